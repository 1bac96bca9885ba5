// useTape's rules option: a rules file of this file's own lets a question
// the mailbox cassette never recorded through.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { useTape } from "mcp-tape/vitest";
import { expect, test } from "vitest";

const tape = useTape({ cassette: "cassettes/agent/the_agent_searches_the_mailbox.sqlite", rules: "lenient.toml" });

test("any question with lenient rules", async () => {
  const client = new Client({ name: "packaging-test", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL("/agents/servers/mcp_MailTools", tape.url)));
  try {
    const result = await client.callTool({ name: "SearchMessages", arguments: { message: "anything at all" } });
    expect(JSON.parse(result.content[0].text).reply).toContain("Found");
  } finally {
    await client.close();
  }
});
