// The official TypeScript MCP SDK over stdio: v1 (@modelcontextprotocol/sdk,
// StdioClientTransport) or v2 (@modelcontextprotocol/client, in a version
// negotiation mode), spawning COMMAND with "{server}" replaced by each
// server's name, in the round trip (FLOW round-trip) or against
// @modelcontextprotocol/server-everything (FLOW everything); or (FLOW unprompted) a client that
// declares roots, hears every notification and request the server sends on its own, pauses
// PAUSE_MS after `initialized`, then lists the tools of SERVER, which COMMAND_JSON runs (or, when
// its only word is an http:// URL, serves over Streamable HTTP).
// Usage: node ts_stdio_client.mjs v1|v2 legacy|auto round-trip|everything COMMAND_JSON
//        node ts_stdio_client.mjs v1|v2 legacy|auto unprompted COMMAND_JSON SERVER ROOT_URI PAUSE_MS
// Prints the transcript as JSON.
import { Client as ClientV1 } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport as StdioV1 } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport as HttpV1 } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ListRootsRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { Client as ClientV2, StreamableHTTPClientTransport as HttpV2 } from "@modelcontextprotocol/client";
import { StdioClientTransport as StdioV2 } from "@modelcontextprotocol/client/stdio";
import { roundTrip } from "./round_trip_flow.mjs";

const [generation, mode, flow, commandJson, ...rest] = process.argv.slice(2);
const command = JSON.parse(commandJson);

function transport(Stdio, server) {
  const [program, ...args] = command.map((word) => word.replaceAll("{server}", server));
  return new Stdio({ command: program, args, env: process.env, stderr: "inherit" });
}

const sdk = {
  async connect(target) {
    const server = target.split("/").pop();
    if (generation === "v1") {
      const client = new ClientV1({ name: "mcp-tape-interop-stdio", version: "1.0.0" });
      await client.connect(transport(StdioV1, server));
      return client;
    }
    const client = new ClientV2(
      { name: "mcp-tape-interop-stdio-v2", version: "1.0.0" },
      { versionNegotiation: { mode } },
    );
    await client.connect(transport(StdioV2, server));
    return client;
  },
  callTool: (client, params, onprogress) =>
    generation === "v1" ? client.callTool(params, undefined, { onprogress }) : client.callTool(params, { onprogress }),
};

async function everything() {
  const transcript = [];
  const note = (step, value) => transcript.push(["server-everything", step, value]);
  const text = (result) => ({ isError: Boolean(result.isError), content: result.content.map((c) => c.text ?? c.type) });
  const client = await sdk.connect("server-everything");
  note("tools", (await client.listTools()).tools.map((t) => t.name).sort());
  note("echo", text(await sdk.callTool(client, { name: "echo", arguments: { message: "hello from mcp-tape" } })));
  note("get-sum", text(await sdk.callTool(client, { name: "get-sum", arguments: { a: 2, b: 40 } })));
  const progress = [];
  const slow = await sdk.callTool(
    client,
    { name: "trigger-long-running-operation", arguments: { duration: 1, steps: 3 } },
    (p) => progress.push(p.progress),
  );
  note("long-running", text(slow));
  note("long-running progress", progress);
  note("prompts", (await client.listPrompts()).prompts.map((p) => p.name).sort());
  const prompt = await client.getPrompt({ name: "args-prompt", arguments: { city: "Seattle", state: "WA" } });
  note("args-prompt", prompt.messages.map((m) => [m.role, m.content.text]));
  await client.close();
  return transcript;
}

async function unprompted([server, rootUri, pauseMs]) {
  const heard = [];
  const listRoots = async () => {
    heard.push(["roots/list", null]);
    return { roots: [{ uri: rootUri, name: "interop" }] };
  };
  const info = { name: "mcp-tape-interop-unprompted", version: "1.0.0" };
  const capabilities = { capabilities: { roots: {} } };
  const v1 = generation === "v1";
  const client = v1
    ? new ClientV1(info, capabilities)
    : new ClientV2(info, { ...capabilities, versionNegotiation: { mode } });
  if (v1) client.setRequestHandler(ListRootsRequestSchema, listRoots);
  else client.setRequestHandler("roots/list", listRoots);
  client.fallbackNotificationHandler = async (notification) => {
    heard.push([notification.method, notification.params?.data ?? null]);
  };
  const [first] = command;
  const url = first.startsWith("http://") ? new URL(first.replaceAll("{server}", server)) : null;
  const Http = v1 ? HttpV1 : HttpV2;
  await client.connect(url ? new Http(url) : transport(v1 ? StdioV1 : StdioV2, server));
  await new Promise((resolve) => setTimeout(resolve, Number(pauseMs)));
  const tools = (await client.listTools()).tools.map((t) => t.name).sort();
  await client.close();
  return [[server, "heard", heard], [server, "tools", tools]];
}

const flows = { everything, unprompted: () => unprompted(rest), "round-trip": () => roundTrip("stdio:", sdk) };

try {
  const transcript = await flows[flow]();
  process.stdout.write(JSON.stringify(transcript));
} catch (error) {
  console.error(error);
  process.exit(1);
}
