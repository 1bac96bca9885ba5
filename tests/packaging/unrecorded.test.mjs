// A test whose cassette was never recorded, run in replay mode: it only
// lists tools (the mock would list none), and it must fail naming the cassette.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { useTape } from "mcp-tape/vitest";
import { expect, test } from "vitest";

const tape = useTape();

test("lists tools", async () => {
  const client = new Client({ name: "packaging-test", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL("/agents/servers/mcp_MeServer", tape.url)));
  try {
    expect(Array.isArray((await client.listTools()).tools)).toBe(true);
  } finally {
    await client.close();
  }
});
