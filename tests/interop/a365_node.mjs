// Drives mcp-tape with the real Agent 365 tooling SDK for Node
// (@microsoft/agents-a365-tooling), the way an agent does: server discovery
// (dev-mode ToolingManifest.json, or the production gateway through the
// legacy overload and through the TurnContext/Authorization overload), the
// tools through the SDK's getMcpClientTools and the official TypeScript MCP
// client, and chat history.
//
// usage: node a365_node.mjs BASE FLOW TOKEN CALLS_JSON
//   BASE   what MCP_PLATFORM_ENDPOINT names (replay or record)
//   FLOW   dev-urlless | dev-urls | gateway-legacy | gateway-auth
//   TOKEN  the bearer token (an unexpired three-part JWT: the SDK checks `exp`)
//   CALLS  JSON: [[server, tool, arguments], ...] to call on every flow
// Prints the transcript as JSON; exits non-zero when a step fails.
import { createRequire } from "node:module";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";

const require = createRequire(import.meta.url);
const [base, flow, token, callsJson] = process.argv.slice(2);
const calls = JSON.parse(callsJson);
const AGENTIC_APP_ID = "agent-app-1";
const SERVERS = ["mcp_MailTools", "mcp_CalendarTools", "mcp_MeServer", "mcp_KnowledgeTools"];
const UNKNOWN_TOOL = ["mcp_MailTools", "NoSuchTool"];

// The SDK logs to the console: keep stdout for the transcript.
console.log = console.info = (...parts) => console.error(...parts);
// The SDK reads its settings when it loads: set them first.
process.env.MCP_PLATFORM_ENDPOINT = base;
process.env.BEARER_TOKEN = token;
process.env.NODE_ENV = flow.startsWith("dev-") ? "development" : "production";
const workdir = mkdtempSync(join(tmpdir(), "a365-node-"));
process.once("exit", () => rmSync(workdir, { recursive: true, force: true }));
process.chdir(workdir);
if (flow.startsWith("dev-")) {
  const entries = SERVERS.map((name) => ({
    mcpServerName: name,
    mcpServerUniqueName: name,
    ...(flow === "dev-urls" ? { url: `${base}/agents/servers/${name}` } : {}),
  }));
  writeFileSync("ToolingManifest.json", JSON.stringify({ mcpServers: entries }));
}
const { McpToolServerConfigurationService } = require("@microsoft/agents-a365-tooling");
const { Activity } = require("@microsoft/agents-activity");

const activity = Activity.fromObject({
  type: "message",
  id: "msg-2",
  text: "What is on my calendar?",
  channelId: "msteams",
  conversation: { id: "conv-1" },
  from: { id: "user-1", name: "Adele" },
  recipient: { id: "agent-1", role: "agenticUser", agenticAppId: AGENTIC_APP_ID },
});
const turnContext = { activity };
const exchanged = new Set();
// Stands in for the hosting SDK's Authorization: every token exchange (one
// per audience scope) returns the test's token and is noted.
const authorization = {
  async exchangeToken(_context, _handler, options) {
    for (const scope of options?.scopes ?? []) exchanged.add(scope);
    return { token };
  },
};

const service = new McpToolServerConfigurationService();
const servers =
  flow === "gateway-auth"
    ? await service.listToolServers(turnContext, authorization, "AGENTIC", token)
    : await service.listToolServers(AGENTIC_APP_ID, token);
const origin = new URL(base).origin;
const transcript = {
  discovery: servers
    .map((server) => {
      const url = new URL(server.url);
      assert.equal(url.origin, origin, `${server.url} is not at ${base}`);
      return {
        name: server.mcpServerName,
        path: url.pathname.replace(/\/$/, ""),
        audience: server.audience ?? null,
        scope: server.scope ?? null,
        authorized: Boolean(server.headers?.Authorization),
      };
    })
    .sort((a, b) => a.name.localeCompare(b.name)),
  tools: {},
  calls: [],
};

const byName = Object.fromEntries(servers.map((server) => [server.mcpServerName, server]));
// A server that fails is told by what the SDK threw (its class and code), as an agent sees it.
const failure = (error) => ({ failed: error.constructor.name, code: error.code ?? null });
for (const server of [...servers].sort((a, b) => a.mcpServerName.localeCompare(b.mcpServerName))) {
  try {
    const tools = await service.getMcpClientTools(server.mcpServerName, server);
    transcript.tools[server.mcpServerName] = tools.map((tool) => tool.name).sort();
  } catch (error) {
    transcript.tools[server.mcpServerName] = failure(error);
  }
}

async function withClient(server, work) {
  const client = new Client({ name: "a365-node-agent", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(server.url), {
    requestInit: { headers: server.headers },
  });
  await client.connect(transport);
  try {
    return await work(client);
  } finally {
    await client.close();
  }
}

for (const [serverName, tool, args] of calls) {
  const result = await withClient(byName[serverName], (client) => client.callTool({ name: tool, arguments: args }));
  transcript.calls.push({ server: serverName, tool, result });
}
transcript["unknown tool"] = await withClient(byName[UNKNOWN_TOOL[0]], async (client) => {
  try {
    await client.callTool({ name: UNKNOWN_TOOL[1], arguments: {} });
    return "answered";
  } catch (error) {
    return { code: error instanceof McpError ? error.code : null, type: error.constructor.name };
  }
}).catch(failure);

const history = [
  { id: "msg-1", role: "user", content: "hello", timestamp: new Date("2026-11-23T10:00:00Z") },
  { id: "msg-1b", role: "assistant", content: "Hi! How can I help?", timestamp: new Date("2026-11-23T10:01:00Z") },
];
const sent = await service.sendChatHistory(turnContext, history);
transcript["chat history"] = { succeeded: sent.succeeded, errors: (sent.errors ?? []).map(String) };
transcript["token exchanges"] = [...exchanged].sort();
process.stdout.write(`${JSON.stringify(transcript)}\n`);
