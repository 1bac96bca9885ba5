"""The round trips: each official client's flow directly against the fixture
upstream, through `mcp-tape record` and against `mcp-tape replay` of what was stored
(HTTP, stdio, across protocol eras, resumed streams): the transcripts must agree.
"""

import json
import os
import secrets
import sqlite3
import sys
import tempfile

import clients

from harness import (
    CLIENT_TIMEOUT_S,
    Daemon,
    EVERYTHING,
    UPSTREAM,
    cassette_bytes,
    python_flow,
    record_through,
    run_process,
    three_ways_on_the_dual_era_fixture,
    without_progress,
)


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
