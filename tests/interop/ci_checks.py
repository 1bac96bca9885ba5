"""`mcp-tape test` around a stand-in agent with a miss, its JUnit file read by
junitparser.
"""

import json
import os
import subprocess
import tempfile

from harness import (
    CI_AGENT,
    CLIENT_TIMEOUT_S,
    ROOT,
)


def run_status(command, timeout, env=None):
    """Runs `command` from the repository's root; its exit code and output."""
    result = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout,
                            env=env, cwd=ROOT)
    return result.returncode, result.stdout + result.stderr


def junit_cases(path):
    """(suite, case name) → the case's result kinds, as junitparser reads the file."""
    from junitparser import JUnitXml

    cases = {}
    for suite in JUnitXml.fromfile(path):
        for case in suite:
            cases[(suite.name, case.name)] = [(type(r).__name__, r.message, r.text) for r in case.result]
    return cases


def ci_examples(args, node_env, checks):
    """`mcp-tape test` as CI runs it around an agent suite (the examples' suites run from the installed
    packages in tests/packaging)."""
    env = dict(node_env, MCP_TAPE_BIN=args.binary)
    env.pop("MCP_TAPE_URL", None)
    env.pop("MCP_TAPE_MODE", None)
    with tempfile.TemporaryDirectory() as out:
        def a_miss_fails():
            junit = os.path.join(out, "miss.xml")
            calls = json.dumps([["/agents/servers/mcp_MeServer", "GetMyDetails", {"select": "mail"}]])
            code, output = run_status([args.binary, "test", "cassettes", "--junit", junit, "--",
                                       args.python, CI_AGENT, "-", calls, "0"], CLIENT_TIMEOUT_S, env)
            assert code == 1, f"exit {code}:\n{output[-4000:]}"
            results = junit_cases(junit)[("mcp_MeServer", "tools/call GetMyDetails")]
            assert [kind for kind, _, _ in results] == ["Failure"], results
            _, message, text = results[0]
            assert "mcp_MeServer tools/call GetMyDetails" in message, message
            assert '/arguments/select: recorded "displayName,jobTitle", requested "mail"' in text, text

        checks.run("ci: a passing command with a miss exits 1; junitparser reads a failure naming the tool",
                   a_miss_fails)
