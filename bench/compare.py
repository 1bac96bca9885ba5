"""Two builds of mcp-tape side by side, in interleaved rounds, on loopback.

    python3 bench/compare.py --new NEW_BINARY --bin target/release [--old OLD_BINARY | --baseline REV]

Without --old, the old build is the release build of a fixed baseline,
--baseline (default 310e202, the commit issue 48 measures against), built
once in a git worktree under target/baseline/ and kept: each change is then
seen against the same yardstick, so that a run of small costs shows as the
sum it is. --old compares against any binary (the previous commit's, say).

For a change that should not change speed (a refactoring), or one that
should: each round measures the old build, then the new, then the old
again, and takes the new build's ratio to the mean of the two old runs
(the machine's speed drifts from minute to minute). Prints the median
and range of the ratios for

- replay of a recorded `tools/call` at 32 connections (requests/s);
- issue 48's scenario: replay of a `tools/call` recorded (by the old
  build) from a server on the official Python SDK (tests/interop's
  agent365_upstream.py, `GetMessage` of `mcp_MailTools`, an SSE answer),
  asked in a session by a client of each protocol version at 32
  connections (requests/s, p99 latency, and the server's CPU time per
  request, user and system, from /proc in the same runs: the work a
  request costs, apart from how the load and the server were scheduled;
  on this VM it spreads about as widely); both builds replay the same
  cassette.
  Each build's answer (its body and headers) is also served by the floor,
  asked with the same request (the session's headers too), for the ratios
  to the floor and p99 against the floor's. The floor writes no log line;
  with --without-lines-too the new build is also measured against it with
  its request lines off (MCP_TAPE_LOG=warn), like for like;
- record in front of the floor at 32 connections (requests/s), each build
  writing its own fresh cassette;
- record's p50 latency at 1 connection;
- stdio replay with 32 requests in flight (messages/s).

Servers are pinned to core 1 and the load to core 0, as in bench.py;
--bin names the directory with gen-cassette, floor and stdio-load;
--python an interpreter with the Python SDK (tests/interop/setup.sh
makes .interop/venv).
"""

import argparse
import json
import os
import shutil
import subprocess
import statistics
import tempfile
import urllib.request

from bench import (BENCH_PATH, LOAD_CORE, LOOKUP, Server, paired_rounds, post, stdio_load, wrk)

ROUNDS = 6
# The headers of replay's answer the floor writes of its own accord (or from its arguments).
OWN_HEADERS = {"content-type", "content-length", "date", "transfer-encoding", "connection"}
SECONDS = 3
BASELINE = "310e202"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def baseline_build(rev):
    """The release binaries of `rev` (mcp-tape and its gen-cassette, whose cassettes that mcp-tape
    reads), built once in a worktree under target/baseline/ and kept; their directory."""
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--verify", f"{rev}^{{commit}}"], check=True,
                            capture_output=True, text=True).stdout.strip()
    place = os.path.join(ROOT, "target", "baseline", commit)
    built = os.path.join(place, "target", "release")
    if not os.path.exists(os.path.join(built, "gen-cassette")):
        if not os.path.isdir(place):
            subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach", place, commit], check=True)
        print(f"compare: building the baseline {rev} ({commit[:12]}) in {place}", flush=True)
        subprocess.run(["cargo", "build", "--release", "--locked", "--workspace", "--bin", "mcp-tape",
                        "--bin", "gen-cassette"],
                       cwd=place, check=True, env=dict(os.environ, CARGO_TARGET_DIR=os.path.join(place, "target")))
    return built


def compare(emit, name, rounds, old, new, higher_is_better=True):
    compare_figures(emit, rounds, old, new, [(name, lambda figure: figure, higher_is_better)])


def compare_figures(emit, rounds, old, new, measures):
    """Paired rounds of `old` and `new`, each run giving figures that every one of `measures`
    (name, how its number is read from a run's figures, whether higher is better) is read from."""
    ratios = [[] for _ in measures]
    for _, before, measured, after in paired_rounds(rounds, old, new):
        for (_, read, _), kept in zip(measures, ratios):
            kept.append(read(measured) / ((read(before) + read(after)) / 2))
    for (name, _, higher_is_better), kept in zip(measures, ratios):
        median = statistics.median(kept)
        verdict = median if higher_is_better else 1 / median
        emit(f"| {name} | {median:.1%} | {min(kept):.1%} to {max(kept):.1%} | {verdict:.1%} |")


def cpu_seconds(pid):
    """The CPU time (user and system, all threads) process `pid` has used so far, in seconds."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wrk_with_cpu(server, url, headers, seconds, scratch, body=None):
    """wrk's figures for `body` (issue 48's request unless given) against `server`, with the server's
    CPU microseconds per request during the run ("cpu_us")."""
    before = cpu_seconds(server.proc.pid)
    figures = wrk(url, body or GET_MESSAGE, 32, seconds, scratch, headers)
    figures["cpu_us"] = (cpu_seconds(server.proc.pid) - before) / figures["requests"] * 1e6
    return figures


def build_arguments(parser, in_bin):
    """The arguments naming the two builds (--old or --baseline, and --new), --bin (the directory
    with `in_bin`) and --python."""
    chosen = parser.add_mutually_exclusive_group()
    chosen.add_argument("--old", help="the mcp-tape binary to compare with (with its gen-cassette beside it, if "
                        "its cassette schema is older)")
    chosen.add_argument("--baseline", default=BASELINE,
                        help=f"the commit whose release build to compare with (default {BASELINE})")
    parser.add_argument("--new", required=True, help="the mcp-tape binary after the change")
    parser.add_argument("--bin", required=True, help=f"directory with {in_bin}")
    parser.add_argument("--python", default=os.path.join(ROOT, ".interop", "venv", "bin", "python"),
                        help="a Python with the MCP Python SDK, for the session scenario's upstream")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    build_arguments(parser, "gen-cassette, floor, stdio-load")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--seconds", type=int, default=SECONDS, help="each run's length (issue 48 used 5)")
    parser.add_argument("--only", default="replay,session,record,stdio",
                        help="which of replay, session (issue 48's scenario), record (throughput and latency), "
                             "stdio, model (the new build replaying the agent's model against the floor) to "
                             "measure")
    parser.add_argument("--without-lines-too", action="store_true",
                        help="in the session scenario, also the new build with its request lines off "
                             "(MCP_TAPE_LOG=warn) against the floor, which writes none")
    args = parser.parse_args()
    tool = lambda name: os.path.join(args.bin, name)  # noqa: E731
    # Each build replays a cassette its own gen-cassette wrote (the baseline's reads an older schema).
    if args.old:
        # The old build's own gen-cassette when it lies beside it (a newer one writes a schema it refuses).
        beside = os.path.join(os.path.dirname(os.path.abspath(args.old)), "gen-cassette")
        old_gen = beside if os.path.exists(beside) else tool("gen-cassette")
        builds = {"old": (args.old, old_gen), "new": (args.new, tool("gen-cassette"))}
    else:
        built = baseline_build(args.baseline)
        builds = {"old": (os.path.join(built, "mcp-tape"), os.path.join(built, "gen-cassette")),
                  "new": (args.new, tool("gen-cassette"))}
    emit = lambda line="": print(line, flush=True)  # noqa: E731

    with tempfile.TemporaryDirectory() as scratch:
        log = lambda name: os.path.join(scratch, f"{name}.log")  # noqa: E731
        cassettes = {}
        for key, (_, gen) in builds.items():
            cassettes[key] = os.path.join(scratch, f"cassettes-{key}")
            os.makedirs(cassettes[key])
            subprocess.run([gen, "1000", os.path.join(cassettes[key], "bench.sqlite")], check=True)
        builds = {key: binary for key, (binary, _) in builds.items()}

        emit(f"new build against {args.old or args.baseline}, {args.rounds} rounds (old, new, old), {args.seconds} s each; "
             "the ratio is new / mean of the two old runs")
        emit()
        emit("| measure | median ratio | range | new is (higher is better) |")
        emit("|---|---:|---:|---:|")

        only = set(args.only.split(","))
        if "replay" in only:
            replay_rounds(emit, args, builds, cassettes, scratch, log)
        if "session" in only:
            session_rounds(emit, args, builds, scratch, log, tool)
        if "record" in only:
            record_rounds(emit, args, builds, scratch, log, tool)
        if "model" in only:
            model_rounds(emit, args, builds["new"], scratch, log, tool)
        if "stdio" in only:
            stdio = {key: (lambda b=binary, c=os.path.join(cassettes[key], "bench.sqlite"):
                           stdio_load(tool("stdio-load"), [b, "replay", "--stdio", c], args.seconds))
                     for key, binary in builds.items()}
            compare(emit, "stdio replay, 32 in flight, messages/s", args.rounds, stdio["old"], stdio["new"])


def replay_rounds(emit, args, builds, cassettes, scratch, log):
    replays = {key: Server([binary, "replay", cassettes[key], "--port", "0"], log(f"replay-{key}"))
               for key, binary in builds.items()}
    for server in replays.values():
        post(server.base + BENCH_PATH, LOOKUP(500))
    load = {key: (lambda s=server: wrk(s.base + BENCH_PATH, LOOKUP(500), 32, args.seconds, scratch)["rps"])
            for key, server in replays.items()}
    compare(emit, "replay, recorded JSON answer, 32 conns, requests/s", args.rounds, load["old"], load["new"])
    for server in replays.values():
        server.stop()


MAIL_PATH = "/agents/servers/mcp_MailTools"
CLIENT_VERSIONS = ("2025-06-18", "2025-11-25")
GET_MESSAGE = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                          "params": {"name": "GetMessage", "arguments": {"id": "AAMkAGI2TG93AAA=", "bodyPreviewOnly": True}}})


# What an MCP client's POST carries besides the session's headers.
POST_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def mcp_post(url, body, headers=None):
    """POSTs one JSON-RPC message; the answer's headers and body."""
    asked = urllib.request.Request(url, data=body.encode(), method="POST", headers={**POST_HEADERS, **(headers or {})})
    with urllib.request.urlopen(asked, timeout=60) as answer:
        return answer.headers, answer.read()


def open_session(url, version):
    """Initializes a session speaking `version` at `url`; the headers its requests carry."""
    initialize = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "compare", "version": "1"}}})
    answered, _ = mcp_post(url, initialize)
    headers = {"Mcp-Session-Id": answered["mcp-session-id"], "MCP-Protocol-Version": version}
    mcp_post(url, json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}), headers)
    return headers


def record_session(python, binary, recorded, log):
    """Issue 48's cassette: `GetMessage` answered by a Python SDK server (tests/interop's
    agent365_upstream.py, run by `python`), recorded by `binary` into the directory `recorded` in a
    session of each client version."""
    upstream_script = os.path.join(ROOT, "tests", "interop", "agent365_upstream.py")
    upstream = Server([python, upstream_script, "--no-auth"], log("python-upstream"), core=LOAD_CORE)
    os.makedirs(recorded)
    record = Server([binary, "record", "--upstream", upstream.base, "--cassettes", recorded, "--name", "mail",
                     "--port", "0"], log("session-record"))
    for version in CLIENT_VERSIONS:
        _, said = mcp_post(record.base + MAIL_PATH, GET_MESSAGE, open_session(record.base + MAIL_PATH, version))
        if b'"result"' not in said:
            raise RuntimeError(f"the Python SDK server did not answer GetMessage: {said[:300]!r}")
    record.stop()
    upstream.stop()


def floor_arguments(answered, body, path):
    """The floor's arguments for serving `body` (written to `path`) with the head of `answered`."""
    with open(path, "wb") as out:
        out.write(body)
    head = [f"{name}:{value}" for name, value in answered.items() if name.lower() not in OWN_HEADERS]
    return [path, answered["content-type"], *head]


def session_rounds(emit, args, builds, scratch, log, tool):
    """Issue 48's scenario: a session's `tools/call`, recorded by the old build from a Python SDK
    server, replayed by both builds from copies of that one cassette."""
    recorded = os.path.join(scratch, "session-recorded")
    record_session(args.python, builds["old"], recorded, log)
    # Each replay reads a copy of its own; the new build also without its request lines when asked.
    runs = {key: (binary, None) for key, binary in builds.items()}
    if args.without_lines_too:
        runs["new (request lines off)"] = (builds["new"], dict(os.environ, MCP_TAPE_LOG="warn"))
    replays = {}
    for index, (key, (binary, env)) in enumerate(runs.items()):
        cassette = shutil.copytree(recorded, os.path.join(scratch, f"session-{index}"))
        replays[key] = Server([binary, "replay", cassette, "--port", "0"], log(f"session-replay-{index}"), env=env)
    for version in CLIENT_VERSIONS:
        urls = {key: server.base + MAIL_PATH for key, server in replays.items()}
        sessions = {key: open_session(url, version) for key, url in urls.items()}
        floors = {}
        for index, (key, url) in enumerate(urls.items()):
            answered, body = mcp_post(url, GET_MESSAGE, sessions[key])
            if b'"result"' not in body:
                raise RuntimeError(f"{key} replay did not answer GetMessage ({version}): {body[:300]!r}")
            # The floor answers with replay's head too, and is asked with the session's headers.
            path = os.path.join(scratch, f"answer-{index}-{version}")
            floors[key] = Server([tool("floor"), "0", *floor_arguments(answered, body, path)],
                                 log(f"floor-{index}-{version}"))
        load = {key: (lambda s=replays[key], u=url, h=sessions[key]: wrk_with_cpu(s, u, h, args.seconds, scratch))
                for key, url in urls.items()}
        scenario = f"replay in a session, SSE answer, {version} client, 32 conns"
        compare_figures(emit, args.rounds, load["old"], load["new"], [
            (f"{scenario}, requests/s", lambda figures: figures["rps"], True),
            (f"{scenario}, CPU per request", lambda figures: figures["cpu_us"], False),
        ])
        for key, floor in floors.items():
            floor_load = lambda f=floor, h=sessions[key]: wrk_with_cpu(  # noqa: E731
                f, f.base + MAIL_PATH, h, args.seconds, scratch)
            against_floor(emit, f"{key} build ({version} client) against the floor", args.rounds, floor_load, load[key])
            floor.stop()
    for server in replays.values():
        server.stop()


# The agent's model on the tape: a chat completion as an OpenAI client asks it, and its answer.
MODEL_REQUEST = json.dumps({"model": "gpt-test", "messages": [
    {"role": "system", "content": "You plan meetings. Be brief."},
    {"role": "user", "content": "Plan a review with Bob from my newest mail."}], "tool_choice": "auto"})
MODEL_ANSWER = json.dumps({
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1790000001, "model": "gpt-test",
    "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": None,
                 "tool_calls": [{"id": "call-0", "type": "function", "function": {
                     "name": "list_messages", "arguments": "{\"folder\": \"inbox\", \"top\": 3}"}}]}}],
    "usage": {"prompt_tokens": 20, "completion_tokens": 7, "total_tokens": 27}}, indent=2)


def model_rounds(emit, args, binary, scratch, log, tool):
    """The new build replaying a recorded chat completion (imported), between two floor runs serving
    its bytes with its head."""
    line = {"model": "openai", "method": "POST", "target": "/chat/completions", "request": MODEL_REQUEST,
            "status": 200, "contentType": "application/json", "body": MODEL_ANSWER}
    cassettes = os.path.join(scratch, "model-cassettes")
    os.makedirs(cassettes)
    lines = os.path.join(scratch, "model.jsonl")
    with open(lines, "w") as out:
        out.write(json.dumps(line) + "\n")
    subprocess.run([binary, "import", lines, "--cassette", os.path.join(cassettes, "model.sqlite")], check=True)
    replay = Server([binary, "replay", cassettes, "--port", "0"], log("model-replay"))
    url = replay.base + "/model/openai/chat/completions"
    answered, body = mcp_post(url, MODEL_REQUEST)
    if body != MODEL_ANSWER.encode():
        raise RuntimeError(f"replay did not answer the recorded chat completion: {body[:300]!r}")
    floor = Server([tool("floor"), "0", *floor_arguments(answered, body, os.path.join(scratch, "model-answer"))],
                   log("model-floor"))
    against_floor(emit, "model replay, a chat completion (JSON), 32 conns", args.rounds,
                  lambda: wrk_with_cpu(floor, floor.base + "/model/openai/chat/completions", None, args.seconds,
                                       scratch, MODEL_REQUEST),
                  lambda: wrk_with_cpu(replay, url, None, args.seconds, scratch, MODEL_REQUEST))
    floor.stop()
    replay.stop()


def against_floor(emit, name, rounds, floor, replay):
    """Replay between two floor runs serving its bytes: the ratio of requests/s, of p99 latency and
    of CPU per request (the floor's to replay's: the share of the floor's speed replay's CPU allows)."""
    ratios, p99s, cpus = [], [], []
    for _, before, measured, after in paired_rounds(rounds, floor, replay):
        ratios.append(measured["rps"] / ((before["rps"] + after["rps"]) / 2))
        p99s.append(measured["p99"] / ((before["p99"] + after["p99"]) / 2))
        cpus.append(((before["cpu_us"] + after["cpu_us"]) / 2) / measured["cpu_us"])
    emit(f"| {name}: requests/s | {statistics.median(ratios):.1%} | {min(ratios):.1%} to {max(ratios):.1%} | |")
    emit(f"| {name}: p99 latency | {statistics.median(p99s):.2f}x | {min(p99s):.2f}x to {max(p99s):.2f}x | |")
    emit(f"| {name}: floor's CPU per request / replay's | {statistics.median(cpus):.1%} | "
         f"{min(cpus):.1%} to {max(cpus):.1%} | |")


def record_rounds(emit, args, builds, scratch, log, tool):
    upstream = Server([tool("floor")], log("upstream"), core=LOAD_CORE)
    records = {key: Server([binary, "record", "--upstream", upstream.base, "--cassettes", scratch,
                            "--name", f"record-{key}", "--port", "0"], log(f"record-{key}"))
               for key, binary in builds.items()}
    load = {key: (lambda s=server: wrk(s.base + BENCH_PATH, LOOKUP(1), 32, args.seconds, scratch)["rps"])
            for key, server in records.items()}
    compare(emit, "record, 32 conns, requests/s", args.rounds, load["old"], load["new"])
    latency = {key: (lambda s=server: wrk(s.base + BENCH_PATH, LOOKUP(1), 1, args.seconds, scratch)["p50"])
               for key, server in records.items()}
    compare(emit, "record, 1 conn, p50 latency", args.rounds, latency["old"], latency["new"],
            higher_is_better=False)
    for server in records.values():
        server.stop()
    upstream.stop()


if __name__ == "__main__":
    main()
