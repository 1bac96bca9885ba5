// The README's examples as TypeScript, for `tsc --strict`: every subpath of
// the npm package must come with its declarations.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { describeMisses, MODES, type Mode, modelUrl, startTape } from "mcp-tape";
import setup from "mcp-tape/global-setup";
import { useTape } from "mcp-tape/vitest";
import { test } from "vitest";

const tape = useTape({ mode: "once", rules: "mcp-tape.toml", onMiss: "error", faults: [{ tool: "GetMyDetails", nth: [1], http: 503 }],
  models: { openai: "https://api.openai.com/v1" } });

test("the agent reads the profile", async () => {
  const client = new Client({ name: "types-check", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL("/agents/servers/mcp_MeServer", tape.url)));
  await client.close();
  const baseURL: string = tape.model("openai");
  if (!baseURL.endsWith("/model/openai") || modelUrl(tape.url ?? "", "openai") !== baseURL) throw new Error(baseURL);
});

export async function withJest(): Promise<string> {
  const mode: Mode = MODES[4];
  const other = await startTape({ cassette: "cassettes/jest/one.sqlite", mode, faults: 'tool = "Send", nth = 2, http = 429' });
  const { misses, text } = await other.stop(true);
  return `${misses.length} ${text} ${describeMisses(misses, other.cassette)} ${typeof setup}`;
}
