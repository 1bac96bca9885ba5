// useTape's options act on this file's tests alone: a fault on the profile
// cassette's first GetMyDetails call (the other tests of the run, on the same
// cassette, get the recorded answer).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { useTape } from "mcp-tape/vitest";
import { expect, test } from "vitest";

const tape = useTape({
  cassette: "cassettes/agent/the_agent_reads_the_user%27s_profile.sqlite",
  faults: [{ tool: "GetMyDetails", nth: [1], tool_error: "directory down" }],
});

test("the directory fails", async () => {
  const client = new Client({ name: "packaging-test", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL("/agents/servers/mcp_MeServer", tape.url)));
  try {
    const result = await client.callTool({ name: "GetMyDetails", arguments: { select: "displayName,jobTitle" } });
    expect(result.isError).toBe(true);
    expect(result.content[0].text).toBe("directory down");
  } finally {
    await client.close();
  }
});
