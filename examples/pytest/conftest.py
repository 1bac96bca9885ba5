"""pytest fixture for testing an MCP agent against mcp-tape.

Under `mcp-tape test -- pytest`, the tape is already running and its URL is
in MCP_TAPE_URL. Run as plain `pytest`, the fixture starts
`mcp-tape replay --port 0` itself, reads the port from the line it logs when
it listens, and stops it (with its miss summary) when the session ends.

Settings (environment): MCP_TAPE_BIN, the binary (default `mcp-tape` on
PATH); MCP_TAPE_CASSETTES, what to replay (default `cassettes`).
"""

import os
import re
import signal
import subprocess

import pytest

LISTENING = re.compile(r"listening on (http://127\.0\.0\.1:\d+)")


@pytest.fixture(scope="session")
def mcp_tape_url():
    if os.environ.get("MCP_TAPE_URL"):
        yield os.environ["MCP_TAPE_URL"]
        return
    binary = os.environ.get("MCP_TAPE_BIN", "mcp-tape")
    cassettes = os.environ.get("MCP_TAPE_CASSETTES", "cassettes")
    tape = subprocess.Popen([binary, "replay", "--port", "0", "--fail-on-miss", cassettes],
                            stderr=subprocess.PIPE, text=True)
    url = None
    for line in tape.stderr:
        found = LISTENING.search(line)
        if found:
            url = found.group(1)
            break
    if url is None:
        tape.wait()
        pytest.fail(f"mcp-tape replay exited ({tape.returncode}) before it listened")
    yield url
    tape.send_signal(signal.SIGTERM)
    rest = tape.stderr.read()
    if tape.wait(timeout=30) != 0:
        pytest.fail(f"mcp-tape replay reported misses:\n{rest}")
