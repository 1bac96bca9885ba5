// A test that records through its tape and then fails unless HARNESS_PASS=1:
// what a recording mode does with the cassette of a failing test.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { useTape } from "mcp-tape/vitest";
import { expect, test } from "vitest";

const tape = useTape();

test("records then fails", async () => {
  const client = new Client({ name: "packaging-test", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL("/agents/servers/mcp_MeServer", tape.url)));
  try {
    await client.callTool({ name: "GetMyDetails", arguments: { select: process.env.HARNESS_SELECT ?? "mail" } });
  } finally {
    await client.close();
  }
  expect(process.env.HARNESS_PASS, "fails on purpose").toBe("1");
});
