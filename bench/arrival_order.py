"""When the upstream hears a client's GET stream and its `notifications/initialized`, directly and
through `mcp-tape record`: what a recorder adds to a POST against what it adds to a GET.

    PYTHON bench/arrival_order.py --bin target/release/mcp-tape [--sessions 40] [--load N] [--json]

PYTHON needs mcp and uvicorn (tests/interop/setup.sh's venv). The upstream is a server on the official
Python SDK (a `search` tool) whose ASGI app notes, on the system's monotonic clock, when each request
reached it (a POST's body, which is when the server can act on it). The official Python SDK client (legacy mode) connects --sessions times, one after another; after
`initialize` it opens its GET stream and POSTs `notifications/initialized` at once. For each session
the upstream's gap is taken: the notification's arrival minus the GET's (positive: the GET came
first); and for the GET, the notification and `tools/list`, the time from the client handing the
request to its HTTP client (httpx2) to the upstream hearing it; and how long the server's app waited
for the notification's body after its head (the client writes the two apart; record sends a POST on
whole). Sessions alternate between the server directly and the server through `mcp-tape record`
(pairs, so a machine's drift falls on both). --load N runs N busy processes beside everything (a
CI runner busy with other work). --json has the server answer in JSON instead of SSE. Prints per way the median of each and its 10th and 90th percentiles in
milliseconds, and in how many sessions the GET came first. Loopback only.
"""

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def serve(log_path, json_response):
    """The upstream: one MCP server at /mcp (answering in JSON, not SSE, with `json_response`); each
    request's arrival appended to `log_path` as JSON."""
    import uvicorn
    from mcp.server.mcpserver import MCPServer

    server = MCPServer(name="arrivals", version="1.0")

    @server.tool(description="Search for a word.")
    def search(query: str) -> str:
        return query

    app = server.streamable_http_app(streamable_http_path="/mcp", json_response=json_response)
    log = open(log_path, "a", buffering=1)  # noqa: SIM115 - open while the server runs

    async def noting(scope, receive, send):
        if scope["type"] != "http":
            return await app(scope, receive, send)
        arrived = headed = time.monotonic_ns()
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        first = []

        async def peeked():
            message = await receive()
            if not first:
                # A POST has arrived when its body has: what the server can act on.
                arrived = time.monotonic_ns()
                first.append(message.get("body", b""))
                try:
                    rpc = json.loads(first[0]).get("method")
                except (ValueError, AttributeError):
                    rpc = None
                log.write(json.dumps({"t": arrived, "head": headed, "http": scope["method"], "rpc": rpc,
                                      "session": headers.get("mcp-session-id")}) + "\n")
            return message

        if scope["method"] == "GET":
            log.write(json.dumps({"t": arrived, "http": "GET", "rpc": None,
                                  "session": headers.get("mcp-session-id")}) + "\n")
            return await app(scope, receive, send)
        return await app(scope, peeked, send)

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    print(f"listening on http://127.0.0.1:{listener.getsockname()[1]}", file=sys.stderr, flush=True)
    config = uvicorn.Config(noting, log_level="warning", lifespan="on")
    asyncio.run(uvicorn.Server(config).serve(sockets=[listener]))


def started(command, log):
    """`command`, once it logs `listening on URL`: the process and the URL."""
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    for line in process.stderr:
        log.write(line)
        if "listening on " in line:
            url = line.split("listening on ", 1)[1].split()[0].rstrip("/,")
            return process, url
    raise SystemExit(f"{command[0]} ended before it listened")


# What the client sent, as it handed each request to httpx2: [{"t", "http", "rpc", "session"}].
SENT = []


def noting_what_is_sent():
    """Has httpx2 note each request the client sends (the time it was handed over, on the monotonic clock)."""
    import httpx2 as httpx

    send = httpx.AsyncClient.send

    async def noted(self, request, *args, **kwargs):
        rpc = None
        if request.method == "POST":
            try:
                rpc = json.loads(request.content).get("method")
            except (ValueError, AttributeError, httpx.RequestNotRead):
                pass
        SENT.append({"t": time.monotonic_ns(), "http": request.method, "rpc": rpc,
                     "session": request.headers.get("mcp-session-id")})
        return await send(self, request, *args, **kwargs)

    httpx.AsyncClient.send = noted


async def one_session(url):
    from mcp.client.client import Client

    # The 2025 era's handshake (legacy mode): `initialize`, then the GET stream and the notification.
    async with Client(f"{url}/mcp", mode="legacy") as client:
        await client.list_tools()


# The requests each session's figures are taken for: (HTTP method, JSON-RPC method).
KINDS = {"GET stream": ("GET", None), "initialized": ("POST", "notifications/initialized"),
         "tools/list": ("POST", "tools/list")}


def first_of(events, kind):
    http, rpc = KINDS[kind]
    return next((e["t"] for e in events if e["http"] == http and e["rpc"] == rpc), None)


def by_session(events):
    found = {}
    for event in events:
        if event["session"]:
            found.setdefault(event["session"], []).append(event)
    return found


def figures(log_path, sent):
    """Per session: the notification's arrival minus the GET's, and for each kind the time from the client
    handing the request over to the upstream hearing it; in milliseconds."""
    heard = by_session(json.loads(line) for line in Path(log_path).read_text().splitlines())
    told = by_session(sent)
    gaps, taken = [], {kind: [] for kind in KINDS}
    # How long the server's app waited for the notification's body after its head.
    trailing = [(e["t"] - e["head"]) / 1e6 for events in heard.values() for e in events
                if e["rpc"] == "notifications/initialized"]
    for session, arrivals in heard.items():
        get, notified = first_of(arrivals, "GET stream"), first_of(arrivals, "initialized")
        if get and notified:
            gaps.append((notified - get) / 1e6)
        for kind in KINDS:
            arrived, handed = first_of(arrivals, kind), first_of(told.get(session, []), kind)
            if arrived and handed:
                taken[kind].append((arrived - handed) / 1e6)
    return gaps, taken, trailing


def spread(found):
    deciles = statistics.quantiles(found, n=10)
    return f"{statistics.median(found):+.2f} ({deciles[0]:+.2f} to {deciles[-1]:+.2f})"


def row(name, gaps, taken, trailing):
    first = sum(1 for gap in gaps if gap > 0)
    cells = "  ".join(f"{kind} {spread(taken[kind])}" for kind in KINDS)
    return (f"  {name:<15} gap {spread(gaps)}, GET first in {first} of {len(gaps)};  to the upstream: {cells};  "
            f"the notification's body after its head at the server {statistics.median(trailing):+.2f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", help="the mcp-tape binary")
    parser.add_argument("--sessions", type=int, default=40, help="sessions each way (default 40)")
    parser.add_argument("--load", type=int, default=0, help="busy processes beside (default none)")
    parser.add_argument("--json", action="store_true", help="the server answers in JSON (default: SSE)")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        return serve(args.serve, args.json)
    scratch = Path(tempfile.mkdtemp(prefix="arrival-order-"))
    log = open(scratch / "daemons.log", "w")  # noqa: SIM115 - open for the run
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.load)]
    processes = []
    try:
        direct_log, record_log = scratch / "direct.jsonl", scratch / "record.jsonl"
        answering = ["--json"] if args.json else []
        upstream, direct = started([sys.executable, __file__, "--serve", str(direct_log), *answering], log)
        recorded, upstream_url = started([sys.executable, __file__, "--serve", str(record_log), *answering], log)
        processes += [upstream, recorded]
        record, through = started([args.bin, "record", "--upstream", f"{upstream_url}/mcp", "--cassettes",
                                   str(scratch), "--name", "arrivals", "--port", "0"], log)
        processes.append(record)
        noting_what_is_sent()
        sent = {direct: [], through: []}
        for _ in range(args.sessions):
            for url in (direct, through):
                SENT.clear()
                asyncio.run(one_session(url))
                sent[url] += SENT
        print(f"{args.sessions} sessions each way, {args.load} busy processes beside, answers in "
              f"{'JSON' if args.json else 'SSE'}; milliseconds, median (10th to 90th percentile)")
        print(row("directly", *figures(direct_log, sent[direct])))
        print(row("through record", *figures(record_log, sent[through])))
    finally:
        for process in [*processes, *busy]:
            process.terminate()
            process.wait()
        log.close()


if __name__ == "__main__":
    main()
