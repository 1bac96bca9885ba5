"""The agent's model on the tape (part of interop.py): agent frameworks with
their real OpenAI providers — Pydantic AI (OpenAIChatModel), the OpenAI
Agents SDK (OpenAIChatCompletionsModel, streamed), LangChain (ChatOpenAI)
and the Vercel AI SDK (@ai-sdk/openai, streamed) — run the four-step agent against
model_server.py (a scripted OpenAI-compatible model of our own, playing the
agent from the messages it is sent, answering 401 without the key) and
frameworks_server.py (the MCP upstream):

- directly; through one `mcp-tape record --model openai=URL`; and on
  `mcp-tape replay` with both servers stopped: the same tool calls, tool
  results and final answer all three ways;
- on replay, a changed system prompt fails the run with the miss's pointer
  (/messages/0/content) in what the framework raises;
- the key reached the model server through record, and is nowhere in the
  cassette; `mcp-tape lint` finds nothing in it;
- the openai SDK's AzureOpenAI client asks its deployment
  (/openai/deployments/NAME/chat/completions?api-version=..., `api-key`
  header) through the same tape, and gets on replay what it got through
  record.
"""

import json
import os
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
FRAMEWORKS = ["pydantic-ai", "openai-agents", "langchain", "vercel-ai-sdk"]
KEY = "sk-proj-" + "Tape0Test1Key2Not3Real4" * 3
SYSTEM = "You plan meetings. Be brief."


def run(h, checks, tools):
    python = os.path.join(tools, "venv-frameworks", "bin", "python")

    def agent(framework, mcp_url, model_url, system=SYSTEM, key=KEY):
        if framework == "vercel-ai-sdk":
            command = [h.args_node, "models_agent.mjs", mcp_url, model_url, key, system]
        else:
            command = [python, "models_agents.py", framework, mcp_url, model_url, key, system]
        return json.loads(h.run_process(command, h.CLIENT_TIMEOUT_S, h.node_env))

    seen = {framework: {} for framework in [*FRAMEWORKS, "azure-openai"]}
    with tempfile.TemporaryDirectory() as cassettes:
        arrived = os.path.join(cassettes, "model-server-requests.jsonl")
        model_server = h.Daemon(None, None, [python, os.path.join(HERE, "model_server.py"), "--key", KEY,
                                             "--seen", arrived])
        mcp_server = h.Daemon(None, None, [python, os.path.join(HERE, "frameworks_server.py")])
        try:
            for framework in FRAMEWORKS:
                def direct(framework=framework):
                    got = agent(framework, mcp_server.url("/mcp"), model_server.url("/v1"))
                    assert [name for name, _ in got.get("calls", [])] == [
                        "list_messages", "create_event", "send_invite"], got
                    assert got["output"].startswith("Invited Bob to evt-"), got
                    seen[framework]["direct"] = got
                checks.run(f"models: {framework} with its real OpenAI provider, directly", direct)
            recorder = h.Daemon(None, None, [
                h.args_binary, "record", "--upstream", mcp_server.url("/mcp"), "--cassettes", cassettes,
                "--name", "agents", "--port", "0", "--model", f"openai={model_server.url('/v1')}",
                "--model", f"azure={model_server.url('')}"])
            try:
                for framework in FRAMEWORKS:
                    def through(framework=framework):
                        got = agent(framework, recorder.url("/mcp"), recorder.url("/model/openai"))
                        seen[framework]["record"] = got
                        assert got == seen[framework]["direct"], (got, seen[framework]["direct"])
                    checks.run(f"models: {framework} through record --model: the same tool calls, results and "
                               "answer as directly", through)

                def azure_through():
                    got = agent("azure-openai", "", recorder.url("/model/azure"))
                    assert got.get("calls") == [["list_messages", {"folder": "inbox", "top": 3}]], got
                    seen["azure-openai"]["record"] = got
                checks.run("models: AzureOpenAI asks its deployment through record --model", azure_through)
            finally:
                recorder.stop(os.path.join(h.args_logs, "record-models.log"))
        finally:
            model_server.stop()
            mcp_server.stop()

        def key_reached_the_server_only():
            with open(arrived) as lines:
                requests = [json.loads(line) for line in lines]
            headers = [{name.lower(): value for name, value in r["headers"].items()} for r in requests]
            keyed = [h for h in headers if h.get("authorization") == f"Bearer {KEY}" or h.get("api-key") == KEY]
            # Each framework asked four times directly and four times through record; Azure once.
            assert len(keyed) == len(requests) == 2 * 4 * len(FRAMEWORKS) + 1, [r["target"] for r in requests]
            azure = [r["target"] for r in requests if r["target"].startswith("/openai/deployments/")]
            assert azure == ["/openai/deployments/planner-deployment/chat/completions?api-version=2024-10-21"], azure
            cassette = os.path.join(cassettes, "agents.sqlite")
            with open(cassette, "rb") as stored:
                assert KEY.encode() not in stored.read(), "the key is in the cassette"
            out = h.run_process([h.args_binary, "lint", cassette], h.CLIENT_TIMEOUT_S)
            assert "finding" not in out, out
        checks.run("models: the key reached the model server through record, and is nowhere in the cassette "
                   "(lint finds nothing)", key_reached_the_server_only)

        replay = h.Daemon(h.args_binary, [cassettes])
        try:
            for framework in FRAMEWORKS:
                def replayed(framework=framework):
                    got = agent(framework, replay.url("/mcp"), replay.url("/model/openai"), key="sk-none")
                    assert got == seen[framework]["record"], (got, seen[framework]["record"])
                checks.run(f"models: {framework} on replay, both servers stopped, as through record", replayed)

                def changed_prompt(framework=framework):
                    got = agent(framework, replay.url("/mcp"), replay.url("/model/openai"),
                                system="You plan meetings. Be thorough.")
                    told = got.get("error", "")
                    for words in ["/messages/0/content", "Be brief.", "Be thorough."]:
                        assert words in told, f"{words!r} is not in what {framework} raised: {got}"
                checks.run(f"models: {framework} on replay with a changed system prompt fails naming the pointer",
                           changed_prompt)

            def azure_replayed():
                got = agent("azure-openai", "", replay.url("/model/azure"), key="other")
                assert got == seen["azure-openai"]["record"], got
            checks.run("models: AzureOpenAI's deployment path replays as recorded", azure_replayed)
        finally:
            code, log = replay.stop(os.path.join(h.args_logs, "replay-models.log"))
        checks.run("models: replay counted the changed prompts as misses",
                   lambda: _assert("model openai" in log and "miss" in log, log[-3000:]))


def _assert(condition, message):
    assert condition, message
