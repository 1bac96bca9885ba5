"""Interop checks for mcp-tape with official MCP clients.

Starts the real `mcp-tape` binary (and the fixture upstream) on 127.0.0.1
port 0, readiness being their "listening on" log line, then drives them
with the official Python SDK (auto and legacy modes), the official
TypeScript SDK and the official conformance suite:
- replay of an empty directory and of an imported cassette;
- the round trip: each client's flow directly against agent365_upstream.py
  (compressing JSON answers for clients that accept gzip), through
  `mcp-tape record`, then against `mcp-tape replay` with the upstream
  stopped; the three transcripts must agree;
- the conformance suite through `mcp-tape record` to the fixture upstream;
- the conformance suite 32/32 against our conformance fixture
  (conformance_upstream.mjs) directly, through `mcp-tape record`, and
  against `mcp-tape replay` of that recording with the fixture stopped;
- cross-era replay: a recording made by handshake-era clients only, replayed
  to a stateless client, and the reverse;
- the real Agent 365 tooling SDKs (Python and Node) against `replay
  cassettes/`, through `mcp-tape record` in front of that replay, and
  against a replay of what record stored;
- stdio: the Python SDK (auto, legacy) and TypeScript SDK (v1; v2 legacy,
  auto) spawning our stdio fixture servers and the published
  server-everything directly, through `mcp-tape record --stdio` (one
  cassette for all) and `mcp-tape replay --stdio` of it; and the HTTP round
  trip's cassette replayed over stdio;
- what a server says on its own: the Python SDK (legacy, auto) and the
  TypeScript SDK (v1), declaring roots and pausing after `initialized`, against server-everything and
  server-filesystem over stdio directly, through `record --stdio`, against
  `replay --stdio` and against `replay` over HTTP (the GET stream): the
  transcripts of everything each heard must agree; server-everything over
  HTTP (everything_http.mjs) through `record` and against `replay` of it:
  replay must give what the client got through record; and where
  server-everything's log messages on its GET stream fall among its answers
  (stream_order.py, by the kernel's receive times): through record, in the
  four cassettes and on replay of each, each one falls between the same two
  answers as directly;
- Agent 365 mocks imported as answer templates (`import --a365-mocks`),
  served to the Python SDK (auto, legacy) and TypeScript SDK (v1; v2
  legacy, auto);
- match rules (`--rules`): the Python SDK (auto, legacy) calling the demo
  cassette's tools with other arguments under each rule kind; a listed tool
  under `--on-miss mock` answering isError; and a scripted, seeded "model"
  varying its arguments on every run: 20 runs in a row pass against one
  recording with a rules file, and the first fails with a clear miss
  without one;
- faults on demand: the Python SDK (auto, legacy) and TypeScript SDK (v1; v2 legacy, auto)
  calling each tool of failing_upstream.py (a JSON-RPC error, isError, 429,
  503, a cut stream, a hang, a lost session) directly, and against `replay`
  of a healthy recording of it with faults.toml: the same outcomes; the
  Agent 365 SDKs with a 503 from one server, against agent365_upstream.py
  and against replay with that fault;
- other tools' recordings (imports.py): mitmdump's HAR, mcp-recorder's and
  mcp-vcr's cassettes of real sessions (and the Inspector's and
  mcp-cassette's shapes built from them), imported and replayed to the
  official clients;
- agent frameworks (frameworks.py): Pydantic AI, the OpenAI Agents SDK,
  LangChain and the Vercel AI SDK with scripted models hand their model the
  same text directly, through record and on replay; a varied run's miss
  names the pointer in what they surface, a rules file answers it; faults
  reach them;
- CI: `mcp-tape test` around a stand-in agent with a miss, its JUnit file
  read by junitparser (the pytest and vitest examples run from the
  installed packages in tests/packaging);
- the soaks (soak.py): hostile requests to replay and record under memory
  bounds, every connection slot held, and ordinary calls beside hostile
  `nearest`-rule queries over 20,000 recordings of one tool (p50 and p99
  printed).
Prints one line per check and closes with "interop: N passed, N failed";
exits 1 if any check failed.
"""

import argparse
import asyncio
import json
import os
import base64
import collections
import queue
import re
import secrets
import sqlite3
import time
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
import types

import agent_loop
import clients
import frameworks
import imports
import soak
import stream_order
from mcp.shared.exceptions import MCPError

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
# The stand-in agent suite the integration tests give `mcp-tape test`.
CI_AGENT = os.path.join(ROOT, "tests", "integration", "scripts", "ci_agent.py")
FIXTURE = os.path.join(HERE, "fixture.jsonl")
UPSTREAM = os.path.join(HERE, "agent365_upstream.py")
CONFORMANCE_UPSTREAM = os.path.join(HERE, "conformance_upstream.mjs")
EXPECTED_FAILURES = os.path.join(HERE, "conformance-expected-failures.yml")
NEXT_EXPECTED_FAILURES = os.path.join(HERE, "conformance-next-expected-failures.yml")
CONFORMANCE_UPSTREAM_V2 = os.path.join(HERE, "conformance_upstream_v2.mjs")
EVERYTHING = os.path.join(HERE, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
EVERYTHING_HTTP = os.path.join(HERE, "everything_http.mjs")
FILESYSTEM = os.path.join(HERE, "node_modules", "@modelcontextprotocol", "server-filesystem", "dist", "index.js")
# The two legs of conformance 0.2.0-alpha.12: each scenario at its own version, and the
# 2026-07-28 scenarios forced to that version.
NEXT_LEGS = {"all": [], "2026-07-28": ["--spec-version", "2026-07-28"]}
# What conformance_upstream_v2.mjs does not implement: the tasks extension (as the SDK it is
# written on), so these fail the same way directly, through record and on replay.
NEXT_FIXTURE_GAPS = "tasks-"
FIXTURE_EXPECTED_FAILURES = os.path.join(HERE, "conformance-fixture-expected-failures.yml")
FAILING_UPSTREAM = os.path.join(HERE, "failing_upstream.py")
FAULTS_TOML = os.path.join(HERE, "faults.toml")
SHIPPED_CASSETTES = os.path.join(HERE, "..", "..", "cassettes")
DEMO_JSONL = os.path.join(SHIPPED_CASSETTES, "agent365-demo.jsonl")
TOOLS_AUDIENCE = "ea9ffc3e-8a23-4a7d-836d-234d7c7565c1"
A365_FLOWS = ["dev-urlless", "dev-urls", "gateway-legacy", "gateway-auth"]
# Recorded calls of the demo cassette: one JSON answer, one SSE answer.
A365_CALLS = [
    ["mcp_MeServer", "GetMyDetails", {"select": "displayName,jobTitle"}],
    ["mcp_MailTools", "GetMessage", {"bodyPreviewOnly": True, "id": "AAMkAGI2TG93AAA="}],
]
PATHS = ["/agents/servers/mcp_Unknown", "/mcp"]
# Bounds on every wait: start-up, shutdown, one client flow, one conformance run.
START_TIMEOUT_S = 30
CLIENT_TIMEOUT_S = 120
CONFORMANCE_TIMEOUT_S = 600


class Daemon:
    """A server process that logs "listening on http://..." once ready; its
    log is collected as it runs. By default `mcp-tape replay PATHS`."""

    def __init__(self, binary, paths, command=None):
        self.proc = subprocess.Popen(
            command or [binary, "replay", *paths, "--port", "0"],
            stdin=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines = []
        ready = queue.Queue()

        def read():
            for line in self.proc.stderr:
                self.lines.append(line)
                if "listening on http://" in line:
                    ready.put(line.split("listening on ", 1)[1].split(",")[0].strip())
            ready.put(None)

        self.reader = threading.Thread(target=read, daemon=True)
        self.reader.start()
        try:
            self.base = ready.get(timeout=START_TIMEOUT_S)
        except queue.Empty:
            self.base = None
        if self.base is None:
            self.proc.kill()
            raise RuntimeError("mcp-tape did not start listening:\n" + "".join(self.lines))

    def url(self, path):
        return self.base + path

    def stop(self, keep_log_as=None):
        """SIGTERM; returns (exit code, whole log), the log also written to
        `keep_log_as` (a path) if given."""
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=START_TIMEOUT_S)
        self.reader.join(timeout=START_TIMEOUT_S)
        log = "".join(self.lines)
        if keep_log_as:
            with open(keep_log_as, "w") as out:
                out.write(log)
        return code, log


class Checks:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def run(self, name, fn):
        try:
            fn()
        except Exception as error:  # any failure of a check is reported, and the others still run
            self.failed += 1
            print(f"FAIL {name}: {error!r}", flush=True)
            traceback.print_exc()
        else:
            self.passed += 1
            print(f"ok   {name}", flush=True)


def run_process(command, timeout, env=None, log_path=None):
    result = subprocess.run(
        command, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout, env=env, cwd=HERE
    )
    if log_path:
        with open(log_path, "w") as log:
            log.write(result.stdout + result.stderr)
    if result.returncode != 0:
        tail = (result.stdout + result.stderr)[-4000:]
        raise AssertionError(f"{command[:3]} exited {result.returncode}:\n{tail}")
    return result.stdout


def python_flow(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, CLIENT_TIMEOUT_S))


def cassette_bytes(directory):
    for name in os.listdir(directory):
        with open(os.path.join(directory, name), "rb") as f:
            yield name, f.read()


def record_through(args, upstream_command, cassettes, drive, name="default"):
    """Starts the upstream, `mcp-tape record` in front of it into `cassettes`,
    runs drive(upstream, recorder), and stops both."""
    upstream = Daemon(None, None, upstream_command)
    try:
        recorder = Daemon(None, None, [args.binary, "record", "--upstream", upstream.base,
                                       "--cassettes", cassettes, "--name", name, "--port", "0"])
        try:
            drive(upstream, recorder)
        finally:
            recorder.stop(os.path.join(args.logs, f"record-{name}.log"))
    finally:
        upstream.stop()


def round_trip_flows(args, node_env, token):
    return {
        **{
            f"python-sdk {mode}": lambda base, mode=mode: python_flow(
                clients.round_trip_flow(clients.http_connector(base, mode, token))
            )
            for mode in ["auto", "legacy"]
        },
        "typescript-sdk": lambda base: json.loads(
            run_process([args.node, "ts_client.mjs", base, "round-trip", token], CLIENT_TIMEOUT_S, node_env)
        ),
        **{
            f"typescript-sdk-v2 {mode}": lambda base, mode=mode: json.loads(
                run_process([args.node, "ts2_client.mjs", base, mode, token], CLIENT_TIMEOUT_S, node_env)
            )
            for mode in ["legacy", "auto", "2026-07-28"]
        },
    }


def round_trip(args, node_env, checks):
    """Each client's flow directly, through record, then from replay.
    Returns the transcripts of the direct runs."""
    token = "eyJhbGciOiJub25lIn0." + secrets.token_urlsafe(32)
    flows = round_trip_flows(args, node_env, token)
    transcripts = {name: {} for name in flows}

    def run_all(stage, base):
        for name, flow in flows.items():

            def one(name=name, flow=flow):
                transcripts[name][stage] = flow(base)
                assert len(transcripts[name][stage]) >= 15, transcripts[name][stage]

            checks.run(f"round trip: {name} flow {stage}", one)

    # The upstream compresses JSON answers for clients that accept gzip (httpx, the Python SDK's
    # client, asks by default): what record relays must still be stored.
    upstream = Daemon(None, None, [sys.executable, UPSTREAM, "--token", token, "--gzip"])
    with tempfile.TemporaryDirectory() as cassettes:
        try:
            run_all("directly against the fixture upstream", upstream.base)
            recorder = Daemon(None, None, [args.binary, "record", "--upstream", upstream.base,
                                           "--cassettes", cassettes, "--name", "round-trip", "--port", "0"])
            run_all("through mcp-tape record", recorder.base)
            code, log = recorder.stop(os.path.join(args.logs, "record-round-trip.log"))
        finally:
            upstream.stop()

        def recorded_and_clean():
            assert code == 0, f"record exited {code}"
            assert "stopped; recorded" in log, log[-2000:]
            for name, data in cassette_bytes(cassettes):
                assert token.encode() not in data, f"the bearer token is in {name}"

        checks.run("round trip: record stopped cleanly; the token is in no cassette byte", recorded_and_clean)
        replayer = Daemon(args.binary, [cassettes])
        run_all("against mcp-tape replay, upstream stopped", replayer.base)
        code, log = replayer.stop(os.path.join(args.logs, "replay-round-trip.log"))
        over_stdio = [args.binary, "replay", "--stdio", cassettes, "--server", "{server}"]
        # Each stdio client against what the same client generation and mode saw over HTTP.
        same_client = {
            "python-sdk legacy round trip": "python-sdk legacy",
            "python-sdk auto round trip": "python-sdk auto",
            "typescript-sdk v1 legacy round-trip": "typescript-sdk",
            "typescript-sdk v2 legacy round-trip": "typescript-sdk-v2 legacy",
            "typescript-sdk v2 auto round-trip": "typescript-sdk-v2 auto",
        }
        stdio = stdio_flows(args, node_env)
        for name, http_name in same_client.items():
            def http_recording_over_stdio(flow=stdio[name], http_name=http_name):
                replayed = flow(over_stdio)
                direct_http = transcripts[http_name]["directly against the fixture upstream"]
                if http_name.startswith("typescript"):
                    direct_http = without_progress(direct_http)
                differ = [(a, b) for a, b in zip(direct_http, replayed) if a != b]
                assert replayed == direct_http, f"differs at {json.dumps(differ[:1])[:3000]}"

            checks.run(f"round trip: the HTTP recording replayed over stdio to {name}", http_recording_over_stdio)

    def agree(name):
        stages = list(transcripts[name].values())
        assert len(stages) == 3, f"only {len(stages)} of 3 stages ran"
        steps = {step: value for _, step, value in stages[0]}
        assert steps.get("progress SearchMessages") == [1, 2, 3], "SSE progress was not exercised"
        assert any(isinstance(v, dict) and v.get("isError") for v in steps.values()), "no isError result"
        for stage, transcript in transcripts[name].items():
            assert transcript == stages[0], f"{stage} differs:\n{json.dumps(transcript)[:3000]}"

    for name in flows:
        checks.run(f"round trip: {name} transcripts agree (direct, record, replay)", lambda name=name: agree(name))
    # Kept for comparing one build's transcripts with another's.
    with open(os.path.join(args.logs, "round-trip-transcripts.json"), "w") as saved:
        json.dump(transcripts, saved, indent=1, sort_keys=True, default=str)
    def no_misses():
        assert code == 0, f"replay exited {code}"
        assert "no misses" in log, log[-3000:]

    checks.run("round trip: replay had no misses", no_misses)
    return {name: stages.get("directly against the fixture upstream") for name, stages in transcripts.items()}


def stdio_flows(args, node_env, extra_env=None):
    """Name → flow(command) → transcript, for each stdio client and server:
    COMMAND is the server's command line with "{server}" for its name."""
    extra_env = dict(extra_env or {}, MCP_TAPE_LOG="warn")
    env = dict(os.environ, **extra_env)
    flows = {}
    for mode in ["legacy", "auto"]:
        flows[f"python-sdk {mode} round trip"] = lambda command, mode=mode: python_flow(
            clients.round_trip_flow(clients.stdio_connector(command, mode, env)))
        flows[f"python-sdk {mode} server-everything"] = lambda command, mode=mode: python_flow(
            clients.everything_flow(clients.stdio_connector(command, mode, env)))
    # The SDK's server sends elicitation/create over stdio in the handshake era only.
    flows["python-sdk legacy elicitation"] = lambda command: python_flow(
        clients.elicitation_flow(clients.stdio_connector(command, "legacy", env)))
    node_stdio_env = dict(node_env, **extra_env)
    for generation, mode in [("v1", "legacy"), ("v2", "legacy"), ("v2", "auto")]:
        for flow in ["round-trip", "everything"]:
            name = f"typescript-sdk {generation} {mode} {flow}"
            flows[name] = lambda command, g=generation, m=mode, f=flow: without_progress(json.loads(run_process(
                [args.node, "ts_stdio_client.mjs", g, m, f, json.dumps(command)], CLIENT_TIMEOUT_S, node_stdio_env)))
    return flows


def without_progress(transcript):
    """The TypeScript SDK's stdio client drops progress notifications that
    arrive in the same read as their request's answer (notifications go
    through a microtask, the answer removes the progress handler at once), so
    how many of a tool's last notifications it sees, none included, varies
    from run to run, directly against a server too. Its transcripts leave
    progress out; the Python SDK's keep every notification, and those check
    that record and replay carry progress."""
    return [[server, step, value] for server, step, value in transcript
            if not (step.startswith("progress") or step.endswith(" progress"))]


def stdio_server_of(flow_name, fixture, everything):
    return everything if "everything" in flow_name else fixture


def stdio_round_trip(args, node_env, checks):
    """Every stdio flow directly against its server, through `mcp-tape record
    --stdio` (all into one cassette), then against `mcp-tape replay --stdio
    --fail-on-miss` of it: transcripts must agree. The recording process gets
    a credential in its environment, which server-everything's get-env tool
    echoes: no cassette byte may hold it."""
    secret = "stdio-" + secrets.token_urlsafe(24)
    fixture = [sys.executable, UPSTREAM, "--stdio", "{server}"]
    everything = [args.node, EVERYTHING, "stdio"]
    flows = stdio_flows(args, node_env, {"INTEROP_SERVICE_TOKEN": secret})
    transcripts = {name: {} for name in flows}
    with tempfile.TemporaryDirectory() as cassettes, tempfile.TemporaryDirectory() as scratch:
        statuses = os.path.join(scratch, "replay-exit-codes")

        def record(server):
            return [args.binary, "record", "--stdio", "--cassettes", cassettes, "--name", "stdio",
                    "--server", "{server}", "--", *server]

        # Each replay appends its exit code: with --fail-on-miss, 0 means every request was a hit.
        replay = ["sh", "-c", f'"$0" "$@"; echo $? >> {statuses}', args.binary, "replay", "--stdio",
                  "--fail-on-miss", os.path.join(cassettes, "stdio.sqlite"), "--server", "{server}"]
        stages = [
            ("directly", lambda name: stdio_server_of(name, fixture, everything)),
            ("through mcp-tape record --stdio", lambda name: record(stdio_server_of(name, fixture, everything))),
            ("against mcp-tape replay --stdio", lambda name: replay),
        ]
        for stage, command_for in stages:
            for name, flow in flows.items():
                def one(name=name, flow=flow, command=command_for(name)):
                    transcripts[name][stage] = flow(command)
                    assert len(transcripts[name][stage]) >= 2, transcripts[name][stage]

                checks.run(f"stdio: {name} {stage}", one)
            if stage.startswith("through"):
                def clean_and_both_eras():
                    for file, data in cassette_bytes(cassettes):
                        assert secret.encode() not in data, f"the child's credential is in {file}"
                    with sqlite3.connect(os.path.join(cassettes, "stdio.sqlite")) as db:
                        eras = {era for (era,) in db.execute("SELECT DISTINCT era FROM exchange")}
                        servers = {server for (server,) in db.execute("SELECT DISTINCT server FROM exchange")}
                    assert eras == {"handshake", "stateless"}, eras
                    assert {"mcp_MailTools", "mcp_Concierge", "server-everything"} <= servers, servers

                checks.run("stdio: one cassette holds both eras and all servers; the child's credential is in no byte",
                           clean_and_both_eras)

        def replays_all_hits():
            with open(statuses) as f:
                codes = f.read().split()
            assert codes and set(codes) == {"0"}, f"replay exit codes: {codes}"

        checks.run("stdio: every replay --stdio --fail-on-miss exited 0", replays_all_hits)

    def agree(name):
        stages_run = transcripts[name]
        assert len(stages_run) == 3, f"only {len(stages_run)} of 3 stages ran"
        first = next(iter(stages_run.values()))
        for stage, transcript in stages_run.items():
            differ = [(a, b) for a, b in zip(first, transcript) if a != b]
            assert transcript == first, f"{stage} differs at {json.dumps(differ[:1])[:3000]} (lengths {len(first)}, {len(transcript)})"

    for name in flows:
        checks.run(f"stdio: {name} transcripts agree (direct, record, replay)", lambda name=name: agree(name))


# How long the unprompted flow's client waits after `initialized`: the time the
# servers get to speak on their own (the scenario itself, not a readiness wait).
UNPROMPTED_PAUSE_S = 1.0


def unprompted(args, node_env, checks):
    """What a server says on its own, with a client that declares roots, hears
    everything the server sends that is no answer, and pauses after
    `initialized`: server-everything (tools/list_changed twice, roots/list, a
    log line about the roots) and server-filesystem (roots/list) over stdio,
    with the Python SDK (legacy, auto) and the TypeScript SDK (v1; v2 legacy
    and auto): directly,
    through `mcp-tape record --stdio`, against `replay --stdio` of that
    cassette, and against `replay` of it over HTTP (what stdio said between
    exchanges comes on the GET stream). Every transcript must equal the direct
    one. Then server-everything over HTTP (its GET stream) directly, through
    `record` and against `replay`."""
    env = dict(os.environ, MCP_TAPE_LOG="warn")
    node_stdio_env = dict(node_env, MCP_TAPE_LOG="warn")
    users = ["python-sdk legacy", "python-sdk auto", "typescript-sdk v1", "typescript-sdk v2 legacy",
             "typescript-sdk v2 auto"]
    with tempfile.TemporaryDirectory() as cassettes, tempfile.TemporaryDirectory() as root:
        root_uri = "file://" + root
        servers = {
            "server-everything": [args.node, EVERYTHING, "stdio"],
            "server-filesystem": [args.node, FILESYSTEM, root],
        }
        transcripts = collections.defaultdict(dict)

        def hear(user, server, where):
            """USER's transcript of SERVER at WHERE: ("stdio", command) or ("http", base)."""
            kind, target = where
            if user.startswith("python-sdk"):
                mode = user.split()[1]
                connector = (clients.stdio_connector(target, mode, env) if kind == "stdio"
                             else clients.http_connector(target, mode, "unused-token"))
                return python_flow(clients.unprompted_flow(connector, server, root_uri, UNPROMPTED_PAUSE_S))
            command = target if kind == "stdio" else [target + "/agents/servers/{server}"]
            generation, mode = (user.split()[1:] + ["legacy"])[:2]
            return json.loads(run_process(
                [args.node, "ts_stdio_client.mjs", generation, mode, "unprompted", json.dumps(command), server,
                 root_uri, str(int(UNPROMPTED_PAUSE_S * 1000))], CLIENT_TIMEOUT_S, node_stdio_env))

        def run(stage, user, server, where, key=None):
            transcript = hear(user, server, where)
            transcripts[(user, key or server)][stage] = transcript
            assert transcript[0][2], f"the server said nothing on its own: {transcript}"

        def stdio_stage(stage, command_of):
            for server, command in servers.items():
                for user in users:
                    where = ("stdio", command_of(server, command))
                    checks.run(f"unprompted: {user} {server} over stdio {stage}",
                               lambda u=user, s=server, w=where: run(stage, u, s, w))

        stdio_stage("directly", lambda server, command: command)
        stdio_stage("through mcp-tape record --stdio", lambda server, command: [
            args.binary, "record", "--stdio", "--cassettes", cassettes, "--name", "said",
            "--server", server, "--", *command])
        cassette = os.path.join(cassettes, "said.sqlite")
        stdio_stage("against mcp-tape replay --stdio", lambda server, command: [
            args.binary, "replay", "--stdio", cassette, "--server", server])

        def stored():
            with sqlite3.connect(cassette) as db:
                rows = db.execute("SELECT e.server, a.after, a.direction, json_extract(a.body, '$.method') "
                                  "FROM aside a JOIN exchange e ON e.id = a.exchange_id").fetchall()
            said = {(server, method) for server, _, _, method in rows}
            assert ("server-everything", "notifications/tools/list_changed") in said, rows
            assert ("server-filesystem", "roots/list") in said, rows
            assert any(direction == "client" for _, _, direction, _ in rows), f"no client reply stored: {rows}"

        checks.run("unprompted: the cassette holds what each server said on its own, and the replies", stored)

        replay = Daemon(args.binary, [cassettes])
        try:
            for server in servers:
                for user in users:
                    checks.run(f"unprompted: {user} {server} against mcp-tape replay over HTTP",
                               lambda u=user, s=server: run("over HTTP", u, s, ("http", replay.base)))
        finally:
            replay.stop(keep_log_as=os.path.join(args.logs, "unprompted-replay.log"))

        # server-everything over HTTP: what it says on its own comes on the GET stream.
        http_cassettes = os.path.join(cassettes, "http")
        over_http = "server-everything over HTTP"

        def http_stage(stage, user, base):
            checks.run(f"unprompted: {user} {over_http} {stage}",
                       lambda: run(stage, user, "server-everything", ("http", base), over_http))

        # One recorded session per cassette: replay answers every `initialize` with a server's
        # first recorded one, and what followed it.
        names = {user: user.replace(" ", "-") for user in users}
        upstream = Daemon(None, None, [args.node, EVERYTHING_HTTP])
        try:
            for user in users:
                http_stage("directly", user, upstream.base)
                recorder = Daemon(None, None, [args.binary, "record", "--upstream", upstream.base,
                                               "--cassettes", http_cassettes, "--name", names[user], "--port", "0"])
                try:
                    http_stage("through mcp-tape record", user, recorder.base)
                finally:
                    recorder.stop(keep_log_as=os.path.join(args.logs, f"unprompted-record-{names[user]}.log"))
        finally:
            upstream.stop()
        for user in users:
            replay = Daemon(args.binary, [os.path.join(http_cassettes, f"{names[user]}.sqlite")])
            try:
                http_stage("against mcp-tape replay", user, replay.base)
            finally:
                replay.stop(keep_log_as=os.path.join(args.logs, f"unprompted-http-replay-{names[user]}.log"))

    def agree(key, count, first_stage="directly"):
        stages = transcripts[key]
        assert len(stages) == count, f"only {len(stages)} of {count} stages ran"
        first = stages[first_stage]
        compared = {stage: t for stage, t in stages.items() if first_stage == "directly" or stage != "directly"}
        for stage, transcript in compared.items():
            assert transcript == first, f"{stage} differs:\n{json.dumps(transcript)}\n{first_stage}:\n{json.dumps(first)}"

    for user in users:
        for server in servers:
            checks.run(f"unprompted: {user} {server} transcripts agree (direct, record, replay, over HTTP)",
                       lambda key=(user, server): agree(key, 4))
        # Over HTTP the server drops what it says while no GET stream is open (its list_changed
        # right after `initialized` comes or not, run by run, directly too): replay must give what
        # the client got through record.
        checks.run(f"unprompted: {user} {over_http} replay agrees with record",
                   lambda key=(user, over_http): agree(key, 3, "through mcp-tape record"))
    with open(os.path.join(args.logs, "unprompted-transcripts.json"), "w") as saved:
        json.dump({f"{u} {s}": t for (u, s), t in transcripts.items()}, saved, indent=1, sort_keys=True)


ORDER_STEPS = [
    ("resources/subscribe", {"uri": "demo://resource/static/document/architecture.md"}),
    ("tools/call", {"name": "echo", "arguments": {"message": "in order"}}),
    ("resources/unsubscribe", {"uri": "demo://resource/static/document/architecture.md"}),
    ("ping", {}),
]
ORDER_SESSIONS = 4


def stream_order_check(args, checks):
    """Where server-everything's log messages on the GET stream fall among its
    answers, by the kernel's receive times at one client (stream_order.py):
    directly (twice, which must agree), through `record` (ORDER_SESSIONS
    sessions, one cassette each) and on `replay` of each cassette (three
    times). Through record and on replay each message must fall between the
    same two answers as directly; and replay where the cassette says it came
    (said while its exchange was in flight: before that answer; else after
    it). The transcripts are kept in the logs."""
    steps = ORDER_STEPS
    seen = collections.defaultdict(list)
    with tempfile.TemporaryDirectory() as cassettes:
        upstream = Daemon(None, None, [args.node, EVERYTHING_HTTP])
        try:
            for _ in range(2):
                seen["directly"].append(stream_order.order(upstream.base + "/mcp", steps))

            def directly_the_same_each_time():
                assert seen["directly"][0] == seen["directly"][1], seen["directly"]
                assert any(logged for _, logged in seen["directly"][0]), "no log message heard"

            checks.run("stream order: server-everything's log messages fall among its answers the same way "
                       "in two direct sessions", directly_the_same_each_time)
            direct = seen["directly"][0]
            for n in range(ORDER_SESSIONS):
                recorder = Daemon(None, None, [args.binary, "record", "--upstream", upstream.base + "/mcp",
                                               "--cassettes", cassettes, "--name", f"order{n}", "--port", "0"])
                try:
                    got = stream_order.order(recorder.base + "/mcp", steps)
                    seen["through record"].append(got)
                finally:
                    recorder.stop()

                def as_directly_through_record(got=got):
                    assert got == direct, {"through record": got, "directly": direct}

                checks.run(f"stream order: through record ({n + 1} of {ORDER_SESSIONS}) each log message "
                           "falls between the same two answers as directly", as_directly_through_record)
        finally:
            upstream.stop()
        for n in range(ORDER_SESSIONS):
            cassette = os.path.join(cassettes, f"order{n}.sqlite")

            def replays_as_stored_and_as_directly(cassette=cassette):
                with sqlite3.connect(cassette) as db:
                    rows = db.execute(
                        "SELECT e.method, a.in_flight, json_extract(a.body, '$.params.data') FROM aside a "
                        "JOIN exchange e ON e.id = a.exchange_id "
                        "WHERE json_extract(a.body, '$.method') = 'notifications/message' ORDER BY e.id, a.seq"
                    ).fetchall()
                assert rows, "the cassette holds no log message"
                methods = [method for method, _ in steps] + ["after the last"]
                want = {method: [] for method in methods}
                for method, in_flight, data in rows:
                    at = methods.index(method) + (0 if in_flight else 1)
                    want[methods[at]].append(stream_order.log_text(data))
                stored = [[method, want[method]] for method in methods]
                assert stored == direct, {"cassette": stored, "directly": direct}
                replay = Daemon(args.binary, [cassette])
                try:
                    for _ in range(3):
                        got = stream_order.order(replay.base + "/mcp", steps)
                        seen["replay"].append(got)
                        assert got == stored, {"replay": got, "cassette": stored}
                finally:
                    replay.stop()

            checks.run(f"stream order: the cassette of record {n + 1} of {ORDER_SESSIONS} places each log message "
                       "as it came directly, and replay puts it there", replays_as_stored_and_as_directly)
    with open(os.path.join(args.logs, "stream-order.json"), "w") as saved:
        json.dump(seen, saved, indent=1)


def cross_era(args, node_env, checks, direct):
    """A recording made only by clients of one era, replayed to a client of
    the other: its transcript must equal that client's direct run."""
    token = "eyJhbGciOiJub25lIn0." + secrets.token_urlsafe(32)
    flows = round_trip_flows(args, node_env, token)
    for recorded_by, replayed_to in [
        (["python-sdk legacy", "typescript-sdk"], "python-sdk auto"),
        (["python-sdk auto"], "python-sdk legacy"),
        (["python-sdk auto"], "typescript-sdk"),
    ]:
        title = f"cross-era: {replayed_to} replays a recording made by {' and '.join(recorded_by)}"
        with tempfile.TemporaryDirectory() as cassettes:

            def drive(_upstream, recorder, recorded_by=recorded_by):
                for name in recorded_by:
                    flows[name](recorder.base)

            record_through(args, [sys.executable, UPSTREAM, "--token", token], cassettes, drive, "cross-era")
            replayer = Daemon(None, None, [args.binary, "replay", cassettes, "--port", "0", "--fail-on-miss"])
            try:
                replayed = flows[replayed_to](replayer.base)
            finally:
                code, log = replayer.stop()

        def agrees(replayed=replayed, code=code, log=log, replayed_to=replayed_to):
            assert direct.get(replayed_to), "no direct transcript to compare with"
            # The fixture (Python SDK) answers an unknown prompt with code 0 in the handshake era
            # and -32603 in the stateless one: no recording of one era can tell the other's, so
            # that step is compared in the one-cassette round trip only, where both eras record it.
            differ = [(want, got) for want, got in zip(direct[replayed_to], replayed)
                      if want != got and want[1] != "get no_such_prompt"]
            assert len(replayed) == len(direct[replayed_to]) and not differ, json.dumps(differ)[:3000]
            assert code == 0, f"replay --fail-on-miss exited {code}:\n{log[-3000:]}"

        checks.run(title, agrees)


def resumed_streams(args, node_env, checks):
    """SEP-1699 polling with real clients: the dual-era fixture closes the
    stream of `test_reconnection` before its answer and each client resumes
    it with GET + Last-Event-ID. Directly, through `mcp-tape record`, then
    against replay of that recording: the same result, and the logs show
    record and replay each resumed every client's stream."""
    clients_of = {
        **{f"python-sdk {mode}": lambda url, mode=mode: python_flow(clients.reconnection_flow(url, mode))
           for mode in ["legacy"]},
        "typescript-sdk": lambda url: json.loads(
            run_process([args.node, "ts_client.mjs", url, "reconnection"], CLIENT_TIMEOUT_S, node_env)
        ),
    }
    results = {name: {} for name in clients_of}

    def run(name, stage, url):
        results[name][stage] = clients_of[name](url)

    stages = {"direct": "directly against the fixture", "record": "through mcp-tape record",
              "replay": "against mcp-tape replay"}
    code, replay_log = three_ways_on_the_dual_era_fixture(
        args, checks, clients_of, lambda name, stage: f"resumed streams: {name} {stages[stage]}", run, "resumed")
    with open(os.path.join(args.logs, "record-resumed.log")) as f:
        record_log = f.read()

    def same_and_resumed():
        assert code == 0, f"replay --fail-on-miss exited {code}:\n{replay_log[-3000:]}"
        for name, stages in results.items():
            assert list(stages) == ["direct", "record", "replay"], f"{name}: {list(stages)}"
            assert len({json.dumps(result, sort_keys=True) for result in stages.values()}) == 1, stages
            assert "Reconnection test completed successfully" in json.dumps(stages["direct"]), stages
        for log, what in [(record_log, "record"), (replay_log, "replay")]:
            resumed = [line for line in log.splitlines() if " resumed " in line]
            assert len(resumed) == len(clients_of), f"{what} resumed {len(resumed)} streams: {resumed}"

    checks.run("resumed streams: each client's result the same everywhere; record and replay resumed each stream",
               same_and_resumed)


def conformance_three_ways(args, node_env, conformance, checks):
    """The whole suite against our conformance fixture, through record, and
    against replay of that recording with the fixture stopped."""
    suite = [*conformance, "server", "--suite", "all"]

    def run_suite(name, url):
        log = os.path.join(args.logs, f"conformance-{name}.log")
        output = run_process([*suite, "--url", url], CONFORMANCE_TIMEOUT_S, node_env, log)
        assert "Total: 44 passed, 0 failed" in output, summary(output)

    with tempfile.TemporaryDirectory() as cassettes:

        def drive(upstream, recorder):
            checks.run("conformance 0.1.16 --suite all: 32/32 against our conformance fixture",
                       lambda: run_suite("fixture", upstream.url("/mcp")))
            checks.run("conformance 0.1.16 --suite all: 32/32 through mcp-tape record",
                       lambda: run_suite("record", recorder.url("/mcp")))

        record_through(args, [args.node, CONFORMANCE_UPSTREAM], cassettes, drive, "conformance")
        replayer = Daemon(None, None, [args.binary, "replay", cassettes, "--port", "0", "--fail-on-miss"])
        try:
            checks.run("conformance 0.1.16 --suite all: 32/32 against mcp-tape replay, fixture stopped",
                       lambda: run_suite("replay", replayer.url("/mcp")))
        finally:
            code, log = replayer.stop(os.path.join(args.logs, "replay-conformance.log"))

        def every_request_a_hit():
            assert code == 0, f"replay --fail-on-miss exited {code}:\n{log[-3000:]}"
            assert " mock " not in log, [line for line in log.splitlines() if " mock " in line][:5]

        checks.run("conformance replay: every request answered from the recording", every_request_a_hit)


def jwt(lifetime_s=3600):
    """An unsigned three-part JWT that has not expired (the Node SDK checks `exp`)."""
    part = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()
    claims = {"exp": int(time.time()) + lifetime_s, "appid": "app-1", "nonce": secrets.token_hex(16)}
    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(claims)}.{secrets.token_urlsafe(16)}"


def demo_result(server, tool, arguments):
    """The result the demo cassette recorded for this call (its input, not
    anything mcp-tape produced)."""
    with open(DEMO_JSONL) as f:
        for line in f:
            exchange = json.loads(line)
            params = exchange["request"].get("params", {})
            if (exchange["server"], params.get("name"), params.get("arguments")) == (server, tool, arguments):
                return exchange["messages"][-1]["body"]["result"]
    raise AssertionError(f"the demo cassette has no {server} {tool} {arguments}")


REQUEST_LINE = re.compile(r"INFO (GET|POST|DELETE) server=(\S+) method=(\S+) ")


def match_rules(args, checks):
    """The demo cassette replayed with match rules to the Python SDK."""
    token = "eyJhbGciOiJub25lIn0." + secrets.token_urlsafe(32)
    with tempfile.TemporaryDirectory() as work:
        kinds = os.path.join(work, "kinds.toml")
        with open(kinds, "w") as out:
            out.write(agent_loop.KIND_RULES)
        for mode in ["auto", "legacy"]:
            daemon = Daemon(None, None, [args.binary, "replay", SHIPPED_CASSETTES, "--port", "0", "--rules", kinds])
            try:
                checks.run(
                    f"python-sdk {mode}: each match rule kind answers other arguments with the recording",
                    lambda: python_flow(agent_loop.rule_kinds(clients.http_connector(daemon.base, mode, token),
                                                              demo_result)),
                )
            finally:
                daemon.stop(os.path.join(args.logs, f"replay-rule-kinds-{mode}.log"))

        daemon = Daemon(None, None, [args.binary, "replay", SHIPPED_CASSETTES, "--port", "0", "--on-miss", "mock"])
        try:
            for mode in ["auto", "legacy"]:
                checks.run(
                    f"python-sdk {mode}: --on-miss mock answers a listed tool's unrecorded call with isError",
                    lambda: python_flow(agent_loop.listed_tool_under_mock(daemon.url("/agents/servers/mcp_MeServer"),
                                                                          mode)),
                )
        finally:
            daemon.stop(os.path.join(args.logs, "replay-on-miss-mock.log"))

        rules = os.path.join(work, "mcp-tape.toml")
        with open(rules, "w") as out:
            out.write(agent_loop.AGENT_RULES)
        daemon = Daemon(None, None, [args.binary, "replay", SHIPPED_CASSETTES, "--port", "0", "--rules", rules])
        runs = []

        def twenty_runs():
            for seed in range(1, 21):
                mode = "auto" if seed % 2 else "legacy"
                model = agent_loop.ScriptedModel(seed)
                try:
                    calls = python_flow(agent_loop.agent_run(clients.http_connector(daemon.base, mode, token), model,
                                                             demo_result))
                except Exception as error:
                    raise AssertionError(f"run {seed} ({mode}) failed after {len(runs)} passing runs") from error
                runs.append(agent_loop.dumps(calls))
            assert len(set(runs)) == len(runs), "the model repeated a run's arguments"

        try:
            checks.run("agent loop: 20 runs of a seeded model with varied arguments pass with a rules file", twenty_runs)
        finally:
            code, log = daemon.stop(os.path.join(args.logs, "replay-agent-loop.log"))

        def every_answer_by_a_rule():
            assert code == 0 and "no misses" in log, log[-2000:]
            calls = [line for line in log.splitlines() if "method=tools/call" in line]
            assert len(calls) == 60 and all(" rule status=200" in line for line in calls), "\n".join(calls[:5])

        checks.run("agent loop: the replay log shows all 60 calls answered by a rule, no miss", every_answer_by_a_rule)

        daemon = Daemon(None, None, [args.binary, "replay", SHIPPED_CASSETTES, "--port", "0"])
        try:
            def fails_without_rules():
                model = agent_loop.ScriptedModel(1)
                connect = clients.http_connector(daemon.base, "legacy", token)
                try:
                    python_flow(agent_loop.agent_run(connect, model, demo_result))
                except agent_loop.Missed as miss:
                    assert "no recorded answer for mcp_KnowledgeTools tools/call query_federated_knowledge" \
                        in str(miss), str(miss)
                    assert "/arguments/query" in str(miss), str(miss)
                else:
                    raise AssertionError("the agent passed without rules: its arguments were not varied")

            checks.run("agent loop: without the rules file the first run fails with a clear miss", fails_without_rules)
        finally:
            daemon.stop(os.path.join(args.logs, "replay-agent-loop-no-rules.log"))


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


SCENARIO_LINE = re.compile(r"^[✓✗] [a-z0-9-]+: \d+ passed, \d+ failed(?:, \d+ warnings)?$", re.M)


def scenario_outcomes(command, node_env, log_path):
    """Runs the suite (a failing scenario is an outcome, not an error) and
    returns its per-scenario lines: name, checks passed and failed."""
    result = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                            timeout=CONFORMANCE_TIMEOUT_S, env=node_env, cwd=HERE)
    with open(log_path, "w") as log:
        log.write(result.stdout + result.stderr)
    assert "Total:" in result.stdout, (result.stdout + result.stderr)[-3000:]
    return SCENARIO_LINE.findall(result.stdout)


def three_ways_on_the_dual_era_fixture(args, checks, names, title, run, label):
    """run(name, stage, url) for each of `names`, directly against
    conformance_upstream_v2.mjs and through `mcp-tape record` (log
    record-LABEL.log) into one cassette, then against `replay --fail-on-miss`
    of it with the fixture stopped; each a check titled title(name, stage).
    Returns replay's exit code and log."""
    with tempfile.TemporaryDirectory() as cassettes:

        def drive(upstream, recorder):
            for name in names:
                for stage, where in [("direct", upstream), ("record", recorder)]:
                    checks.run(title(name, stage), lambda name=name, stage=stage, where=where:
                               run(name, stage, where.url("/mcp")))

        record_through(args, [args.node, CONFORMANCE_UPSTREAM_V2], cassettes, drive, label)
        replayer = Daemon(None, None, [args.binary, "replay", cassettes, "--port", "0", "--fail-on-miss"])
        try:
            for name in names:
                checks.run(title(name, "replay"), lambda name=name: run(name, "replay", replayer.url("/mcp")))
        finally:
            stopped = replayer.stop(os.path.join(args.logs, f"replay-{label}.log"))
    return stopped


def conformance_next_three_ways(args, node_env, conformance_next, checks):
    """Conformance 0.2.0-alpha.12, both legs, against our dual-era fixture on
    the TypeScript SDK v2: directly, through `mcp-tape record` with both legs
    into one cassette, then against `replay --fail-on-miss` of that cassette
    with the fixture stopped. Every scenario's outcome must be the same."""
    outcomes = {}

    def leg(name, stage, url):
        log = os.path.join(args.logs, f"conformance-next-{name}-{stage}.log")
        command = [*conformance_next, "server", "--url", url, "--suite", "all", *NEXT_LEGS[name]]
        outcomes[(name, stage)] = scenario_outcomes(command, node_env, log)

    stages = {"direct": "directly against our dual-era fixture", "record": "through mcp-tape record",
              "replay": "against mcp-tape replay of the one cassette"}
    code, log = three_ways_on_the_dual_era_fixture(
        args, checks, NEXT_LEGS, lambda name, stage: f"conformance 0.2.0-alpha.12 {name} leg {stages[stage]}", leg,
        "conformance-next")

    def fixture_complete():
        for name in NEXT_LEGS:
            failing = [line for line in outcomes[(name, "direct")] if line.startswith("✗")]
            assert all(line[2:].startswith(NEXT_FIXTURE_GAPS) for line in failing), failing
            assert len(outcomes[(name, "direct")]) >= 40, outcomes[(name, "direct")]

    checks.run("conformance 0.2.0-alpha.12: the fixture fails nothing but the tasks extension", fixture_complete)

    def same_everywhere():
        assert code == 0, f"replay --fail-on-miss exited {code}:\n{log[-3000:]}"
        for name in NEXT_LEGS:
            direct = outcomes[(name, "direct")]
            for stage in ["record", "replay"]:
                differ = [(d, o) for d, o in zip(direct, outcomes[(name, stage)]) if d != o]
                assert len(direct) == len(outcomes[(name, stage)]) and not differ, f"{name} {stage}: {differ}"

    checks.run("conformance 0.2.0-alpha.12: every scenario's outcome the same directly, through record and on replay",
               same_everywhere)


def summary(output):
    return output[output.index("=== SUMMARY ==="):] if "=== SUMMARY ===" in output else output


def conformance_through_record(args, node_env, conformance, checks):
    """The conformance suite directly against the fixture upstream, then
    through `mcp-tape record` in front of it: the same scenarios must pass."""
    upstream = Daemon(None, None, [sys.executable, UPSTREAM, "--no-auth"])
    summaries = {}

    def suite(name, url):
        command = [*conformance, "server", "--url", url, "--suite", "all",
                   "--expected-failures", FIXTURE_EXPECTED_FAILURES]
        log = os.path.join(args.logs, f"conformance-{name}.log")
        summaries[name] = summary(run_process(command, CONFORMANCE_TIMEOUT_S, node_env, log))

    with tempfile.TemporaryDirectory() as cassettes:
        try:
            path = "/agents/servers/mcp_MailTools"
            checks.run("conformance 0.1.16 --suite all directly against the fixture upstream",
                       lambda: suite("fixture-direct", upstream.url(path)))
            recorder = Daemon(None, None, [args.binary, "record", "--upstream", upstream.base,
                                           "--cassettes", cassettes, "--port", "0"])
            checks.run("conformance 0.1.16 --suite all through mcp-tape record to the fixture upstream",
                       lambda: suite("fixture-through-record", recorder.url(path)))
            code, log = recorder.stop(os.path.join(args.logs, "record-conformance.log"))
        finally:
            upstream.stop()

    def same_outcomes():
        assert code == 0, f"record exited {code}:\n{log[-2000:]}"
        assert len(summaries) == 2, "a suite run failed"
        direct, through = summaries["fixture-direct"], summaries["fixture-through-record"]
        assert direct == through, f"direct:\n{direct}\nthrough record:\n{through}"

    checks.run("conformance: every scenario has the same outcome through record as directly", same_outcomes)


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


def faults_on_demand(args, node_env, checks):
    """Each client's flow against failing_upstream.py directly, then against `mcp-tape replay` of a healthy
    recording of it with faults.toml: every step must come out the same (what the SDK reports for a 429, a
    cut stream, a lost session...)."""
    flows = {
        "python-sdk auto": lambda url: python_flow(clients.faults_flow(url, "auto")),
        "python-sdk legacy": lambda url: python_flow(clients.faults_flow(url, "legacy")),
    }
    for sdk in ["v1", "legacy", "auto"]:
        flows[f"typescript-sdk {'v2 ' if sdk != 'v1' else ''}{sdk}"] = lambda url, sdk=sdk: json.loads(run_process(
            [args.node, "ts_faults_client.mjs", url, sdk], CLIENT_TIMEOUT_S, node_env))
    direct = {}
    failing = Daemon(None, None, [args.python, FAILING_UPSTREAM])
    try:
        for client, flow in flows.items():
            direct[client] = flow(failing.url("/mcp"))
    finally:
        failing.stop()
    with open(os.path.join(args.logs, "faults-transcripts.json"), "w") as out:
        json.dump(direct, out, indent=1)

    def the_server_fails_each_way():
        for client, transcript in direct.items():
            outcomes = {step["tool"]: step for step in transcript if "tool" in step}
            assert outcomes["tool_error"]["isError"] and outcomes["tool_error"]["content"] == ["mailbox full"], client
            code = outcomes["rpc_error"].get("error", outcomes["rpc_error"].get("code"))
            assert code == -32050, (client, outcomes["rpc_error"])
            for name in ["rate_limited", "unavailable", "cut", "slow", "forget"]:
                assert "content" not in outcomes[name], (client, outcomes[name])
            if client.startswith("typescript"):  # the HTTP error, with its status
                assert 429 in (outcomes["rate_limited"].get("code"), outcomes["rate_limited"].get("status")), client

    checks.run("faults: each client sees failing_upstream.py fail each way", the_server_fails_each_way)
    with tempfile.TemporaryDirectory() as cassettes:
        def record_healthy(upstream, recorder):
            for flow in flows.values():
                flow(recorder.url("/mcp"))

        record_through(args, [args.python, FAILING_UPSTREAM, "--healthy"], cassettes, record_healthy, "failing")
        daemon = Daemon(None, None, [args.binary, "replay", cassettes, "--port", "0", "--rules", FAULTS_TOML])
        try:
            for client, flow in flows.items():
                def same(client=client, flow=flow):
                    replayed = flow(daemon.url("/mcp"))
                    assert replayed == direct[client], (
                        f"{client}\n  directly: {json.dumps(direct[client])}\n  replayed: {json.dumps(replayed)}")

                checks.run(f"faults: {client} sees replay's injected faults as from the failing server", same)
        finally:
            code, log = daemon.stop(os.path.join(args.logs, "replay-faults.log"))

        def counted():
            assert code == 0, f"exit {code}: a fault is not a miss\n{log[-2000:]}"
            assert "faults injected" in log and "no misses" in log, log[-2000:]

        checks.run("faults: replay stops with 0, no misses, and the faults counted", counted)


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


def run_status(command, timeout, env=None):
    """Runs `command` from the repository's root; its exit code and output."""
    result = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout,
                            env=env, cwd=ROOT)
    return result.returncode, result.stdout + result.stderr


def junit_cases(path):
    """(suite, case name) → the case's result kinds, as junitparser reads the file."""
    from junitparser import JUnitXml

    cases = {}
    for suite in JUnitXml.fromfile(path):
        for case in suite:
            cases[(suite.name, case.name)] = [(type(r).__name__, r.message, r.text) for r in case.result]
    return cases


def ci_examples(args, node_env, checks):
    """`mcp-tape test` as CI runs it around an agent suite (the examples' suites run from the installed
    packages in tests/packaging)."""
    env = dict(node_env, MCP_TAPE_BIN=args.binary)
    env.pop("MCP_TAPE_URL", None)
    env.pop("MCP_TAPE_MODE", None)
    with tempfile.TemporaryDirectory() as out:
        def a_miss_fails():
            junit = os.path.join(out, "miss.xml")
            calls = json.dumps([["/agents/servers/mcp_MeServer", "GetMyDetails", {"select": "mail"}]])
            code, output = run_status([args.binary, "test", "cassettes", "--junit", junit, "--",
                                       args.python, CI_AGENT, "-", calls, "0"], CLIENT_TIMEOUT_S, env)
            assert code == 1, f"exit {code}:\n{output[-4000:]}"
            results = junit_cases(junit)[("mcp_MeServer", "tools/call GetMyDetails")]
            assert [kind for kind, _, _ in results] == ["Failure"], results
            _, message, text = results[0]
            assert "mcp_MeServer tools/call GetMyDetails" in message, message
            assert '/arguments/select: recorded "displayName,jobTitle", requested "mail"' in text, text

        checks.run("ci: a passing command with a miss exits 1; junitparser reads a failure naming the tool",
                   a_miss_fails)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--binary", required=True)
    parser.add_argument("--node", required=True, help="Node 22 executable")
    parser.add_argument("--python", default=sys.executable, help="Python with the pinned SDKs")
    parser.add_argument("--logs", required=True, help="directory for conformance and daemon logs")
    parser.add_argument("--tools", required=True, help="where setup.sh put the venvs of other recorders")
    args = parser.parse_args()
    os.makedirs(args.logs, exist_ok=True)
    node_env = dict(os.environ, PATH=os.path.dirname(args.node) + os.pathsep + os.environ["PATH"])
    conformance = [args.node, "node_modules/@modelcontextprotocol/conformance/dist/index.js"]
    conformance_next = [args.node, "node_modules/conformance-next/dist/index.js"]
    checks = Checks()

    with tempfile.TemporaryDirectory() as empty:
        daemon = Daemon(args.binary, [empty])
        for path in PATHS:
            url = daemon.url(path)
            for mode in ["auto", "legacy"]:
                checks.run(f"python-sdk {mode}: empty server flow on {path}", lambda: python_flow(clients.empty_flow(url, mode)))
            checks.run(
                f"typescript-sdk: empty server flow on {path}",
                lambda: run_process([args.node, "ts_client.mjs", url, "empty"], CLIENT_TIMEOUT_S, node_env),
            )
            log = os.path.join(args.logs, f"conformance{path.replace('/', '_')}.log")
            checks.run(
                f"conformance 0.1.16 --suite all on {path} (expected failures: fixture scenarios only)",
                lambda: run_process(
                    [*conformance, "server", "--url", url, "--suite", "all", "--expected-failures", EXPECTED_FAILURES],
                    CONFORMANCE_TIMEOUT_S,
                    node_env,
                    log,
                ),
            )
            for name, leg_args in NEXT_LEGS.items():
                log = os.path.join(args.logs, f"conformance-next-{name}{path.replace('/', '_')}.log")
                checks.run(
                    f"conformance 0.2.0-alpha.12 {name} leg on {path} (expected failures: fixture scenarios only)",
                    lambda leg_args=leg_args, log=log: run_process(
                        [*conformance_next, "server", "--url", url, "--suite", "all", *leg_args,
                         "--expected-failures", NEXT_EXPECTED_FAILURES],
                        CONFORMANCE_TIMEOUT_S,
                        node_env,
                        log,
                    ),
                )
        code, log = daemon.stop(os.path.join(args.logs, "replay-empty.log"))

        def stopped_cleanly():
            assert code == 0, f"exit code {code}"
            assert "no misses" in log, log[-2000:]

        checks.run("empty replay stops cleanly on SIGTERM", stopped_cleanly)

    with tempfile.TemporaryDirectory() as cassettes:
        cassette = os.path.join(cassettes, "mail.sqlite")
        run_process([args.binary, "import", FIXTURE, "--cassette", cassette], CLIENT_TIMEOUT_S)
        daemon = Daemon(args.binary, [cassettes])
        url = daemon.url("/agents/servers/mcp_MailTools")
        for mode in ["auto", "legacy"]:
            checks.run(
                f"python-sdk {mode}: recorded results from an imported cassette",
                lambda: python_flow(clients.recorded_flow(url, mode, FIXTURE)),
            )
        checks.run(
            "typescript-sdk: recorded results from an imported cassette",
            lambda: run_process([args.node, "ts_client.mjs", url, "recorded", FIXTURE], CLIENT_TIMEOUT_S, node_env),
        )
        code, log = daemon.stop(os.path.join(args.logs, "replay-recorded.log"))

        def all_hits():
            assert code == 0, f"exit code {code}"
            assert "no misses" in log, log[-2000:]
            recorded = [line for line in log.splitlines() if "method=tools/" in line]
            assert len(recorded) == 9, recorded  # 3 clients x (tools/list + 2 tools/call)
            assert all(" hit status=200" in line for line in recorded), "\n".join(recorded)

        checks.run("recorded replay answered every client request from the cassette", all_hits)

    agent365_sdks(args, node_env, checks)
    direct = round_trip(args, node_env, checks)
    cross_era(args, node_env, checks, direct)
    stdio_round_trip(args, node_env, checks)
    unprompted(args, node_env, checks)
    stream_order_check(args, checks)
    resumed_streams(args, node_env, checks)
    conformance_through_record(args, node_env, conformance, checks)
    conformance_three_ways(args, node_env, conformance, checks)
    conformance_next_three_ways(args, node_env, conformance_next, checks)
    a365_mocks_import(args, node_env, checks)
    match_rules(args, checks)
    faults_on_demand(args, node_env, checks)
    a365_server_unavailable(args, node_env, checks)
    ci_examples(args, node_env, checks)
    helpers = types.SimpleNamespace(
        args_binary=args.binary, args_node=args.node, args_logs=args.logs, node_env=node_env,
        run_process=run_process, python_flow=python_flow, Daemon=Daemon, UPSTREAM=UPSTREAM,
        CLIENT_TIMEOUT_S=CLIENT_TIMEOUT_S, START_TIMEOUT_S=START_TIMEOUT_S, without_progress=without_progress)
    imports.run(helpers, checks, args.tools)
    frameworks.run(helpers, checks, args.tools)
    with tempfile.TemporaryDirectory() as cassettes:
        run_process([args.binary, "import", FIXTURE, "--cassette", os.path.join(cassettes, "mail.sqlite")],
                    CLIENT_TIMEOUT_S)
        soak.run(args, checks, Daemon, cassettes)
    soak.nearest(args, checks, Daemon)

    print(f"interop: {checks.passed} passed, {checks.failed} failed", flush=True)
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
