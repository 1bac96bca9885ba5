"""What a test suite pays for the tape: 100 tests, directly and through a tape each.

    python3 bench/per_test.py --bin target/release/mcp-tape --python PYTHON --node NODE [--runs 5]

Each test opens the official SDK client on the README's quick-start server
(tests/packaging/quickstart_server.py, `search` tool) and lists its tools:
100 pytest tests (Python SDK, the wheel's plugin from packaging/python) and
100 vitest tests (TypeScript SDK, the npm package's helper from
packaging/npm). The suite runs against the server directly, then is recorded
once through the tapes (mode once), then replayed with the server stopped;
each of the direct and replayed suites runs --runs times, alternating, and
the whole wall time of `pytest -q` and `vitest run` is taken. Prints the
medians and the tape's cost a test: (replay - direct) / 100.

PYTHON needs mcp, pytest, anyio and uvicorn (tests/interop/setup.sh's
venv); NODE is Node 22 (the same). vitest and the TypeScript SDK are
installed (pinned, as tests/packaging/package.json has them) into a fresh
npm project under the scratch directory. Loopback only.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = 100

# The suite as a user writes it (the fixture taken as an argument); PER_TEST_DIRECT, when set, is the URL
# each test uses instead (the conftest then gives `mcp_tape` that URL, and no tape is started).
PYTEST_FILE = """
import pytest
from mcp.client.client import Client


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.anyio
@pytest.mark.parametrize("n", range({tests}))
async def test_search(mcp_tape, n):
    async with Client(f"{{mcp_tape}}/mcp") as client:
        assert "search" in [tool.name for tool in (await client.list_tools()).tools]
"""

PYTEST_CONFTEST = """
import os

import pytest

if os.environ.get("PER_TEST_DIRECT"):
    @pytest.fixture
    def mcp_tape():
        return os.environ["PER_TEST_DIRECT"]
"""

VITEST_FILE = """
import {{ Client }} from "@modelcontextprotocol/sdk/client/index.js";
import {{ StreamableHTTPClientTransport }} from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {{ expect, test }} from "vitest";
import {{ useTape }} from "mcp-tape/vitest";

const direct = process.env.PER_TEST_DIRECT;
const tape = direct ? {{ url: direct }} : useTape();

for (let n = 0; n < {tests}; n++) {{
  test(`search ${{n}}`, async () => {{
    const client = new Client({{ name: "per-test", version: "1.0" }});
    await client.connect(new StreamableHTTPClientTransport(new URL(`${{tape.url}}/mcp`)));
    const {{ tools }} = await client.listTools();
    expect(tools.map((tool) => tool.name)).toContain("search");
    await client.close();
  }});
}}
"""


def start_server(python):
    """The quick-start server on a free port; (process, base URL)."""
    server = subprocess.Popen([python, str(ROOT / "tests/packaging/quickstart_server.py")],
                              stderr=subprocess.PIPE, text=True)
    line = server.stderr.readline().strip()
    if not line.startswith("listening on "):
        server.kill()
        raise SystemExit(f"per_test: the quick-start server did not start: {line}")
    return server, line.removeprefix("listening on ")


def timed(command, cwd, env):
    """Wall seconds of one run of `command`, which must pass."""
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"per_test: {' '.join(command)} failed ({done.returncode}):\n{done.stdout[-3000:]}"
                         f"\n{done.stderr[-3000:]}")
    return seconds


def measure(name, command, cwd, env, python, binary, runs):
    """Records the suite through the tapes, then times it against the server, against one replaying tape
    for the suite, and through a tape each with the server stopped, in rounds."""
    server, base = start_server(python)
    try:
        timed(command, cwd, dict(env, PER_TEST_DIRECT=base))  # warms the caches
        timed(command, cwd, dict(env, MCP_TAPE_MODE="once", MCP_TAPE_UPSTREAM=f"{base}/mcp"))
    finally:
        server.terminate()
        server.wait()
    # One tape for the whole suite, replaying one test's cassette: the server that answers as the
    # per-test tapes do, started once.
    one = next((cwd / "cassettes").rglob("*.sqlite"))
    shared = subprocess.Popen([binary, "replay", str(one), "--port", "0"], stderr=subprocess.PIPE,
                              text=True)
    try:
        shared_base = listening(shared)
        direct, one_tape, replayed = [], [], []
        for _ in range(runs):
            server, base = start_server(python)
            try:
                direct.append(timed(command, cwd, dict(env, PER_TEST_DIRECT=base)))
            finally:
                server.terminate()
                server.wait()
            one_tape.append(timed(command, cwd, dict(env, PER_TEST_DIRECT=shared_base)))
            replayed.append(timed(command, cwd, env))
    finally:
        shared.terminate()
        shared.wait()
    medians = [statistics.median(runs) for runs in (direct, one_tape, replayed)]
    shown = [f"{median:.2f} s ({', '.join(f'{s:.2f}' for s in runs)})"
             for median, runs in zip(medians, (direct, one_tape, replayed))]
    # Each round's own difference (the machine's speed drifts from round to round), then their median.
    paired = statistics.median(each - one for each, one in zip(replayed, one_tape)) / TESTS * 1000
    print(f"{name}: {TESTS} tests against the quick-start server {shown[0]}; against one replaying tape "
          f"{shown[1]}; through a tape each {shown[2]}: the tape costs {paired:.1f} ms a test (median of the "
          f"rounds' differences; {(medians[2] - medians[0]) / TESTS * 1000:+.1f} ms against the server)", flush=True)
    return paired


def listening(process):
    """The base URL of an mcp-tape that logs `listening on URL` on its stderr (read until then)."""
    for line in process.stderr:
        if "listening on " in line:
            threading.Thread(target=process.stderr.read, daemon=True).start()  # keeps the pipe drained
            return line.split("listening on ", 1)[1].split()[0].rstrip("/")
    raise SystemExit(f"per_test: mcp-tape replay exited ({process.wait()}) before it listened")


def pytest_suite(scratch, binary, python, runs):
    project = scratch / "pytest-project"
    project.mkdir()
    (project / "test_search.py").write_text(PYTEST_FILE.format(tests=TESTS))
    (project / "conftest.py").write_text(PYTEST_CONFTEST)
    (project / "pytest.ini").write_text("[pytest]\n")
    env = dict(os.environ, MCP_TAPE_BIN=binary, PYTHONPATH=str(ROOT / "packaging/python"))
    command = [python, "-m", "pytest", "-q", "-p", "mcp_tape.pytest_plugin", "-p", "no:cacheprovider"]
    return measure("pytest", command, project, env, python, binary, runs)


def vitest_suite(scratch, binary, python, node, runs):
    project = scratch / "vitest-project"
    project.mkdir()
    pinned = json.loads((ROOT / "tests/packaging/package.json").read_text())["devDependencies"]
    (project / "package.json").write_text(json.dumps({
        "name": "per-test", "private": True, "type": "module",
        "devDependencies": {
            "@modelcontextprotocol/sdk": pinned["@modelcontextprotocol/sdk"],
            "vitest": pinned["vitest"],
            "mcp-tape": f"file:{ROOT / 'packaging/npm/mcp-tape'}",
        },
    }))
    npm = shutil.which("npm", path=str(Path(node).parent)) or "npm"
    env = dict(os.environ, PATH=f"{Path(node).parent}{os.pathsep}{os.environ['PATH']}")
    subprocess.run([npm, "install", "--no-audit", "--no-fund", "--ignore-scripts", "--install-links",
                    "--loglevel=error"], cwd=project, env=env, check=True)
    (project / "search.test.mjs").write_text(VITEST_FILE.format(tests=TESTS))
    env["MCP_TAPE_BIN"] = binary
    command = [node, str(project / "node_modules/vitest/vitest.mjs"), "run"]
    return measure("vitest", command, project, env, python, binary, runs)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", required=True, help="the mcp-tape binary")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--node", default="node")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--only", choices=["pytest", "vitest"])
    args = parser.parse_args()
    binary = str(Path(args.bin).resolve())
    with tempfile.TemporaryDirectory(prefix="mcp-tape-per-test-") as scratch:
        if args.only != "vitest":
            pytest_suite(Path(scratch), binary, args.python, args.runs)
        if args.only != "pytest":
            vitest_suite(Path(scratch), binary, args.python, shutil.which(args.node) or args.node, args.runs)


if __name__ == "__main__":
    main()
