"""Match rules (`--rules`) over the demo cassette, and faults on demand against a
healthy recording of failing_upstream.py.
"""

import json
import os
import secrets
import tempfile

import agent_loop
import clients

from harness import (
    CLIENT_TIMEOUT_S,
    DEMO_JSONL,
    Daemon,
    FAILING_UPSTREAM,
    FAULTS_TOML,
    SHIPPED_CASSETTES,
    python_flow,
    record_through,
    run_process,
)


def demo_result(server, tool, arguments):
    """The result the demo cassette recorded for this call (its input, not
    anything mcp-tape produced)."""
    with open(DEMO_JSONL) as f:
        for line in f:
            exchange = json.loads(line)
            params = exchange["request"].get("params", {})
            if (exchange["server"], params.get("name"), params.get("arguments")) == (server, tool, arguments):
                return exchange["messages"][-1]["body"]["result"]
    raise AssertionError(f"the demo cassette has no {server} {tool} {arguments}")


def match_rules(args, checks):
    """The demo cassette replayed with match rules to the Python SDK."""
    token = "eyJhbGciOiJub25lIn0." + secrets.token_urlsafe(32)
    with tempfile.TemporaryDirectory() as work:
        kinds = os.path.join(work, "kinds.toml")
        with open(kinds, "w") as out:
            out.write(agent_loop.KIND_RULES)
        for mode in ["auto", "legacy"]:
            daemon = Daemon(None, None, [args.binary, "replay", SHIPPED_CASSETTES, "--port", "0", "--rules", kinds])
            try:
                checks.run(
                    f"python-sdk {mode}: each match rule kind answers other arguments with the recording",
                    lambda: python_flow(agent_loop.rule_kinds(clients.http_connector(daemon.base, mode, token),
                                                              demo_result)),
                )
            finally:
                daemon.stop(os.path.join(args.logs, f"replay-rule-kinds-{mode}.log"))

        daemon = Daemon(None, None, [args.binary, "replay", SHIPPED_CASSETTES, "--port", "0", "--on-miss", "mock"])
        try:
            for mode in ["auto", "legacy"]:
                checks.run(
                    f"python-sdk {mode}: --on-miss mock answers a listed tool's unrecorded call with isError",
                    lambda: python_flow(agent_loop.listed_tool_under_mock(daemon.url("/agents/servers/mcp_MeServer"),
                                                                          mode)),
                )
        finally:
            daemon.stop(os.path.join(args.logs, "replay-on-miss-mock.log"))

        rules = os.path.join(work, "mcp-tape.toml")
        with open(rules, "w") as out:
            out.write(agent_loop.AGENT_RULES)
        daemon = Daemon(None, None, [args.binary, "replay", SHIPPED_CASSETTES, "--port", "0", "--rules", rules])
        runs = []

        def twenty_runs():
            for seed in range(1, 21):
                mode = "auto" if seed % 2 else "legacy"
                model = agent_loop.ScriptedModel(seed)
                try:
                    calls = python_flow(agent_loop.agent_run(clients.http_connector(daemon.base, mode, token), model,
                                                             demo_result))
                except Exception as error:
                    raise AssertionError(f"run {seed} ({mode}) failed after {len(runs)} passing runs") from error
                runs.append(agent_loop.dumps(calls))
            assert len(set(runs)) == len(runs), "the model repeated a run's arguments"

        try:
            checks.run("agent loop: 20 runs of a seeded model with varied arguments pass with a rules file", twenty_runs)
        finally:
            code, log = daemon.stop(os.path.join(args.logs, "replay-agent-loop.log"))

        def every_answer_by_a_rule():
            assert code == 0 and "no misses" in log, log[-2000:]
            calls = [line for line in log.splitlines() if "method=tools/call" in line]
            assert len(calls) == 60 and all(" rule status=200" in line for line in calls), "\n".join(calls[:5])

        checks.run("agent loop: the replay log shows all 60 calls answered by a rule, no miss", every_answer_by_a_rule)

        daemon = Daemon(None, None, [args.binary, "replay", SHIPPED_CASSETTES, "--port", "0"])
        try:
            def fails_without_rules():
                model = agent_loop.ScriptedModel(1)
                connect = clients.http_connector(daemon.base, "legacy", token)
                try:
                    python_flow(agent_loop.agent_run(connect, model, demo_result))
                except agent_loop.Missed as miss:
                    assert "no recorded answer for mcp_KnowledgeTools tools/call query_federated_knowledge" \
                        in str(miss), str(miss)
                    assert "/arguments/query" in str(miss), str(miss)
                else:
                    raise AssertionError("the agent passed without rules: its arguments were not varied")

            checks.run("agent loop: without the rules file the first run fails with a clear miss", fails_without_rules)
        finally:
            daemon.stop(os.path.join(args.logs, "replay-agent-loop-no-rules.log"))


def faults_on_demand(args, node_env, checks):
    """Each client's flow against failing_upstream.py directly, then against `mcp-tape replay` of a healthy
    recording of it with faults.toml: every step must come out the same (what the SDK reports for a 429, a
    cut stream, a lost session...)."""
    flows = {
        "python-sdk auto": lambda url: python_flow(clients.faults_flow(url, "auto")),
        "python-sdk legacy": lambda url: python_flow(clients.faults_flow(url, "legacy")),
    }
    for sdk in ["v1", "legacy", "auto"]:
        flows[f"typescript-sdk {'v2 ' if sdk != 'v1' else ''}{sdk}"] = lambda url, sdk=sdk: json.loads(run_process(
            [args.node, "ts_faults_client.mjs", url, sdk], CLIENT_TIMEOUT_S, node_env))
    direct = {}
    failing = Daemon(None, None, [args.python, FAILING_UPSTREAM])
    try:
        for client, flow in flows.items():
            direct[client] = flow(failing.url("/mcp"))
    finally:
        failing.stop()
    with open(os.path.join(args.logs, "faults-transcripts.json"), "w") as out:
        json.dump(direct, out, indent=1)

    def the_server_fails_each_way():
        for client, transcript in direct.items():
            outcomes = {step["tool"]: step for step in transcript if "tool" in step}
            assert outcomes["tool_error"]["isError"] and outcomes["tool_error"]["content"] == ["mailbox full"], client
            code = outcomes["rpc_error"].get("error", outcomes["rpc_error"].get("code"))
            assert code == -32050, (client, outcomes["rpc_error"])
            for name in ["rate_limited", "unavailable", "cut", "slow", "forget"]:
                assert "content" not in outcomes[name], (client, outcomes[name])
            if client.startswith("typescript"):  # the HTTP error, with its status
                assert 429 in (outcomes["rate_limited"].get("code"), outcomes["rate_limited"].get("status")), client

    checks.run("faults: each client sees failing_upstream.py fail each way", the_server_fails_each_way)
    with tempfile.TemporaryDirectory() as cassettes:
        def record_healthy(upstream, recorder):
            for flow in flows.values():
                flow(recorder.url("/mcp"))

        record_through(args, [args.python, FAILING_UPSTREAM, "--healthy"], cassettes, record_healthy, "failing")
        daemon = Daemon(None, None, [args.binary, "replay", cassettes, "--port", "0", "--rules", FAULTS_TOML])
        try:
            for client, flow in flows.items():
                def same(client=client, flow=flow):
                    replayed = flow(daemon.url("/mcp"))
                    assert replayed == direct[client], (
                        f"{client}\n  directly: {json.dumps(direct[client])}\n  replayed: {json.dumps(replayed)}")

                checks.run(f"faults: {client} sees replay's injected faults as from the failing server", same)
        finally:
            code, log = daemon.stop(os.path.join(args.logs, "replay-faults.log"))

        def counted():
            assert code == 0, f"exit {code}: a fault is not a miss\n{log[-2000:]}"
            assert "faults injected" in log and "no misses" in log, log[-2000:]

        checks.run("faults: replay stops with 0, no misses, and the faults counted", counted)
