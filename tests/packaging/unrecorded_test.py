"""Tests whose cassettes were never recorded, run in replay mode: each must
fail naming its cassette, even one that only lists tools (the mock would list
none) and one that never looks at a tool result's isError."""

import pytest
from mcp.client.client import Client

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


async def test_lists_tools(mcp_tape):
    async with Client(f"{mcp_tape}/agents/servers/mcp_MeServer") as client:
        tools = (await client.list_tools()).tools
        assert isinstance(tools, list)


async def test_swallows_tool_errors(mcp_tape):
    async with Client(f"{mcp_tape}/agents/servers/mcp_MeServer") as client:
        await client.call_tool("GetMyDetails", {"select": "displayName"})
