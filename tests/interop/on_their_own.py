"""What a server says on its own: server-everything and server-filesystem heard
directly, through record and on replay (stdio and the GET stream), and where
server-everything's log messages fall among its answers (by the kernel's receive times).
"""

import collections
import json
import os
import sqlite3
import tempfile

import clients
import stream_order

from harness import (
    CLIENT_TIMEOUT_S,
    Daemon,
    EVERYTHING,
    EVERYTHING_HTTP,
    FILESYSTEM,
    python_flow,
    run_process,
)


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
                    recorder.stop(keep_log_as=os.path.join(args.logs, f"stream-order-record-{n}.log"))

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
