"""The official conformance suite (0.1.16 and 0.2.0-alpha.12) through record, and
directly, through record and on replay of our conformance fixtures.
"""

import os
import re
import subprocess
import sys
import tempfile

from harness import (
    CONFORMANCE_TIMEOUT_S,
    CONFORMANCE_UPSTREAM,
    Daemon,
    FIXTURE_EXPECTED_FAILURES,
    HERE,
    NEXT_FIXTURE_GAPS,
    NEXT_LEGS,
    UPSTREAM,
    record_through,
    run_process,
    three_ways_on_the_dual_era_fixture,
)


def conformance_three_ways(args, node_env, conformance, checks):
    """The whole suite against our conformance fixture, through record, and
    against replay of that recording with the fixture stopped."""
    suite = [*conformance, "server", "--suite", "all"]

    def run_suite(name, url):
        log = os.path.join(args.logs, f"conformance-{name}.log")
        output = run_process([*suite, "--url", url], CONFORMANCE_TIMEOUT_S, node_env, log)
        assert "Total: 44 passed, 0 failed" in output, summary(output)

    with tempfile.TemporaryDirectory() as cassettes:

        def drive(upstream, recorder):
            checks.run("conformance 0.1.16 --suite all: 32/32 against our conformance fixture",
                       lambda: run_suite("fixture", upstream.url("/mcp")))
            checks.run("conformance 0.1.16 --suite all: 32/32 through mcp-tape record",
                       lambda: run_suite("record", recorder.url("/mcp")))

        record_through(args, [args.node, CONFORMANCE_UPSTREAM], cassettes, drive, "conformance")
        replayer = Daemon(None, None, [args.binary, "replay", cassettes, "--port", "0", "--fail-on-miss"])
        try:
            checks.run("conformance 0.1.16 --suite all: 32/32 against mcp-tape replay, fixture stopped",
                       lambda: run_suite("replay", replayer.url("/mcp")))
        finally:
            code, log = replayer.stop(os.path.join(args.logs, "replay-conformance.log"))

        def every_request_a_hit():
            assert code == 0, f"replay --fail-on-miss exited {code}:\n{log[-3000:]}"
            assert " mock " not in log, [line for line in log.splitlines() if " mock " in line][:5]

        checks.run("conformance replay: every request answered from the recording", every_request_a_hit)


SCENARIO_LINE = re.compile(r"^[✓✗] [a-z0-9-]+: \d+ passed, \d+ failed(?:, \d+ warnings)?$", re.M)


def scenario_outcomes(command, node_env, log_path):
    """Runs the suite (a failing scenario is an outcome, not an error) and
    returns its per-scenario lines: name, checks passed and failed."""
    result = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                            timeout=CONFORMANCE_TIMEOUT_S, env=node_env, cwd=HERE)
    with open(log_path, "w") as log:
        log.write(result.stdout + result.stderr)
    assert "Total:" in result.stdout, (result.stdout + result.stderr)[-3000:]
    return SCENARIO_LINE.findall(result.stdout)


def conformance_next_three_ways(args, node_env, conformance_next, checks):
    """Conformance 0.2.0-alpha.12, both legs, against our dual-era fixture on
    the TypeScript SDK v2: directly, through `mcp-tape record` with both legs
    into one cassette, then against `replay --fail-on-miss` of that cassette
    with the fixture stopped. Every scenario's outcome must be the same."""
    outcomes = {}

    def leg(name, stage, url):
        log = os.path.join(args.logs, f"conformance-next-{name}-{stage}.log")
        command = [*conformance_next, "server", "--url", url, "--suite", "all", *NEXT_LEGS[name]]
        outcomes[(name, stage)] = scenario_outcomes(command, node_env, log)

    stages = {"direct": "directly against our dual-era fixture", "record": "through mcp-tape record",
              "replay": "against mcp-tape replay of the one cassette"}
    code, log = three_ways_on_the_dual_era_fixture(
        args, checks, NEXT_LEGS, lambda name, stage: f"conformance 0.2.0-alpha.12 {name} leg {stages[stage]}", leg,
        "conformance-next")

    def fixture_complete():
        for name in NEXT_LEGS:
            failing = [line for line in outcomes[(name, "direct")] if line.startswith("✗")]
            assert all(line[2:].startswith(NEXT_FIXTURE_GAPS) for line in failing), failing
            assert len(outcomes[(name, "direct")]) >= 40, outcomes[(name, "direct")]

    checks.run("conformance 0.2.0-alpha.12: the fixture fails nothing but the tasks extension", fixture_complete)

    def same_everywhere():
        assert code == 0, f"replay --fail-on-miss exited {code}:\n{log[-3000:]}"
        for name in NEXT_LEGS:
            direct = outcomes[(name, "direct")]
            for stage in ["record", "replay"]:
                differ = [(d, o) for d, o in zip(direct, outcomes[(name, stage)]) if d != o]
                assert len(direct) == len(outcomes[(name, stage)]) and not differ, f"{name} {stage}: {differ}"

    checks.run("conformance 0.2.0-alpha.12: every scenario's outcome the same directly, through record and on replay",
               same_everywhere)


def summary(output):
    return output[output.index("=== SUMMARY ==="):] if "=== SUMMARY ===" in output else output


def conformance_through_record(args, node_env, conformance, checks):
    """The conformance suite directly against the fixture upstream, then
    through `mcp-tape record` in front of it: the same scenarios must pass."""
    upstream = Daemon(None, None, [sys.executable, UPSTREAM, "--no-auth"])
    summaries = {}

    def suite(name, url):
        command = [*conformance, "server", "--url", url, "--suite", "all",
                   "--expected-failures", FIXTURE_EXPECTED_FAILURES]
        log = os.path.join(args.logs, f"conformance-{name}.log")
        summaries[name] = summary(run_process(command, CONFORMANCE_TIMEOUT_S, node_env, log))

    with tempfile.TemporaryDirectory() as cassettes:
        try:
            path = "/agents/servers/mcp_MailTools"
            checks.run("conformance 0.1.16 --suite all directly against the fixture upstream",
                       lambda: suite("fixture-direct", upstream.url(path)))
            recorder = Daemon(None, None, [args.binary, "record", "--upstream", upstream.base,
                                           "--cassettes", cassettes, "--port", "0"])
            checks.run("conformance 0.1.16 --suite all through mcp-tape record to the fixture upstream",
                       lambda: suite("fixture-through-record", recorder.url(path)))
            code, log = recorder.stop(os.path.join(args.logs, "record-conformance.log"))
        finally:
            upstream.stop()

    def same_outcomes():
        assert code == 0, f"record exited {code}:\n{log[-2000:]}"
        assert len(summaries) == 2, "a suite run failed"
        direct, through = summaries["fixture-direct"], summaries["fixture-through-record"]
        assert direct == through, f"direct:\n{direct}\nthrough record:\n{through}"

    checks.run("conformance: every scenario has the same outcome through record as directly", same_outcomes)
