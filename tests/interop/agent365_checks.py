"""The real Agent 365 tooling SDKs against replay, through record and on replay of
what record stored; Agent 365 mocks imported as answer templates; one server
unavailable (503).
"""

import collections
import json
import os
import re
import sqlite3
import tempfile

import clients

from harness import (
    A365_CALLS,
    A365_FLOWS,
    CLIENT_TIMEOUT_S,
    Daemon,
    SHIPPED_CASSETTES,
    TOOLS_AUDIENCE,
    UPSTREAM,
    cassette_bytes,
    jwt,
    python_flow,
    run_process,
)
from rules_and_faults import demo_result


REQUEST_LINE = re.compile(r"INFO (GET|POST|DELETE) server=(\S+) method=(\S+) ")


def requests_in(log):
    """The requests a daemon's log shows: (HTTP method, server, MCP method)."""
    return collections.Counter(m.groups() for m in map(REQUEST_LINE.search, log.splitlines()) if m)


def agent365_sdks(args, node_env, checks):
    """The real Agent 365 tooling SDKs, each discovery flow, against `replay
    cassettes/`, through `record` in front of that replay (every request must
    reach it), then against a replay of what record stored."""
    token = jwt()
    calls = json.dumps(A365_CALLS)
    sdks = {
        "python": lambda base, flow: run_process(
            [args.python, "a365_python.py", base, flow, token, calls], CLIENT_TIMEOUT_S),
        "node": lambda base, flow: run_process(
            [args.node, "a365_node.mjs", base, flow, token, calls], CLIENT_TIMEOUT_S, node_env),
    }
    transcripts = collections.defaultdict(dict)

    def run_all(stage, base):
        for sdk, run in sdks.items():
            for flow in A365_FLOWS:
                def one(sdk=sdk, flow=flow, run=run):
                    transcript = json.loads(run(base, flow))
                    transcripts[(sdk, flow)][stage] = transcript
                    gateway = flow.startswith("gateway")
                    for server in transcript["discovery"]:
                        assert server["path"] == f"/agents/servers/{server['name']}", server
                        if gateway:
                            assert (server["audience"], server["scope"]) != (None, None), server
                            assert server["audience"] == TOOLS_AUDIENCE, server
                    assert transcript["tools"]["mcp_MailTools"], transcript["tools"]
                    assert len(transcript["calls"]) == len(A365_CALLS), transcript["calls"]
                    for call, (server, tool, arguments) in zip(transcript["calls"], A365_CALLS):
                        recorded = demo_result(server, tool, arguments)
                        assert call["result"]["content"] == recorded["content"], call
                        assert bool(call["result"].get("isError")) == bool(recorded.get("isError")), call
                    assert transcript["unknown tool"]["code"] == -32602, transcript["unknown tool"]
                    assert transcript["chat history"]["succeeded"], transcript["chat history"]
                    if flow == "gateway-auth":
                        assert transcript["token exchanges"] == [f"{TOOLS_AUDIENCE}/.default"], transcript

                checks.run(f"agent 365 {sdk} sdk: {flow} {stage}", one)

    demo = Daemon(args.binary, [SHIPPED_CASSETTES])
    with tempfile.TemporaryDirectory() as cassettes:
        try:
            run_all("against replay cassettes/", demo.base)
            recorder = Daemon(None, None, [args.binary, "record", "--upstream", demo.base, "--cassettes", cassettes,
                                           "--name", "agent365", "--port", "0"])
            first_stage_lines = len(demo.lines)
            run_all("through record in front of that replay", recorder.base)
            record_code, record_log = recorder.stop(os.path.join(args.logs, "record-agent365.log"))
        finally:
            demo_code, _ = demo.stop(os.path.join(args.logs, "replay-agent365-upstream.log"))

        def every_request_reached_the_upstream():
            assert record_code == 0 and demo_code == 0, (record_code, demo_code)
            # The upstream saw exactly what the SDKs sent through record:
            # nothing answered by record alone, nothing that went around it.
            through = requests_in(record_log)
            upstream = requests_in("".join(demo.lines[first_stage_lines:]))
            assert through == upstream, f"through record: {through}\nat the upstream: {upstream}"
            gateway = [key for key in through if key[1].endswith("/mcpServers")]
            chat = [key for key in through if key[1].endswith("/chat-message")]
            mcp = [key for key in through if key[1].startswith("mcp_") and key[2] == "tools/call"]
            assert gateway and chat and mcp, through

        checks.run("agent 365 sdks: every request through record reached the upstream", every_request_reached_the_upstream)

        def token_never_stored():
            for name, data in cassette_bytes(cassettes):
                assert token.encode() not in data, f"the bearer token is in {name}"
            for name in os.listdir(cassettes):
                if name.endswith(".sqlite"):
                    dump = "\n".join(sqlite3.connect(os.path.join(cassettes, name)).iterdump())
                    assert token not in dump and "chat-message" in dump, name

        checks.run("agent 365 sdks: the bearer token is in no cassette byte nor its SQL dump", token_never_stored)
        replayer = Daemon(None, None, [args.binary, "replay", cassettes, "--port", "0", "--fail-on-miss"])
        try:
            run_all("against replay of what record stored", replayer.base)
        finally:
            code, log = replayer.stop(os.path.join(args.logs, "replay-agent365.log"))

    def same_everywhere():
        assert code == 0, f"replay --fail-on-miss exited {code}:\n{log[-3000:]}"
        for (sdk, flow), stages in transcripts.items():
            first = next(iter(stages.values()))
            assert len(stages) == 3, f"{sdk} {flow}: only {list(stages)}"
            for stage, transcript in stages.items():
                differs = sorted(k for k in first.keys() | transcript.keys() if first.get(k) != transcript.get(k))
                assert not differs, f"{sdk} {flow} {stage} differs in {differs}:\n" + "\n".join(
                    f"{k}: {json.dumps(first.get(k))[:1500]}\n  vs {json.dumps(transcript.get(k))[:1500]}" for k in differs)

    checks.run("agent 365 sdks: the same transcripts against replay, through record, against its replay", same_everywhere)


# An Agent 365 mocks file as `a365 develop mts` users keep them: comments, trailing commas, any-case
# property names, a disabled tool, a JSON template.
CALENDAR_MOCKS = r"""// mocks/mcp_CalendarTools.json
[
  {
    "name": "GetRooms",
    "description": "Lists meeting rooms in a city",
    "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    "responseTemplate": "Rooms in {{city}}: Aurora, Borealis",
    "delayMs": 20,
  },
  /* JSON in the text, as the newer mocks write it */
  {
    "Name": "CreateEvent",
    "DESCRIPTION": "Creates an event",
    "inputSchema": {"type": "object", "properties": {"subject": {"type": "string"}, "attendees": {"type": "array"}}},
    "responseTemplate": "{\"id\": \"evt-1\", \"subject\": \"{{subject}}\", \"attendees\": {{attendees}}}",
  },
  {"name": "DeleteEvent", "responseTemplate": "deleted", "enabled": false},
]
"""
MOCK_CALLS = [
    ["GetRooms", {"city": 'Oslo "Sentrum" \\ 1'}],
    ["CreateEvent", {"subject": 'Q3 "plan"', "attendees": ["a@x", "b@x"]}],
    ["DeleteEvent", {}],
    ["GetRooms", {}],
]


def a365_mocks_import(args, node_env, checks):
    """Mocks imported as answer templates, served to every client generation in both eras."""
    with tempfile.TemporaryDirectory() as work:
        mocks = os.path.join(work, "mocks")
        os.makedirs(mocks)
        with open(os.path.join(mocks, "mcp_CalendarTools.json"), "w") as out:
            out.write(CALENDAR_MOCKS)
        cassettes = os.path.join(work, "cassettes")
        os.makedirs(cassettes)
        run_process([args.binary, "import", "--a365-mocks", mocks, "--cassette",
                     os.path.join(cassettes, "mocks.sqlite")], CLIENT_TIMEOUT_S)
        daemon = Daemon(args.binary, [cassettes])
        url = daemon.url("/agents/servers/mcp_CalendarTools")

        def expect(transcript):
            tools = sorted(transcript["tools"], key=lambda t: t["name"])
            assert [t["name"] for t in tools] == ["CreateEvent", "GetRooms"], tools
            assert tools[1]["description"] == "Lists meeting rooms in a city", tools
            assert tools[1]["inputSchema"]["required"] == ["city"], tools
            assert all(t["extra"] == [] for t in tools), "the mock server's own fields are not listed"
            rooms, event, disabled, unfilled = transcript["calls"]
            assert rooms == {"text": f"Rooms in {MOCK_CALLS[0][1]['city']}: Aurora, Borealis"}, rooms
            assert json.loads(event["text"]) == {"id": "evt-1", **MOCK_CALLS[1][1]}, event
            assert disabled == {"code": -32602}, disabled
            assert unfilled == {"text": "Rooms in {{city}}: Aurora, Borealis"}, unfilled

        for mode in ["auto", "legacy"]:
            checks.run(f"a365 mocks: python-sdk {mode} lists the tools and gets each template filled",
                       lambda mode=mode: expect(python_flow(clients.mocks_flow(url, mode, MOCK_CALLS))))
        for sdk in ["v1", "legacy", "auto"]:
            checks.run(f"a365 mocks: typescript-sdk {sdk} lists the tools and gets each template filled",
                       lambda sdk=sdk: expect(json.loads(run_process(
                           [args.node, "mocks_client.mjs", url, sdk, json.dumps(MOCK_CALLS)], CLIENT_TIMEOUT_S,
                           node_env))))
        code, log = daemon.stop(os.path.join(args.logs, "replay-mocks.log"))

        def no_misses():
            assert code == 0, f"exit code {code}"
            assert "no misses" in log, log[-2000:]

        checks.run("a365 mocks: replay stopped cleanly with no misses", no_misses)


def a365_server_unavailable(args, node_env, checks):
    """The Agent 365 SDKs' dev-urls flow with mcp_MailTools answering 503: from agent365_upstream.py
    --unavailable, and from `replay cassettes/` with a fault rule; the SDKs must take it the same way."""
    token = jwt()
    calls = json.dumps(A365_CALLS[:1])
    down = "mcp_MailTools"
    sdks = {
        "python": lambda base: json.loads(run_process(
            [args.python, "a365_python.py", base, "dev-urls", token, calls], CLIENT_TIMEOUT_S)),
        "node": lambda base: json.loads(run_process(
            [args.node, "a365_node.mjs", base, "dev-urls", token, calls], CLIENT_TIMEOUT_S, node_env)),
    }
    # What of a transcript tells how the SDK took the failing server.
    seen = {
        "python": lambda t: {"connected": t["connected"]},
        "node": lambda t: {"tools": t["tools"][down], "unknown tool": t["unknown tool"]},
    }
    outcomes = collections.defaultdict(dict)
    upstream = Daemon(None, None, [args.python, UPSTREAM, "--token", token, "--unavailable", down])
    try:
        for sdk, run in sdks.items():
            outcomes[sdk]["directly"] = seen[sdk](run(upstream.base))
    finally:
        upstream.stop()
    replay = Daemon(None, None, [args.binary, "replay", SHIPPED_CASSETTES, "--port", "0",
                                 "--fault", f'server = "{down}", http = 503'])
    try:
        for sdk, run in sdks.items():
            outcomes[sdk]["replay"] = seen[sdk](run(replay.base))
    finally:
        replay.stop(os.path.join(args.logs, "replay-a365-unavailable.log"))
    for sdk in sdks:
        def same(sdk=sdk):
            direct, replayed = outcomes[sdk]["directly"], outcomes[sdk]["replay"]
            assert replayed == direct, f"directly: {direct}\nreplay: {replayed}"
            assert down not in json.dumps(direct.get("connected", [])), direct
            if sdk == "node":
                assert direct["tools"] == {"failed": "StreamableHTTPError", "code": 503}, direct

        checks.run(f"faults: agent 365 {sdk} sdk takes a 503 from {down} as from a server that is down", same)
