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


# The round trip: one flow over every server of agent365_upstream.py. Each
# step's outcome goes into a transcript; runs directly against the fixture,
# through `mcp-tape record` and against `mcp-tape replay` must give equal
# transcripts. Keys the fixture makes volatile on purpose are dropped.

VOLATILE_KEYS = {"currentDateTime", "sentDateTime"}


def stable(value):
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items() if k not in VOLATILE_KEYS}
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value


def text_of(block):
    try:
        return stable(json.loads(block.text))
    except ValueError:
        return block.text


def tool_outcome(result):
    return {
        "isError": bool(result.is_error),
        "content": [text_of(b) for b in result.content],
        "meta": stable(getattr(result, "meta", None)),
    }


def connect(base, server, mode, token, **options):
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    return Client(streamable_http_client(f"{base}/agents/servers/{server}", http_client=http), mode=mode,
                  **options)


def http_connector(base, mode, token):
    """Server name → a client of it at BASE/agents/servers/NAME."""
    return lambda server, **options: connect(base, server, mode, token, **options)


def stdio_connector(command, mode, env):
    """Server name → a client that spawns COMMAND, with "{server}" in any of
    its words replaced by the name (the SDK's stdio_client)."""
    from mcp.client.stdio import StdioServerParameters

    def connect_stdio(server, **options):
        argv = [word.replace("{server}", server) for word in command]
        return Client(StdioServerParameters(command=argv[0], args=argv[1:], env=env), mode=mode, **options)

    return connect_stdio


async def round_trip_flow(connect, only=None):
    """The flow over all six servers (or those named in `only`); `connect(server)` makes a client."""
    transcript = []

    def note(server, step, value):
        transcript.append([server, step, value])

    async def call(client, server, name, arguments):
        seen = []

        async def on_progress(progress, total, message):
            seen.append(progress)

        result = await client.call_tool(name, arguments, progress_callback=on_progress)
        note(server, f"call {name} {json.dumps(arguments, sort_keys=True)}", tool_outcome(result))
        if seen:
            note(server, f"progress {name}", seen)

    if only is None or "mcp_MailTools" in only:
        async with connect("mcp_MailTools") as client:
            tools = (await client.list_tools()).tools
            note("mcp_MailTools", "tools", sorted((t.name, json.dumps(t.input_schema, sort_keys=True)) for t in tools))
            await call(client, "mcp_MailTools", "SearchMessages", {"message": "invoice from Fabrikam"})
            await call(client, "mcp_MailTools", "GetMessage", {"id": "AAMkAGI2TG93AAA=", "bodyPreviewOnly": True})
            await call(client, "mcp_MailTools", "GetMessage", {"id": "AAMk-missing"})
            await call(client, "mcp_MailTools", "SendEmailWithAttachments",
                       {"to": ["adele.vance@contoso.com"], "subject": "Budget", "body": "See you Thursday."})
    if only is None or "mcp_CalendarTools" in only:
        async with connect("mcp_CalendarTools") as client:
            note("mcp_CalendarTools", "tools", sorted(t.name for t in (await client.list_tools()).tools))
            await call(client, "mcp_CalendarTools", "ListEvents", {"meetingTitle": "budget"})
            await call(client, "mcp_CalendarTools", "GetUserDateAndTimeZoneSettings", {})
    if only is None or "mcp_MeServer" in only:
        async with connect("mcp_MeServer") as client:
            await call(client, "mcp_MeServer", "GetMyDetails", {"select": "displayName,jobTitle"})
            await call(client, "mcp_MeServer", "GetManagerDetails", {"userId": "me"})
    if only is None or "mcp_KnowledgeTools" in only:
        async with connect("mcp_KnowledgeTools") as client:
            await call(client, "mcp_KnowledgeTools", "query_federated_knowledge",
                       {"consumerId": "agent-1", "query": "How do I use the vpn?"})
    if only is None or "mcp_WritingPrompts" in only:
        async with connect("mcp_WritingPrompts") as client:
            note("mcp_WritingPrompts", "prompts", sorted(p.name for p in (await client.list_prompts()).prompts))
            prompt = await client.get_prompt("draft_reply", {"tone": "friendly", "points": "thanks; next steps"})
            note("mcp_WritingPrompts", "get draft_reply", [[m.role, m.content.text] for m in prompt.messages])
            try:
                await client.get_prompt("no_such_prompt", {})
                unknown = "answered"
            except Exception as error:  # the SDK raises the JSON-RPC error it got
                unknown = {"code": getattr(getattr(error, "error", None), "code", None), "message": str(error)}
            note("mcp_WritingPrompts", "get no_such_prompt", unknown)
    if only is None or "mcp_PolicyLibrary" in only:
        async with connect("mcp_PolicyLibrary") as client:
            note("mcp_PolicyLibrary", "resources", sorted(str(r.uri) for r in (await client.list_resources()).resources))
            travel = await client.read_resource("policy://travel")
            note("mcp_PolicyLibrary", "read policy://travel", [c.text for c in travel.contents])
    return transcript


async def elicitation_flow(connect):
    """mcp_Concierge's book_room asks the client which room (elicitation);
    the client answers, the tool books it."""
    import mcp_types as types

    asked = []

    async def choose_room(context, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"room": "Lakeview"})

    transcript = []
    async with connect("mcp_Concierge", elicitation_callback=choose_room) as client:
        result = await client.call_tool("book_room", {"when": "Thursday"})
        transcript.append(["mcp_Concierge", "call book_room", tool_outcome(result)])
    transcript.append(["mcp_Concierge", "asked", asked])
    return transcript


async def everything_flow(connect):
    """@modelcontextprotocol/server-everything (the published reference
    server) over stdio: tools, a tool with progress, prompts, resources."""
    transcript = []

    def note(step, value):
        transcript.append(["server-everything", step, value])

    async with connect("server-everything") as client:
        note("tools", sorted(t.name for t in (await client.list_tools()).tools))
        note("echo", tool_outcome(await client.call_tool("echo", {"message": "hello from mcp-tape"})))
        note("get-sum", tool_outcome(await client.call_tool("get-sum", {"a": 2, "b": 40})))
        seen = []

        async def on_progress(progress, total, message):
            seen.append(progress)

        slow = await client.call_tool("trigger-long-running-operation", {"duration": 1, "steps": 3},
                                      progress_callback=on_progress)
        note("long-running", tool_outcome(slow))
        note("long-running progress", seen)
        note("prompts", sorted(p.name for p in (await client.list_prompts()).prompts))
        prompt = await client.get_prompt("args-prompt", {"city": "Seattle", "state": "WA"})
        note("args-prompt", [[m.role, m.content.text] for m in prompt.messages])
        resources = (await client.list_resources()).resources
        note("resources", sorted(str(r.uri) for r in resources)[:5])
        first = await client.read_resource(str(resources[0].uri))
        note("read first resource", [getattr(c, "text", None) or getattr(c, "blob", None) for c in first.contents])
        environment = await client.call_tool("get-env", {})
        note("get-env", "answered" if environment.content else "empty")
    return transcript


async def unprompted_flow(connect, server, root_uri, pause_s):
    """What a server says on its own: a client that declares roots connects
    to SERVER, hears everything the server sends that is no answer (in
    order, the roots request among them, answered with ROOT_URI), pauses
    PAUSE_S seconds after `initialized` (the server speaks then), then
    lists the tools."""
    import anyio
    import mcp_types as types

    heard = []

    async def on_message(message):
        if isinstance(message, Exception):
            heard.append(["transport error", type(message).__name__])
            return
        params = getattr(message, "params", None)
        data = getattr(params, "data", None) if params is not None else None
        heard.append([message.method, stable(data)])

    async def list_roots(context):
        heard.append(["roots/list", None])
        return types.ListRootsResult(roots=[types.Root(uri=root_uri, name="interop")])

    async with connect(server, list_roots_callback=list_roots, message_handler=on_message) as client:
        await anyio.sleep(pause_s)
        tools = sorted(t.name for t in (await client.list_tools()).tools)
    return [[server, "heard", heard], [server, "tools", tools]]


async def reconnection_flow(url, mode):
    """Calls the fixture's `test_reconnection`, whose stream the server closes
    before the answer: the client resumes it (GET + Last-Event-ID) to get it."""
    async with Client(url, mode=mode) as client:
        return tool_outcome(await client.call_tool("test_reconnection", {}))


async def mocks_flow(url, mode, calls):
    """Tools listed and calls made against answer templates: {tools, calls},
    the same shape mocks_client.mjs prints."""
    async with Client(url, mode=mode) as client:
        listed = (await client.list_tools()).tools
        tools = [{"name": t.name, "description": t.description, "inputSchema": t.input_schema,
                  "extra": [k for k in ("responseTemplate", "placeholders") if k in (t.model_extra or {})]}
                 for t in listed]
        answers = []
        for name, arguments in calls:
            try:
                result = await client.call_tool(name, arguments)
            except MCPError as error:
                answers.append({"code": error.error.code})
                continue
            answers.append({"isError": True} if result.is_error else {"text": result.content[0].text})
        return {"tools": tools, "calls": answers}


# Faults: one call of each failing_upstream.py tool, in one session; each
# step's outcome as the SDK reports it. The same directly against that server
# and against replay with faults.toml.
FAULT_STEPS = ["ok", "rpc_error", "tool_error", "rate_limited", "unavailable", "cut", "slow", "forget", "ok"]
# How long a call may wait (the hung one waits this long, then the client gives up).
FAULT_STEP_TIMEOUT_S = 2


async def faults_flow(url, mode):
    transcript = []
    try:
        async with Client(url, mode=mode) as client:
            for name in FAULT_STEPS:
                seen = []

                async def on_progress(progress, total, message, seen=seen):
                    seen.append(progress)

                step = {"tool": name}
                try:
                    result = await client.call_tool(name, {}, read_timeout_seconds=FAULT_STEP_TIMEOUT_S,
                                                    progress_callback=on_progress)
                except MCPError as error:
                    step["error"] = error.error.code
                    if name == "rpc_error":
                        step["message"] = error.error.message
                except Exception as error:  # whatever else the SDK raises is part of what it reports
                    step["raised"] = type(error).__name__
                else:
                    step["isError"] = bool(result.is_error)
                    step["content"] = [text_of(block) for block in result.content]
                step["progress"] = seen
                transcript.append(step)
    except Exception as error:  # the session's end, as the SDK reports it
        transcript.append({"closed": type(error).__name__})
    return transcript
