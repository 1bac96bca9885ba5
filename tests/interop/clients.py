"""The official Python MCP SDK (PyPI `mcp`) as a client of mcp-tape replay.

Two flows, each run in the SDK's `auto` mode (probes `server/discover`, falls
back to `initialize`) and `legacy` mode (`initialize` only):
- empty: against a server with no recordings, everything the mock offers;
- recorded: against a cassette imported from `fixture.jsonl`, the recorded
  results, with expectations read from that fixture (the input), not from
  anything mcp-tape produced.
Each flow raises AssertionError (or the SDK's error) on the first mismatch.
"""

import json

from mcp.client.client import Client
from mcp.shared.exceptions import MCPError


def recorded_calls(fixture_path):
    """The fixture's tools/call exchanges: (name, arguments, final text, progress count)."""
    calls = []
    with open(fixture_path) as fixture:
        for line in fixture:
            exchange = json.loads(line)
            request = exchange["request"]
            if request["method"] != "tools/call":
                continue
            bodies = [m["body"] for m in exchange["messages"]]
            final = bodies[-1]["result"]["content"][0]["text"]
            progress = sum(1 for b in bodies if b.get("method") == "notifications/progress")
            calls.append((request["params"]["name"], request["params"].get("arguments", {}), final, progress))
    return calls


def recorded_tool_names(fixture_path):
    with open(fixture_path) as fixture:
        for line in fixture:
            exchange = json.loads(line)
            if exchange["request"]["method"] == "tools/list":
                return sorted(t["name"] for t in exchange["messages"][-1]["body"]["result"]["tools"])
    raise AssertionError("the fixture has no tools/list exchange")


async def empty_flow(url, mode):
    async with Client(url, mode=mode) as client:
        expected_version = "2026-07-28" if mode == "auto" else "2025-11-25"
        assert client.protocol_version == expected_version, client.protocol_version
        assert client.server_info.name == "mcp-tape", client.server_info
        assert (await client.list_tools()).tools == []
        assert (await client.list_prompts()).prompts == []
        assert (await client.list_resources()).resources == []
        if mode == "legacy":
            await client.send_ping()
        try:
            result = await client.call_tool("SendEmailWithAttachments", {"to": ["megan@contoso.com"]})
        except MCPError as error:
            assert error.error.code == -32602, error.error
        else:
            raise AssertionError(f"a tool call on an empty server returned {result}")


async def recorded_flow(url, mode, fixture_path):
    async with Client(url, mode=mode) as client:
        names = sorted(t.name for t in (await client.list_tools()).tools)
        assert names == recorded_tool_names(fixture_path), names
        for name, arguments, text, progress_count in recorded_calls(fixture_path):
            seen = []

            async def on_progress(progress, total, message, seen=seen):
                seen.append(progress)

            result = await client.call_tool(name, arguments, progress_callback=on_progress)
            assert result.content[0].text == text, (name, result)
            assert len(seen) == progress_count, (name, seen)
