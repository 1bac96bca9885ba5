"""Drives mcp-tape with the real Agent 365 tooling SDK for Python
(microsoft-agents-a365-tooling and its OpenAI extension), the way an agent
does: server discovery (dev-mode ToolingManifest.json, or the production
gateway through the legacy overload and through the auth-context overload),
the tools through the extension's add_tool_servers_to_agent (the OpenAI
Agents SDK's Streamable HTTP client), and chat history.

usage: a365_python.py BASE FLOW TOKEN CALLS_JSON
  BASE   what MCP_PLATFORM_ENDPOINT names (replay or record)
  FLOW   dev-urlless | dev-urls | gateway-legacy | gateway-auth
  TOKEN  the bearer token (a three-part JWT)
  CALLS  JSON: [[server, tool, arguments], ...] to call on every flow
Prints the transcript as JSON; exits non-zero when a step fails.
"""

import asyncio
import json
import os
import sys
import tempfile
from datetime import datetime, timezone
from urllib.parse import urlparse

AGENTIC_APP_ID = "agent-app-1"
SERVERS = ["mcp_MailTools", "mcp_CalendarTools", "mcp_MeServer", "mcp_KnowledgeTools"]
UNKNOWN_TOOL = ("mcp_MailTools", "NoSuchTool")


class TokenResponse:
    def __init__(self, token):
        self.token = token


class FakeAuthorization:
    """Stands in for the hosting SDK's Authorization: every token exchange
    (one per audience scope) returns the test's token and is noted."""

    def __init__(self, token):
        self.token = token
        self.scopes = []

    async def exchange_token(self, context, scopes=None, auth_handler_id=None, exchange_connection=None):
        self.scopes.extend(scopes or [])
        return TokenResponse(self.token)


def turn_context():
    from microsoft_agents.activity import Activity
    from microsoft_agents.hosting.core import TurnContext

    activity = Activity.model_validate({
        "type": "message",
        "id": "msg-2",
        "text": "What is on my calendar?",
        "channelId": "msteams",
        "conversation": {"id": "conv-1"},
        "from": {"id": "user-1", "name": "Adele"},
        "recipient": {"id": "agent-1", "role": "agenticUser", "agenticAppId": AGENTIC_APP_ID},
    })
    return TurnContext(object(), activity)


def write_manifest(directory, base, with_urls):
    entries = []
    for name in SERVERS:
        entry = {"mcpServerName": name, "mcpServerUniqueName": name}
        if with_urls:
            entry["url"] = f"{base}/agents/servers/{name}"
        entries.append(entry)
    with open(os.path.join(directory, "ToolingManifest.json"), "w") as f:
        json.dump({"mcpServers": entries}, f)


def described(servers, base):
    """What discovery gave, with each url checked to point at BASE."""
    out = []
    origin = urlparse(base)
    for server in servers:
        url = urlparse(server.url)
        assert (url.scheme, url.netloc) == (origin.scheme, origin.netloc), f"{server.url} is not at {base}"
        out.append({
            "name": server.mcp_server_name,
            "path": url.path,
            "audience": server.audience,
            "scope": server.scope,
            "authorized": bool(server.headers and server.headers.get("Authorization")),
        })
    return sorted(out, key=lambda s: s["name"])


async def flow(base, name, token, calls):
    from agents import Agent
    from microsoft_agents_a365.tooling.extensions.openai import McpToolRegistrationService
    from microsoft_agents_a365.tooling.models import ChatHistoryMessage
    from microsoft_agents_a365.tooling.services.mcp_tool_server_configuration_service import (
        McpToolServerConfigurationService,
    )

    transcript = {}
    context = turn_context()
    auth = FakeAuthorization(token)
    service = McpToolServerConfigurationService()
    if name == "gateway-legacy":
        servers = await service.list_tool_servers(AGENTIC_APP_ID, token)
    else:
        servers = await service.list_tool_servers(
            AGENTIC_APP_ID, token, authorization=auth, auth_handler_name="AGENTIC", turn_context=context
        )
    transcript["discovery"] = described(servers, base)

    registration = McpToolRegistrationService()
    agent = Agent(name="tape-agent", instructions="Answer from the tools.")
    agent = await registration.add_tool_servers_to_agent(agent, auth, "AGENTIC", context, token)
    try:
        connected = {server.name: server for server in agent.mcp_servers}
        transcript["connected"] = sorted(connected)
        transcript["tools"] = {}
        for server_name, server in sorted(connected.items()):
            tools = await server.list_tools()
            transcript["tools"][server_name] = sorted(tool.name for tool in tools)
        transcript["calls"] = []
        for server_name, tool, arguments in calls:
            result = await connected[server_name].call_tool(tool, arguments)
            transcript["calls"].append({
                "server": server_name,
                "tool": tool,
                "result": result.model_dump(mode="json", exclude_none=True, by_alias=True),
            })
        server_name, tool = UNKNOWN_TOOL
        try:
            await connected[server_name].session.call_tool(tool, {})
            transcript["unknown tool"] = "answered"
        except Exception as error:  # the SDK raises the JSON-RPC error it got
            code = getattr(getattr(error, "error", None), "code", None)
            transcript["unknown tool"] = {"code": code, "type": type(error).__name__}
    finally:
        await registration.cleanup_all_servers()

    history = [
        ChatHistoryMessage(id="msg-1", role="user", content="hello", timestamp=datetime(2026, 11, 23, 10, 0, tzinfo=timezone.utc)),
        ChatHistoryMessage(
            id="msg-1b", role="assistant", content="Hi! How can I help?", timestamp=datetime(2026, 11, 23, 10, 1, tzinfo=timezone.utc)
        ),
    ]
    result = await service.send_chat_history(context, history)
    transcript["chat history"] = {"succeeded": result.succeeded, "errors": [str(e) for e in result.errors]}
    transcript["token exchanges"] = sorted(set(auth.scopes))
    return transcript


def main():
    base, name, token, calls = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
    os.environ["MCP_PLATFORM_ENDPOINT"] = base
    os.environ["BEARER_TOKEN"] = token
    os.environ["PYTHON_ENVIRONMENT"] = "Development" if name.startswith("dev-") else "Production"
    with tempfile.TemporaryDirectory() as workdir:
        os.chdir(workdir)
        if name.startswith("dev-"):
            write_manifest(workdir, base, with_urls=name == "dev-urls")
        transcript = asyncio.run(asyncio.wait_for(flow(base, name, token, calls), 120))
    print(json.dumps(transcript, sort_keys=True))


if __name__ == "__main__":
    main()
