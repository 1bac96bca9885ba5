// A bench upstream on the official TypeScript SDK (@modelcontextprotocol/sdk, pinned in
// tests/interop/package.json): a stateless Streamable HTTP server, as the SDK documents stateless
// serving (a fresh Server and transport per POST, JSON answers), with one tool, `lookup`, that
// answers `{"n": N}` with the text "value N". Every path is the MCP endpoint, so it stands behind
// `mcp-tape record --upstream` with Agent 365's paths unchanged. Loopback only.
//
// Usage: node sdk_upstream.mjs   (logs "listening on http://127.0.0.1:PORT" on stderr)
import http from "node:http";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { listenOnLoopback } from "../tests/interop/listen.mjs";

const LOOKUP = {
  name: "lookup",
  description: "Answers with the text 'value N'.",
  inputSchema: { type: "object", properties: { n: { type: "integer" } }, required: ["n"] },
};

function makeServer() {
  const server = new Server({ name: "mcp-tape-bench-sdk", version: "1.0.0" }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: [LOOKUP] }));
  server.setRequestHandler(CallToolRequestSchema, async ({ params }) => ({
    content: [{ type: "text", text: `value ${params.arguments?.n}` }],
  }));
  return server;
}

async function readJson(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

const httpServer = http.createServer(async (req, res) => {
  let body;
  try {
    body = req.method === "POST" ? await readJson(req) : undefined;
  } catch {
    res.writeHead(400, { "content-type": "application/json" });
    return res.end(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32700, message: "Parse error" } }));
  }
  const server = makeServer();
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  res.on("close", () => {
    transport.close();
    server.close();
  });
  await server.connect(transport);
  await transport.handleRequest(req, res, body);
});

httpServer.keepAliveTimeout = 60_000;
listenOnLoopback(httpServer);
