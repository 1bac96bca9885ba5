"""Tests whose ids a cassette's file name must tell apart: a class's tests,
parameters with dots, slashes, brackets, dots alone, a name that `_` would
make equal to another, two that differ only in case (one file where case
does not count), and a name of 90 CJK characters (270 bytes, more than a
file name holds); and a test that takes the tape through
`request.getfixturevalue`. Each lists the quick-start server's tools
through its own tape; the packaging test records them once, then replays
them with the server stopped, under `pytest -W error`."""

import pytest
from mcp.client.client import Client

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


async def lists_search(url):
    async with Client(f"{url}/mcp") as client:
        assert "search" in [tool.name for tool in (await client.list_tools()).tools]


class TestPair:
    async def test_one(self, mcp_tape):
        await lists_search(mcp_tape)

    async def test_two(self, mcp_tape):
        await lists_search(mcp_tape)


@pytest.mark.parametrize("value", ["1.5", "1.7", "a/b", "a_b", "..", ".", "/", "x" * 300])
async def test_p(value, mcp_tape):
    await lists_search(mcp_tape)


async def test_taken_in_the_body(request):
    await lists_search(request.getfixturevalue("mcp_tape"))


@pytest.mark.parametrize("word", ["Case", "case"])
async def test_q(word, mcp_tape):
    await lists_search(mcp_tape)


async def test_測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測測(mcp_tape):
    await lists_search(mcp_tape)
