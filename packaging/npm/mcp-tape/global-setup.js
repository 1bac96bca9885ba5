// A vitest globalSetup with one tape for the whole run, answering from the
// cassettes in MCP_TAPE_CASSETTES (default `cassettes`): tests read its URL
// with inject("mcpTapeUrl") or from MCP_TAPE_URL; the run fails at its end
// when a request missed. (For a cassette per test, see mcp-tape/vitest.)
// Under `mcp-tape test`, the tape already running is used.
import { startTape } from "./index.js";

export default async function setup(project) {
  if (process.env.MCP_TAPE_URL) {
    project.provide("mcpTapeUrl", process.env.MCP_TAPE_URL);
    return undefined;
  }
  const tape = await startTape({ cassette: process.env.MCP_TAPE_CASSETTES ?? "cassettes", mode: "replay" });
  process.env.MCP_TAPE_URL = tape.url;
  process.env.MCP_PLATFORM_ENDPOINT = tape.url;
  project.provide("mcpTapeUrl", tape.url);
  return async () => {
    const { misses, text } = await tape.stop(true);
    if (misses.length > 0) throw new Error(text);
  };
}
