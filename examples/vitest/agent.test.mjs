// An agent's tool use, tested against recordings with the official MCP
// TypeScript SDK and the vitest helper of the `mcp-tape` npm package: each
// test gets a tape of its own (tape.url), answering from
// cassettes/agent/<test>.sqlite. No tenant, no network.
//
// Record the cassettes once against the real servers, then replay them:
//
//     MCP_TAPE_MODE=once MCP_TAPE_UPSTREAM=https://your-mcp-server npx vitest run
//     npx vitest run
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { useTape } from "mcp-tape/vitest";
import { expect, test } from "vitest";

const tape = useTape();

// What the model asked the mail search for: a run that asks something else
// sends a request the cassette does not hold, and that test fails.
const QUESTION = process.env.AGENT_QUESTION ?? "budget review";

async function connect(server) {
  const client = new Client({ name: "vitest-example", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(`/agents/servers/${server}`, tape.url)));
  return client;
}

const textOf = (result) => JSON.parse(result.content[0].text);

test("the agent reads the user's profile", async () => {
  const client = await connect("mcp_MeServer");
  try {
    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name)).toContain("GetMyDetails");
    const result = await client.callTool({ name: "GetMyDetails", arguments: { select: "displayName,jobTitle" } });
    expect(textOf(result).displayName).toBe("Megan Bowen");
  } finally {
    await client.close();
  }
});

test("the agent books a big enough room", async () => {
  const client = await connect("mcp_CalendarTools");
  try {
    const rooms = textOf(await client.callTool({ name: "GetRooms", arguments: {} })).value;
    expect(rooms.filter((room) => room.capacity >= 10).map((room) => room.displayName)).toEqual(["Lakeview"]);
  } finally {
    await client.close();
  }
});

test("the agent searches the mailbox", async () => {
  const client = await connect("mcp_MailTools");
  try {
    const result = await client.callTool({ name: "SearchMessages", arguments: { message: QUESTION } });
    expect(textOf(result).reply).toContain("Found");
  } finally {
    await client.close();
  }
});
