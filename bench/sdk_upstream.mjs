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
import { listenOnLoopback, readJson, refuse } from "../tests/interop/http_server.mjs";

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

const httpServer = http.createServer(async (req, res) => {
  let body;
  try {
    body = req.method === "POST" ? await readJson(req) : undefined;
  } catch {
    return refuse(res, 400, -32700, "Parse error");
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
