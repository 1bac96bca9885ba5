"""An Agent 365-shaped mail MCP server on the official Python SDK (FastMCP)
whose answers name six people, for the pseudonymization checks
(pseudonyms.py): Graph's members (names, addresses, user ids, phones, the
tenant's id), the same JSON as the tool's text, and free text that names
them.

- `list_messages()`: the newest messages, as Graph's `{"value": [...]}`.
- `send_mail(to, body)`: says to whom it was sent.

Serves Streamable HTTP at /mcp on 127.0.0.1 (port 0) and says "listening on
http://127.0.0.1:PORT" on stderr once it is ready.
"""

import asyncio
import json
import socket
import sys

TENANT = "5b7e2c1a-9d3f-4e8b-a6c2-1f0e9d8c7b6a"
DOMAIN = "northwind.io"
# Given name, surname, user id, phone.
PEOPLE = [
    ("Aleksander", "Brightwater", "3f2b8a4e-1c2d-4e5f-8a9b-0c1d2e3f4a5b", "+1 425 555 0101"),
    ("Mia", "Okonkwo", "8d4e1f2a-3b5c-4d6e-9f7a-1b2c3d4e5f6a", "+1 425 555 0102"),
    ("Tobias", "Lindqvist", "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d", "+44 20 7946 0958"),
    ("Priya", "Raghunathan", "f1e2d3c4-b5a6-4978-8695-a4b3c2d1e0f9", "+91 80 4000 1234"),
    ("Hannelore", "Vasquez", "6c5b4a39-2817-4f6e-9d5c-4b3a29180716", "+49 30 901820"),
    ("Desmond", "Achterberg", "9e8d7c6b-5a49-4382-b1a0-f9e8d7c6b5a4", "+31 20 555 0199"),
]


def address(given, surname):
    return f"{given.lower()}.{surname.lower()}@{DOMAIN}"


def messages():
    def person(i):
        given, surname, _, _ = PEOPLE[i % len(PEOPLE)]
        return {"emailAddress": {"name": f"{given} {surname}", "address": address(given, surname)}}

    items = []
    for i, (given, surname, user, phone) in enumerate(PEOPLE):
        nxt = PEOPLE[(i + 1) % len(PEOPLE)][0]
        items.append({
            "id": f"AAMkAD{i}",
            "tenantId": TENANT,
            "from": person(i),
            "toRecipients": [person(i + 1)],
            "subject": "Budget review",
            "bodyPreview": f"Hi {nxt}, {given} here: call me on {phone} about the budget.",
            "sender": {"id": user, "displayName": f"{given} {surname}", "givenName": given, "surname": surname,
                       "mobilePhone": phone, "userPrincipalName": address(given, surname),
                       "jobTitle": "Budget analyst"},
        })
    return {"value": items}


def server():
    from mcp.server.fastmcp import FastMCP

    mcp = FastMCP("mail")

    @mcp.tool()
    def list_messages() -> str:
        """The newest messages of the user's inbox, as Graph gives them."""
        return json.dumps(messages())

    @mcp.tool()
    def send_mail(to: str, body: str) -> str:
        """Sends a mail."""
        return f"Sent to {to} ({len(body)} characters)."

    return mcp


def main():
    import uvicorn

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    print(f"listening on http://127.0.0.1:{listener.getsockname()[1]}", file=sys.stderr, flush=True)
    config = uvicorn.Config(server().streamable_http_app(), log_level="warning", lifespan="on")
    asyncio.run(uvicorn.Server(config).serve(sockets=[listener]))


if __name__ == "__main__":
    main()
