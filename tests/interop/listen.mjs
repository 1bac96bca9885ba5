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
