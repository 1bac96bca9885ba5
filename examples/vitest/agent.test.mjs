// An agent's tool use, tested against recordings with the official MCP
// TypeScript SDK: no tenant, no network.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { expect, inject, test } from "vitest";

test("the agent reads the user's profile", async () => {
  const url = new URL("/agents/servers/mcp_MeServer", inject("mcpTapeUrl"));
  const client = new Client({ name: "vitest-example", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(url));
  try {
    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name)).toContain("GetMyDetails");
    const result = await client.callTool({ name: "GetMyDetails", arguments: { select: "displayName,jobTitle" } });
    expect(JSON.parse(result.content[0].text).displayName).toBe("Megan Bowen");
  } finally {
    await client.close();
  }
});
