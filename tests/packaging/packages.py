"""The packages a person installs, tried as that person would, from the
wheel and tarballs packaging/build.sh made of this checkout:

- a fresh venv with no Rust on PATH installs the wheel (and the pinned SDK
  and pytest): `mcp-tape --version`, `python -m mcp_tape --version`; the
  pytest example records a cassette per test with `--mcp-tape-mode once`
  from a fixture upstream (tests/interop/agent365_upstream.py), replays with
  the upstream stopped, fails only the test whose request misses (the miss in
  its failure text), runs under `pytest -n 2` and under `mcp-tape test`; a
  recording mode never writes the cassette of a failing test; the README's
  pytest example, copied as written, passes under `pytest -W error` against a
  quick-start server (quickstart_server.py) and records into the path the
  README names; tests whose ids differ only in a class, dots, slashes or
  brackets, and one taking the tape through `getfixturevalue`, each record a
  cassette of their own (naming_test.py);
- a fresh npm project installs both tarballs and runs the vitest example
  through `mcp-tape/vitest` the same way;
- the README's install-from-checkout lines (pip, npm), run as written, give a
  working `mcp-tape` and `npx mcp-tape`;
- headless Chromium renders the HTML report of a run with a miss, and the
  DOM shows the miss's tool, pointer and both values.
"""

import argparse
import contextlib
import hashlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT / "tests" / "interop"))

import platforms  # noqa: E402
from running import TIMEOUT_S, must, run  # noqa: E402
from interop import Checks, Daemon  # noqa: E402

UPSTREAM = ROOT / "tests" / "interop" / "agent365_upstream.py"
QUICKSTART = HERE / "quickstart_server.py"
# The scripted OpenAI-compatible model the README's examples record (it calls the offered tool with the
# user's last word), and the key it wants: never in a cassette.
MODEL_SERVER = ROOT / "tests" / "interop" / "model_server.py"
MODEL_KEY = "sk-proj-" + "Readme0Example1Key2" * 3
# What a model miss says when a test asks "Find the rota" where "Find the budget" was recorded.
MODEL_MISS_TEXT = '/messages/0/content (recorded "Find the budget", requested "Find the rota")'
CHANGED_QUESTION = "holiday plans"
MISS_TEXT = 'at /arguments/message: recorded "budget review", sent "holiday plans"'
# A rules file that lets any question through to the mailbox cassette's recording.
LENIENT_RULES = '[[match]]\nserver = "mcp_MailTools"\ntool = "SearchMessages"\nignore = ["/arguments/message"]\n'


@contextlib.contextmanager
def placed(project, files, leftovers=()):
    """`files` (name in `project`: a file to copy, or text) put there for one check, then taken away
    with the directories the check leaves (`leftovers`), whatever the check did."""
    for name, content in files.items():
        if isinstance(content, Path):
            shutil.copy(content, project / name)
        else:
            (project / name).write_text(content)
    try:
        yield
    finally:
        for name in files:
            (project / name).unlink()
        for leftover in leftovers:
            shutil.rmtree(leftover, ignore_errors=True)


def digest(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def files_under(directory):
    return sorted(str(p.relative_to(directory)) for p in Path(directory).rglob("*") if p.is_file())


class Upstream:
    """The fixture MCP servers (or the quick-start server, or the scripted model server with `extra` its
    arguments), started and stopped as a test run needs them."""

    def __init__(self, python, script=UPSTREAM, extra=()):
        self.python = python
        self.command = [python, str(script)] + (["--no-auth", "--port", "0"] if script == UPSTREAM else [])
        self.command += list(extra)
        self.daemon = None

    def __enter__(self):
        self.daemon = Daemon(None, [], command=self.command)
        return self.daemon.base

    def __exit__(self, *exc):
        self.daemon.stop()


def assert_both_sides_on_the_tape(cassette):
    """`cassette` holds exchanges with the MCP server and with the model, and not the model's key."""
    with contextlib.closing(sqlite3.connect(f"file:{cassette}?mode=ro", uri=True)) as db:
        mcp = db.execute("SELECT count(*) FROM exchange WHERE method = 'tools/call'").fetchone()[0]
        model = db.execute("SELECT count(*) FROM model_exchange").fetchone()[0]
    assert (mcp, model) == (1, 1), (mcp, model)
    assert MODEL_KEY.encode() not in Path(cassette).read_bytes(), "the model's key is in the cassette"


def readme_pytest_example():
    """The README's pytest example, as a person copies it: the first Python block after "In a pytest suite"."""
    text = (ROOT / "README.md").read_text()
    found = re.search(r"```python\n(.*?)```", text[text.index("In a pytest suite"):], re.S)
    assert found, "the README has no pytest example"
    return found.group(1)


def readme_vitest_example():
    """The README's vitest example, as a person copies it: the first JavaScript block after "In a vitest suite"."""
    text = (ROOT / "README.md").read_text()
    found = re.search(r"```js\n(.*?)```", text[text.index("In a vitest suite"):], re.S)
    assert found, "the README has no vitest example"
    return found.group(1)


def clean_env(extra_path, **variables):
    """This machine's environment (its proxy and certificate settings, as a person's shell has them) with
    no Rust and no mcp-tape settings: PATH holds only `extra_path` and the system's directories."""
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(("CARGO", "RUST", "MCP_TAPE", "MCP_PLATFORM", "VIRTUAL_ENV"))}
    env["PATH"] = os.pathsep.join([*extra_path, "/usr/bin", "/bin"])
    env.update(variables)
    for tool in ("cargo", "rustc"):
        assert shutil.which(tool, path=env["PATH"]) is None, f"{tool} is on the clean PATH"
    return env


def python_package(args, work, checks):
    wheels = sorted(Path(args.dist).glob("mcp_tape-*manylinux_2_17_x86_64*.whl"))
    assert len(wheels) == 1, f"one wheel expected in {args.dist}: {wheels}"
    wheel = wheels[0]
    venv = work / "venv"
    env = clean_env([str(venv / "bin")])
    project = work / "pytest-project"
    cassettes = project / "cassettes"

    def installs():
        assert "manylinux_2_17_x86_64" in wheel.name, wheel.name
        must([sys.executable, "-m", "venv", str(venv)], work, env)
        must([str(venv / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check", str(wheel),
              "-r", str(HERE / "requirements.txt")], work, env)
        version = must(["mcp-tape", "--version"], work, env).strip()
        assert version.startswith("mcp-tape "), version
        assert shutil.which("mcp-tape", path=env["PATH"]) == str(venv / "bin" / "mcp-tape")
        assert must(["python", "-m", "mcp_tape", "--version"], work, env).strip() == version

    checks.run(f"wheel {wheel.name}: a fresh venv with no Rust on PATH installs it; "
               "mcp-tape --version and python -m mcp_tape --version", installs)

    project.mkdir()
    shutil.copy(ROOT / "examples" / "pytest" / "test_agent.py", project)
    shutil.copy(HERE / "failing_test.py", project / "test_failing.py")
    pytest = ["python", "-m", "pytest", "-p", "no:cacheprovider", "-q"]
    example = [*pytest, "test_agent.py"]
    failing = [*pytest, "test_failing.py"]
    failing_cassette = cassettes / "test_failing" / "test_records_then_fails.sqlite"

    with Upstream(args.python) as upstream:
        def records_once():
            output = must([*example, "--mcp-tape-mode", "once", "--mcp-tape-upstream", upstream], project, env)
            assert "3 passed" in output, output
            assert files_under(cassettes) == [
                "test_agent/test_the_agent_books_a_big_enough_room.sqlite",
                "test_agent/test_the_agent_reads_the_users_profile.sqlite",
                "test_agent/test_the_agent_searches_the_mailbox.sqlite",
            ], files_under(cassettes)

        checks.run("pytest plugin: --mcp-tape-mode once records a cassette per test from the upstream", records_once)

        def failing_tests_record_nothing():
            recording = ["--mcp-tape-mode", "all", "--mcp-tape-upstream", upstream]
            code, output = run([*failing, *recording], project, env)
            assert code == 1 and "1 failed" in output, output
            assert not failing_cassette.exists(), "a failing test's recording was kept"
            must([*failing, *recording], project, dict(env, HARNESS_PASS="1"))
            before = digest(failing_cassette)
            for mode in ("all", "missing"):
                changed = dict(env, HARNESS_SELECT="displayName")
                code, output = run([*failing, "--mcp-tape-mode", mode, "--mcp-tape-upstream", upstream],
                                   project, changed)
                assert code == 1 and "1 failed" in output, output
                assert digest(failing_cassette) == before, f"--mcp-tape-mode {mode} changed a failing test's cassette"
            assert files_under(cassettes / "test_failing") == ["test_records_then_fails.sqlite"]

        checks.run("pytest plugin: recording modes (all, missing) never write the cassette of a failing test",
                   failing_tests_record_nothing)

    def replays():
        output = must(example, project, env)
        assert "3 passed" in output, output

    checks.run("pytest plugin: the recordings replay with the upstream stopped (3 passed)", replays)

    mailbox = cassettes / "test_agent" / "test_the_agent_searches_the_mailbox.sqlite"
    html = project / "html" / "test_agent" / "test_the_agent_searches_the_mailbox.html"

    def a_miss_fails_its_test():
        before = digest(mailbox)
        code, output = run([*example, "--mcp-tape-html", "html"], project,
                           dict(env, AGENT_QUESTION=CHANGED_QUESTION))
        assert code == 1, output
        assert "1 failed, 2 passed" in output, output
        assert "FAILED test_agent.py::test_the_agent_searches_the_mailbox" in output, output
        assert "tools/call SearchMessages on mcp_MailTools" in output, output
        assert MISS_TEXT in output, output
        assert digest(mailbox) == before
        assert html.is_file(), files_under(project / "html")

    checks.run("pytest plugin: a miss fails only its test, the tool, pointer and both values in the failure text",
               a_miss_fails_its_test)

    def tells_github():
        summary = work / "pytest-step-summary.md"
        github = dict(env, AGENT_QUESTION=CHANGED_QUESTION, GITHUB_ACTIONS="true", GITHUB_STEP_SUMMARY=str(summary))
        test = "test_agent.py::test_the_agent_searches_the_mailbox"
        for extra in ([], ["-n", "2"]):
            summary.write_text("")
            code, output = run([*example, *extra], project, github)
            assert code == 1, output
            annotations = [line for line in output.splitlines() if line.startswith("::")]
            assert len(annotations) == 1, output
            assert annotations[0].startswith("::error file=test_agent.py,line="), annotations
            assert f",title=mcp-tape miss in {test.replace(':', '%3A')}::mcp_MailTools tools/call SearchMessages " \
                   "missed ×1: mcp-tape: no recorded answer" in annotations[0], annotations
            written = summary.read_text()
            assert written.startswith("### mcp-tape: 3 tests with a tape, 1 with misses\n"), written
            rows = [line for line in written.splitlines() if line.startswith("| ")]
            assert len(rows) == 2 and rows[1].startswith(
                f"| {test.replace('_', chr(92) + '_')} | miss | mcp\\_MailTools tools/call SearchMessages | 1 | "), rows
            assert "/arguments/message" in rows[1] and "budget review" in rows[1], rows
        assert "::error" not in must(example, project, dict(env, GITHUB_ACTIONS="true")), "a passing run annotates"

    checks.run("pytest plugin: under GitHub Actions a miss is an ::error annotation at its test and the step "
               "summary lists it with the test (also under pytest -n 2)", tells_github)

    def under_xdist():
        output = must([*example, "-n", "2"], project, env)
        assert "3 passed" in output, output

    checks.run("pytest plugin: pytest -n 2 (xdist), a tape per test in each worker: 3 passed", under_xdist)

    def misses_come_first():
        code, output = run([*example, "-k", "mailbox"], project, dict(env, AGENT_QUESTION=CHANGED_QUESTION))
        assert code == 1, output
        failure = output.split("test_the_agent_searches_the_mailbox ___", 1)[1].lstrip("_ \n")
        assert failure.startswith("mcp-tape: 1 request(s) missed the recordings of"), failure[:800]

    checks.run("pytest plugin: the miss is the first line of the failure, the traceback after it",
               misses_come_first)

    def no_cassette_no_pass():
        with placed(project, {"test_unrecorded.py": HERE / "unrecorded_test.py"}, [cassettes / "test_unrecorded"]):
            code, output = run([*pytest, "test_unrecorded.py"], project, env)
            assert code == 1 and "2 failed" in output, output
            for test in ("test_lists_tools", "test_swallows_tool_errors"):
                absent = cassettes / "test_unrecorded" / f"{test}.sqlite"
                assert f"mcp-tape: no cassette at {absent}" in output, output
                assert not absent.exists()

    checks.run("pytest plugin: tests with no cassette fail in replay mode naming it (one only lists tools, one "
               "never looks at isError)", no_cassette_no_pass)

    def once_without_upstream():
        output = must([*example, "--mcp-tape-mode", "once"], project, env)
        assert "3 passed" in output, output
        aside = work / "mailbox.sqlite"
        shutil.move(mailbox, aside)
        try:
            code, output = run([*example, "--mcp-tape-mode", "once"], project, env)
            assert code == 1 and "1 failed, 2 passed" in output, output
            assert f"mcp-tape: no cassette at {mailbox}" in output, output
            assert not mailbox.exists()
        finally:
            shutil.move(aside, mailbox)

    checks.run("pytest plugin: --mcp-tape-mode once with no upstream replays every cassette there (3 passed); with "
               "one missing, that test alone fails naming it", once_without_upstream)

    def marker_options_per_test():
        pages = project / "marker-html"
        files = {"test_marker.py": HERE / "marker_test.py", "lenient.toml": LENIENT_RULES}
        with placed(project, files, [pages]):
            output = must([*pytest, "test_marker.py", "--mcp-tape-html", "marker-html"], project, env)
            assert "3 passed" in output, output
            assert files_under(pages) == [
                "index.html",
                "test_marker/test_any_question_with_lenient_rules.html",
                "test_marker/test_profile_as_recorded.html",
                "test_marker/test_profile_when_the_directory_fails.html",
            ], files_under(pages)
            profile = cassettes / "test_agent" / "test_the_agent_reads_the_users_profile.sqlite"
            for test in ("test_profile_as_recorded", "test_profile_when_the_directory_fails"):
                page = (pages / "test_marker" / f"{test}.html").read_text()
                assert f"test_marker.py::{test} ({profile})" in page, page[:2000]
            index = (pages / "index.html").read_text()
            assert "3 tests, 0 failed" in index and index.count("<li") == 3, index

    checks.run("pytest plugin: the marker's faults and rules act on their test alone; two tests on one cassette get "
               "two HTML pages naming test and cassette, and an index", marker_options_per_test)

    def reports_feed_rules_suggest():
        reports = project / "reports"
        code, output = run([*example, "--mcp-tape-report", "reports"], project,
                           dict(env, AGENT_QUESTION=CHANGED_QUESTION))
        assert code == 1, output
        assert files_under(reports) == [f"test_agent/{test.stem}.json" for test in sorted(
            (cassettes / "test_agent").glob("*.sqlite"))], files_under(reports)
        suggested = must(["mcp-tape", "rules", "suggest", "cassettes", "--from", "reports"], project, env)
        assert 'tool = "SearchMessages"\nignore = ["/arguments/message"]' in suggested, suggested
        shutil.rmtree(reports)

    checks.run("pytest plugin: --mcp-tape-report DIR writes each test's report; rules suggest --from DIR reads them",
               reports_feed_rules_suggest)

    def under_mcp_tape_test():
        junit = work / "pytest-junit.xml"
        # The plugin's layout, cassettes/<module>/<test>.sqlite, read from the top directory.
        output = must(["mcp-tape", "test", "cassettes", "--junit", str(junit), "--", *example],
                      project, env)
        # The one tape answered all nine requests: no test started a tape of its own.
        assert "3 passed" in output, output
        assert "9 requests: 9 answered from recordings, 0 by the mock, 0 missed" in output, output
        assert 'name="tools/call SearchMessages"' in junit.read_text()

    checks.run("pytest plugin under mcp-tape test -- pytest: the fixture yields the one tape", under_mcp_tape_test)

    readme = work / "readme-project"
    readme.mkdir()
    (readme / "test_search.py").write_text(readme_pytest_example())
    shutil.copy(HERE / "naming_test.py", readme / "test_naming.py")
    strict = ["python", "-m", "pytest", "-p", "no:cacheprovider", "-q", "-W", "error"]
    # An id with capitals ends in `~` and the first 8 hex digits of its SHA-256, so that ids differing only in
    # case never share a file where case does not count; one past 240 bytes is cut on a character and ends
    # in `-` and the first 16 (docs/ci.md).
    def by_case(test_id):
        return f"{test_id}~{hashlib.sha256(test_id.encode()).hexdigest()[:8]}"
    long_cjk = "test_" + "測" * 90
    long_cjk_name = "test_" + "測" * 72 + "-" + hashlib.sha256(long_cjk.encode()).hexdigest()[:16]
    naming_cassettes = [
        by_case("TestPair.test_one"), by_case("TestPair.test_two"), "test_p[%2F]", "test_p[..]", "test_p[.]",
        "test_p[1.5]", "test_p[1.7]", "test_p[a%2Fb]", "test_p[a_b]", "test_p[value7]", "test_taken_in_the_body",
        by_case("test_q[Case]"), "test_q[case]", long_cjk_name,
    ]

    with Upstream(args.python, QUICKSTART) as quickstart, \
            Upstream(args.python, MODEL_SERVER, ["--key", MODEL_KEY]) as model:
        def readme_example_records():
            output = must([*strict, "test_search.py", "--mcp-tape-mode", "once", "--mcp-tape-upstream",
                           f"{quickstart}/mcp", "--mcp-tape-model", f"openai={model}/v1"], readme,
                          dict(env, OPENAI_API_KEY=MODEL_KEY))
            assert "1 passed" in output, output
            assert files_under(readme / "cassettes") == ["test_search/test_the_agent_searches.sqlite"], \
                files_under(readme / "cassettes")
            assert_both_sides_on_the_tape(readme / "cassettes" / "test_search" / "test_the_agent_searches.sqlite")

        checks.run("README's pytest example, copied as written: under pytest -W error it records "
                   "cassettes/test_search/test_the_agent_searches.sqlite, as the README says, the MCP server's "
                   "and the model's exchanges on it and the model's key nowhere", readme_example_records)

        def each_test_its_own_cassette():
            output = must([*strict, "test_naming.py", "--mcp-tape-mode", "once", "--mcp-tape-upstream",
                           f"{quickstart}/mcp"], readme, env)
            assert "14 passed" in output, output
            assert files_under(readme / "cassettes" / "test_naming") == sorted(
                f"{name}.sqlite" for name in naming_cassettes), files_under(readme / "cassettes")
            # A cassette recorded under the name earlier versions gave (no `~` digest) is still found.
            named = readme / "cassettes" / "test_naming" / f"{by_case('TestPair.test_two')}.sqlite"
            named.rename(named.with_name("TestPair.test_two.sqlite"))
            output = must([*strict, "test_naming.py", "-k", "test_two"], readme, env)
            assert "1 passed" in output, output
            (named.with_name("TestPair.test_two.sqlite")).rename(named)

        checks.run("pytest plugin: a class's tests, parameters with dots, slashes, brackets and dots alone, ids "
                   "differing only in case, a 270-byte CJK name, and a test taking the tape through getfixturevalue "
                   "each record a cassette of their own; one under the earlier name is still found",
                   each_test_its_own_cassette)

        def ahead_tapes():
            shutil.copy(HERE / "ahead_test.py", readme / "test_ahead.py")
            record = [*strict, "test_ahead.py", "--mcp-tape-mode", "once", "--mcp-tape-upstream",
                      f"{quickstart}/mcp", "--mcp-tape-html", "ahead-html", "--mcp-tape-report", "ahead-reports"]
            output = must(record, readme, env)
            assert "3 passed, 1 skipped" in output, output
            ran = ["test_after_the_skipped_one", "test_records_the_shared_cassette",
                   "test_replays_the_shared_cassette"]
            assert files_under(readme / "ahead-html") == ["index.html", *(f"test_ahead/{t}.html" for t in ran)], \
                files_under(readme / "ahead-html")
            assert files_under(readme / "ahead-reports") == [f"test_ahead/{t}.json" for t in ran], \
                files_under(readme / "ahead-reports")
            # No recording was left half made (a tape started for the skipped test records into a file of its own).
            assert files_under(readme / "cassettes" / "shared") == ["one.sqlite"], files_under(readme / "cassettes")
            assert files_under(readme / "cassettes" / "test_ahead") == ["test_after_the_skipped_one.sqlite"], \
                files_under(readme / "cassettes")
            second = json.loads((readme / "ahead-reports" / "test_ahead" / "test_replays_the_shared_cassette.json")
                                .read_text())
            assert sum(case["forwarded"] for case in second["cases"]) == 0, second["cases"]
            assert any(case["method"] == "tools/list" and case["hits"] for case in second["cases"]), second["cases"]
            # -x: the first test fails with the next one's tape started; the session's end ends it.
            shutil.rmtree(readme / "ahead-html")
            code, output = run([*record, "-x"], readme, dict(env, AHEAD_FAIL="1"))
            assert code == 1 and "1 failed" in output, output
            assert files_under(readme / "ahead-html") == ["index.html", "test_ahead/test_records_the_shared_cassette.html"], \
                files_under(readme / "ahead-html")
            assert files_under(readme / "cassettes" / "shared") == ["one.sqlite"], files_under(readme / "cassettes")
            shutil.rmtree(readme / "ahead-html")
            shutil.rmtree(readme / "ahead-reports")

        checks.run("pytest plugin: a tape started ahead of the next test: of two tests on one cassette the second "
                   "replays what the first recorded (0 forwarded); one started for a skipped test, or for the test "
                   "after the one -x stopped at, ends unused, with no page, report or recording left", ahead_tapes)

    def readme_example_replays():
        output = must([*strict, "test_search.py", "test_naming.py"], readme, env)
        assert "15 passed" in output, output

    checks.run("README's pytest example and the naming tests replay under pytest -W error with the server stopped "
               "(15 passed)", readme_example_replays)

    def model_miss_fails_its_test():
        # The same test asking the model something it was never asked: its recording does not answer.
        asked = readme_pytest_example().replace("Find the budget", "Find the rota")
        with placed(readme, {"test_search.py": asked}):
            code, output = run([*strict, "test_search.py"], readme, env)
        (readme / "test_search.py").write_text(readme_pytest_example())
        assert code == 1 and "1 failed" in output, output
        assert MODEL_MISS_TEXT in output, output

    checks.run("pytest plugin: a request to the model its cassette does not answer fails the test, the pointer and "
               "both values in the failure text", model_miss_fails_its_test)

    def unkept_recording_fails():
        shutil.copy(HERE / "unkept_test.py", readme / "test_unkept.py")
        # The quick-start server has stopped: every request record forwards fails upstream.
        code, output = run([*strict, "test_unkept.py", "--mcp-tape-mode", "all", "--mcp-tape-upstream",
                            f"{quickstart}/mcp"], readme, env)
        assert code == 1 and "1 failed" in output, output
        assert "its recording was not kept" in output and "Connection refused" in output, output
        unkept = readme / "cassettes" / "test_unkept" / "test_passes_whatever_the_server_says.sqlite"
        assert not unkept.exists(), files_under(readme / "cassettes")

    checks.run("pytest plugin: a passing test whose recording cannot be kept (its upstream gone) fails, saying why",
               unkept_recording_fails)

    checks.run("headless Chromium renders the pytest miss's HTML report: the DOM shows tool, pointer, both values",
               lambda: browser_shows_the_miss(args.chromium, html, work / "chromium-py"))


def node_package(args, work, checks):
    tarballs = {name: sorted(Path(args.dist).glob(pattern)) for name, pattern in
                [("main", "mcp-tape-[0-9]*.tgz"), ("platform", "mcp-tape-linux-x64-[0-9]*.tgz")]}
    assert all(len(found) == 1 for found in tarballs.values()), tarballs
    project = work / "npm-project"
    project.mkdir()
    shutil.copy(HERE / "package.json", project)
    for name in ("agent.test.mjs", "vitest.config.mjs"):
        shutil.copy(ROOT / "examples" / "vitest" / name, project)
    env = clean_env([str(Path(args.node).parent), str(project / "node_modules" / ".bin")], NO_COLOR="1")
    vitest = [args.node, "node_modules/vitest/vitest.mjs", "run"]
    cassettes = project / "cassettes"

    def installs():
        must(["npm", "install", "--no-audit", "--no-fund", *(str(t[0]) for t in tarballs.values())], project, env)
        version = must(["npx", "--no-install", "mcp-tape", "--version"], project, env).strip()
        assert version.startswith("mcp-tape "), version
        binary = project / "node_modules" / "@mcp-tape" / "linux-x64" / "bin" / "mcp-tape"
        assert os.access(binary, os.X_OK), binary

    checks.run("npm: a fresh project installs both tarballs; npx mcp-tape --version runs the platform's binary",
               installs)

    def test_paths_stay_apart_and_inside():
        # Each name is a describe block holding the test "t"; the file is agent.test.mjs.
        names = ["..", ".", "/", "a/b", "a_b", "1.5", "1.7", "x" * 300, "Case", "case", "測" * 90]
        script = ("import { testPath } from 'mcp-tape/vitest'; import { resolve, sep } from 'node:path';"
                  "const names = JSON.parse(process.argv[1]); const file = {name: 'agent.test.mjs'};"
                  "console.log(JSON.stringify(names.map((name) => { const suite = {name, suite: file, file};"
                  " return testPath('agent.test.mjs', {name: 't', suite, file}); })));")
        paths = json.loads(must([args.node, "--input-type=module", "-e", script, json.dumps(names)], project, env))
        assert len({path.lower() for path in paths}) == len(names), paths
        root = Path(project / "cassettes").resolve()
        for path in paths:
            placed = (root / f"{path}.sqlite").resolve()
            assert placed.is_relative_to(root / "agent"), (path, placed)
            assert len(placed.parent.name) <= 160 and placed.name == "t.sqlite", path
            assert len(f"{placed.parent.name}.sqlite-journal".encode()) <= 255, path

    checks.run("vitest helper: testPath gives describe blocks named '..', '.', '/', 'a/b' and 'a_b', dotted, "
               "long, CJK and differing only in case, each a cassette of its own under cassettes/<file>/ (apart "
               "where case does not count; at most 255 bytes with SQLite's suffixes)", test_paths_stay_apart_and_inside)

    def alone_says_what_is_missing():
        alone = work / "npm-alone"
        alone.mkdir()
        (alone / "package.json").write_text('{"name": "alone", "private": true, "type": "module"}\n')
        code, output = run(["npm", "install", "--no-audit", "--no-fund", "--save-dev", str(tarballs["main"][0]),
                            "--omit=optional"], alone, env)
        assert code != 0, output
        assert "npm install --save-dev @mcp-tape/linux-x64@" in output, output
        assert "npm install --save-dev ./dist/mcp-tape-linux-x64-" in output, output

    checks.run("npm: the main tarball installed without its platform package fails, saying which package to add",
               alone_says_what_is_missing)

    with Upstream(args.python) as upstream:
        def records_once():
            output = must(vitest, project, dict(env, MCP_TAPE_MODE="once", MCP_TAPE_UPSTREAM=upstream))
            assert "3 passed" in output, output
            recorded = files_under(cassettes)
            assert recorded == ["agent/the_agent_books_a_big_enough_room.sqlite",
                                "agent/the_agent_reads_the_user%27s_profile.sqlite",
                                "agent/the_agent_searches_the_mailbox.sqlite"], recorded

        checks.run("vitest helper: MCP_TAPE_MODE=once records a cassette per test from the upstream", records_once)

        def names_apart_by_case_and_bytes():
            with placed(project, {"naming.test.mjs": HERE / "naming.test.mjs"}, [cassettes / "naming"]):
                naming = [*vitest, "naming.test.mjs"]
                output = must(naming, project, dict(env, MCP_TAPE_MODE="once", MCP_TAPE_UPSTREAM=upstream))
                assert "3 passed" in output, output
                # Capitals: `~` and 8 hex digits of the name's SHA-256; past 240 bytes: cut, `-` and 16 (docs/ci.md).
                capital = f"Lists_tools~{hashlib.sha256('Lists tools'.encode()).hexdigest()[:8]}"
                cjk = "測" * 90
                cut = "測" * 74 + "-" + hashlib.sha256(cjk.encode()).hexdigest()[:16]
                expected = sorted(f"{name}.sqlite" for name in [capital, "lists_tools", cut])
                assert files_under(cassettes / "naming") == expected, files_under(cassettes / "naming")
                # A cassette under the name earlier versions gave (no `~` digest) is still found, in replay.
                (cassettes / "naming" / f"{capital}.sqlite").rename(cassettes / "naming" / "Lists_tools.sqlite")
                output = must([*naming, "-t", "Lists tools"], project, env)
                assert "1 passed" in output, output

        checks.run("vitest helper: tests named 'Lists tools' and 'lists tools' record two cassettes that stay apart "
                   "where case does not count, one named with 90 CJK characters a cassette cut to fit 255 bytes; "
                   "one recorded under the earlier name is still found", names_apart_by_case_and_bytes)

        def failing_tests_record_nothing():
            with placed(project, {"failing.test.mjs": HERE / "failing.test.mjs"}, [cassettes / "failing"]):
                failing = [*vitest, "failing.test.mjs"]
                cassette = cassettes / "failing" / "records_then_fails.sqlite"
                recording = dict(env, MCP_TAPE_MODE="all", MCP_TAPE_UPSTREAM=upstream)
                code, output = run(failing, project, recording)
                assert code == 1 and "1 failed" in output, output
                assert not cassette.exists(), "a failing test's recording was kept"
                must(failing, project, dict(recording, HARNESS_PASS="1"))
                before = digest(cassette)
                for mode in ("all", "missing"):
                    code, output = run(failing, project, dict(recording, MCP_TAPE_MODE=mode, HARNESS_SELECT="x"))
                    assert code == 1 and "1 failed" in output, output
                    assert digest(cassette) == before, f"MCP_TAPE_MODE={mode} changed a failing test's cassette"

        checks.run("vitest helper: recording modes (all, missing) never write the cassette of a failing test",
                   failing_tests_record_nothing)

        def turns_of_tapes():
            with placed(project, {"turns.test.mjs": HERE / "turns.test.mjs"}, [cassettes / "turns"]):
                turns = [*vitest, "turns.test.mjs"]
                recording = dict(env, MCP_TAPE_MODE="once", MCP_TAPE_UPSTREAM=upstream, MCP_TAPE_HTML="turns-html",
                                 MCP_TAPE_REPORTS="turns-reports")
                output = must(turns, project, recording)
                assert "3 passed" in output and "1 skipped" in output, output
                ran = ["records_the_shared_cassette", "replays_the_shared_cassette", "runs_after_the_skipped_one"]
                assert files_under(project / "turns-html") == ["index.html", *(f"turns/{t}.html" for t in ran)], \
                    files_under(project / "turns-html")
                assert files_under(project / "turns-reports") == [f"turns/{t}.json" for t in ran], \
                    files_under(project / "turns-reports")
                # No recording left half made: one cassette, the file's.
                assert files_under(cassettes / "turns") == ["shared.sqlite"], files_under(cassettes / "turns")
                second = json.loads((project / "turns-reports" / "turns" / "replays_the_shared_cassette.json")
                                    .read_text())
                assert sum(case["forwarded"] for case in second["cases"]) == 0, second["cases"]
                assert any(case["method"] == "tools/list" and case["hits"] for case in second["cases"]), \
                    second["cases"]
                # --bail: the first test fails, and the run stops before the second's tape.
                shutil.rmtree(project / "turns-html")
                code, output = run([*turns, "--bail", "1"], project, dict(recording, TURNS_FAIL="1"))
                assert code == 1 and "1 failed" in output, output
                first = "turns/records_the_shared_cassette.html"
                assert files_under(project / "turns-html") == ["index.html", first], files_under(project / "turns-html")
                assert files_under(cassettes / "turns") == ["shared.sqlite"], files_under(cassettes / "turns")
                shutil.rmtree(project / "turns-html")
                shutil.rmtree(project / "turns-reports")

        checks.run("vitest helper: tapes taking turns: of two tests on the file's cassette the second replays "
                   "what the first recorded (0 forwarded); after a failure, --bail stops the run before the next "
                   "test's tape, and no page, report or recording of it is left", turns_of_tapes)

    with Upstream(args.python, QUICKSTART) as quickstart, \
            Upstream(args.python, MODEL_SERVER, ["--key", MODEL_KEY]) as model:
        def readme_vitest_example_records():
            with placed(project, {"search.test.mjs": readme_vitest_example()}):
                output = must([*vitest, "search.test.mjs"], project, dict(
                    env, MCP_TAPE_MODE="once", MCP_TAPE_UPSTREAM=f"{quickstart}/mcp",
                    MCP_TAPE_MODEL=f"openai={model}/v1", OPENAI_API_KEY=MODEL_KEY))
                assert "1 passed" in output, output
            assert_both_sides_on_the_tape(cassettes / "search" / "the_agent_searches.sqlite")

        checks.run("README's vitest example, copied as written: MCP_TAPE_MODE=once with MCP_TAPE_MODEL records "
                   "cassettes/search/the_agent_searches.sqlite, the MCP server's and the model's exchanges on it and "
                   "the model's key nowhere", readme_vitest_example_records)

    def readme_vitest_example_replays():
        with placed(project, {"search.test.mjs": readme_vitest_example()}):
            output = must([*vitest, "search.test.mjs"], project, env)
            assert "1 passed" in output, output

    checks.run("README's vitest example replays with both servers stopped and no key", readme_vitest_example_replays)

    def vitest_model_miss_fails_its_test():
        asked = readme_vitest_example().replace("Find the budget", "Find the rota")
        with placed(project, {"search.test.mjs": asked}, [cassettes / "search"]):
            code, output = run([*vitest, "search.test.mjs"], project, env)
        assert code == 1 and "1 failed" in output, output
        assert MODEL_MISS_TEXT in output, output

    checks.run("vitest helper: a request to the model its cassette does not answer fails the test, the pointer and "
               "both values in the error", vitest_model_miss_fails_its_test)

    def replays():
        scratch = work / "vitest-tmp"
        scratch.mkdir()
        output = must(vitest, project, dict(env, TMPDIR=str(scratch)))
        assert "3 passed" in output, output
        # vitest ends its fork workers without their exit handlers: nothing the helper or its tapes
        # write may need one to be removed.
        deadline = time.monotonic() + 10
        while (left := sorted(path.name for path in scratch.iterdir())) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not left, f"left in TMPDIR after the run: {left}"

    checks.run("vitest helper: the recordings replay with the upstream stopped (3 passed) and leave nothing in "
               "TMPDIR", replays)

    def a_miss_fails_its_test():
        before = {p: digest(cassettes / p) for p in files_under(cassettes)}
        code, output = run(vitest, project, dict(env, AGENT_QUESTION=CHANGED_QUESTION, MCP_TAPE_HTML="html"))
        assert code == 1, output
        assert "1 failed" in output and "2 passed" in output, output
        assert "tools/call SearchMessages on mcp_MailTools" in output, output
        assert MISS_TEXT in output, output
        assert {p: digest(cassettes / p) for p in files_under(cassettes)} == before
        pages = project / "html"
        assert len(files_under(pages)) == 4, files_under(pages)
        index = (pages / "index.html").read_text()
        assert "3 tests, 1 failed" in index and index.count("<li") == 3, index
        shutil.rmtree(pages)

    checks.run("vitest helper: a miss fails only its test, the tool, pointer and both values in the error; "
               "MCP_TAPE_HTML writes a page per test and an index",
               a_miss_fails_its_test)

    def tells_github():
        summary = work / "vitest-step-summary.md"
        summary.write_text("")
        github = dict(env, AGENT_QUESTION=CHANGED_QUESTION, GITHUB_ACTIONS="true", GITHUB_STEP_SUMMARY=str(summary))
        code, output = run(vitest, project, github)
        assert code == 1, output
        test = "the agent searches the mailbox"
        # One for the client's error (the tool call's text is the miss), one for the miss, at useTape's line.
        annotations = [line for line in output.splitlines() if line.startswith("::error")
                       and "tools/call SearchMessages on mcp_MailTools" in line]
        assert len(annotations) == 1, output
        assert annotations[0].startswith(f"::error file={project / 'agent.test.mjs'},title=agent.test.mjs > {test},"
                                         "line=15,"), annotations
        written = summary.read_text()
        ours = written[written.index("### mcp-tape: "):]
        assert ours.startswith("### mcp-tape: agent.test.mjs: 3 tests with a tape, 1 with misses\n"), written
        rows = [line for line in ours.splitlines() if line.startswith("| ")]
        assert len(rows) == 2 and rows[1].startswith(
            f"| {test} | miss | mcp\\_MailTools tools/call SearchMessages | 1 | mcp-tape: no recorded answer"), rows

    checks.run("vitest helper: under GitHub Actions a miss is an ::error annotation titled with its test (vitest's "
               "github-actions reporter) and the step summary lists it with the test", tells_github)

    def no_cassette_no_pass():
        with placed(project, {"unrecorded.test.mjs": HERE / "unrecorded.test.mjs"}, [cassettes / "unrecorded"]):
            code, output = run([*vitest, "unrecorded.test.mjs"], project, env)
            assert code == 1 and "1 failed" in output, output
            assert "mcp-tape: no cassette at cassettes/unrecorded/lists_tools.sqlite" in output, output

    checks.run("vitest helper: a test with no cassette that only lists tools fails in replay mode naming it",
               no_cassette_no_pass)

    def options_per_file():
        files = {name: HERE / name for name in ("faulted.test.mjs", "lenient.test.mjs")}
        with placed(project, dict(files, **{"lenient.toml": LENIENT_RULES})):
            output = must([*vitest, "faulted.test.mjs", "lenient.test.mjs", "agent.test.mjs"], project, env)
            assert "5 passed" in output, output

    checks.run("vitest helper: useTape({ faults }) and useTape({ rules }) act on their file's tests alone (the "
               "example's tests on the same cassettes pass as recorded)", options_per_file)

    def declarations():
        with placed(project, {"types_check.ts": HERE / "types_check.ts"}):
            must(["npx", "--no-install", "tsc", "--strict", "--noEmit", "--module", "nodenext", "--moduleResolution",
                  "nodenext", "--target", "es2022", "--lib", "es2022,dom", "types_check.ts"], project, env)

    checks.run("npm: tsc --strict on the README's examples in TypeScript: mcp-tape, mcp-tape/vitest and "
               "mcp-tape/global-setup come with declarations", declarations)

    def under_mcp_tape_test():
        output = must(["npx", "--no-install", "mcp-tape", "test", "cassettes", "--", *vitest],
                      project, env)
        assert "3 passed" in output, output
        # The one tape answered every request: no test started a tape of its own.
        assert re.search(r"mcp-tape: (\d+) requests: \1 answered from recordings, 0 by the mock, 0 missed", output), \
            output

    checks.run("vitest helper under mcp-tape test -- vitest run: every test uses the one tape", under_mcp_tape_test)

    def global_setup():
        (project / "global.config.mjs").write_text(
            'export default { test: { globalSetup: ["mcp-tape/global-setup"], testTimeout: 30000 } };\n')
        one_tape = [*vitest, "--config", "global.config.mjs"]
        tape_env = dict(env, MCP_TAPE_CASSETTES="cassettes/agent")
        output = must(one_tape, project, tape_env)
        assert "3 passed" in output, output
        code, output = run(one_tape, project, dict(tape_env, AGENT_QUESTION=CHANGED_QUESTION))
        assert code == 1, output
        assert MISS_TEXT in output, output

    checks.run("npm: mcp-tape/global-setup, one tape for the run: passes, and a miss fails the run with its text",
               global_setup)


def browser_shows_the_miss(chromium, page, profile):
    """Opens `page` in headless Chromium over the DevTools protocol and reads what the DOM shows."""
    from websockets.sync.client import connect

    browser = subprocess.Popen([chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                                "--remote-debugging-port=0", f"--user-data-dir={profile}", "about:blank"],
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               # Its singleton directory goes beside the profile, not into the machine's /tmp for good.
                               env=dict(os.environ, TMPDIR=str(profile.parent)))
    try:
        endpoint = None
        for line in browser.stderr:
            if "DevTools listening on " in line:
                endpoint = line.split("DevTools listening on ", 1)[1].strip()
                break
        assert endpoint, "chromium did not open its DevTools endpoint"
        with connect(endpoint, max_size=None, open_timeout=30) as socket:
            counter = iter(range(1, 1000))
            events = []

            def call(method, session=None, **params):
                ask = {"id": next(counter), "method": method, "params": params}
                if session:
                    ask["sessionId"] = session
                socket.send(json.dumps(ask))
                while True:
                    answer = json.loads(socket.recv(timeout=30))
                    if answer.get("id") == ask["id"]:
                        assert "error" not in answer, answer
                        return answer["result"]
                    events.append(answer)

            def event(method, session):
                while not any(e.get("method") == method and e.get("sessionId") == session for e in events):
                    events.append(json.loads(socket.recv(timeout=30)))

            target = call("Target.createTarget", url="about:blank")["targetId"]
            session = call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
            call("Page.enable", session)
            call("Page.navigate", session, url=page.as_uri())
            event("Page.loadEventFired", session)
            evaluated = call("Runtime.evaluate", session, awaitPromise=True, returnByValue=True, expression="""
                (async () => {
                  const miss = document.querySelector("section.miss");
                  const visible = (e) => e.getBoundingClientRect().width > 0 && getComputedStyle(e).visibility !== "hidden";
                  return {
                    verdict: document.getElementById("verdict").innerText,
                    heading: miss.querySelector("h3").innerText,
                    rows: [...miss.querySelectorAll("table.differences tr")].map(r => r.innerText),
                    marks: [...miss.querySelectorAll("mark")].map(m => [m.dataset.pointer, m.innerText, visible(m)]),
                    dots: document.querySelectorAll("#timeline circle.answer-miss").length,
                  };
                })()""")
            assert "exceptionDetails" not in evaluated, evaluated
            shown = evaluated["result"]["value"]
    finally:
        browser.kill()
        browser.wait()
    assert shown["verdict"] == "failed", shown
    assert shown["heading"].startswith("mcp_MailTools tools/call SearchMessages"), shown
    assert shown["rows"][1].split("\t") == ["/arguments/message", '"budget review"', '"holiday plans"'], shown
    assert ["/arguments/message", '"holiday plans"', True] in shown["marks"], shown
    assert ["/arguments/message", '"budget review"', True] in shown["marks"], shown
    assert shown["dots"] == 1, shown


def readme_install_lines():
    """The README's install-from-checkout lines after its build line, as a person copies them."""
    text = (ROOT / "README.md").read_text()
    found = re.search(r"<!-- install-from-checkout:.*?-->\n```sh\n(.*?)```", text, re.S)
    assert found, "the README has no install-from-checkout block"
    lines = found.group(1).splitlines()
    assert lines[0].startswith("packaging/build.sh "), lines
    return lines[1:]


def readme_install_from_checkout(args, work, checks):
    """The README's pip and npm lines, run as written in a fresh venv and a fresh npm project whose `dist/` is
    the checkout's (the test command's build, profile quick, stands in for the README's build line)."""
    project = work / "readme-install"
    project.mkdir()
    (project / "dist").symlink_to(args.dist)
    (project / "package.json").write_text('{"name": "readme-install", "private": true, "type": "module"}\n')
    venv = work / "readme-venv"
    env = clean_env([str(venv / "bin"), str(Path(args.node).parent), str(project / "node_modules" / ".bin")])

    def installs():
        must([sys.executable, "-m", "venv", str(venv)], work, env)
        for line in readme_install_lines():
            must(["bash", "-euc", line], project, env)
        for command in (["mcp-tape", "--version"], ["npx", "--no-install", "mcp-tape", "--version"]):
            assert must(command, project, env).startswith("mcp-tape "), command
        assert shutil.which("mcp-tape", path=env["PATH"]) == str(venv / "bin" / "mcp-tape")

    checks.run("README: the install-from-checkout lines as written (pip, npm) in a fresh venv and npm project; "
               "mcp-tape --version and npx mcp-tape --version answer", installs)

def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dist", required=True, help="where packaging/build.sh put the wheel and tarballs")
    parser.add_argument("--python", required=True, help="Python with the pinned SDKs, for the fixture upstream")
    parser.add_argument("--node", required=True, help="Node 22 executable")
    parser.add_argument("--chromium", required=True, help="the Chromium executable")
    args = parser.parse_args()
    args.dist = Path(args.dist).resolve()
    args.node = str(Path(args.node).resolve())
    checks = Checks()
    with tempfile.TemporaryDirectory(prefix="mcp-tape-packaging-") as scratch:
        work = Path(scratch)
        for part in (python_package, node_package, readme_install_from_checkout):
            checks.run(f"{part.__name__}: every step ran", lambda part=part: part(args, work, checks))
        platforms.check_all(args, work, checks)
    print(f"packaging: {checks.passed} passed, {checks.failed} failed", flush=True)
    sys.exit(1 if checks.failed else 0)


if __name__ == "__main__":
    main()
