"""What every interop check shares: where things are, how long anything may take,
the daemon under test (started on port 0, ready at its "listening on" line), the
checks' tally, and running a client or a process with a bound.
"""

import asyncio
import base64
import json
import os
import queue
import secrets
import signal
import subprocess
import tempfile
import threading
import time
import traceback


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

    def __init__(self, binary, paths, command=None, env=None):
        self.proc = subprocess.Popen(
            command or [binary, "replay", *paths, "--port", "0"],
            env=env,
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


def jwt(lifetime_s=3600):
    """An unsigned three-part JWT that has not expired (the Node SDK checks `exp`)."""
    part = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()
    claims = {"exp": int(time.time()) + lifetime_s, "appid": "app-1", "nonce": secrets.token_hex(16)}
    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(claims)}.{secrets.token_urlsafe(16)}"


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
