"""pytest plugin (entry point `pytest11`): a tape per test, cassettes the VCR way.

A test that takes the `mcp_tape` fixture (or carries `@pytest.mark.mcp_tape`)
gets a tape of its own on a free loopback port, answering from
`cassettes/<module>/<test>.sqlite`; the fixture's value is the tape's URL,
also in MCP_TAPE_URL and MCP_PLATFORM_ENDPOINT (where the Agent 365 SDKs look)
while the test runs. A request the cassette does not hold fails that test,
with the misses in the failure text. Recording modes store a test's
recording only when the test passes.

Under `mcp-tape test -- pytest` (MCP_TAPE_URL set when the session starts),
the fixture yields that one tape's URL instead, and `mcp-tape test` judges
the run as a whole.
"""

import os
import re
from pathlib import Path

import pytest

from mcp_tape import MODES, Tape, TapeError

_TAPE = pytest.StashKey()
_SETTINGS = pytest.StashKey()
_VARIABLES = ("MCP_TAPE_URL", "MCP_PLATFORM_ENDPOINT")


def pytest_addoption(parser):
    group = parser.getgroup("mcp-tape", "mcp-tape: record and replay MCP traffic per test")
    group.addoption(
        "--mcp-tape-mode",
        choices=MODES,
        default=None,
        help="replay (default), missing, all or once, as `mcp-tape test --mode`; "
        "MCP_TAPE_MODE in the environment overrides it",
    )
    group.addoption("--mcp-tape-upstream", metavar="URL", help="the MCP server the recording modes record from")
    group.addoption(
        "--mcp-tape-cassettes", metavar="DIR", help="where per-test cassettes live (default: cassettes)"
    )
    group.addoption("--mcp-tape-rules", metavar="FILE", help="match rules (default: mcp-tape.toml if present)")
    group.addoption("--mcp-tape-html", metavar="DIR", help="write each test's HTML run report under DIR")
    parser.addini("mcp_tape_cassettes", "where per-test cassettes live, relative to the root", default="cassettes")


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "mcp_tape(cassette=None): give the test a tape of its own; cassette= names its file "
        "(relative to the cassettes directory) instead of <module>/<test>.sqlite",
    )
    root = Path(config.rootpath)
    option = config.getoption
    cassettes = option("--mcp-tape-cassettes") or config.getini("mcp_tape_cassettes")
    rules = option("--mcp-tape-rules") or (root / "mcp-tape.toml")
    html = option("--mcp-tape-html")
    config.stash[_SETTINGS] = {
        "mode": os.environ.get("MCP_TAPE_MODE", "").strip() or option("--mcp-tape-mode") or "replay",
        "upstream": option("--mcp-tape-upstream") or os.environ.get("MCP_TAPE_UPSTREAM"),
        "cassettes": root / cassettes,
        "rules": Path(rules) if Path(rules).exists() or option("--mcp-tape-rules") else None,
        "html": root / html if html else None,
        "outer": os.environ.get("MCP_TAPE_URL"),
    }


def pytest_report_header(config):
    settings = config.stash[_SETTINGS]
    if settings["outer"]:
        return f"mcp-tape: one tape for the session, at {settings['outer']}"
    return f"mcp-tape: mode {settings['mode']}, cassettes {settings['cassettes']}"


def pytest_collection_modifyitems(items):
    for item in items:
        if item.get_closest_marker("mcp_tape") and "mcp_tape" not in item.fixturenames:
            item.fixturenames.append("mcp_tape")


def _file_name(text):
    return re.sub(r"[^\w.\[\]=,+-]", "_", text)


def _cassette(item, settings):
    marker = item.get_closest_marker("mcp_tape")
    chosen = marker.kwargs.get("cassette") if marker else None
    if chosen:
        return settings["cassettes"] / chosen
    module = Path(str(item.fspath)).stem
    test = _file_name(item.name if item.cls is None else f"{item.cls.__name__}.{item.name}")
    return settings["cassettes"] / module / f"{test}.sqlite"


@pytest.fixture
def mcp_tape(request):
    """The URL of this test's tape (also in MCP_TAPE_URL and MCP_PLATFORM_ENDPOINT while the test runs)."""
    settings = request.config.stash[_SETTINGS]
    if settings["outer"]:
        yield settings["outer"]
        return
    cassette = _cassette(request.node, settings)
    html = None
    if settings["html"] is not None:
        html = settings["html"] / cassette.relative_to(settings["cassettes"]).with_suffix(".html")
    tape = Tape(
        cassette,
        mode=settings["mode"],
        upstream=settings["upstream"],
        rules=settings["rules"],
        html=html,
    )
    try:
        url = tape.start()
    except TapeError as error:
        pytest.fail(f"mcp-tape: {error}", pytrace=False)
    request.node.stash[_TAPE] = tape
    saved = {name: os.environ.get(name) for name in _VARIABLES}
    os.environ.update(dict.fromkeys(_VARIABLES, url))
    try:
        yield url
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        # Still running when the test body never ran (a fixture after this one failed).
        tape.stop(passed=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    tape = item.stash.get(_TAPE, None)
    try:
        result = yield
    except BaseException as failure:
        if tape is not None:
            try:
                misses = tape.stop(passed=False)
            except TapeError:
                misses = []  # the test's own failure is the one to show
            if misses:
                # Often the failure is the client's error for the miss: say what missed beside it.
                if hasattr(failure, "add_note"):
                    failure.add_note(tape.describe_misses())
                else:
                    item.add_report_section("call", "mcp-tape", tape.describe_misses())
        raise
    if tape is not None:
        try:
            misses = tape.stop(passed=True)
        except TapeError as error:
            pytest.fail(f"mcp-tape: {error}", pytrace=False)
        if misses:
            pytest.fail(tape.describe_misses(), pytrace=False)
    return result
