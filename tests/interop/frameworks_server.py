"""A mail-and-calendar MCP server on the official Python SDK (FastMCP), for
the agent-framework checks (frameworks.py): three tools whose structured
results put their members in an order no sort gives, the way a server's own
models write them.

- `list_messages(folder, top)`: the folder's first messages, each
  `{"id", "from", "subject", "isRead", "receivedAt", "score"}`.
- `create_event(subject, start)`: an event; its id depends on the subject's
  words alone (case and spacing aside), as a calendar that files by title.
- `send_invite(eventId, to, body)`: says who was invited to what.

Serves Streamable HTTP at /mcp on 127.0.0.1 (port 0 unless --port) and says
"listening on http://127.0.0.1:PORT" on stderr once it is ready.
"""

import argparse
import asyncio
import hashlib
import socket
import sys
from typing import Any

import uvicorn
from mcp.server.fastmcp import FastMCP

MESSAGES = {
    "inbox": [
        {"id": "msg-7", "from": "ada@contoso.com", "subject": "Quarterly budget review", "isRead": False,
         "receivedAt": "2026-11-24T09:15:00Z", "score": 0.5},
        {"id": "msg-4", "from": "grace@contoso.com", "subject": "Offsite venue", "isRead": True,
         "receivedAt": "2026-11-23T16:40:00Z", "score": 1.25},
        {"id": "msg-2", "from": "alan@contoso.com", "subject": "Lunch on Friday?", "isRead": True,
         "receivedAt": "2026-11-22T11:05:00Z", "score": 2.0},
    ],
}


def server():
    mcp = FastMCP("mail-calendar")

    @mcp.tool()
    def list_messages(folder: str = "inbox", top: int = 3) -> dict[str, Any]:
        """The newest messages of a mail folder."""
        messages = MESSAGES.get(folder.lower(), [])[:top]
        return {"folder": folder.lower(), "count": len(messages), "messages": messages}

    @mcp.tool()
    def create_event(subject: str, start: str) -> dict[str, Any]:
        """Creates a calendar event and returns it."""
        words = " ".join(subject.split()).lower()
        event_id = "evt-" + hashlib.sha256(words.encode()).hexdigest()[:8]
        return {"eventId": event_id, "subject": subject, "start": start, "status": "created", "attendees": 0}

    @mcp.tool()
    def send_invite(eventId: str, to: str, body: str) -> str:
        """Invites someone to an event with a message."""
        return f"invited {to} to {eventId} ({len(body)} characters of message)"

    return mcp


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    app = server().streamable_http_app()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", args.port))
    listener.listen(128)
    print(f"listening on http://127.0.0.1:{listener.getsockname()[1]}", file=sys.stderr, flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    asyncio.run(uvicorn.Server(config).serve(sockets=[listener]))


if __name__ == "__main__":
    main()
