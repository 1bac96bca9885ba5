// What the Node servers of the interop tests and the bench share: reading a JSON body, refusing a
// request with a JSON-RPC error, and serving on loopback.

// The request's body, parsed as JSON (throws on a body that is not).
export async function readJson(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

// Answers with HTTP `status` and a JSON-RPC error (id null) of `code` and `message`.
export function refuse(res, status, code, message) {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code, message } }));
}

// Serves a node:http server on 127.0.0.1, on a port the system picks, and logs
// "<what> listening on http://127.0.0.1:PORT" on stderr once it listens (the line the harnesses
// wait for). SIGTERM and SIGINT close it, and every open connection, and end the process.
export function listenOnLoopback(server, what = "") {
  server.listen(0, "127.0.0.1", () => {
    console.error(`${what ? `${what} ` : ""}listening on http://127.0.0.1:${server.address().port}`);
  });
  for (const signal of ["SIGTERM", "SIGINT"]) {
    process.on(signal, () => {
      server.close();
      server.closeAllConnections();
      process.exit(0);
    });
  }
}
