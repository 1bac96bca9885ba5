"""An agent's tool use, tested against recordings with the official MCP
Python SDK (`mcp` 2.x) and the pytest plugin of the `mcp-tape` wheel: each
test gets a tape of its own (the `mcp_tape` fixture is its URL), answering
from cassettes/test_agent/<test>.sqlite. No tenant, no network.

Record the cassettes once against the real servers, then replay them:

    pytest --mcp-tape-mode once --mcp-tape-upstream https://your-mcp-server
    pytest
"""

import json
import os

import pytest
from mcp.client.client import Client

pytestmark = pytest.mark.anyio

# What the model asked the mail search for: a run that asks something else
# sends a request the cassette does not hold, and that test fails.
QUESTION = os.environ.get("AGENT_QUESTION", "budget review")


@pytest.fixture
def anyio_backend():
    return "asyncio"


async def test_the_agent_reads_the_users_profile(mcp_tape):
    async with Client(f"{mcp_tape}/agents/servers/mcp_MeServer") as client:
        tools = (await client.list_tools()).tools
        assert "GetMyDetails" in [tool.name for tool in tools]
        result = await client.call_tool("GetMyDetails", {"select": "displayName,jobTitle"})
        assert json.loads(result.content[0].text)["displayName"] == "Megan Bowen"


async def test_the_agent_books_a_big_enough_room(mcp_tape):
    async with Client(f"{mcp_tape}/agents/servers/mcp_CalendarTools") as client:
        result = await client.call_tool("GetRooms", {})
        rooms = json.loads(result.content[0].text)["value"]
        assert [room["displayName"] for room in rooms if room["capacity"] >= 10] == ["Lakeview"]


async def test_the_agent_searches_the_mailbox(mcp_tape):
    async with Client(f"{mcp_tape}/agents/servers/mcp_MailTools") as client:
        result = await client.call_tool("SearchMessages", {"message": QUESTION})
        assert "Found" in json.loads(result.content[0].text)["reply"]
