"""A handshake-era MCP server over Streamable HTTP that fails the way real
servers, and the gateways in front of them, fail: one tool per way, each
failing on every call. The interop suite runs each client's flow against
it directly, and against `mcp-tape replay` of a healthy recording with
faults.toml's fault rules; the clients must report the same outcomes.

Tools (the texts are faults.toml's):
  ok            a result
  rpc_error     a JSON-RPC error -32050 "the mail service is down"
  tool_error    a tool result with isError: "mailbox full"
  rate_limited  HTTP 429 with Retry-After: 1, plain text (a gateway's)
  unavailable   HTTP 503, plain text
  cut           an SSE stream: one progress notification, then closed
  slow          no answer at all, until the client gives up
  forget        the session is forgotten: 404 now and for every later use

With --healthy every tool answers a result instead (cut: its progress, then
its result): what `mcp-tape record` stores.

usage: failing_upstream.py [--healthy]
Prints "listening on http://127.0.0.1:PORT" once the port is bound.
"""

import argparse
import asyncio
import json
import socket
import sys
import uuid

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

VERSIONS = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]
TOOLS = ["ok", "rpc_error", "tool_error", "rate_limited", "unavailable", "cut", "slow", "forget"]


def result(id, value):
    return JSONResponse({"jsonrpc": "2.0", "id": id, "result": value})


def text(value, is_error=False):
    answer = {"content": [{"type": "text", "text": value}]}
    if is_error:
        answer["isError"] = True
    return answer


def event(message):
    return f"event: message\ndata: {json.dumps(message)}\n\n"


def build_app(healthy):
    sessions = set()

    def no_session():
        # As the official Python SDK's server answers a session it does not know.
        return JSONResponse({"jsonrpc": "2.0", "id": None,
                             "error": {"code": -32600, "message": "Session not found"}}, status_code=404)

    async def mcp(request: Request):
        session = request.headers.get("mcp-session-id")
        if request.method == "GET":
            return Response(status_code=405, headers={"allow": "POST, DELETE"})
        if request.method == "DELETE":
            if session not in sessions:
                return no_session()
            sessions.discard(session)
            return Response(status_code=200)
        message = await request.json()
        method, id = message.get("method"), message.get("id")
        if method == "initialize":
            asked = message["params"].get("protocolVersion")
            session = uuid.uuid4().hex
            sessions.add(session)
            response = result(id, {"protocolVersion": asked if asked in VERSIONS else VERSIONS[0],
                                   "capabilities": {"tools": {"listChanged": False}},
                                   "serverInfo": {"name": "failing", "version": "1"}})
            response.headers["mcp-session-id"] = session
            return response
        if method == "server/discover":
            # A handshake-only server: the probe fails, so clients fall back to initialize.
            return JSONResponse({"jsonrpc": "2.0", "id": None,
                                 "error": {"code": -32000, "message": "Bad Request: Server not initialized"}},
                                status_code=400)
        if session is not None and session not in sessions:
            return no_session()
        if id is None:
            return Response(status_code=202)  # a notification, or a reply
        if method == "ping":
            return result(id, {})
        if method == "tools/list":
            return result(id, {"tools": [{"name": name, "inputSchema": {"type": "object", "properties": {}}}
                                         for name in TOOLS]})
        if method != "tools/call":
            return JSONResponse({"jsonrpc": "2.0", "id": id,
                                 "error": {"code": -32601, "message": f"Method not found: {method}"}})
        name = message["params"]["name"]
        token = message["params"].get("_meta", {}).get("progressToken")
        if name == "cut":
            progress = {"jsonrpc": "2.0", "method": "notifications/progress",
                        "params": {"progressToken": token, "progress": 1, "total": 2}}
            events = [event(progress)]
            if healthy:
                events.append(event({"jsonrpc": "2.0", "id": id, "result": text("cut done")}))

            async def stream():
                for one in events:
                    yield one

            return StreamingResponse(stream(), media_type="text/event-stream")
        if healthy or name == "ok":
            return result(id, text(f"{name} done"))
        if name == "rpc_error":
            return JSONResponse({"jsonrpc": "2.0", "id": id,
                                 "error": {"code": -32050, "message": "the mail service is down"}})
        if name == "tool_error":
            return result(id, text("mailbox full", is_error=True))
        if name == "rate_limited":
            return PlainTextResponse("429 Too Many Requests\n", status_code=429, headers={"retry-after": "1"})
        if name == "unavailable":
            return PlainTextResponse("503 Service Unavailable\n", status_code=503)
        if name == "slow":
            while not await request.is_disconnected():  # no answer, until the client gives up
                await asyncio.sleep(0.05)
            return Response(status_code=499)
        if name == "forget":
            sessions.discard(session)
            return no_session()
        return JSONResponse({"jsonrpc": "2.0", "id": id, "error": {"code": -32602, "message": f"Unknown tool: {name}"}})

    return Starlette(routes=[Route("/mcp", mcp, methods=["GET", "POST", "DELETE"])])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--healthy", action="store_true", help="every tool answers a result")
    args = parser.parse_args()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)  # before the readiness line: a client may connect at once
    print(f"listening on http://127.0.0.1:{listener.getsockname()[1]}", file=sys.stderr, flush=True)
    # A client that gave up on `slow` may leave its connection open: shutdown does not wait for it.
    config = uvicorn.Config(build_app(args.healthy), log_level="warning", timeout_graceful_shutdown=1)
    asyncio.run(uvicorn.Server(config).serve(sockets=[listener]))


if __name__ == "__main__":
    main()
