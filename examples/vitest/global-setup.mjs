// vitest globalSetup for testing an MCP agent against mcp-tape.
//
// Under `mcp-tape test -- npx vitest run`, the tape is already running and
// its URL is in MCP_TAPE_URL. Run as plain `vitest run`, this starts
// `mcp-tape replay --port 0` itself, reads the port from the line it logs
// when it listens, and stops it when the run ends (failing the run if a
// request missed the recordings).
//
// Settings (environment): MCP_TAPE_BIN, the binary (default `mcp-tape` on
// PATH); MCP_TAPE_CASSETTES, what to replay (default `cassettes`).
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";

export default async function setup(project) {
  if (process.env.MCP_TAPE_URL) {
    project.provide("mcpTapeUrl", process.env.MCP_TAPE_URL);
    return undefined;
  }
  const binary = process.env.MCP_TAPE_BIN ?? "mcp-tape";
  const cassettes = process.env.MCP_TAPE_CASSETTES ?? "cassettes";
  const tape = spawn(binary, ["replay", "--port", "0", "--fail-on-miss", cassettes], {
    stdio: ["ignore", "inherit", "pipe"],
  });
  const exited = new Promise((resolve) => tape.on("exit", (code) => resolve(code)));
  const lines = createInterface({ input: tape.stderr });
  const url = await new Promise((resolve, reject) => {
    lines.on("line", (line) => {
      const found = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(line);
      if (found) resolve(found[1]);
    });
    exited.then((code) => reject(new Error(`mcp-tape replay exited (${code}) before it listened`)));
  });
  project.provide("mcpTapeUrl", url);
  return async () => {
    tape.kill("SIGTERM");
    const code = await exited;
    if (code !== 0) throw new Error(`mcp-tape replay reported misses (exit ${code})`);
  };
}
