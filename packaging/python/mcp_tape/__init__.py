"""mcp-tape: record and replay MCP (Model Context Protocol) traffic.

The wheel carries the `mcp-tape` binary; `binary()` finds it. `Tape` runs one
tape for the length of one test (what the pytest plugin does per test): it
runs `mcp-tape test --verdict-on-stdin`, which prints the tape's URL and then
waits for the test's verdict on its standard input. So the modes, the rules
file, the reports and "a failing test never changes its cassette" are exactly
those of `mcp-tape test`.
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

__all__ = ["MODES", "Tape", "TapeError", "binary", "fault_spec", "model_url"]

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

# Tapes whose run has said all it will (its report is written) but whose process is still ending:
# reaped as they end, and each's log read then.
_ENDING = []


def _reap(wait=False):
    """Finishes the tapes in `_ENDING` whose process has ended (every one, with `wait`)."""
    for tape in list(_ENDING):
        if wait or tape._ending.poll() is not None:
            _ENDING.remove(tape)
            tape._finish()


atexit.register(_reap, wait=True)

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
    """One `mcp-tape test` run around one test; `start()` returns its URL.

    `faults`: fault rules for this tape only (spec strings, or dicts of a `[[fault]]` table's keys), on top of the
    rules file's; `on_miss`: `--on-miss`; `report`: keep the JSON usage report there; `title`: what the reports say
    the run was (the test's id and cassette). The reports are written to a scratch directory and moved to `html`
    and `report` when the run ends: a tape started ahead of its test and never used (`spawn()`, then `stop(False)`)
    leaves none. Once stopped, `cases` holds the report's cases and `misses` those that missed. A tape tells
    GitHub Actions nothing itself (the pytest plugin tells it of the whole session).
    """

    def __init__(self, cassette, mode="replay", upstream=None, rules=None, html=None, executable=None,
                 faults=(), on_miss=None, report=None, title=None, models=None):
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
        self.executable = executable or binary()
        self.url = None
        self.cases = []
        self.misses = []
        self._process = None
        self._ending = None
        self._log = None
        self._text = None
        serial = next(_SERIAL)
        self._report = _scratch() / f"report-{serial}.json"
        self._page = _scratch() / f"page-{serial}.html"

    def settings(self):
        """What this tape was made with: two tapes with the same settings are alike."""
        return (self.executable, self.cassette, self.mode, self.upstream, self.rules, self.html, tuple(self.faults),
                self.on_miss, self.kept_report, self.title, tuple(self.models))

    def model_url(self, name):
        """The base URL the agent's model `name` is reached at on this tape (`URL/model/NAME`), for its client
        in place of the API's own (`--model NAME=URL` records it; replay answers it from the cassette)."""
        if self.url is None:
            raise TapeError("the tape is not started: start() it first")
        return model_url(self.url, name)

    def _arguments(self):
        """`mcp-tape test`'s arguments for this tape, the command it runs included."""
        # A cassette that is not there is replayed as absent: each request misses, naming it.
        command = ["test", str(self.cassette), "--mode", self.mode, "--report", str(self._report)]
        if self.upstream:
            command += ["--upstream", self.upstream]
        for model in self.models:
            command += ["--model", model]
        if self.rules:
            command += ["--rules", str(self.rules)]
        for fault in self.faults:
            command += ["--fault", fault]
        if self.on_miss:
            command += ["--on-miss", self.on_miss]
        if self.title:
            command += ["--title", self.title]
        if self.html:
            command += ["--html", str(self._page)]
        return [*command, "--verdict-on-stdin"]

    def spawn(self):
        """Starts the tape on a free loopback port, without waiting for it to serve (`start()` does)."""
        self._log = tempfile.TemporaryFile(dir=_scratch())  # noqa: SIM115 - kept open for the run
        self.cassette.parent.mkdir(parents=True, exist_ok=True)
        # What the tape would tell GitHub goes to this pipe; the pytest plugin tells it for the session.
        env = {name: value for name, value in os.environ.items() if name not in _GITHUB_VARIABLES}
        self._process = subprocess.Popen(
            [self.executable, *self._arguments()], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self._log, text=True, env=env,
        )

    def start(self):
        """Starts the tape (unless `spawn()` did); returns its URL once it listens."""
        if self._process is None:
            self.spawn()
        line = self._process.stdout.readline().strip()
        if not line.startswith("http://"):
            process, self._process = self._process, None
            process.stdin.close()
            process.wait()
            process.stdout.close()
            self._text = self.log()
            self._log.close()
            self._drop_reports()
            raise TapeError(f"mcp-tape exited ({process.returncode}) before it served:\n{self._text}")
        self.url = line
        return self.url

    def stop(self, passed):
        """Ends the run with the test's verdict; returns the misses (each a dict of the report's case).

        A failing test's recording is thrown away, so its cassette is left as it was. Returns once the
        report is written (the tape lets go of its stdout then); the process ends meanwhile.
        """
        if self._process is None:
            return self.misses
        process, self._process = self._process, None
        try:
            process.stdin.write("0\n" if passed else "1\n")
            process.stdin.close()
        except BrokenPipeError:
            pass
        process.stdout.read()  # to its end: the tape's report is written
        process.stdout.close()
        self._ending = process
        try:
            report = json.loads(self._report.read_text())
        except (OSError, ValueError) as error:
            self._finish()
            raise TapeError(f"mcp-tape exited ({process.returncode}) with no report ({error}):\n{self._text}")
        if self.url is None:
            self._drop_reports()  # started ahead of a test that never took it
        else:
            self._place_reports()
        self.cases = report.get("cases", [])
        self.misses = [case for case in self.cases if case.get("misses")]
        if passed and not report.get("passed") and not self.misses:
            # The test passed, yet the run did not: its recording (an upstream that failed a request,
            # say) was not kept, or a recording it used is too old; the log's last lines say which.
            self._finish()
            tail = "\n".join(self._text.splitlines()[-12:])
            raise TapeError(f"the test passed, but mcp-tape exited {process.returncode}: its recording "
                            f"was not kept, or it failed the run for another reason:\n{tail}")
        _reap()
        _ENDING.append(self)
        return self.misses

    def _finish(self):
        """Waits for the process to end, then reads its log and closes it."""
        self._ending.wait()
        self._log.seek(0)
        self._text = self._log.read().decode("utf-8", "replace")
        self._log.close()

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
        """What mcp-tape wrote to its standard error so far (all of it, once the tape has stopped)."""
        if self in _ENDING:
            _ENDING.remove(self)
            self._finish()
        if self._text is not None:
            return self._text
        self._log.seek(0)
        text = self._log.read().decode("utf-8", "replace")
        self._log.seek(0, os.SEEK_END)
        return text

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
