"""Interop checks for mcp-tape with official MCP clients.

Starts the real `mcp-tape` binary (and the fixture upstream) on 127.0.0.1
port 0, readiness being their "listening on" log line, then drives them
with the official Python SDK (auto and legacy modes), the official
TypeScript SDK and the official conformance suite:
- replay of an empty directory and of an imported cassette;
- the round trip: each client's flow directly against agent365_upstream.py
  (compressing JSON answers for clients that accept gzip), through
  `mcp-tape record`, then against `mcp-tape replay` with the upstream
  stopped; the three transcripts must agree;
- the conformance suite through `mcp-tape record` to the fixture upstream;
- the conformance suite 32/32 against our conformance fixture
  (conformance_upstream.mjs) directly, through `mcp-tape record`, and
  against `mcp-tape replay` of that recording with the fixture stopped;
- cross-era replay: a recording made by handshake-era clients only, replayed
  to a stateless client, and the reverse;
- the real Agent 365 tooling SDKs (Python and Node) against `replay
  cassettes/`, through `mcp-tape record` in front of that replay, and
  against a replay of what record stored;
- stdio: the Python SDK (auto, legacy) and TypeScript SDK (v1; v2 legacy,
  auto) spawning our stdio fixture servers and the published
  server-everything directly, through `mcp-tape record --stdio` (one
  cassette for all) and `mcp-tape replay --stdio` of it; and the HTTP round
  trip's cassette replayed over stdio;
- what a server says on its own: the Python SDK (legacy, auto) and the
  TypeScript SDK (v1), declaring roots and pausing after `initialized`, against server-everything and
  server-filesystem over stdio directly, through `record --stdio`, against
  `replay --stdio` and against `replay` over HTTP (the GET stream): the
  transcripts of everything each heard must agree; server-everything over
  HTTP (everything_http.mjs) through `record` and against `replay` of it:
  replay must give what the client got through record; and where
  server-everything's log messages on its GET stream fall among its answers
  (stream_order.py, by the kernel's receive times): through record, in the
  four cassettes and on replay of each, each one falls between the same two
  answers as directly;
- Agent 365 mocks imported as answer templates (`import --a365-mocks`),
  served to the Python SDK (auto, legacy) and TypeScript SDK (v1; v2
  legacy, auto);
- match rules (`--rules`): the Python SDK (auto, legacy) calling the demo
  cassette's tools with other arguments under each rule kind; a listed tool
  under `--on-miss mock` answering isError; and a scripted, seeded "model"
  varying its arguments on every run: 20 runs in a row pass against one
  recording with a rules file, and the first fails with a clear miss
  without one;
- faults on demand: the Python SDK (auto, legacy) and TypeScript SDK (v1; v2 legacy, auto)
  calling each tool of failing_upstream.py (a JSON-RPC error, isError, 429,
  503, a cut stream, a hang, a lost session) directly, and against `replay`
  of a healthy recording of it with faults.toml: the same outcomes; the
  Agent 365 SDKs with a 503 from one server, against agent365_upstream.py
  and against replay with that fault;
- other tools' recordings (imports.py): mitmdump's HAR, mcp-recorder's and
  mcp-vcr's cassettes of real sessions (and the Inspector's and
  mcp-cassette's shapes built from them), imported and replayed to the
  official clients;
- agent frameworks (frameworks.py): Pydantic AI, the OpenAI Agents SDK,
  LangChain and the Vercel AI SDK with scripted models hand their model the
  same text directly, through record and on replay; a varied run's miss
  names the pointer in what they surface, a rules file answers it; faults
  reach them;
- the agent's model on the tape (models.py): Pydantic AI, the OpenAI Agents
  SDK, LangChain and the Vercel AI SDK with their real OpenAI providers against a
  scripted model server: directly, through `record --model` and on replay
  with both servers stopped, the same run; a changed system prompt fails
  naming the pointer; the key never stored; AzureOpenAI's deployment path;
- personal data on the tape (pseudonyms.py): the OpenAI Agents SDK through
  the pytest plugin with --mcp-tape-pseudonymize records no original byte of
  six people, the same key the same pseudonyms; lint finds a recording in the
  clear, `mcp-tape pseudonymize` makes it what recording gives; both replay;
- CI: `mcp-tape test` around a stand-in agent with a miss, its JUnit file
  read by junitparser (the pytest and vitest examples run from the
  installed packages in tests/packaging);
- the soaks (soak.py): hostile requests to replay and record under memory
  bounds, every connection slot held, and ordinary calls beside hostile
  `nearest`-rule queries over 20,000 recordings of one tool (p50 and p99
  printed).
Prints one line per check and closes with "interop: N passed, N failed";
exits 1 if any check failed.
"""

import argparse
import os
import sys
import tempfile
import types

import clients
import frameworks
import imports
import models
import pseudonyms
import soak

from harness import (
    CLIENT_TIMEOUT_S,
    CONFORMANCE_TIMEOUT_S,
    Checks,
    Daemon,
    EXPECTED_FAILURES,
    FIXTURE,
    NEXT_EXPECTED_FAILURES,
    NEXT_LEGS,
    PATHS,
    START_TIMEOUT_S,
    UPSTREAM,
    python_flow,
    run_process,
    without_progress,
)
from agent365_checks import a365_mocks_import, a365_server_unavailable, agent365_sdks
from ci_checks import ci_examples
from conformance_runs import conformance_next_three_ways, conformance_three_ways, conformance_through_record
from on_their_own import stream_order_check, unprompted
from round_trips import cross_era, resumed_streams, round_trip, stdio_round_trip
from rules_and_faults import faults_on_demand, match_rules


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--binary", required=True)
    parser.add_argument("--node", required=True, help="Node 22 executable")
    parser.add_argument("--python", default=sys.executable, help="Python with the pinned SDKs")
    parser.add_argument("--logs", required=True, help="directory for conformance and daemon logs")
    parser.add_argument("--tools", required=True, help="where setup.sh put the venvs of other recorders")
    parser.add_argument("--only", choices=["published", "models", "pseudonyms"],
                        help="published: only the checks against published servers (server-everything and "
                             "server-filesystem (npm) over stdio and HTTP, and the frameworks' server on the Python "
                             "SDK (PyPI)); models: only the checks of the agent's model on the tape; pseudonyms: "
                             "only the checks of personal data on the tape")
    args = parser.parse_args()
    os.makedirs(args.logs, exist_ok=True)
    node_env = dict(os.environ, PATH=os.path.dirname(args.node) + os.pathsep + os.environ["PATH"])
    conformance = [args.node, "node_modules/@modelcontextprotocol/conformance/dist/index.js"]
    conformance_next = [args.node, "node_modules/conformance-next/dist/index.js"]
    checks = Checks()
    if args.only == "published":
        return published_servers(args, node_env, checks)
    if args.only == "models":
        models.run(helpers_of(args, node_env), checks, args.tools)
        return finished(checks)
    if args.only == "pseudonyms":
        pseudonyms.run(helpers_of(args, node_env), checks, args.tools)
        return finished(checks)

    with tempfile.TemporaryDirectory() as empty:
        daemon = Daemon(args.binary, [empty])
        for path in PATHS:
            url = daemon.url(path)
            for mode in ["auto", "legacy"]:
                checks.run(f"python-sdk {mode}: empty server flow on {path}", lambda: python_flow(clients.empty_flow(url, mode)))
            checks.run(
                f"typescript-sdk: empty server flow on {path}",
                lambda: run_process([args.node, "ts_client.mjs", url, "empty"], CLIENT_TIMEOUT_S, node_env),
            )
            log = os.path.join(args.logs, f"conformance{path.replace('/', '_')}.log")
            checks.run(
                f"conformance 0.1.16 --suite all on {path} (expected failures: fixture scenarios only)",
                lambda: run_process(
                    [*conformance, "server", "--url", url, "--suite", "all", "--expected-failures", EXPECTED_FAILURES],
                    CONFORMANCE_TIMEOUT_S,
                    node_env,
                    log,
                ),
            )
            for name, leg_args in NEXT_LEGS.items():
                log = os.path.join(args.logs, f"conformance-next-{name}{path.replace('/', '_')}.log")
                checks.run(
                    f"conformance 0.2.0-alpha.12 {name} leg on {path} (expected failures: fixture scenarios only)",
                    lambda leg_args=leg_args, log=log: run_process(
                        [*conformance_next, "server", "--url", url, "--suite", "all", *leg_args,
                         "--expected-failures", NEXT_EXPECTED_FAILURES],
                        CONFORMANCE_TIMEOUT_S,
                        node_env,
                        log,
                    ),
                )
        code, log = daemon.stop(os.path.join(args.logs, "replay-empty.log"))

        def stopped_cleanly():
            assert code == 0, f"exit code {code}"
            assert "no misses" in log, log[-2000:]

        checks.run("empty replay stops cleanly on SIGTERM", stopped_cleanly)

    with tempfile.TemporaryDirectory() as cassettes:
        cassette = os.path.join(cassettes, "mail.sqlite")
        run_process([args.binary, "import", FIXTURE, "--cassette", cassette], CLIENT_TIMEOUT_S)
        daemon = Daemon(args.binary, [cassettes])
        url = daemon.url("/agents/servers/mcp_MailTools")
        for mode in ["auto", "legacy"]:
            checks.run(
                f"python-sdk {mode}: recorded results from an imported cassette",
                lambda: python_flow(clients.recorded_flow(url, mode, FIXTURE)),
            )
        checks.run(
            "typescript-sdk: recorded results from an imported cassette",
            lambda: run_process([args.node, "ts_client.mjs", url, "recorded", FIXTURE], CLIENT_TIMEOUT_S, node_env),
        )
        code, log = daemon.stop(os.path.join(args.logs, "replay-recorded.log"))

        def all_hits():
            assert code == 0, f"exit code {code}"
            assert "no misses" in log, log[-2000:]
            recorded = [line for line in log.splitlines() if "method=tools/" in line]
            assert len(recorded) == 9, recorded  # 3 clients x (tools/list + 2 tools/call)
            assert all(" hit status=200" in line for line in recorded), "\n".join(recorded)

        checks.run("recorded replay answered every client request from the cassette", all_hits)

    agent365_sdks(args, node_env, checks)
    direct = round_trip(args, node_env, checks)
    cross_era(args, node_env, checks, direct)
    stdio_round_trip(args, node_env, checks)
    unprompted(args, node_env, checks)
    stream_order_check(args, checks)
    resumed_streams(args, node_env, checks)
    conformance_through_record(args, node_env, conformance, checks)
    conformance_three_ways(args, node_env, conformance, checks)
    conformance_next_three_ways(args, node_env, conformance_next, checks)
    a365_mocks_import(args, node_env, checks)
    match_rules(args, checks)
    faults_on_demand(args, node_env, checks)
    a365_server_unavailable(args, node_env, checks)
    ci_examples(args, node_env, checks)
    imports.run(helpers_of(args, node_env), checks, args.tools)
    frameworks.run(helpers_of(args, node_env), checks, args.tools)
    models.run(helpers_of(args, node_env), checks, args.tools)
    pseudonyms.run(helpers_of(args, node_env), checks, args.tools)
    with tempfile.TemporaryDirectory() as cassettes:
        run_process([args.binary, "import", FIXTURE, "--cassette", os.path.join(cassettes, "mail.sqlite")],
                    CLIENT_TIMEOUT_S)
        soak.run(args, checks, Daemon, cassettes)
    soak.nearest(args, checks, Daemon)

    return finished(checks)


def helpers_of(args, node_env):
    """What imports.py and frameworks.py take from the harness."""
    return types.SimpleNamespace(
        args_binary=args.binary, args_node=args.node, args_logs=args.logs, node_env=node_env,
        run_process=run_process, python_flow=python_flow, Daemon=Daemon, UPSTREAM=UPSTREAM,
        CLIENT_TIMEOUT_S=CLIENT_TIMEOUT_S, START_TIMEOUT_S=START_TIMEOUT_S, without_progress=without_progress)


def published_servers(args, node_env, checks):
    """The checks against published servers alone (--only published): what a busy machine is tried with."""
    stdio_round_trip(args, node_env, checks)
    unprompted(args, node_env, checks)
    stream_order_check(args, checks)
    frameworks.run(helpers_of(args, node_env), checks, args.tools)
    return finished(checks)


def finished(checks):
    print(f"interop: {checks.passed} passed, {checks.failed} failed", flush=True)
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
