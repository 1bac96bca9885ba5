"""Agent frameworks as the MCP client (part of interop.py): Pydantic AI
(FunctionModel + MCPToolset), the OpenAI Agents SDK (ScriptedModel +
MCPServerStreamableHttp with structured content), LangChain
(langchain-mcp-adapters in a tool-calling loop) and the Vercel AI SDK 6
(@ai-sdk/mcp + MockLanguageModelV3), each running the four-step agent of
frameworks_agents.py / frameworks_agent.mjs against frameworks_server.py (the
official Python SDK's FastMCP, answering structured results whose members
are in no sorted order):

- directly, through `mcp-tape record`, and on `mcp-tape replay` with the
  server stopped: what each framework handed its model is the same text,
  byte for byte, all three ways (structuredContent's member order included);
- a varied run (the model writes the subject in another case and spacing,
  the address in another case, a message body never written before): on
  replay without rules, what the framework hands the model (or raises)
  names the tool, the differing pointer and both values; with a rules file
  that normalizes and ignores those fields it gets the recorded answers;
- faults: a tool-error fault reaches every framework's model as the tool's
  failure; an HTTP 503 fault reaches the Vercel AI SDK's model (which hands
  a failed request's body on) as a gateway says it, with no word of mcp-tape.

The Python frameworks live in a venv of their own (langchain-mcp-adapters
needs mcp < 2, the rest of the suite uses 2.x): requirements-frameworks.txt.
"""

import hashlib
import json
import os
import secrets
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_FRAMEWORKS = ["pydantic-ai", "openai-agents", "langchain"]
FRAMEWORKS = [*PYTHON_FRAMEWORKS, "vercel-ai-sdk"]
SUBJECT = "Quarterly budget review"

RULES = """
[[match]]
tool = "create_event"
normalize = { "/arguments/subject" = ["case", "space"] }

[[match]]
tool = "send_invite"
ignore = ["/arguments/body"]
normalize = { "/arguments/to" = ["case"] }
"""


def event_id(subject):
    """The id the server gives an event of this subject (its words, in any case and spacing)."""
    return "evt-" + hashlib.sha256(" ".join(subject.split()).lower().encode()).hexdigest()[:8]


def plan(subject=SUBJECT, to="bob@contoso.com", body="Join me for the quarterly budget review."):
    return {"folder": "inbox", "top": 3, "subject": subject, "start": "2026-12-01T10:00:00Z",
            "eventId": event_id(subject), "to": to, "body": body}


def varied_plan():
    """What a model writes on another run: other case and spacing, a body never seen before."""
    return plan(subject="  quarterly BUDGET   review ", to="Bob@Contoso.com",
                body=f"Hi Bob, shall we go over the numbers? ({secrets.token_hex(6)})")


def run(h, checks, tools):
    python = os.path.join(tools, "venv-frameworks", "bin", "python")

    def agent(framework, url, the_plan):
        if framework == "vercel-ai-sdk":
            command = [h.args_node, "frameworks_agent.mjs", url, json.dumps(the_plan)]
        else:
            command = [python, "frameworks_agents.py", framework, url, json.dumps(the_plan)]
        return json.loads(h.run_process(command, h.CLIENT_TIMEOUT_S, h.node_env))

    server_command = [python, os.path.join(HERE, "frameworks_server.py")]
    seen = {framework: {} for framework in FRAMEWORKS}

    def as_recorded(framework, url, the_plan):
        got = agent(framework, url, the_plan)
        assert got == seen[framework]["record"], (got, seen[framework]["record"])
    with tempfile.TemporaryDirectory() as cassettes:
        server = h.Daemon(None, None, server_command)
        try:
            for framework in FRAMEWORKS:
                def direct(framework=framework):
                    seen[framework]["direct"] = agent(framework, server.url("/mcp"), plan())
                    assert SUBJECT in seen[framework]["direct"]["seen"][0], seen[framework]["direct"]
                checks.run(f"frameworks: {framework} directly", direct)
            # The upstream as a user has it: the server's own MCP URL, path included.
            recorder = h.Daemon(None, None, [h.args_binary, "record", "--upstream", server.url("/mcp"),
                                             "--cassettes", cassettes, "--name", "agents", "--port", "0"])
            try:
                for framework in FRAMEWORKS:
                    def through(framework=framework):
                        seen[framework]["record"] = agent(framework, recorder.url("/mcp"), plan())
                        assert seen[framework]["record"] == seen[framework]["direct"], seen[framework]
                    checks.run(f"frameworks: {framework} through record (--upstream the server's /mcp URL) sees "
                               "what it saw directly", through)
            finally:
                recorder.stop(os.path.join(h.args_logs, "record-frameworks.log"))
        finally:
            server.stop()

        replay = h.Daemon(h.args_binary, [cassettes])
        try:
            for framework in FRAMEWORKS:
                checks.run(f"frameworks: {framework} on replay sees byte for byte what it saw through record",
                           lambda framework=framework: as_recorded(framework, replay.url("/mcp"), plan()))

                def varied_misses(framework=framework):
                    got = agent(framework, replay.url("/mcp"), varied_plan())["seen"]
                    told = got[1]
                    for words in ["create_event", "/arguments/subject", SUBJECT, "quarterly BUDGET   review"]:
                        assert words in told, f"{words!r} is not in what {framework} surfaced: {told}"
                checks.run(f"frameworks: {framework} varied run without rules: the miss names the pointer "
                           "and both values in what the framework surfaces", varied_misses)
        finally:
            code, log = replay.stop(os.path.join(h.args_logs, "replay-frameworks.log"))

        def misses_counted():
            assert "tool=create_event miss" in log and "tool=send_invite miss" in log, log[-3000:]
        checks.run("frameworks: replay logged each varied run's misses, naming the tool", misses_counted)

        rules = os.path.join(cassettes, "rules.toml")
        with open(rules, "w") as out:
            out.write(RULES)
        replay = h.Daemon(None, None, [h.args_binary, "replay", cassettes, "--rules", rules, "--port", "0"])
        try:
            for framework in FRAMEWORKS:
                checks.run(f"frameworks: {framework} varied run with a rules file gets the recorded answers",
                           lambda framework=framework: as_recorded(framework, replay.url("/mcp"), varied_plan()))
        finally:
            code, log = replay.stop(os.path.join(h.args_logs, "replay-frameworks-rules.log"))
        checks.run("frameworks: the rules answered every varied run (no misses)",
                   lambda: _assert(code == 0 and "no misses" in log, log[-2000:]))

        busy = "the calendar service is busy"
        replay = h.Daemon(None, None, [h.args_binary, "replay", cassettes, "--port", "0",
                                       "--fault", f'tool = "send_invite", tool_error = "{busy}"'])
        try:
            for framework in FRAMEWORKS:
                def tool_error(framework=framework):
                    got = agent(framework, replay.url("/mcp"), plan())["seen"]
                    assert got[:2] == seen[framework]["record"]["seen"][:2], got
                    assert busy in got[2], f"{framework} surfaced: {got}"
                checks.run(f"frameworks: {framework} hands its model a tool-error fault", tool_error)
        finally:
            replay.stop(os.path.join(h.args_logs, "replay-frameworks-tool-error.log"))

        replay = h.Daemon(None, None, [h.args_binary, "replay", cassettes, "--port", "0",
                                       "--fault", 'tool = "send_invite", http = 503'])
        try:
            def gateway_503():
                got = agent("vercel-ai-sdk", replay.url("/mcp"), plan())["seen"]
                assert "Service Unavailable" in got[2] and "mcp-tape" not in got[2], got
            checks.run("frameworks: vercel-ai-sdk hands its model a 503 fault as a gateway says it", gateway_503)
        finally:
            replay.stop(os.path.join(h.args_logs, "replay-frameworks-503.log"))


def _assert(condition, message):
    assert condition, message
