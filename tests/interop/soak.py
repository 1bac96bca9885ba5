"""The soak: `mcp-tape replay` and `mcp-tape record` under hostile input for a
bounded time, then replay with every connection slot held by clients that send
nothing, trickle a body or only ping.

For SOAK_S seconds, workers send replay distinct long tool names, methods and
paths and oversized misses, and send record distinct long tool names and calls
whose upstream answers are large; each daemon's resident memory is sampled all
along. Both must stay under a fixed bound (the figures are printed) and never
abort. Then 1030 silent connections, 100 trickling bodies and 100 HTTP/2
connections that only ping are opened against replay: a new client must still
be served within the header limit (10 s) and a margin. And `nearest`: replay
with a `by = "nearest"` rule over a large cassette of one tool, hostile
queries of that tool beside ordinary calls of another, whose latency is
printed.
"""

import http.client
import http.server
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

SOAK_S = 30
WORKERS = 6
# Resident memory each daemon must stay under, in MiB (a debug build).
# Record holds up to 256 MiB of answers in flight, and a buffer being grown
# to the 64 MiB cap briefly holds its old and new halves.
RSS_BOUND_MIB = {"replay": 512, "record": 1024}
HEADER_LIMIT_S = 10
SERVED_MARGIN_S = 5
SILENT, TRICKLING, PINGING = 1030, 100, 100
MIB = 1024 * 1024


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


class LargeAnswers(http.server.ThreadingHTTPServer):
    """An upstream on loopback answering a `tools/call` with `arguments.mib`
    MiB of text (none if not given), chunked, with no length announced:
    past 64 MiB the recorder reads up to its cap, refuses it and stores
    nothing, so the soak tests the recorder's memory, not the disk."""

    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), LargeAnswers.Handler)

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_):
            pass

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("content-length", 0)))
            try:
                request = json.loads(body)
            except ValueError:
                request = {}
            params = request.get("params") or {}
            size = int((params.get("arguments") or {}).get("mib", 0)) if request.get("method") == "tools/call" else 0
            head = json.dumps({"jsonrpc": "2.0", "id": request.get("id")})[:-1]
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            pieces = [head.encode() + b', "result": {"content": [{"type": "text", "text": "']
            pieces += [b"x" * MIB] * size
            pieces.append(b'"}]}}')
            try:
                for piece in pieces:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                self.wfile.write(b"0\r\n\r\n")
            except OSError:
                pass  # the recorder gave up on an answer past its cap


def post(base, path, body, timeout=30):
    """POSTs `body` (bytes); returns the status, or the exception's name."""
    host, port = base.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        connection.request("POST", path, body=body, headers={
            "content-type": "application/json", "accept": "application/json, text/event-stream"})
        response = connection.getresponse()
        response.read()
        return response.status
    except (OSError, http.client.HTTPException) as error:
        return type(error).__name__
    finally:
        connection.close()


def call(name, arguments=None, method="tools/call", request_id=1):
    params = {"name": name, "arguments": arguments or {}}
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}).encode()


def hostile(base, worker, n, recording):
    """The n-th hostile request of a worker. Names sent to record are
    shorter (what it forwards, it stores)."""
    unique = f"{worker}-{n}-"
    long = 4096 if recording else 65536
    kind = n % 4
    if kind == 0:
        return post(base, "/agents/servers/mcp_MailTools", call(unique + "t" * long))
    if kind == 1:
        return post(base, "/agents/servers/mcp_MailTools", call("x", method=unique + "m" * long))
    if kind == 2:
        return post(base, "/agents/servers/" + unique + "p" * 7000, call("x"))
    if recording:
        return post(base, "/agents/servers/mcp_Large", call("large", {"mib": 65}))
    return post(base, "/agents/servers/mcp_MailTools", call("GetMessage", {"id": "m1", "extra": "e" * MIB}))


def run_for(seconds, threads, stop):
    """Runs `threads` for `seconds`, then sets `stop` and waits for them."""
    for thread in threads:
        thread.start()
    time.sleep(seconds)  # the soak's length, not a readiness wait
    stop.set()
    for thread in threads:
        thread.join(timeout=180)


def soak(args, checks, replay, recorder):
    """The timed part against the running `replay` and `recorder` Daemons."""
    peaks = {"replay": 0.0, "record": 0.0}
    counts = {"replay": {}, "record": {}}
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            for name, daemon in [("replay", replay), ("record", recorder)]:
                if daemon.proc.poll() is None:
                    peaks[name] = max(peaks[name], rss_mib(daemon.proc.pid))
            stop.wait(0.25)

    def work(name, daemon, worker):
        n = 0
        while not stop.is_set():
            outcome = hostile(daemon.base, worker, n, name == "record")
            counts[name][outcome] = counts[name].get(outcome, 0) + 1
            n += 1

    threads = [threading.Thread(target=sample)]
    for name, daemon in [("replay", replay), ("record", recorder)]:
        threads += [threading.Thread(target=work, args=(name, daemon, w)) for w in range(WORKERS)]
    run_for(SOAK_S, threads, stop)

    def bounded():
        for name, daemon in [("replay", replay), ("record", recorder)]:
            print(f"soak: {name}: peak RSS {peaks[name]:.0f} MiB (bound {RSS_BOUND_MIB[name]}) over {SOAK_S} s; "
                  f"answers {dict(sorted((str(k), v) for k, v in counts[name].items()))}", flush=True)
            assert daemon.proc.poll() is None, f"{name} exited {daemon.proc.returncode}"
            assert peaks[name] < RSS_BOUND_MIB[name], f"{name} peaked at {peaks[name]:.0f} MiB"
            assert sum(counts[name].values()) > 100, counts[name]

    checks.run(f"soak: replay and record under {SOAK_S} s of hostile requests stay under their RSS bounds",
               bounded)


def http2_ping_only(address):
    """An HTTP/2 connection that sends the preface and settings, then pings."""
    peer = socket.create_connection(address)
    peer.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + struct.pack(">I", 0)[1:] + b"\x04\x00" + b"\x00" * 4)
    return peer


def ping_frame(n):
    return struct.pack(">I", 8)[1:] + b"\x06\x00" + b"\x00" * 4 + struct.pack(">Q", n)


def held_slots(checks, replay):
    """Every slot held by clients that send nothing, trickle a body or ping."""
    host, port = replay.base.removeprefix("http://").split(":")
    address = (host, int(port))
    peers, trickling, pinging = [], [], []
    stop = threading.Event()
    try:
        for _ in range(SILENT):
            peers.append(socket.create_connection(address))
        for _ in range(TRICKLING):
            peer = socket.create_connection(address)
            peer.sendall(f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\ncontent-type: application/json\r\n"
                         f"content-length: 100000\r\n\r\n".encode())
            trickling.append(peer)
        for _ in range(PINGING):
            pinging.append(http2_ping_only(address))

        def keep_busy():
            n = 0
            while not stop.is_set():
                for peer in trickling:
                    try:
                        peer.sendall(b" ")
                    except OSError:
                        pass
                for peer in pinging:
                    try:
                        peer.sendall(ping_frame(n))
                    except OSError:
                        pass
                n += 1
                stop.wait(1)

        busy = threading.Thread(target=keep_busy)
        busy.start()

        def served():
            began = time.monotonic()
            status = post(replay.base, "/mcp", call("x", method="ping"), timeout=HEADER_LIMIT_S + SERVED_MARGIN_S)
            waited = time.monotonic() - began
            print(f"soak: with {SILENT} silent, {TRICKLING} trickling and {PINGING} pinging connections open, "
                  f"a new client was answered {status} after {waited:.1f} s", flush=True)
            assert status == 200, status

        checks.run(f"soak: {SILENT} silent, {TRICKLING} trickling and {PINGING} ping-only connections do not keep "
                   f"a new client waiting past the header limit", served)
    finally:
        stop.set()
        for peer in peers + trickling + pinging:
            peer.close()


def run(args, checks, daemon_class, fixture_cassettes):
    """Starts replay of `fixture_cassettes`, record in front of LargeAnswers,
    soaks both, then holds replay's slots; both must stop cleanly."""
    upstream = LargeAnswers()
    serving = threading.Thread(target=upstream.serve_forever, daemon=True)
    serving.start()
    replay = daemon_class(args.binary, [fixture_cassettes])
    recorded = os.path.join(args.logs, "soak-cassettes")
    recorder = daemon_class(None, None, [args.binary, "record", "--upstream",
                                         f"http://127.0.0.1:{upstream.server_address[1]}",
                                         "--cassettes", recorded, "--name", "soak", "--port", "0"])
    try:
        soak(args, checks, replay, recorder)
        held_slots(checks, replay)
    finally:
        codes = {"replay": replay.stop(os.path.join(args.logs, "soak-replay.log"))[0],
                 "record": recorder.stop(os.path.join(args.logs, "soak-record.log"))[0]}
        upstream.shutdown()

    def stopped_cleanly():
        assert codes == {"replay": 0, "record": 0}, codes

    checks.run("soak: replay and record stop cleanly afterwards (exit 0, no abort)", stopped_cleanly)


NEAREST_RECORDINGS = 20_000
# How much more an export of those recordings may hold at its peak than an
# export of one exchange, in MiB (read one at a time, about 2 MiB more; loaded
# whole, as before, about 105), and how long either may take (a debug build:
# about 12 s).
EXPORT_GROWTH_MIB = 16
EXPORT_TIMEOUT_S = 120
# Runs argv[1:] and prints its exit code and peak resident memory in KiB.
MEASURE_PEAK = ("import os, sys\n"
                "pid = os.fork()\n"
                "if pid == 0:\n"
                "    os.execv(sys.argv[1], sys.argv[1:])\n"
                "_, status, usage = os.wait4(pid, 0)\n"
                "print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)\n")
NEAREST_S = 20
ORDINARY_TIMEOUT_S = 10


def recorded_call_line(tool, arguments, text):
    """A recorded `tools/call` of mcp_Soak as a line of `mcp-tape import`."""
    request = {"jsonrpc": "2.0", "id": "mcp-tape:request-id", "method": "tools/call",
               "params": {"name": tool, "arguments": arguments}}
    answer = {"jsonrpc": "2.0", "id": "mcp-tape:request-id",
              "result": {"content": [{"type": "text", "text": text}]}}
    return json.dumps({"server": "mcp_Soak", "era": "handshake", "protocolVersion": "2025-06-18",
                       "request": request, "status": 200, "contentType": "application/json",
                       "messages": [{"offsetMs": 0, "direction": "server", "body": answer}]})


def nearest_cassette(binary, directory):
    """A cassette of NEAREST_RECORDINGS calls of one tool (each its own
    arguments), written as JSON Lines and imported; plus one call of another
    tool for ordinary clients to hit exactly."""
    lines = os.path.join(directory, "nearest.jsonl")
    line = recorded_call_line
    with open(lines, "w") as out:
        out.write(line("Hello", {}, "hello") + "\n")
        for n in range(NEAREST_RECORDINGS):
            out.write(line("Lookup", {"query": f"question number {n}", "page": n % 7, "tags": [n % 3, n % 5]},
                           f"answer {n}") + "\n")
    cassette = os.path.join(directory, "nearest.sqlite")
    subprocess.run([binary, "import", "--cassette", cassette, lines], check=True, capture_output=True)
    rules = os.path.join(directory, "nearest.toml")
    with open(rules, "w") as out:
        out.write('[[match]]\nserver = "mcp_Soak"\ntool = "Lookup"\nby = "nearest"\n')
    return cassette, rules


def nearest(args, checks, daemon_class):
    """Replay with a `by = "nearest"` rule over NEAREST_RECORDINGS recordings
    of one tool, for NEAREST_S seconds: hostile workers send that tool
    never-repeated queries, some with 10,000 extra arguments (each one a
    ranking over every recording), while ordinary clients call another tool
    that is recorded exactly. Every ordinary call must be answered; their
    p50 and p99 are printed, beside the same clients' figures with no
    hostile load."""
    with tempfile.TemporaryDirectory() as directory:
        cassette, rules = nearest_cassette(args.binary, directory)
        replay = daemon_class(None, None, [args.binary, "replay", cassette, "--rules", rules, "--port", "0"])
        path = "/agents/servers/mcp_Soak"
        stop = threading.Event()
        hostile_counts = {}

        # Built once (the client's own work must not stand in for the daemon's): each request
        # puts its own query in.
        plain = call("Lookup", {"query": "QUERY" + "q" * 200, "page": 1})
        wide = call("Lookup", {"query": "QUERY", "page": 1, **{f"extra{k}": k for k in range(10_000)}})

        def hostile_worker(worker):
            n = 0
            while not stop.is_set():
                body = (wide if n % 2 == 0 else plain).replace(b"QUERY", f"never asked {worker}-{n} ".encode())
                outcome = post(replay.base, path, body, timeout=120)
                hostile_counts[outcome] = hostile_counts.get(outcome, 0) + 1
                n += 1

        def measure(seconds, hostile):
            """The ordinary calls' latencies and outcomes over `seconds`, with the
            hostile workers running or not. The ordinary clients are a process
            of their own: in this one they would wait for the hostile threads'
            turns at the interpreter, and that wait would count as the daemon's."""
            stop.clear()
            threads = [threading.Thread(target=hostile_worker, args=(w,)) for w in range(WORKERS)] if hostile else []
            for thread in threads:
                thread.start()
            try:
                measured = subprocess.run([sys.executable, __file__, "ordinary", replay.base, path, str(seconds)],
                                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                          timeout=seconds + ORDINARY_TIMEOUT_S + 30, check=True)
            finally:
                stop.set()
                for thread in threads:
                    thread.join(timeout=180)
            ordinary = json.loads(measured.stdout)
            return sorted(ordinary["latencies"]), ordinary["outcomes"]

        try:
            quiet, quiet_outcomes = measure(3, hostile=False)
            loaded, loaded_outcomes = measure(NEAREST_S, hostile=True)
        finally:
            code, _ = replay.stop(os.path.join(args.logs, "soak-nearest-replay.log"))

        def figure(latencies, share):
            return latencies[min(len(latencies) - 1, int(len(latencies) * share))] * 1000

        def answered():
            print(f"soak: nearest over {NEAREST_RECORDINGS} recordings: ordinary calls alone "
                  f"p50 {figure(quiet, 0.5):.1f} ms, p99 {figure(quiet, 0.99):.1f} ms ({len(quiet)}); "
                  f"beside {WORKERS} hostile workers for {NEAREST_S} s p50 {figure(loaded, 0.5):.1f} ms, "
                  f"p99 {figure(loaded, 0.99):.1f} ms, max {loaded[-1] * 1000:.0f} ms ({len(loaded)}); "
                  f"hostile answers {dict(sorted((str(k), v) for k, v in hostile_counts.items()))}", flush=True)
            assert quiet_outcomes == {"200": len(quiet)} and loaded_outcomes == {"200": len(loaded)}, \
                (quiet_outcomes, loaded_outcomes)
            assert sum(hostile_counts.values()) >= WORKERS, hostile_counts
            assert code == 0, code

        checks.run(f"soak: ordinary calls are all answered while {WORKERS} clients send nearest-rule queries "
                   f"over {NEAREST_RECORDINGS} recordings of one tool", answered)
        flat_export(args, checks, cassette, directory)


def flat_export(args, checks, large, directory):
    """`export` reads a cassette one exchange at a time: in either format, its
    peak resident memory over `large` (NEAREST_RECORDINGS exchanges) is less
    than EXPORT_GROWTH_MIB above its peak over a cassette of one exchange."""
    lines = os.path.join(directory, "one.jsonl")
    with open(lines, "w") as out:
        out.write(recorded_call_line("Hello", {}, "hello") + "\n")
    small = os.path.join(directory, "one.sqlite")
    subprocess.run([args.binary, "import", "--cassette", small, lines], check=True, capture_output=True)
    output = os.path.join(directory, "exported")

    def peak_mib(cassette, form):
        """The export's exit code and peak resident memory. A child's peak
        starts from its parent's size at the fork, so the export is started
        by a bare Python (a few MiB), which prints the figure."""
        command = [args.binary, "export", cassette, *form, "-o", output]
        measured = subprocess.run([sys.executable, "-S", "-c", MEASURE_PEAK, *command], stdin=subprocess.DEVNULL,
                                  capture_output=True, text=True, timeout=EXPORT_TIMEOUT_S)
        code, kib = measured.stdout.split()
        return int(code), int(kib) / 1024

    for name, form in (("JSON Lines", []), ("HAR", ["--to", "har"])):
        def flat(form=form, name=name):
            figures = {}
            for label, cassette in (("one exchange", small), (f"{NEAREST_RECORDINGS} exchanges", large)):
                code, rss = peak_mib(cassette, form)
                assert code == 0, f"export of {label} exited {code}"
                figures[label] = (rss, os.path.getsize(output))
            print(f"soak: export as {name}: peak RSS " + ", ".join(
                f"{label} {rss:.1f} MiB ({size // 1024} KiB written)" for label, (rss, size) in figures.items()),
                flush=True)
            (small_rss, _), (large_rss, _) = figures.values()
            assert large_rss - small_rss < EXPORT_GROWTH_MIB, figures

        checks.run(f"soak: export as {name} holds one exchange at a time ({NEAREST_RECORDINGS} exchanges "
                   f"within {EXPORT_GROWTH_MIB} MiB of one)", flat)


def ordinary_calls(base, path, seconds):
    """Two clients calling an exactly recorded tool for `seconds`: each call's
    latency and the count of each outcome, as JSON on stdout."""
    latencies, outcomes = [], {}
    stop = threading.Event()

    def client():
        while not stop.is_set():
            began = time.monotonic()
            outcome = post(base, path, call("Hello"), timeout=ORDINARY_TIMEOUT_S)
            latencies.append(time.monotonic() - began)
            outcomes[str(outcome)] = outcomes.get(str(outcome), 0) + 1

    run_for(seconds, [threading.Thread(target=client) for _ in range(2)], stop)
    print(json.dumps({"latencies": latencies, "outcomes": outcomes}))


if __name__ == "__main__":
    # soak.py ordinary BASE PATH SECONDS: the ordinary clients of `nearest`, in a process of their own.
    if sys.argv[1:2] == ["ordinary"]:
        ordinary_calls(sys.argv[2], sys.argv[3], float(sys.argv[4]))
