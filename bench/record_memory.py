"""Peak memory of `mcp-tape record` recording large answers (issue 86, item 2).

    python3 bench/record_memory.py --bin target/release/mcp-tape [--json-mib 50] [--sse-mib 15] [--streams 4]

An upstream in this script answers every `tools/call` with `[0,0,…]` of the asked size (the shape
whose parsed tree is largest for its text), as JSON or as one SSE event. The recorder records one
JSON answer, then `--streams` SSE answers at once; the script prints the recorder's peak resident
memory (VmHWM) after each step. Everything stays on 127.0.0.1.
"""

import argparse
import http.server
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import urllib.request


def zeros(request_id, mib):
    return ('{"jsonrpc":"2.0","id":%s,"result":{"structuredContent":{"zeros":[%s0]},"content":[]}}'
            % (json.dumps(request_id), "0," * (mib << 19)))


class Upstream(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        arguments = body.get("params", {}).get("arguments", {})
        answer = zeros(body["id"], arguments["mib"]).encode()
        stream = arguments.get("stream")
        if stream:
            answer = b"event: message\ndata: " + answer + b"\n\n"
        self.send_response(200)
        self.send_header("content-type", "text/event-stream" if stream else "application/json")
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *_):
        pass


def peak(pid):
    with open(f"/proc/{pid}/status") as status:
        return int(re.search(r"VmHWM:\s+(\d+)", status.read()).group(1)) // 1024


def call(url, request_id, mib, stream):
    body = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                       "params": {"name": "zeros", "arguments": {"mib": mib, "stream": stream}}}).encode()
    request = urllib.request.Request(url, data=body, headers={
        "content-type": "application/json", "accept": "application/json, text/event-stream"})
    with urllib.request.urlopen(request, timeout=300) as answer:
        return len(answer.read())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", required=True)
    parser.add_argument("--json-mib", type=int, default=50)
    parser.add_argument("--sse-mib", type=int, default=15)
    parser.add_argument("--streams", type=int, default=4)
    args = parser.parse_args()
    upstream = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    with tempfile.TemporaryDirectory() as cassettes:
        recorder = subprocess.Popen(
            [args.bin, "record", "--port", "0", "--upstream", f"http://127.0.0.1:{upstream.server_port}",
             "--cassettes", cassettes], stderr=subprocess.PIPE, text=True)
        for line in recorder.stderr:
            found = re.search(r"listening on (http://[0-9.:]+)", line)
            if found:
                url = found.group(1) + "/mcp"
                break
        threading.Thread(target=recorder.stderr.read, daemon=True).start()
        print(f"started: {peak(recorder.pid)} MB")
        call(url, 1, args.json_mib, False)
        print(f"one {args.json_mib} MiB JSON answer: {peak(recorder.pid)} MB")
        threads = [threading.Thread(target=call, args=(url, 2 + n, args.sse_mib, True)) for n in range(args.streams)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        print(f"then {args.streams} SSE answers of {args.sse_mib} MiB at once: {peak(recorder.pid)} MB")
        recorder.terminate()
        recorder.wait()
        size = os.path.getsize(os.path.join(cassettes, "default.sqlite")) >> 20
        print(f"cassette: {size} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
