// The published @modelcontextprotocol/server-everything served over Streamable HTTP on loopback:
// its own server (createServer) behind the TypeScript SDK's transport, one per session, on
// 127.0.0.1 and a port the system picks (its own streamableHttp entry point listens on every
// interface, on a fixed port). Logs "server-everything listening on http://127.0.0.1:PORT".
// Usage: node everything_http.mjs
import { createServer as createHttpServer } from "node:http";
import { randomUUID } from "node:crypto";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { createServer } from "@modelcontextprotocol/server-everything/dist/server/index.js";
import { listenOnLoopback, readJson, refuse } from "./http_server.mjs";

const sessions = new Map();

async function open(req, res, body) {
  const { server, cleanup } = createServer();
  const transport = new StreamableHTTPServerTransport({
    sessionIdGenerator: () => randomUUID(),
    onsessioninitialized: (id) => sessions.set(id, transport),
  });
  server.server.onclose = () => {
    if (transport.sessionId) {
      sessions.delete(transport.sessionId);
      cleanup(transport.sessionId);
    }
  };
  await server.connect(transport);
  await transport.handleRequest(req, res, body);
}

const http = createHttpServer(async (req, res) => {
  try {
    const id = req.headers["mcp-session-id"];
    const transport = id ? sessions.get(id) : undefined;
    if (req.method === "POST") {
      const body = await readJson(req);
      if (transport) return await transport.handleRequest(req, res, body);
      if (!id) return await open(req, res, body);
    } else if (transport) {
      return await transport.handleRequest(req, res);
    }
    refuse(res, id ? 404 : 400, -32000, id ? "Session not found" : "Bad Request: no session");
  } catch (error) {
    if (!res.headersSent) refuse(res, 500, -32603, String(error));
  }
});
listenOnLoopback(http, "server-everything");
