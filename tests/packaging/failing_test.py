"""A test that records through its tape and then fails unless HARNESS_PASS=1:
what a recording mode does with the cassette of a failing test."""

import os

import pytest
from mcp.client.client import Client

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.mcp_tape
async def test_records_then_fails():
    async with Client(f"{os.environ['MCP_TAPE_URL']}/agents/servers/mcp_MeServer") as client:
        await client.call_tool("GetMyDetails", {"select": os.environ.get("HARNESS_SELECT", "mail")})
    assert os.environ.get("HARNESS_PASS") == "1", "fails on purpose"
