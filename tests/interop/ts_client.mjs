// The official TypeScript MCP SDK as a client of mcp-tape replay.
// Usage: node ts_client.mjs URL empty
//        node ts_client.mjs URL recorded FIXTURE.jsonl
//        node ts_client.mjs BASE round-trip TOKEN [SERVER,...]   (prints the transcript as JSON;
//                                                     only the servers named, if any)
//        node ts_client.mjs URL reconnection        (prints test_reconnection's result as JSON)
// Expectations for `recorded` come from the fixture (the input), not from
// anything mcp-tape produced. Exits 1 with the reason on the first mismatch.
// The round trip drives every server of agent365_upstream.py; its transcript
// must be the same directly, through `mcp-tape record` and from replay.
import { readFileSync } from "node:fs";
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";
import { roundTrip } from "./round_trip_flow.mjs";

const [url, scenario, fixturePath, onlyServers] = process.argv.slice(2);

async function connect(target = url, token = undefined) {
  const client = new Client({ name: "mcp-tape-interop", version: "1.0.0" });
  const requestInit = token ? { headers: { Authorization: `Bearer ${token}` } } : undefined;
  await client.connect(new StreamableHTTPClientTransport(new URL(target), { requestInit }));
  return client;
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
    const token = fixturePath;
    const sdk = {
      connect: (target) => connect(target, token),
      callTool: (client, params, onprogress) => client.callTool(params, undefined, { onprogress }),
      only: onlyServers ? onlyServers.split(",") : undefined,
    };
    process.stdout.write(JSON.stringify(await roundTrip(url, sdk)));
  } else if (scenario === "reconnection") {
    // The server closes this call's stream before the answer: the client
    // resumes it (GET + Last-Event-ID) to get it.
    const client = await connect();
    const result = await client.callTool({ name: "test_reconnection", arguments: {} });
    await client.close();
    process.stdout.write(JSON.stringify({ isError: Boolean(result.isError), content: result.content }));
  } else {
    await (scenario === "empty" ? emptyFlow() : recordedFlow());
  }
} catch (error) {
  console.error(error);
  process.exit(1);
}
