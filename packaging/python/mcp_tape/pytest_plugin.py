"""pytest plugin (entry point `pytest11`): a tape per test, cassettes the VCR way.

A test that takes the `mcp_tape` fixture (or carries `@pytest.mark.mcp_tape`)
gets a tape of its own on a free loopback port, answering from
`cassettes/<module>/<test>.sqlite`; the fixture's value is the tape's URL,
also in MCP_TAPE_URL and MCP_PLATFORM_ENDPOINT (where the Agent 365 SDKs look)
while the test runs. A request the cassette does not hold fails that test,
the misses first in its failure text; so does any request when the cassette
is not there. Recording modes store a test's recording only when the test
passes. The marker takes the test's own cassette, mode, rules file, faults,
on-miss and models. The agent's model goes on the same tape: `--mcp-tape-model
NAME=URL` (or the marker's `models=`) records it, and the `mcp_tape_model`
fixture gives its base URL on the tape (`mcp_tape_model("openai")`).

Under GitHub Actions the session ends with each miss as an `::error` annotation
at its test (GITHUB_ACTIONS=true) and a section of the job's summary listing each
test's misses, drift and faults (GITHUB_STEP_SUMMARY).

Under `mcp-tape test -- pytest` (MCP_TAPE_URL set when the session starts),
the fixture yields that one tape's URL instead, and `mcp-tape test` judges
the run as a whole.
"""

import functools
import hashlib
import html
import json
import os
import re
from pathlib import Path

import pytest

from mcp_tape import _TEST_VARIABLES, MODES, Tape, TapeError, _variables, end_idle_tapes, github, model_url

_TAPE = pytest.StashKey()
_MISSES = pytest.StashKey()
_SETTINGS = pytest.StashKey()
_NEXT = pytest.StashKey()
_AHEAD = pytest.StashKey()
_CASES = pytest.StashKey()
# The name under which a test's report carries what GitHub is told of its tape (across xdist's workers too).
_GITHUB_PROPERTY = "mcp-tape"
# What the session's tests told GitHub: [(test id, file, line, rows)], gathered where reports are logged.
_TOLD = []
_MARKER_OPTIONS = ("cassette", "mode", "rules", "faults", "on_miss", "models", "pseudonymize")


def pytest_addoption(parser):
    group = parser.getgroup("mcp-tape", "mcp-tape: record and replay MCP traffic per test")
    group.addoption(
        "--mcp-tape-mode",
        choices=MODES,
        default=None,
        help="replay (default; vcrpy's none), missing (new_episodes), all or once, as `mcp-tape test --mode`; "
        "default MCP_TAPE_MODE",
    )
    group.addoption("--mcp-tape-upstream", metavar="URL", help="the MCP server the recording modes record from")
    group.addoption(
        "--mcp-tape-model",
        metavar="NAME=URL",
        action="append",
        default=None,
        help="record the agent's model NAME too, at the base URL its client had (repeatable; default "
        "MCP_TAPE_MODEL); the mcp_tape_model fixture gives its URL on the tape",
    )
    group.addoption(
        "--mcp-tape-pseudonymize",
        action="store_true",
        default=False,
        help="recording, store each person, address, GUID and phone number as a keyed pseudonym of the same form "
        "(mcp-tape test --pseudonymize; default MCP_TAPE_PSEUDONYMIZE; the key: MCP_TAPE_PSEUDONYM_KEY)",
    )
    group.addoption(
        "--mcp-tape-cassettes", metavar="DIR", help="where per-test cassettes live (default: cassettes)"
    )
    group.addoption("--mcp-tape-rules", metavar="FILE", help="match rules (default: mcp-tape.toml if present)")
    group.addoption(
        "--mcp-tape-html", metavar="DIR", help="write each test's HTML run report under DIR, with an index.html"
    )
    group.addoption(
        "--mcp-tape-report", metavar="DIR", help="write each test's JSON usage report under DIR (rules suggest --from DIR)"
    )
    parser.addini("mcp_tape_cassettes", "where per-test cassettes live, relative to the root", default="cassettes")


def pytest_configure(config):
    _TOLD.clear()
    config.addinivalue_line(
        "markers",
        "mcp_tape(cassette=None, mode=None, rules=None, faults=(), on_miss=None, models=None, pseudonymize=None): "
        "give the test a tape "
        "of its own; cassette= names its file (relative to the cassettes directory) instead of "
        "<module>/<test>.sqlite; mode= and rules= override the command line's for this test; faults= adds fault "
        "rules (spec strings or dicts of a [[fault]] table's keys); on_miss= is --on-miss; models= (a dict of name "
        "to base URL) records the agent's models instead of --mcp-tape-model's; pseudonymize=True stores personal "
        "data as pseudonyms (--mcp-tape-pseudonymize)",
    )
    root = Path(config.rootpath)
    option = config.getoption
    cassettes = option("--mcp-tape-cassettes") or config.getini("mcp_tape_cassettes")
    rules = option("--mcp-tape-rules") or (root / "mcp-tape.toml")
    html_dir = option("--mcp-tape-html")
    reports = option("--mcp-tape-report")
    config.stash[_SETTINGS] = {
        # The command line wins over the environment, as everywhere else.
        "mode": option("--mcp-tape-mode") or os.environ.get("MCP_TAPE_MODE", "").strip() or "replay",
        "upstream": option("--mcp-tape-upstream") or os.environ.get("MCP_TAPE_UPSTREAM"),
        "models": option("--mcp-tape-model") or os.environ.get("MCP_TAPE_MODEL", "").split(),
        "pseudonymize": option("--mcp-tape-pseudonymize"),
        "cassettes": root / cassettes,
        "rules": Path(rules) if Path(rules).exists() or option("--mcp-tape-rules") else None,
        "html": root / html_dir if html_dir else None,
        "reports": root / reports if reports else None,
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


# The longest file name a test's id becomes as it is, in characters and in UTF-8 bytes; a longer one is cut
# (on a character) and told apart by its digest. 240 bytes leave room for `.sqlite-journal` in the 255 bytes
# file systems hold.
_LONGEST_NAME = 160
_LONGEST_NAME_BYTES = 240


def _spelled(character):
    """A character a file name may not hold: a space as `_`, anything else as `%XX` of its UTF-8 bytes."""
    return "_" if character == " " else "".join(f"%{byte:02X}" for byte in character.encode())


def _digest(text):
    return hashlib.sha256(text.encode()).hexdigest()


def _file_name(text, told_by_case=True):
    """`text` as one file name of its own: a space as `_`, every other character a file name may not hold
    (a path separator, a character Windows refuses, `%` itself) as `%XX`, so that ids differing in
    anything but a space against an `_` never share a name; a name of dots only is spelled out too; a
    name with capitals ends in `~` and a digest of the whole, so that two ids differing only in case
    never share a file where case does not count (macOS, Windows); and a long one is cut and ends in a
    digest of the whole. Without `told_by_case`, the name earlier versions gave. The vitest helper
    names its cassettes the same way."""
    name = re.sub(r"[^\w.\[\]=,+-]", lambda m: _spelled(m.group()), text)
    if name.strip(".") == "":
        name = name.replace(".", "%2E")
    if told_by_case and text != text.lower():
        name = f"{name}~{_digest(text)[:8]}"
    if len(name) > _LONGEST_NAME or len(name.encode()) > _LONGEST_NAME_BYTES:
        cut = name[:_LONGEST_NAME - 17]
        while len(cut.encode()) > _LONGEST_NAME_BYTES - 17:
            cut = cut[:-1]
        name = f"{cut}-{_digest(text)[:16]}"
    return name


def _test_path(item, told_by_case=True):
    """`<module>/<test>`: where this test's cassette, HTML page and report go (each adds its suffix to the
    whole name: a test's name may hold dots of its own)."""
    module = _file_name(Path(str(item.fspath)).stem, told_by_case)
    test = _file_name(item.name if item.cls is None else f"{item.cls.__name__}.{item.name}", told_by_case)
    return Path(module) / test


def _with(place, suffix):
    """`place` with `suffix` added to its whole name (never `with_suffix`, which takes a dot of the name's)."""
    return place.parent / f"{place.name}{suffix}"


class _BadMarker(Exception):
    pass


def _marker_options(item):
    marker = item.get_closest_marker("mcp_tape")
    options = dict(marker.kwargs) if marker else {}
    unknown = sorted(set(options) - set(_MARKER_OPTIONS))
    if unknown:
        raise _BadMarker(f"mcp_tape marker: unknown option(s) {', '.join(unknown)}; it takes "
                         f"{', '.join(_MARKER_OPTIONS)}")
    return options


def _tape_for(item):
    """The tape `item` gets, not yet started."""
    config = item.config
    settings = config.stash[_SETTINGS]
    options = _marker_options(item)
    place = _test_path(item)
    cassette = settings["cassettes"] / (options.get("cassette") or _with(place, ".sqlite"))
    earlier = settings["cassettes"] / _with(_test_path(item, told_by_case=False), ".sqlite")
    if not options.get("cassette") and not cassette.exists() and earlier.exists():
        cassette = earlier  # recorded under the name earlier versions gave
    rules = options.get("rules")
    faults = options.get("faults") or ()
    if isinstance(faults, (str, dict)):
        faults = [faults]
    return Tape(
        cassette,
        mode=options.get("mode") or settings["mode"],
        upstream=settings["upstream"],
        rules=config.rootpath / rules if rules else settings["rules"],
        html=settings["html"] / _with(place, ".html") if settings["html"] else None,
        faults=faults,
        on_miss=options.get("on_miss"),
        report=settings["reports"] / _with(place, ".json") if settings["reports"] else None,
        title=f"{item.nodeid} ({cassette})",
        models=options.get("models") or settings["models"],
        pseudonymize=options.get("pseudonymize", settings["pseudonymize"]),
    )


def _start_ahead(item, beside=None):
    """Starts the tape of the test after `item`, if it takes one: most of a tape's start (the process, its
    cassette, its port) is then no longer that test's wait. While `beside` (this test's tape) runs, only a
    tape of another cassette is started; one of the same cassette waits for this test's recording."""
    following = item.stash.get(_NEXT, None)
    config = item.config
    if following is None or config.stash[_SETTINGS]["outer"] or "mcp_tape" not in following.fixturenames:
        return
    ahead = config.stash.get(_AHEAD, None)
    if ahead is not None and ahead[0] == following.nodeid:
        return  # started already
    _end_ahead(config)
    try:
        tape = _tape_for(following)
        if beside is not None and tape.cassette.resolve() == beside.cassette.resolve():
            return
        tape.spawn()
    except (_BadMarker, TapeError, OSError, TypeError, ValueError):
        return  # the fixture meets the same again, and says so
    config.stash[_AHEAD] = (following.nodeid, _variables(), tape)


def _taken_ahead(item, wanted):
    """The tape started ahead for `item`, if it is `wanted`'s like and nothing mcp-tape reads has changed since;
    any other tape started ahead is ended, unused (its reports are not kept)."""
    ahead = item.config.stash.get(_AHEAD, None)
    if ahead is None:
        return None
    del item.config.stash[_AHEAD]
    nodeid, environment, tape = ahead
    if nodeid == item.nodeid and tape.settings() == wanted.settings() and environment == _variables():
        return tape
    _end_unused(tape)
    return None


def _end_unused(tape):
    try:
        tape.stop(passed=False)
    except TapeError:
        pass


def _end_ahead(config):
    """Ends the tape started ahead, if there is one, unused."""
    ahead = config.stash.get(_AHEAD, None)
    if ahead is not None:
        del config.stash[_AHEAD]
        _end_unused(ahead[2])


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    item.stash[_NEXT] = nextitem
    return (yield)


@pytest.fixture
def mcp_tape(request):
    """The URL of this test's tape (also in MCP_TAPE_URL and MCP_PLATFORM_ENDPOINT while the test runs)."""
    settings = request.config.stash[_SETTINGS]
    try:
        if settings["outer"]:
            ignored = sorted(set(_marker_options(request.node)) - {"cassette"})
            if ignored:
                request.node.warn(pytest.PytestWarning(
                    f"mcp_tape marker: {', '.join(ignored)} ignored under `mcp-tape test`, whose one tape serves "
                    "every test with its own settings"))
        else:
            wanted = _tape_for(request.node)
    except _BadMarker as error:
        pytest.fail(str(error), pytrace=False)
    if settings["outer"]:
        yield settings["outer"]
        return
    try:
        tape = _taken_ahead(request.node, wanted) or wanted
        url = tape.start()
    except TapeError as error:
        pytest.fail(f"mcp-tape: {error}", pytrace=False)
    request.node.stash[_TAPE] = tape
    _start_ahead(request.node, beside=tape)
    saved = {name: os.environ.get(name) for name in _TEST_VARIABLES}
    os.environ.update(dict.fromkeys(_TEST_VARIABLES, url))
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


@pytest.fixture
def mcp_tape_model(mcp_tape):
    """`mcp_tape_model("openai")`: the base URL of the agent's model `openai` on this test's tape, for its client
    in place of the API's own."""
    return functools.partial(model_url, mcp_tape)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    try:
        result = yield
    except BaseException:
        # Read after the test body: a test may have taken the tape there (request.getfixturevalue).
        tape = item.stash.get(_TAPE, None)
        if tape is not None:
            try:
                misses = tape.stop(passed=False)
                item.stash[_CASES] = tape.cases
            except TapeError:
                misses = []  # the test's own failure is the one to show
            if misses:
                # Often the failure is the client's error for the miss: the miss goes first (see makereport).
                item.stash[_MISSES] = tape.describe_misses()
        _start_ahead(item)
        raise
    tape = item.stash.get(_TAPE, None)
    misses, failure = [], None
    if tape is not None:
        try:
            misses = tape.stop(passed=True)
            item.stash[_CASES] = tape.cases
        except TapeError as error:
            failure = f"mcp-tape: {error}"
    # After this test's tape has ended: a cassette it recorded is in place for the next test to read.
    _start_ahead(item)
    if failure:
        # Outside the except block: the failure is the message, with no traceback chained to it.
        pytest.fail(failure, pytrace=False)
    if misses:
        pytest.fail(tape.describe_misses(), pytrace=False)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    misses = item.stash.get(_MISSES, None)
    if misses and report.when == "call" and report.failed:
        # What missed is the first thing a person reads; the test's own traceback follows.
        report.longrepr = f"{misses}\n\n{report.longreprtext}"
    cases = item.stash.get(_CASES, None)
    if cases is not None and report.when == "call" and github.wanted():
        report.user_properties.append((_GITHUB_PROPERTY, json.dumps(github.rows(cases))))
    return report


def pytest_runtest_logreport(report):
    """Gathers what each test's tape tells GitHub: in the one process, or in xdist's controller."""
    if report.when != "call":
        return
    for name, value in report.user_properties:
        if name == _GITHUB_PROPERTY:
            path, line, _ = report.location
            _TOLD.append((report.nodeid, path, (line or 0) + 1, json.loads(value)))


def pytest_terminal_summary(terminalreporter, config):
    """Under GitHub Actions: each miss as an annotation at its test, and the session's section of the step
    summary (where the session's reports were gathered: not in an xdist worker)."""
    if hasattr(config, "workerinput") or not _TOLD:
        return
    if os.environ.get(github.ACTIONS_VARIABLE) == "true":
        for test, path, line, found in _TOLD:
            for annotation in github.annotations(test, path, line, found):
                terminalreporter.write_line(annotation)
    if os.environ.get(github.SUMMARY_VARIABLE):
        try:
            github.append_summary(github.summary([(test, found) for test, _, _, found in _TOLD]))
        except OSError as error:
            terminalreporter.write_line(f"mcp-tape: the GitHub step summary was not written: {error}")


def pytest_sessionfinish(session):
    _end_ahead(session.config)  # started for a test that never ran (the session stopped first)
    end_idle_tapes()  # every tape server ended before the session does
    settings = session.config.stash.get(_SETTINGS, None)
    # Under xdist the workers write the pages and the controller (no workerinput) the index.
    if settings is None or settings["html"] is None or hasattr(session.config, "workerinput"):
        return
    _write_index(settings["html"])


def _write_index(directory):
    """`index.html` under `directory`: each test's page with its verdict, failed first."""
    pages = []
    for page in sorted(Path(directory).rglob("*.html")):
        if page.name == "index.html" and page.parent == Path(directory):
            continue
        head = page.read_text(errors="replace")[:4096]
        title = re.search(r"<title>mcp-tape run report(?: of (.*?))?: (passed|failed)</title>", head, re.S)
        named, verdict = (title.group(1) or str(page), title.group(2)) if title else (str(page), "unknown")
        pages.append((verdict != "failed", html.unescape(named), verdict, page.relative_to(directory).as_posix()))
    rows = "\n".join(
        f'<li class="{verdict}"><a href="{html.escape(link)}">{html.escape(name)}</a>: {verdict}</li>'
        for _, name, verdict, link in sorted(pages)
    )
    failed = sum(1 for passed, *_ in pages if not passed)
    Path(directory, "index.html").write_text(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>mcp-tape: "
        f"{len(pages)} tests, {failed} failed</title></head><body>\n<h1>mcp-tape: {len(pages)} tests, {failed} "
        f"failed</h1>\n<ul id=\"tests\">\n{rows}\n</ul>\n</body></html>\n"
    )
