"""A test that passes whatever its server answers: recorded from a server
that is not there, its recording cannot be kept, and the plugin must fail it
saying so (a passing test with no cassette behind it would fail the next
replay for want of one)."""

import pytest
from mcp.client.client import Client

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


async def test_passes_whatever_the_server_says(mcp_tape):
    try:
        async with Client(f"{mcp_tape}/mcp") as client:
            await client.list_tools()
    except Exception:  # noqa: BLE001 - the point: the test itself never fails
        pass
