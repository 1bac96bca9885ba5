"""What a pytest session tells GitHub Actions, as `mcp-tape test` does for one run: a Markdown section for
the job's summary (the file GITHUB_STEP_SUMMARY names) with each test's misses, drift (requests a match rule
answered though they differed from the recording, recordings older than --max-age) and injected faults; and,
under GITHUB_ACTIONS=true, each miss as an `::error` workflow command naming the test."""

import json
import os

SUMMARY_VARIABLE = "GITHUB_STEP_SUMMARY"
ACTIONS_VARIABLE = "GITHUB_ACTIONS"


def wanted():
    """Whether GitHub asks for a summary or annotations."""
    return bool(os.environ.get(SUMMARY_VARIABLE)) or os.environ.get(ACTIONS_VARIABLE) == "true"


def _case(case):
    subject = f" {case['subject']}" if case.get("subject") else ""
    return f"{case['server']} {case['method']}{subject}"


def _differences(differences):
    """`POINTER (recorded A, requested B), ...`, as mcp-tape tells them."""
    def side(difference, name):
        return "absent" if difference.get(name) is None else json.dumps(difference[name])

    return ", ".join(f"{d.get('pointer', '')} (recorded {side(d, 'recorded')}, requested {side(d, 'requested')})"
                     for d in differences)


def _first_miss(case):
    """A case's first miss as its message says it (where the nearest recording differed included)."""
    return (case.get("firstMiss") or {}).get("message", "")


def rows(cases):
    """A run's rows from its report's cases: [kind, case, requests, what], misses first."""
    found = [["miss", _case(case), case["misses"], _first_miss(case)] for case in cases if case.get("misses")]
    for case in cases:
        for ruled in case.get("rules") or []:
            differed = "; ".join(_differences(d) for d in ruled.get("nearestDifferences") or [] if d)
            if differed:
                found.append(["drift", _case(case), ruled["answered"],
                              f"rule {ruled['rule']} answered; the request differed at {differed}"])
        if case.get("stale"):
            found.append(["drift", _case(case), case["stale"], "answered by recordings older than --max-age"])
    for case in cases:
        for fault in case.get("faults") or []:
            found.append(["fault", _case(case), fault["injected"], f"fault {fault['fault']}"])
    return found


def cell(text):
    """`text` for a Markdown table cell: one line, its pipes escaped, no markup of its own."""
    out = []
    for c in str(text):
        if c in "|`*_[]\\#":
            out.append("\\" + c)
        elif c in "<>&":
            out.append({"<": "&lt;", ">": "&gt;", "&": "&amp;"}[c])
        elif c in "\r\n\t":
            out.append(" ")
        elif ord(c) < 0x20 or c in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069":
            out.append(c.encode("unicode_escape").decode())
        else:
            out.append(c)
    return "".join(out)


def summary(tests):
    """The session's section: `tests` is [(test id, rows)], one a test that had a tape."""
    missed = sum(1 for _, found in tests if any(row[0] == "miss" for row in found))
    heading = f"### mcp-tape: {len(tests)} tests with a tape, {missed} with misses\n"
    table = [f"| {cell(test)} | {kind} | {cell(case)} | {requests} | {cell(what)} |"
             for test, found in tests for kind, case, requests, what in found]
    if not table:
        return f"{heading}\nEvery request was answered as recorded; no fault was injected.\n\n"
    return (f"{heading}\n| test | | case | requests | what |\n|---|---|---|---:|---|\n" + "\n".join(table) + "\n\n")


def _data(text):
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text):
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def annotations(test, path, line, found):
    """The `::error` workflow commands of one test's misses, at its file and line."""
    return [f"::error file={_property(path)},line={line},title={_property(f'mcp-tape miss in {test}')}::"
            f"{_data(f'{case} missed ×{requests}: {what}')}"
            for kind, case, requests, what in found if kind == "miss"]


def append_summary(text):
    with open(os.environ[SUMMARY_VARIABLE], "a", encoding="utf-8") as summary_file:
        summary_file.write(text)
