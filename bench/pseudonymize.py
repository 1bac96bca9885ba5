"""What `--pseudonymize` costs a recording (issue 87): answers that name many people.

    python3 bench/pseudonymize.py --bin target/release/mcp-tape [--people 10000] [--requests 20] [--rounds 11]

An upstream in this script answers every `tools/call` with a Graph-shaped list of `--people` people,
each with a user id (a GUID), a display name and an address (about 1 MB for 10,000), the same
people every time. `mcp-tape record` is run without the flag, with it, and without it again,
round after round, each on a fresh cassette, asked `--requests` calls one after another; the script
prints each round's ratio of the pseudonymizing recorder's calls/s to the mean of the two plain
ones, and the median and range. Then, for a fresh recorder of each kind, the peak resident memory
(VmHWM) one answer adds over the idle process, as a multiple of the answer's bytes. Everything
stays on 127.0.0.1.
"""

import argparse
import http.server
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

KEY = "the benchmark's pseudonym key, 32 characters"


def name(i, salt):
    """A word of letters alone, one of 26^4 per salt."""
    letters = "".join(chr(97 + (i // 26 ** k + salt) % 26) for k in range(4))
    return letters.capitalize()


def answer(request_id, people):
    listed = []
    for i in range(people):
        given, surname = name(i, 3) + "ia", name(i, 11) + "son"
        listed.append({
            "id": "%08x-%04x-4%03x-8%03x-%012x" % (i * 2654435761 % 2**32, i % 65536, i % 4096, (i * 7) % 4096,
                                                  i * 40503),
            "displayName": f"{given} {surname}",
            "mail": f"{given.lower()}.{surname.lower()}@people-bench.net",
        })
    return json.dumps({"jsonrpc": "2.0", "id": request_id,
                       "result": {"content": [], "structuredContent": {"value": listed}}}).encode()


class Upstream(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    people = 10000
    body = {}

    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers["content-length"])))
        # The same people every time, as a directory listed again; only the id changes.
        template = Upstream.body.setdefault("answer", answer("__ID__", Upstream.people))
        text = template.replace(b'"__ID__"', json.dumps(request["id"]).encode())
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(text)))
        self.end_headers()
        self.wfile.write(text)

    def log_message(self, *_):
        pass


def call(url, request_id):
    body = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                       "params": {"name": "ListUsers", "arguments": {}}}).encode()
    request = urllib.request.Request(url, data=body, headers={
        "content-type": "application/json", "accept": "application/json, text/event-stream"})
    with urllib.request.urlopen(request, timeout=300) as answered:
        return len(answered.read())


def memory(pid, field):
    with open(f"/proc/{pid}/status") as status:
        return int(re.search(rf"{field}:\s+(\d+)", status.read()).group(1)) * 1024


class Recorder:
    def __init__(self, binary, upstream, pseudonymize):
        self.dir = tempfile.TemporaryDirectory()
        command = [binary, "record", "--port", "0", "--upstream", upstream, "--cassettes", self.dir.name]
        if pseudonymize:
            command.append("--pseudonymize")
        env = dict(os.environ, MCP_TAPE_PSEUDONYM_KEY=KEY, MCP_TAPE_LOG="warn,mcp_tape=info")
        self.process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
        for line in self.process.stderr:
            found = re.search(r"listening on (http://\S+?),", line)
            if found:
                self.url = found.group(1) + "/mcp"
                break
        threading.Thread(target=lambda: [None for _ in self.process.stderr], daemon=True).start()

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=120)
        self.dir.cleanup()


def rate(binary, upstream, pseudonymize, requests):
    recorder = Recorder(binary, upstream, pseudonymize)
    try:
        start = time.perf_counter()
        for n in range(requests):
            call(recorder.url, n)
        return requests / (time.perf_counter() - start)
    finally:
        recorder.stop()


def added_memory(binary, upstream, pseudonymize):
    recorder = Recorder(binary, upstream, pseudonymize)
    try:
        idle = memory(recorder.process.pid, "VmRSS")
        size = call(recorder.url, 1)
        return (memory(recorder.process.pid, "VmHWM") - idle) / size, size
    finally:
        recorder.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", required=True)
    parser.add_argument("--people", type=int, default=10000)
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=11)
    args = parser.parse_args()
    Upstream.people = args.people
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    upstream = f"http://127.0.0.1:{server.server_address[1]}"
    size = len(answer(1, args.people))
    print(f"answer: {size} bytes naming {args.people} people; {args.requests} calls a run")
    ratios = []
    for round_number in range(args.rounds):
        before = rate(args.bin, upstream, False, args.requests)
        pseudonymized = rate(args.bin, upstream, True, args.requests)
        after = rate(args.bin, upstream, False, args.requests)
        ratios.append(pseudonymized / ((before + after) / 2))
        print(f"round {round_number + 1}: plain {before:.1f} and {after:.1f} calls/s, pseudonymized "
              f"{pseudonymized:.1f}: {ratios[-1]:.3f}", flush=True)
    print(f"pseudonymized / plain: median {statistics.median(ratios):.3f} "
          f"(range {min(ratios):.3f}-{max(ratios):.3f}, {args.rounds} rounds)")
    for pseudonymize in (False, True):
        multiple, answered = added_memory(args.bin, upstream, pseudonymize)
        kind = "pseudonymized" if pseudonymize else "plain"
        print(f"peak memory one {answered}-byte answer adds ({kind}): {multiple:.1f}x its bytes")
    server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
