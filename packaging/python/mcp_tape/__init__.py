"""mcp-tape: record and replay MCP (Model Context Protocol) traffic.

The wheel carries the `mcp-tape` binary; `binary()` finds it. `Tape` runs one
tape for the length of one test (what the pytest plugin does per test). Tapes
take turns in `mcp-tape test --tapes-on-stdin` processes, as the vitest helper's
do: each is told a tape's arguments and, once its test has run, the test's
verdict, and answers with the tape's exit code and report. So the modes, the
rules file, the reports and "a failing test never changes its cassette" are
exactly those of `mcp-tape test`, and a test's tape costs no process of its own.
One process serves the tapes running at once one each, and is kept for the
next tape once its tape ends.
"""

import atexit
import itertools
import json
import os
import shutil
import subprocess
import sysconfig
import tempfile
from pathlib import Path

__all__ = ["MODES", "Tape", "TapeError", "binary", "end_idle_tapes", "fault_spec", "model_url"]

# mcp-tape's modes, then vcrpy's names for two of them (none: replay, new_episodes: missing).
MODES = ("replay", "missing", "all", "once", "none", "new_episodes")

class TapeError(Exception):
    """The tape could not start, or stopped in a way that says nothing of the test."""


def binary():
    """The mcp-tape executable: $MCP_TAPE_BIN, else the one this package installed, else PATH."""
    chosen = os.environ.get("MCP_TAPE_BIN")
    if chosen:
        return chosen
    name = "mcp-tape.exe" if os.name == "nt" else "mcp-tape"
    schemes = [None, f"{os.name}_user"]
    for scheme in schemes:
        try:
            scripts = sysconfig.get_path("scripts", scheme) if scheme else sysconfig.get_path("scripts")
        except KeyError:
            continue
        candidate = Path(scripts) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which(name)
    if found:
        return found
    raise TapeError("the mcp-tape binary was not found: install the mcp-tape wheel or set MCP_TAPE_BIN")


def _toml(value):
    """`value` as a TOML inline value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + fault_spec(value) + "}"
    raise TapeError(f"fault: {value!r} is not a TOML value")


def fault_spec(fault):
    """A fault rule as `--fault` takes it: a spec string as it is, a dict (the keys of a `[[fault]]` table) inline."""
    if isinstance(fault, str):
        return fault
    if isinstance(fault, dict):
        return ", ".join(f"{json.dumps(str(key))} = {_toml(value)}" for key, value in fault.items())
    raise TapeError(f"fault {fault!r}: expected a spec string or a dict of a [[fault]] table's keys")


# What `mcp-tape test` reads to tell GitHub Actions of a run (its step summary, its annotations).
_GITHUB_VARIABLES = ("GITHUB_STEP_SUMMARY", "GITHUB_ACTIONS")
# What the plugin sets for a test's client while it runs: not for the tape server's process.
_TEST_VARIABLES = ("MCP_TAPE_URL", "MCP_PLATFORM_ENDPOINT")


def _variables():
    """The variables a tape server reads (its log filter, the upstream token, models), as they are now."""
    return tuple(sorted((name, value) for name, value in os.environ.items()
                        if name.startswith("MCP_TAPE_") and name not in _TEST_VARIABLES))


class _TapeServer:
    """One `mcp-tape test --tapes-on-stdin`: tape after tape on its own port. Each line written to its stdin
    is answered by one line on its stdout, in order; what it logs goes to a file of its own."""

    def __init__(self, executable):
        self.executable = executable
        self.variables = _variables()
        self._log = _scratch() / f"tapes-{next(_SERIAL)}.log"
        # What a tape would tell GitHub goes nowhere; the pytest plugin tells it for the session.
        env = {name: value for name, value in os.environ.items()
               if name not in _GITHUB_VARIABLES and name not in _TEST_VARIABLES}
        with open(self._log, "wb") as log:
            self.process = subprocess.Popen(
                [executable, "test", "--tapes-on-stdin"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=log, text=True, env=env,
            )
        self.url = None
        self.gone = None

    def tell(self, line):
        """Writes `line`; its answer is the next `answer()` not yet read. Returns where the log stood."""
        logged = self.logged()
        if self.gone is None:
            try:
                self.process.stdin.write(f"{line}\n")
                self.process.stdin.flush()
            except OSError:
                self._ended()
        return logged

    def answer(self):
        """The next line it said: its URL first, then each answer parsed; None once it has ended."""
        if self.gone is not None:
            return None
        line = self.process.stdout.readline()
        if not line:
            self._ended()
            return None
        if self.url is None:
            self.url = line.strip()
            return self.url
        return json.loads(line)

    def served(self):
        """Its URL and the answer to the tape told last (None for either once it has ended)."""
        url = self.url or self.answer()
        return url, self.answer() if url else None

    def _ended(self):
        self.gone = f"mcp-tape exited ({self.process.wait()})"
        if self in _IDLE:
            _IDLE.remove(self)

    def logged(self):
        """How many bytes it has logged."""
        return self._log.stat().st_size

    def log(self, since=0):
        """What it logged from byte `since` on."""
        with open(self._log, "rb") as log:
            log.seek(since)
            return log.read().decode("utf-8", "replace")

    def end(self):
        """Ends it (at the end of its input; a tape still running fails) and waits for it."""
        try:
            self.process.stdin.close()
        except OSError:
            pass
        self.process.wait()
        self.process.stdout.close()
        self._log.unlink(missing_ok=True)


# Tape servers with no tape running, ready for the next.
_IDLE = []


def _server(executable):
    """An idle tape server that runs `executable` with the variables as they are now, or a new one."""
    variables = _variables()
    for server in [idle for idle in _IDLE if idle.executable != executable or idle.variables != variables]:
        _IDLE.remove(server)
        server.end()
    return _IDLE.pop() if _IDLE else _TapeServer(executable)


def end_idle_tapes():
    """Ends the tape servers with no tape running, and waits for them."""
    while _IDLE:
        _IDLE.pop().end()


atexit.register(end_idle_tapes)

# One directory for what every tape of this process writes before it is moved into place (its
# reports) or read and dropped (its log); made once, removed at exit.
_SCRATCH = []
_SERIAL = itertools.count()


def _scratch():
    if not _SCRATCH:
        _SCRATCH.append(Path(tempfile.mkdtemp(prefix="mcp-tape-")))
        atexit.register(shutil.rmtree, _SCRATCH[0], ignore_errors=True)
    return _SCRATCH[0]


def _move(source, target):
    """`source` to `target` (made whole there: a reader never sees half a report), if it was written."""
    if source.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.replace(source, target)
        except OSError:
            # Another file system: copied beside the target first, then renamed over it.
            partial = target.with_name(f"{target.name}.partial-{os.getpid()}")
            shutil.copyfile(source, partial)
            os.replace(partial, target)
            source.unlink()


def model_specs(models):
    """`--model` values from `models`: a dict of name to base URL, `NAME=URL` strings (one, or several), or
    None."""
    if not models:
        return []
    if isinstance(models, dict):
        return [f"{name}={url}" for name, url in models.items()]
    if isinstance(models, str):
        models = models.split()
    specs = list(models)
    for spec in specs:
        name, equals, url = str(spec).partition("=")
        if not (name and equals and url):
            raise TapeError(f"model {spec!r}: expected NAME=URL, e.g. openai=https://api.openai.com/v1")
    return specs


def model_url(tape_url, name):
    """The base URL of the agent's model `name` on the tape at `tape_url`."""
    return f"{tape_url.rstrip('/')}/model/{name}"


class Tape:
    """One test's tape, in its turn on a tape server; `start()` returns its URL.

    `faults`: fault rules for this tape only (spec strings, or dicts of a `[[fault]]` table's keys), on top of the
    rules file's; `on_miss`: `--on-miss`; `report`: keep the JSON usage report there; `title`: what the reports say
    the run was (the test's id and cassette). The reports are written to a scratch directory and moved to `html`
    and `report` when the tape ends: a tape started ahead of its test and never used (`spawn()`, then
    `stop(False)`) leaves none. Once stopped, `cases` holds the report's cases and `misses` those that missed. A
    tape tells GitHub Actions nothing itself (the pytest plugin tells it of the whole session).
    """

    def __init__(self, cassette, mode="replay", upstream=None, rules=None, html=None, executable=None,
                 faults=(), on_miss=None, report=None, title=None, models=None, pseudonymize=False):
        if mode not in MODES:
            raise TapeError(f"mode {mode!r}: expected one of {', '.join(MODES)}")
        self.cassette = Path(cassette)
        self.mode = mode
        self.upstream = upstream
        self.rules = rules
        self.html = Path(html) if html else None
        self.faults = [fault_spec(fault) for fault in faults]
        self.on_miss = on_miss
        self.kept_report = Path(report) if report else None
        self.title = title
        self.models = model_specs(models)
        self.pseudonymize = bool(pseudonymize)
        self.executable = executable or binary()
        self.url = None
        self.cases = []
        self.misses = []
        self._server = None
        self._logged = 0
        self._text = None
        serial = next(_SERIAL)
        self._report = _scratch() / f"report-{serial}.json"
        self._page = _scratch() / f"page-{serial}.html"

    def settings(self):
        """What this tape was made with: two tapes with the same settings are alike."""
        return (self.executable, self.cassette, self.mode, self.upstream, self.rules, self.html, tuple(self.faults),
                self.on_miss, self.kept_report, self.title, tuple(self.models), self.pseudonymize)

    def model_url(self, name):
        """The base URL the agent's model `name` is reached at on this tape (`URL/model/NAME`), for its client
        in place of the API's own (`--model NAME=URL` records it; replay answers it from the cassette)."""
        if self.url is None:
            raise TapeError("the tape is not started: start() it first")
        return model_url(self.url, name)

    def _arguments(self):
        """`mcp-tape test`'s arguments for this tape, as its line gives them."""
        # A cassette that is not there is replayed as absent: each request misses, naming it.
        arguments = [str(self.cassette), "--mode", self.mode]
        if self.upstream:
            arguments += ["--upstream", self.upstream]
        for model in self.models:
            arguments += ["--model", model]
        if self.pseudonymize:
            arguments.append("--pseudonymize")
        if self.rules:
            arguments += ["--rules", str(self.rules)]
        for fault in self.faults:
            arguments += ["--fault", fault]
        if self.on_miss:
            arguments += ["--on-miss", self.on_miss]
        if self.title:
            arguments += ["--title", self.title]
        if self.html:
            arguments += ["--html", str(self._page)]
        if self.kept_report:
            arguments += ["--report", str(self._report)]
        return arguments

    def spawn(self):
        """Tells a tape server this tape, without waiting for it to serve (`start()` does)."""
        self.cassette.parent.mkdir(parents=True, exist_ok=True)
        self._server = _server(self.executable)
        self._logged = self._server.tell(json.dumps(self._arguments()))

    def start(self):
        """Starts the tape (unless `spawn()` did); returns its URL once it serves."""
        if self._server is None:
            self.spawn()
        server = self._server
        url, told = server.served()
        if told is None or "error" in told:
            self._server = None
            self._release(server)
            self._drop_reports()
            why = f"mcp-tape: {told['error']}" if told else f"{server.gone} before it served"
            raise TapeError(f"{why}:\n{server.log(self._logged)}")
        self.url = url
        return self.url

    def stop(self, passed):
        """Ends the tape with the test's verdict; returns the misses (each a dict of the report's case).

        A failing test's recording is thrown away, so its cassette is left as it was. Returns once the tape
        has ended and its reports are written.
        """
        if self._server is None:
            return self.misses
        server, self._server = self._server, None
        # Started ahead of a test that never took it: its answer, never read, says whether it serves.
        _, unread = server.served() if self.url is None else (self.url, {"serving": True})
        if unread is None or "error" in unread:
            self._release(server)
            self._drop_reports()
            return self.misses
        server.tell("0" if passed else "1")
        told = server.answer()
        self._text = server.log(self._logged)
        self._release(server)
        if told is None or "error" in told:
            self._drop_reports()
            why = told["error"] if told else f"{server.gone} with no report"
            raise TapeError(f"{why}:\n{self._text}")
        if self.url is None:
            self._drop_reports()
        else:
            self._place_reports()
        self.cases = told["report"].get("cases", [])
        self.misses = [case for case in self.cases if case.get("misses")]
        if passed and told["code"] != 0 and not self.misses:
            # The test passed, yet the run did not: its recording (an upstream that failed a request,
            # say) was not kept, or a recording it used is too old; its log's last lines say which (the
            # upstream's refusal too).
            said = "\n".join(self._text.splitlines()[-12:] or told.get("said") or [])
            raise TapeError(f"the test passed, but its tape ended with {told['code']}: its recording was not "
                            f"kept, or it failed the run for another reason:\n{said}")
        return self.misses

    @staticmethod
    def _release(server):
        """`server`'s tape has ended: it waits, idle, for the next."""
        if server.gone is None:
            _IDLE.append(server)

    def _place_reports(self):
        if self.html:
            _move(self._page, self.html)
        if self.kept_report:
            _move(self._report, self.kept_report)
        self._drop_reports()

    def _drop_reports(self):
        for written in (self._report, self._page):
            written.unlink(missing_ok=True)

    def log(self):
        """What mcp-tape logged for this tape so far (all of it, once the tape has stopped)."""
        if self._text is not None:
            return self._text
        return self._server.log(self._logged) if self._server else ""

    def describe_misses(self):
        """The misses as a person reads them: each case, its first miss and where the nearest recording differed."""
        total = sum(case["misses"] for case in self.misses)
        if not self.cassette.exists():
            lines = [f"mcp-tape: no cassette at {self.cassette}: {total} request(s) had nothing to answer them; "
                     "record it with --mcp-tape-mode once --mcp-tape-upstream URL"]
        else:
            lines = [f"mcp-tape: {total} request(s) missed the recordings of {self.cassette}"]
        for case in self.misses:
            subject = f" {case['subject']}" if case.get("subject") else ""
            lines.append(f"  {case['method']}{subject} on {case['server']} ×{case['misses']}")
            first = case.get("firstMiss") or {}
            if first.get("message"):
                lines.append(f"    {first['message']}")
            nearest = ((first.get("data") or {}).get("nearest") or [{}])[0]
            for difference in nearest.get("differences") or []:
                recorded = json.dumps(difference.get("recorded"))
                requested = json.dumps(difference.get("requested"))
                lines.append(f"    at {difference['pointer']}: recorded {recorded}, sent {requested}")
        if self.html:
            lines.append(f"  HTML report: {self.html}")
        return "\n".join(lines)
