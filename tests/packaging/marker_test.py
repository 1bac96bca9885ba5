"""The marker's options act on their test alone: two tests share one
cassette (and get a page each), one of them with a fault; another replays
with a rules file of its own that lets a different question through."""

import json

import pytest
from mcp.client.client import Client

pytestmark = pytest.mark.anyio

PROFILE = "test_agent/test_the_agent_reads_the_users_profile.sqlite"
MAILBOX = "test_agent/test_the_agent_searches_the_mailbox.sqlite"


@pytest.fixture
def anyio_backend():
    return "asyncio"


async def my_details(url):
    async with Client(f"{url}/agents/servers/mcp_MeServer") as client:
        return await client.call_tool("GetMyDetails", {"select": "displayName,jobTitle"})


@pytest.mark.mcp_tape(cassette=PROFILE)
async def test_profile_as_recorded(mcp_tape):
    result = await my_details(mcp_tape)
    assert json.loads(result.content[0].text)["displayName"] == "Megan Bowen"


@pytest.mark.mcp_tape(cassette=PROFILE, faults=[{"tool": "GetMyDetails", "nth": [1], "tool_error": "directory down"}])
async def test_profile_when_the_directory_fails(mcp_tape):
    result = await my_details(mcp_tape)
    assert result.is_error and result.content[0].text == "directory down"


@pytest.mark.mcp_tape(cassette=MAILBOX, rules="lenient.toml")
async def test_any_question_with_lenient_rules(mcp_tape):
    async with Client(f"{mcp_tape}/agents/servers/mcp_MailTools") as client:
        result = await client.call_tool("SearchMessages", {"message": "anything at all"})
        assert "Found" in json.loads(result.content[0].text)["reply"]
