// Tests whose names a cassette's file name must tell apart where case does
// not count (macOS, Windows), and a name of 90 CJK characters (270 bytes,
// more than a file name holds): each records a cassette of its own.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { useTape } from "mcp-tape/vitest";
import { expect, test } from "vitest";

const tape = useTape();

async function listsTools() {
  const client = new Client({ name: "packaging-test", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL("/agents/servers/mcp_MeServer", tape.url)));
  try {
    expect((await client.listTools()).tools.length).toBeGreaterThan(0);
  } finally {
    await client.close();
  }
}

test("Lists tools", listsTools);

test("lists tools", listsTools);

test("測".repeat(90), listsTools);
