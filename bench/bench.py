"""mcp-tape benchmarks, in one run, on loopback, bounded in time.

Every server measured runs pinned to core 1 and the load (wrk, the stdio
client, first-event) to core 0 (taskset), so what is measured is the
server's own cost. Measures, side by side:
- the floor (bench/floor.rs, answering the very bytes replay answers the
  JSON scenario with), `mcp-tape replay` (a recorded JSON answer, a
  recorded SSE answer with 3 progress notifications) and the mock fallback
  (`ping`, empty `tools/list`) at 1 and 32 connections with wrk: requests/s,
  p50/p99/p99.9 latency, and the ratio to the floor of the same run;
- replay's recorded JSON answer at 32 connections in paired rounds: each
  replay run between two floor runs, its ratio to their mean, and the
  median of the rounds (the machine's speed drifts from minute to minute);
- replay with a match rules file (`--rules`: ignore, ignore + normalize,
  nearest) against exact replay of the same cassette at 32 connections, in
  paired rounds (each rules run between two exact runs);
- record's overhead: the floor called directly vs through `mcp-tape record`
  (record on core 1, its upstream a second floor on core 0; added latency
  at 1 connection, throughput at 32), the time to the first SSE event, and
  the added latency at 1 connection again in paired rounds (each record run
  between two direct runs, added to their mean; the median of the rounds),
  and with the upstream on core 1 beside record (where the direct floor
  runs: no extra hop between the cores); the proxy floor
  (bench/proxy_floor.rs, the smallest forwarding proxy) in record's place,
  as the bound for any recorder's second hop;
- record in front of a server on the official TypeScript SDK
  (bench/sdk_upstream.mjs, stateless, JSON answers): paired rounds against
  that server directly, at 32 and 1 connections, with record's upstream
  beside the load and beside record;
- stdio: one client keeping 32 requests in flight against `mcp-tape replay
  --stdio` and against the stdio floor (bench/stdio_floor.rs, one fixed line
  per line): messages/s and the ratio;
- scale: cassettes of 1k, 10k and 100k exchanges written through the store
  API: file size, start to first answer, peak RSS, lookup latency.

Prints a Markdown table and writes it to --out.
"""

import argparse
import json
import os
import queue
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

SECONDS_PER_LOAD = 5
PAIRED_ROUNDS = 8
PAIRED_SECONDS = 3
LATENCY_ROUNDS = 12
SCALE_SECONDS = 3
FIRST_EVENT_SAMPLES = 2000
SDK_ROUNDS = 4
RULE_ROUNDS = 4
STDIO_IN_FLIGHT = 32
START_TIMEOUT_S = 60
SERVER_CORE = "1"
LOAD_CORE = "0"


def pinned(core, command):
    return ["taskset", "-c", core, *command]

LUA = """
wrk.method = "POST"
wrk.body = [[%s]]
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('{"requests":%%d,"duration_us":%%d,"errors":%%d,"non2xx":%%d,"p50":%%d,"p99":%%d,"p999":%%d}\\n',
    summary.requests, summary.duration, e.connect + e.read + e.write + e.timeout, e.status,
    latency:percentile(50), latency:percentile(99), latency:percentile(99.9)))
end
"""


def request(method, params=None, id=1):
    body = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        body["params"] = params
    return json.dumps(body)


LOOKUP = lambda n: request("tools/call", {"name": "lookup", "arguments": {"n": n}})  # noqa: E731
BENCH_PATH = "/agents/servers/mcp_Bench"
# A lookup with an argument no recording has, as a model adds a fresh id to every call.
LOOKUP_WITH_ID = lambda n, id="r-8f3a": request("tools/call", {"name": "lookup", "arguments": {"n": n, "requestId": id}})  # noqa: E731
# Match rules files for the bench cassette's `lookup` tool (1000 recordings).
IGNORE_RULES = '[[match]]\nserver = "mcp_Bench"\ntool = "lookup"\nignore = ["/arguments/requestId"]\n'
NORMALIZE_RULES = IGNORE_RULES + 'normalize = { "/arguments/n" = ["number"] }\n'
NEAREST_RULES = '[[match]]\nserver = "mcp_Bench"\ntool = "lookup"\nby = "nearest"\n'
PROGRESS = request("tools/call", {"name": "progress", "arguments": {}, "_meta": {"progressToken": 7}})


class Server:
    """A process that logs "listening on http://..." once ready."""

    def __init__(self, command, log_path, core=SERVER_CORE, env=None):
        self.started = time.monotonic()
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(pinned(core, command), stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        ready = queue.Queue()

        def read():
            for raw in self.proc.stderr:
                line = raw.decode(errors="replace")
                self.log.write(line)
                if "listening on http://" in line:
                    ready.put(line.split("listening on ", 1)[1].split(",")[0].strip())
                    return
            ready.put(None)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        self.base = ready.get(timeout=START_TIMEOUT_S)
        reader.join()
        # Under load the server logs ~100k lines/s: `cat` drains them to the log file in large
        # reads, so the harness takes next to no CPU from what is being measured.
        self.log.flush()
        self.drain = subprocess.Popen(pinned(LOAD_CORE, ["cat"]), stdin=self.proc.stderr, stdout=self.log)
        if self.base is None:
            raise RuntimeError(f"{command[0]} exited before listening; see {log_path}")
        self.ready_at = time.monotonic()

    def peak_rss_mib(self):
        with open(f"/proc/{self.proc.pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=START_TIMEOUT_S)
        self.drain.wait(timeout=START_TIMEOUT_S)
        self.log.close()


def start_record(tool, upstream, scratch, name, log):
    """`mcp-tape record` in front of `upstream` (a base URL), writing cassette `name` into `scratch`."""
    return Server([tool("mcp-tape"), "record", "--upstream", upstream, "--cassettes", scratch, "--name", name,
                   "--port", "0"], log(f"record-{name}"))


# Appended to the wrk script when the body holds FRESH: each request gets its own number there.
FRESH_LUA = """
counter = 0
request = function()
  counter = counter + 1
  return wrk.format(nil, nil, nil, (string.gsub(wrk.body, "@FRESH@", tostring(counter))))
end
"""
FRESH = "@FRESH@"


def wrk(url, body, connections, seconds, scratch, headers=None):
    """wrk's figures for `body` POSTed to `url`, with `headers` (a dict) besides the JSON ones."""
    script = os.path.join(scratch, "load.lua")
    extra = "".join(f'wrk.headers["{name}"] = "{value}"\n' for name, value in (headers or {}).items())
    with open(script, "w") as f:
        f.write(LUA % body + extra + (FRESH_LUA if FRESH in body else ""))
    output = subprocess.run(
        pinned(LOAD_CORE, ["wrk", "-t1", "-c", str(connections), "-d", f"{seconds}s", "-s", script, url]),
        capture_output=True, text=True, timeout=seconds + 60, check=True,
    ).stdout
    result = json.loads(output.strip().splitlines()[-1])
    if result["errors"] or result["non2xx"]:
        raise RuntimeError(f"wrk saw errors against {url}: {result}")
    result["rps"] = result["requests"] / (result["duration_us"] / 1e6)
    return result


def post(url, body):
    data = urllib.request.Request(url, data=body.encode(), method="POST",
                                  headers={"Content-Type": "application/json", "Accept": "application/json"})
    with urllib.request.urlopen(data, timeout=START_TIMEOUT_S) as answer:
        return answer.read()


def first_event(tool, url, body):
    output = subprocess.run(pinned(LOAD_CORE, [tool, url, body, str(FIRST_EVENT_SAMPLES)]), capture_output=True, text=True,
                            timeout=120, check=True).stdout
    return json.loads(output)


def stdio_load(tool, command, seconds):
    """Messages/s of one client keeping STDIO_IN_FLIGHT requests in flight: the
    client pinned to core 0, the server it spawns to core 1, so the server's
    own cost is what is measured."""
    done = subprocess.run(pinned(LOAD_CORE, [tool, str(seconds), str(STDIO_IN_FLIGHT), *pinned(SERVER_CORE, command)]),
                          capture_output=True, text=True, timeout=seconds + 60)
    if done.returncode != 0:
        raise RuntimeError(f"stdio-load {command[0]} exited {done.returncode}: {done.stderr[-2000:]}")
    return json.loads(done.stdout)["messages_per_s"]


def ms(us):
    return f"{us / 1000:.3f}"


def signed_ms(us):
    return f"{us / 1000:+.3f}"


def paired_rounds(rounds, base, subject):
    """Runs `subject` between two runs of `base`, `rounds` times, each
    `base` run ending one round and starting the next; yields the round's
    number and its (before, subject, after) figures."""
    before = base()
    for number in range(1, rounds + 1):
        measured = subject()
        after = base()
        yield number, before, measured, after
        before = after


def rules_section(emit, tool, cassettes, exact_url, scratch, log):
    """Replay with a match rules file against exact replay, on the same
    cassette, in paired rounds: each rules run between two exact runs."""
    emit()
    emit("## Replay with match rules vs exact replay (32 connections, paired rounds)")
    emit()
    emit("Both replay the bench cassette (1000 recordings of `lookup`). Exact: replay without rules, asked a")
    emit("recorded call; for the rows with a new requestId on every request, replay with `--ignore-param")
    emit("/arguments/requestId` asked the same requests (new params cost a parse and a match key before any")
    emit("rule, exact or not). With rules: a replay with `--rules FILE`, asked the call the row names, which")
    emit(f"the rule answers. Each rules run ({PAIRED_SECONDS} s) sits between two exact runs and is taken against")
    emit(f"their mean; {RULE_ROUNDS} rounds each.")
    emit()
    emit("| rules file | request | exact rps (median) | with rules rps (median) | rules vs exact, median (range) |")
    emit("|---|---|---:|---:|---:|")
    fixed = [
        ("ignore /arguments/requestId", IGNORE_RULES, "recorded exactly (the exact match wins)", LOOKUP(500)),
        ("ignore /arguments/requestId", IGNORE_RULES, "with a requestId nothing recorded", LOOKUP_WITH_ID(500)),
        ("ignore + normalize number", NORMALIZE_RULES, "with a requestId nothing recorded", LOOKUP_WITH_ID(500)),
        ("by = nearest", NEAREST_RULES, "with a requestId nothing recorded", LOOKUP_WITH_ID(500)),
    ]
    fresh = [
        ("ignore /arguments/requestId", IGNORE_RULES, "with a new requestId every request", LOOKUP_WITH_ID(500, FRESH)),
        ("by = nearest", NEAREST_RULES, "with a new requestId every request", LOOKUP_WITH_ID(500, FRESH)),
    ]
    # New params on every request cost a parse and a key before any rule: against exact replay
    # answering the same requests (the request id left out of its keys with --ignore-param).
    ignoring = Server([tool("mcp-tape"), "replay", cassettes, "--port", "0", "--ignore-param", "/arguments/requestId"],
                      log("rules-exact-ignoring"))
    cases = [(case, exact_url, LOOKUP(500)) for case in fixed] + [(case, ignoring.base + BENCH_PATH, case[3]) for case in fresh]
    for number, ((label, text, asked, body), base_url, base_body) in enumerate(cases):
        path = os.path.join(scratch, f"rules-{number}.toml")
        with open(path, "w") as out:
            out.write(text)
        server = Server([tool("mcp-tape"), "replay", cassettes, "--port", "0", "--rules", path], log(f"rules-{number}"))
        url = server.base + BENCH_PATH
        answered = json.loads(post(url, body.replace(FRESH, "0")))
        if "result" not in answered:
            raise RuntimeError(f"the rules replay did not answer {body}: {answered}")
        rounds = list(paired_rounds(RULE_ROUNDS,
                                    lambda: wrk(base_url, base_body, 32, PAIRED_SECONDS, scratch)["rps"],
                                    lambda: wrk(url, body, 32, PAIRED_SECONDS, scratch)["rps"]))
        ratios = [ruled / ((before + after) / 2) for _, before, ruled, after in rounds]
        emit(f"| {label} | {asked} | {statistics.median(r[1] for r in rounds):.0f} | "
             f"{statistics.median(r[2] for r in rounds):.0f} | {statistics.median(ratios):.0%} "
             f"({min(ratios):.0%}–{max(ratios):.0%}) |")
        server.stop()
    ignoring.stop()


def sdk_upstream_section(emit, tool, node, scratch, log):
    """Record in front of a server on the official TypeScript SDK
    (bench/sdk_upstream.mjs), as its users run it: paired rounds, each
    record run between two direct runs, in two placements."""
    emit()
    emit("## Record in front of a server on the official TypeScript SDK")
    emit()
    emit("The upstream is bench/sdk_upstream.mjs: `@modelcontextprotocol/sdk` (pinned in tests/interop) serving")
    emit("stateless Streamable HTTP with JSON answers, a fresh Server and transport per POST, one `lookup`")
    emit("tool. Direct: that server on core 1. Through record: record on core 1 and its upstream either on")
    emit("core 0 beside the load (record has a core of its own, as in the floor table) or on core 1 beside")
    emit(f"record (record's CPU is taken from the server's). Each record run ({PAIRED_SECONDS} s) sits between two")
    emit(f"direct runs and is taken against their mean; {SDK_ROUNDS} rounds each, after a warm-up of both")
    emit("servers' JIT; every exchange is stored.")
    emit()
    emit("| record's upstream | conns | direct rps (median) | through record rps (median) | record vs direct, median (range) | added p50, median |")
    emit("|---|---:|---:|---:|---:|---:|")
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sdk_upstream.mjs")
    direct = Server([node, script], log("sdk-direct"))
    beside_load = Server([node, script], log("sdk-beside-load"), core=LOAD_CORE)
    placements = [("core 0, beside the load", beside_load), ("core 1, beside record", direct)]
    for label, upstream in placements:
        record = start_record(tool, upstream.base, scratch, f"sdk-{upstream.proc.pid}", log)
        for server in (direct, record):
            wrk(server.base + BENCH_PATH, LOOKUP(1), 32, PAIRED_SECONDS, scratch)
        for connections in (32, 1):
            rounds = list(paired_rounds(SDK_ROUNDS,
                                        lambda: wrk(direct.base + BENCH_PATH, LOOKUP(1), connections, PAIRED_SECONDS, scratch),
                                        lambda: wrk(record.base + BENCH_PATH, LOOKUP(1), connections, PAIRED_SECONDS, scratch)))
            ratios = [through["rps"] / ((before["rps"] + after["rps"]) / 2) for _, before, through, after in rounds]
            added = [through["p50"] - (before["p50"] + after["p50"]) / 2 for _, before, through, after in rounds]
            emit(f"| {label} | {connections} | {statistics.median(r[1]['rps'] for r in rounds):.0f} | "
                 f"{statistics.median(r[2]['rps'] for r in rounds):.0f} | {statistics.median(ratios):.0%} "
                 f"({min(ratios):.0%}–{max(ratios):.0%}) | {signed_ms(statistics.median(added))} ms |")
        record.stop()
    beside_load.stop()
    direct.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bin", required=True, help="directory with mcp-tape, floor, proxy-floor, gen-cassette, first-event, stdio-floor, stdio-load")
    parser.add_argument("--out", required=True)
    parser.add_argument("--node", required=True, help="Node 22, to run bench/sdk_upstream.mjs")
    args = parser.parse_args()
    tool = lambda name: os.path.join(args.bin, name)  # noqa: E731
    lines = []

    def emit(line=""):
        print(line, flush=True)
        lines.append(line)

    with tempfile.TemporaryDirectory() as scratch:
        log = lambda name: os.path.join(scratch, f"{name}.log")  # noqa: E731
        cassettes = os.path.join(scratch, "cassettes")
        os.makedirs(cassettes)
        subprocess.run([tool("gen-cassette"), "1000", os.path.join(cassettes, "bench.sqlite")], check=True)

        replay = Server([tool("mcp-tape"), "replay", cassettes, "--port", "0"], log("replay"))
        bench_url = replay.base + BENCH_PATH
        answer = os.path.join(scratch, "answer.json")
        with open(answer, "wb") as f:
            f.write(post(bench_url, LOOKUP(500)))
        floor = Server([tool("floor"), "0", answer], log("floor"))
        cases = [
            ("floor (replay's JSON answer as fixed bytes)", floor.base + "/", LOOKUP(500)),
            ("replay: recorded JSON answer", bench_url, LOOKUP(500)),
            ("replay: recorded SSE answer, 3 progress notifications", bench_url, PROGRESS),
            ("mock: ping", replay.base + "/mcp", request("ping")),
            ("mock: empty tools/list", replay.base + "/mcp", request("tools/list")),
        ]
        emit("## Replay and mock vs the floor")
        emit()
        emit("Each scenario is measured right after a floor run of its own; the ratios are to that run, so")
        emit("that drift in the machine's speed during the run does not land on one scenario.")
        emit()
        emit("| scenario | conns | requests/s | p50 ms | p99 ms | p99.9 ms | floor rps | rps vs floor | p99 vs floor |")
        emit("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        floor_url, floor_body = cases[0][1], cases[0][2]
        for connections in (1, 32):
            for name, url, body in cases:
                base = wrk(floor_url, floor_body, connections, SECONDS_PER_LOAD, scratch)
                result = base if url == floor_url else wrk(url, body, connections, SECONDS_PER_LOAD, scratch)
                emit(f"| {name} | {connections} | {result['rps']:.0f} | {ms(result['p50'])} | {ms(result['p99'])} | "
                     f"{ms(result['p999'])} | {base['rps']:.0f} | {result['rps'] / base['rps']:.0%} | "
                     f"{result['p99'] / base['p99']:.2f}× |")
        emit()
        emit("## Replay vs the floor in paired rounds (recorded JSON answer, 32 connections)")
        emit()
        emit(f"Each replay run ({PAIRED_SECONDS} s) between two floor runs; its ratio is to their mean.")
        emit()
        emit("| round | floor before | replay | floor after | replay vs floor |")
        emit("|---:|---:|---:|---:|---:|")
        ratios = []
        rounds = paired_rounds(PAIRED_ROUNDS,
                               lambda: wrk(floor_url, floor_body, 32, PAIRED_SECONDS, scratch)["rps"],
                               lambda: wrk(bench_url, LOOKUP(500), 32, PAIRED_SECONDS, scratch)["rps"])
        for number, before, replayed, after in rounds:
            ratios.append(replayed / ((before + after) / 2))
            emit(f"| {number} | {before:.0f} | {replayed:.0f} | {after:.0f} | {ratios[-1]:.0%} |")
        emit()
        emit(f"Median {statistics.median(ratios):.0%} (from {min(ratios):.0%} to {max(ratios):.0%}).")
        rules_section(emit, tool, cassettes, bench_url, scratch, log)
        replay.stop()

        emit()
        emit("## Record overhead (the floor as a fast upstream)")
        emit()
        emit("Direct: the floor on core 1. Through record: record on core 1, its upstream a second floor on")
        emit("core 0 (beside the load), so that record, like the floor, has a core of its own.")
        emit()
        emit("The proxy floor (bench/proxy_floor.rs) sits where record does, in front of the same upstream:")
        emit("the smallest hyper forwarding proxy, one upstream connection per client connection, no parsing,")
        emit("no storage. It is what any HTTP recorder on this stack pays for the second hop alone.")
        emit()
        upstream = Server([tool("floor")], log("upstream"), core=LOAD_CORE)
        authority = upstream.base.removeprefix("http://")
        proxy = Server([tool("proxy-floor"), "0", authority], log("proxy-floor"))
        record = start_record(tool, upstream.base, scratch, "overhead", log)
        emit("| measure | direct | proxy floor | through record | record added / ratio | record vs proxy floor |")
        emit("|---|---:|---:|---:|---:|---:|")
        direct, bare, through = (wrk(server.base + BENCH_PATH, LOOKUP(1), 1, SECONDS_PER_LOAD, scratch)
                                 for server in (floor, proxy, record))
        for q in ("p50", "p99"):
            emit(f"| JSON latency {q}, 1 conn (ms) | {ms(direct[q])} | {ms(bare[q])} | {ms(through[q])} | "
                 f"+{ms(through[q] - direct[q])} ms | +{ms(through[q] - bare[q])} ms |")
        direct, bare, through = (wrk(server.base + BENCH_PATH, LOOKUP(1), 32, SECONDS_PER_LOAD, scratch)
                                 for server in (floor, proxy, record))
        emit(f"| JSON requests/s, 32 conns | {direct['rps']:.0f} | {bare['rps']:.0f} "
             f"({bare['rps'] / direct['rps']:.0%} of direct) | {through['rps']:.0f} | "
             f"{through['rps'] / direct['rps']:.0%} | {through['rps'] / bare['rps']:.0%} |")
        proxy.stop()
        direct = first_event(tool("first-event"), floor.base + "/sse", PROGRESS)
        through = first_event(tool("first-event"), record.base + "/sse", PROGRESS)
        for q in ("p50", "p99"):
            emit(f"| SSE time to first event {q} (ms) | {ms(direct[q + '_us'])} | — | {ms(through[q + '_us'])} | "
                 f"+{ms(through[q + '_us'] - direct[q + '_us'])} ms | — |")
        emit()
        emit(f"Added p50 at 1 connection in paired rounds: each record run ({PAIRED_SECONDS} s) between two direct")
        emit("runs, the added latency to their mean (same placement as above).")
        emit()
        emit("| round | direct p50 before | through record p50 | direct p50 after | added |")
        emit("|---:|---:|---:|---:|---:|")
        added = []
        rounds = paired_rounds(LATENCY_ROUNDS,
                               lambda: wrk(floor.base + BENCH_PATH, LOOKUP(1), 1, PAIRED_SECONDS, scratch)["p50"],
                               lambda: wrk(record.base + BENCH_PATH, LOOKUP(1), 1, PAIRED_SECONDS, scratch)["p50"])
        for number, before, through, after in rounds:
            added.append(through - (before + after) / 2)
            emit(f"| {number} | {ms(before)} | {ms(through)} | {ms(after)} | {signed_ms(added[-1])} ms |")
        emit()
        emit(f"Median {signed_ms(statistics.median(added))} ms (from {signed_ms(min(added))} to "
             f"{signed_ms(max(added))}).")
        record.stop()
        upstream.stop()
        emit()
        emit("The same 1-connection latency with record's upstream on core 1 beside record, where the direct")
        emit("floor runs (a request crosses between the cores twice, as it does direct):")
        emit()
        beside = Server([tool("floor")], log("upstream-beside"))
        record = start_record(tool, beside.base, scratch, "overhead-beside", log)
        emit("| measure | direct | through record | added |")
        emit("|---|---:|---:|---:|")
        direct = wrk(floor.base + BENCH_PATH, LOOKUP(1), 1, SECONDS_PER_LOAD, scratch)
        through = wrk(record.base + BENCH_PATH, LOOKUP(1), 1, SECONDS_PER_LOAD, scratch)
        emit(f"| JSON latency p50, 1 conn (ms) | {ms(direct['p50'])} | {ms(through['p50'])} | "
             f"+{ms(through['p50'] - direct['p50'])} ms |")
        record.stop()
        beside.stop()
        floor.stop()

        sdk_upstream_section(emit, tool, args.node, scratch, log)

        emit()
        emit(f"## stdio: one client, {STDIO_IN_FLIGHT} requests in flight")
        emit()
        emit("Each replay run right after a floor run of its own (bench/stdio_floor.rs answers every line with")
        emit("one fixed line of the same size).")
        emit()
        emit("| run | floor messages/s | replay --stdio messages/s | replay vs floor |")
        emit("|---:|---:|---:|---:|")
        replay_stdio = [tool("mcp-tape"), "replay", "--stdio", cassettes, "--server", "mcp_Bench"]
        for run in (1, 2, 3, 4, 5):
            base = stdio_load(tool("stdio-load"), [tool("stdio-floor")], SECONDS_PER_LOAD)
            rate = stdio_load(tool("stdio-load"), replay_stdio, SECONDS_PER_LOAD)
            emit(f"| {run} | {base:.0f} | {rate:.0f} | {rate / base:.0%} |")

        emit()
        emit("## Scale: cassettes written through the store API")
        emit()
        emit("| exchanges | file MiB | write s | start → first answer ms | peak RSS MiB | lookup p50 ms | lookup p99 ms |")
        emit("|---:|---:|---:|---:|---:|---:|---:|")
        for count in (1_000, 10_000, 100_000):
            directory = os.path.join(scratch, f"scale-{count}")
            os.makedirs(directory)
            file = os.path.join(directory, "scale.sqlite")
            began = time.monotonic()
            subprocess.run([tool("gen-cassette"), str(count), file], check=True)
            written = time.monotonic() - began
            server = Server([tool("mcp-tape"), "replay", directory, "--port", "0"], log(f"scale-{count}"))
            url = server.base + BENCH_PATH
            post(url, LOOKUP(count // 2))
            first_answer = time.monotonic() - server.started
            result = wrk(url, LOOKUP(count // 2), 1, SCALE_SECONDS, scratch)
            rss = server.peak_rss_mib()
            server.stop()
            emit(f"| {count} | {os.path.getsize(file) / 2**20:.1f} | {written:.1f} | {first_answer * 1000:.0f} | "
                 f"{rss:.0f} | {ms(result['p50'])} | {ms(result['p99'])} |")

    with open(args.out, "w") as out:
        out.write("\n".join(lines) + "\n")
    print(f"\nwritten to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
