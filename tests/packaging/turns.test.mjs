// Tests of tapes taking turns, on the packaging test's upstream: the first
// two share one cassette (the file's, `useTape({ cassette })`), so the
// second must replay what the first recorded, its tape begun only once that
// recording is in place; the skipped test has no tape; with TURNS_FAIL set
// the first test fails and --bail stops the run before the second's tape.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { useTape } from "mcp-tape/vitest";
import { expect, test } from "vitest";

const tape = useTape({ cassette: "cassettes/turns/shared.sqlite" });

async function listsTools() {
  const client = new Client({ name: "packaging-test", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL("/agents/servers/mcp_MeServer", tape.url)));
  try {
    expect((await client.listTools()).tools.length).toBeGreaterThan(0);
  } finally {
    await client.close();
  }
}

test("records the shared cassette", async () => {
  await listsTools();
  expect(process.env.TURNS_FAIL).toBeUndefined();
});

test("replays the shared cassette", listsTools);

test.skip("is skipped", listsTools);

test("runs after the skipped one", listsTools);
