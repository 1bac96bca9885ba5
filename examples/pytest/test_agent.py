"""An agent's tool use, tested against recordings with the official MCP
Python SDK (`mcp` 2.x): no tenant, no network."""

import json

import pytest
from mcp.client.client import Client


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.anyio
async def test_the_agent_reads_the_users_profile(mcp_tape_url):
    async with Client(f"{mcp_tape_url}/agents/servers/mcp_MeServer") as client:
        tools = (await client.list_tools()).tools
        assert "GetMyDetails" in [tool.name for tool in tools]
        result = await client.call_tool("GetMyDetails", {"select": "displayName,jobTitle"})
        profile = json.loads(result.content[0].text)
        assert profile["displayName"] == "Megan Bowen"
