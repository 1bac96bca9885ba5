// The official TypeScript MCP SDK as a client of mcp-tape replay.
// Usage: node ts_client.mjs URL empty
//        node ts_client.mjs URL recorded FIXTURE.jsonl
//        node ts_client.mjs BASE round-trip TOKEN   (prints the transcript as JSON)
// Expectations for `recorded` come from the fixture (the input), not from
// anything mcp-tape produced. Exits 1 with the reason on the first mismatch.
// The round trip drives every server of agent365_upstream.py; its transcript
// must be the same directly, through `mcp-tape record` and from replay.
import { readFileSync } from "node:fs";
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";

const [url, scenario, fixturePath] = process.argv.slice(2);

async function connect(target = url, token = undefined) {
  const client = new Client({ name: "mcp-tape-interop", version: "1.0.0" });
  const requestInit = token ? { headers: { Authorization: `Bearer ${token}` } } : undefined;
  await client.connect(new StreamableHTTPClientTransport(new URL(target), { requestInit }));
  return client;
}

const VOLATILE_KEYS = new Set(["currentDateTime", "sentDateTime"]);

function stable(value) {
  if (Array.isArray(value)) return value.map(stable);
  if (value && typeof value === "object") {
    return Object.fromEntries(
      Object.keys(value)
        .sort()
        .filter((k) => !VOLATILE_KEYS.has(k))
        .map((k) => [k, stable(value[k])]),
    );
  }
  return value;
}

function textOf(block) {
  try {
    return stable(JSON.parse(block.text));
  } catch {
    return block.text;
  }
}

async function roundTrip(base, token) {
  const transcript = [];
  const note = (server, step, value) => transcript.push([server, step, value]);
  const call = async (client, server, name, args) => {
    const progress = [];
    const result = await client.callTool({ name, arguments: args }, undefined, {
      onprogress: (p) => progress.push(p.progress),
    });
    note(server, `call ${name} ${JSON.stringify(stable(args))}`, {
      isError: Boolean(result.isError),
      content: result.content.map(textOf),
    });
    if (progress.length) note(server, `progress ${name}`, progress);
  };
  const session = async (server, steps) => {
    const client = await connect(`${base}/agents/servers/${server}`, token);
    await steps(client);
    await client.close();
  };
  await session("mcp_MailTools", async (c) => {
    const tools = (await c.listTools()).tools.map((t) => [t.name, JSON.stringify(stable(t.inputSchema))]);
    note("mcp_MailTools", "tools", tools.sort());
    await call(c, "mcp_MailTools", "SearchMessages", { message: "invoice from Fabrikam" });
    await call(c, "mcp_MailTools", "GetMessage", { id: "AAMkAGI2TG93AAA=", bodyPreviewOnly: true });
    await call(c, "mcp_MailTools", "GetMessage", { id: "AAMk-missing" });
    await call(c, "mcp_MailTools", "SendEmailWithAttachments", {
      to: ["adele.vance@contoso.com"],
      subject: "Budget",
      body: "See you Thursday.",
    });
  });
  await session("mcp_CalendarTools", async (c) => {
    note("mcp_CalendarTools", "tools", (await c.listTools()).tools.map((t) => t.name).sort());
    await call(c, "mcp_CalendarTools", "ListEvents", { meetingTitle: "budget" });
    await call(c, "mcp_CalendarTools", "GetUserDateAndTimeZoneSettings", {});
  });
  await session("mcp_MeServer", async (c) => {
    await call(c, "mcp_MeServer", "GetMyDetails", { select: "displayName,jobTitle" });
    await call(c, "mcp_MeServer", "GetManagerDetails", { userId: "me" });
  });
  await session("mcp_KnowledgeTools", async (c) => {
    await call(c, "mcp_KnowledgeTools", "query_federated_knowledge", {
      consumerId: "agent-1",
      query: "How do I use the vpn?",
    });
  });
  await session("mcp_WritingPrompts", async (c) => {
    note("mcp_WritingPrompts", "prompts", (await c.listPrompts()).prompts.map((p) => p.name).sort());
    const prompt = await c.getPrompt({ name: "draft_reply", arguments: { tone: "friendly", points: "thanks; next steps" } });
    note("mcp_WritingPrompts", "get draft_reply", prompt.messages.map((m) => [m.role, m.content.text]));
  });
  await session("mcp_PolicyLibrary", async (c) => {
    note("mcp_PolicyLibrary", "resources", (await c.listResources()).resources.map((r) => r.uri).sort());
    const travel = await c.readResource({ uri: "policy://travel" });
    note("mcp_PolicyLibrary", "read policy://travel", travel.contents.map((x) => x.text));
  });
  return transcript;
}

async function emptyFlow() {
  const client = await connect();
  assert.equal(client.getServerVersion().name, "mcp-tape");
  assert.deepEqual((await client.listTools()).tools, []);
  assert.deepEqual((await client.listPrompts()).prompts, []);
  assert.deepEqual((await client.listResources()).resources, []);
  await client.ping();
  await assert.rejects(
    client.callTool({ name: "GetMyDetails", arguments: {} }),
    (error) => error instanceof McpError && error.code === -32602,
  );
  await client.close();
}

async function recordedFlow() {
  const exchanges = readFileSync(fixturePath, "utf8").trim().split("\n").map((line) => JSON.parse(line));
  const client = await connect();
  const listed = exchanges.find((e) => e.request.method === "tools/list");
  const expectedNames = listed.messages.at(-1).body.result.tools.map((t) => t.name).sort();
  assert.deepEqual((await client.listTools()).tools.map((t) => t.name).sort(), expectedNames);
  for (const exchange of exchanges.filter((e) => e.request.method === "tools/call")) {
    const bodies = exchange.messages.map((m) => m.body);
    const progress = [];
    const result = await client.callTool(
      { name: exchange.request.params.name, arguments: exchange.request.params.arguments },
      undefined,
      { onprogress: (p) => progress.push(p.progress) },
    );
    assert.equal(result.content[0].text, bodies.at(-1).result.content[0].text);
    assert.equal(progress.length, bodies.filter((b) => b.method === "notifications/progress").length);
  }
  await client.close();
}

try {
  if (scenario === "round-trip") {
    process.stdout.write(JSON.stringify(await roundTrip(url, fixturePath)));
  } else {
    await (scenario === "empty" ? emptyFlow() : recordedFlow());
  }
} catch (error) {
  console.error(error);
  process.exit(1);
}
