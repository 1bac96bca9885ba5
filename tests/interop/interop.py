"""Interop checks for mcp-tape replay with official MCP clients.

Starts the real `mcp-tape` binary on 127.0.0.1 port 0 (readiness = its
"listening on" log line), then drives it with the official Python SDK
(auto and legacy modes), the official TypeScript SDK and the official
conformance suite. Prints one line per check and closes with
"interop: N passed, N failed"; exits 1 if any check failed.
"""

import argparse
import asyncio
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import traceback

import clients

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "fixture.jsonl")
EXPECTED_FAILURES = os.path.join(HERE, "conformance-expected-failures.yml")
PATHS = ["/agents/servers/mcp_Unknown", "/mcp"]
# Bounds on every wait: start-up, shutdown, one client flow, one conformance run.
START_TIMEOUT_S = 30
CLIENT_TIMEOUT_S = 120
CONFORMANCE_TIMEOUT_S = 600


class Daemon:
    """`mcp-tape replay PATHS --port 0`, its log collected as it runs."""

    def __init__(self, binary, paths):
        self.proc = subprocess.Popen(
            [binary, "replay", *paths, "--port", "0"],
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
                    ready.put(line.split("listening on ", 1)[1].strip())
            ready.put(None)

        threading.Thread(target=read, daemon=True).start()
        try:
            self.base = ready.get(timeout=START_TIMEOUT_S)
        except queue.Empty:
            self.base = None
        if self.base is None:
            self.proc.kill()
            raise RuntimeError("mcp-tape did not start listening:\n" + "".join(self.lines))

    def url(self, path):
        return self.base + path

    def stop(self):
        """SIGTERM; returns (exit code, whole log)."""
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=START_TIMEOUT_S)
        self.proc.stderr.close()
        return code, "".join(self.lines)


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
    asyncio.run(asyncio.wait_for(coroutine, CLIENT_TIMEOUT_S))


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--binary", required=True)
    parser.add_argument("--node", required=True, help="Node 22 executable")
    parser.add_argument("--logs", required=True, help="directory for conformance and daemon logs")
    args = parser.parse_args()
    os.makedirs(args.logs, exist_ok=True)
    node_env = dict(os.environ, PATH=os.path.dirname(args.node) + os.pathsep + os.environ["PATH"])
    conformance = [args.node, "node_modules/@modelcontextprotocol/conformance/dist/index.js"]
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
        code, log = daemon.stop()
        with open(os.path.join(args.logs, "replay-empty.log"), "w") as out:
            out.write(log)

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
        code, log = daemon.stop()
        with open(os.path.join(args.logs, "replay-recorded.log"), "w") as out:
            out.write(log)

        def all_hits():
            assert code == 0, f"exit code {code}"
            assert "no misses" in log, log[-2000:]
            recorded = [line for line in log.splitlines() if "method=tools/" in line]
            assert len(recorded) == 9, recorded  # 3 clients x (tools/list + 2 tools/call)
            assert all(" hit status=200" in line for line in recorded), "\n".join(recorded)

        checks.run("recorded replay answered every client request from the cassette", all_hits)

    print(f"interop: {checks.passed} passed, {checks.failed} failed", flush=True)
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
