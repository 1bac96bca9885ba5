"""The server a person meets in the README's quick start: one MCP server at
/mcp (Streamable HTTP, the official Python SDK) with a `search` tool, and no
credentials. Prints "listening on http://127.0.0.1:PORT" once the port is
bound; serves until it is stopped."""

import asyncio
import json
import socket
import sys

import uvicorn
from mcp.server.mcpserver import MCPServer

DOCUMENTS = ["budget review 2026", "holiday rota", "room bookings"]


def build_app():
    server = MCPServer(name="quickstart", version="1.0")

    @server.tool(description="Search the documents for a word.")
    def search(query: str) -> str:
        return json.dumps([doc for doc in DOCUMENTS if query.lower() in doc])

    return server.streamable_http_app(streamable_http_path="/mcp")


def main():
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    print(f"listening on http://127.0.0.1:{listener.getsockname()[1]}", file=sys.stderr, flush=True)
    config = uvicorn.Config(build_app(), log_level="warning", lifespan="on")
    asyncio.run(uvicorn.Server(config).serve(sockets=[listener]))


if __name__ == "__main__":
    main()
