"""Personal data on the tape (part of interop.py): a pytest test of an agent
on the OpenAI Agents SDK, with its real OpenAI provider (OpenAIChatCompletionsModel
on AsyncOpenAI) and the official Python SDK's client under MCPServerStreamableHttp,
run through the pytest plugin (`-p mcp_tape.pytest_plugin`, the checkout's) against
people_server.py (six people in Graph's members, the tool's text and free text) and
model_server.py (a scripted model that answers the first sender by name and address):

- recorded with `--mcp-tape-pseudonymize`: no original name, address, id,
  phone, the tenant's id or domain, in any letter case, nor the key, in any
  byte of the cassette directory or its export; `mcp-tape lint` finds nothing;
  the test passes again on replay with both servers stopped and no key;
- recorded again with the same key: the same cassette export; with another
  key: other pseudonyms;
- recorded without the flag: `mcp-tape lint` exits 1 naming pointers and the
  kinds email, guid, name and phone, printing no whole address; `mcp-tape
  pseudonymize` makes it lint clean, gives the pseudonyms recording with the
  key gives, and the test still replays;
- a vitest test of the same agent on the official TypeScript SDK's client and
  the Vercel AI SDK with its real OpenAI provider, through the vitest helper
  (the npm package's files) with `useTape({ pseudonymize: true })`: no
  original byte in its cassette, lint clean, the Python run's pseudonyms;
  it replays with both servers stopped and no key.
"""

import json
import os
import shutil
import sqlite3
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
KEY = "sk-proj-" + "People0Test1Key2Not3Real" * 3
PSEUDONYM_KEY = "the interop checks' pseudonym key"
OTHER_PSEUDONYM_KEY = "another pseudonym key for the interop checks"

TEST = '''import os

import pytest
from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
from agents.mcp import MCPServerStreamableHttp
from openai import AsyncOpenAI


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.anyio
async def test_the_agent_answers_the_newest_mail(mcp_tape, mcp_tape_model):
    set_tracing_disabled(True)
    key = os.environ.get("OPENAI_API_KEY", "replay")
    async with AsyncOpenAI(base_url=mcp_tape_model("openai"), api_key=key) as client:
        model = OpenAIChatCompletionsModel(model="gpt-test", openai_client=client)
        async with MCPServerStreamableHttp({"url": f"{mcp_tape}/mcp"}, client_session_timeout_seconds=30) as mail:
            agent = Agent(name="mail", instructions="You answer the user's mail.", model=model, mcp_servers=[mail])
            result = await Runner.run(agent, "Answer the newest mail.", max_turns=6)
    assert result.final_output.startswith("Answered "), result.final_output
    print("ANSWER", result.final_output)
'''


VITEST_TEST = """import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, jsonSchema, stepCountIs, tool } from "ai";
import { expect, test } from "vitest";
import { useTape } from "mcp-tape/vitest";

const tape = useTape({ pseudonymize: true });

test("the agent answers the newest mail", async () => {
  const client = new Client({ name: "people-agent", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${tape.url}/mcp`)));
  try {
    const listed = await client.listTools();
    const tools = Object.fromEntries(listed.tools.map((offered) => [offered.name, tool({
      description: offered.description,
      inputSchema: jsonSchema(offered.inputSchema),
      execute: async (args) => {
        const result = await client.callTool({ name: offered.name, arguments: args });
        return result.content.map((part) => part.text).join("");
      },
    })]));
    const openai = createOpenAI({ baseURL: tape.model("openai"), apiKey: process.env.OPENAI_API_KEY ?? "replay" });
    const { text } = await generateText({
      model: openai.chat("gpt-test"), system: "You answer the user's mail.", prompt: "Answer the newest mail.",
      tools, stopWhen: stepCountIs(6), maxRetries: 0,
    });
    console.log("ANSWER", text);
    expect(text.startsWith("Answered ")).toBe(true);
  } finally {
    await client.close();
  }
});
"""


def originals():
    """Every original value people_server.py names, lowercased."""
    import people_server

    found = [people_server.TENANT, people_server.DOMAIN, "northwind"]
    for given, surname, user, phone in people_server.PEOPLE:
        found += [given.lower(), surname.lower(), people_server.address(given, surname), user, phone,
                  "".join(c for c in phone if c.isdigit())]
    return found


def people_in(exported):
    """Each sender's name, address, user id and phone, and the tenant id, as the export of a recording holds
    the list_messages answer."""
    for line in exported.splitlines():
        exchange = json.loads(line)
        if exchange.get("request", {}).get("params", {}).get("name") == "list_messages":
            listed = json.loads(exchange["messages"][-1]["body"]["result"]["content"][0]["text"])
            return [(m["from"]["emailAddress"]["name"], m["from"]["emailAddress"]["address"], m["sender"]["id"],
                     m["sender"]["mobilePhone"], m["tenantId"]) for m in listed["value"]]
    raise AssertionError("no list_messages exchange in the export")


def all_bytes(directory):
    """Every byte of every file under `directory` (-wal and -shm included), lowercased."""
    text = ""
    for place, _, files in os.walk(directory):
        for name in files:
            with open(os.path.join(place, name), "rb") as stored:
                text += stored.read().decode("utf-8", "replace").lower()
    return text


def run(h, checks, tools):
    import sys

    sys.path.insert(0, HERE)
    python = os.path.join(tools, "venv-frameworks", "bin", "python")
    work = tempfile.mkdtemp(prefix="mcp-tape-pseudonyms-")
    config = os.path.join(work, "config")
    with open(os.path.join(work, "test_people.py"), "w") as test:
        test.write(TEST)
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "packaging", "python"), MCP_TAPE_BIN=h.args_binary,
               XDG_CONFIG_HOME=config, OPENAI_API_KEY=KEY)
    for name in [name for name in env if name.startswith("MCP_TAPE_") and name != "MCP_TAPE_BIN"]:
        del env[name]

    def process(command, key, *dropped):
        """`command` run in the project, with the pseudonym key `key` (None: none); its code and output."""
        variables = dict(env, MCP_TAPE_PSEUDONYM_KEY=key or "")
        for name in ([] if key else ["MCP_TAPE_PSEUDONYM_KEY"]) + list(dropped):
            del variables[name]
        done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=variables,
                              cwd=work, timeout=h.CLIENT_TIMEOUT_S)
        return done.returncode, done.stdout, done.stderr

    def pytest(cassettes, *extra, key=PSEUDONYM_KEY, dropped=()):
        command = [python, "-m", "pytest", "-p", "mcp_tape.pytest_plugin", "-p", "no:cacheprovider", "-q", "-s",
                   "test_people.py", "--mcp-tape-cassettes", cassettes, *extra]
        code, out, err = process(command, key, *dropped)
        assert code == 0, out[-4000:] + err[-2000:]
        return out

    def mcp_tape(*args, key=PSEUDONYM_KEY):
        return process([h.args_binary, *args], key)

    def cassette_of(cassettes):
        return os.path.join(work, cassettes, "test_people", "test_the_agent_answers_the_newest_mail.sqlite")

    def export(cassettes):
        code, out, _ = mcp_tape("export", cassette_of(cassettes))
        assert code == 0, out
        return out

    model_server = h.Daemon(None, None, [python, os.path.join(HERE, "model_server.py"), "--key", KEY])
    people = h.Daemon(None, None, [python, os.path.join(HERE, "people_server.py")])
    try:
        def record(cassettes, *extra, key=PSEUDONYM_KEY):
            out = pytest(cassettes, "--mcp-tape-mode", "all", "--mcp-tape-upstream", people.url("/mcp"),
                         "--mcp-tape-model", f"openai={model_server.url('/v1')}", *extra, key=key)
            assert "1 passed" in out, out
            assert "Answered Aleksander Brightwater (aleksander.brightwater@northwind.io)" in out, \
                "the live agent got the originals: " + out

        def recorded_pseudonymized():
            record("pseudonymized", "--mcp-tape-pseudonymize")
            stored = all_bytes(os.path.join(work, "pseudonymized"))
            exported = export("pseudonymized").lower()
            for original in originals():
                assert original not in stored, f"{original} is in the cassette directory"
                assert original not in exported, f"{original} is in the export"
            assert PSEUDONYM_KEY.lower() not in stored and PSEUDONYM_KEY.lower() not in exported
            assert json.loads(exported.splitlines()[0])["pseudonymized"]["key"], exported.splitlines()[0]
            with sqlite3.connect(f"file:{cassette_of('pseudonymized')}?mode=ro", uri=True) as db:
                mcp = db.execute("SELECT count(*) FROM exchange WHERE method = 'tools/call'").fetchone()[0]
                model = db.execute("SELECT count(*) FROM model_exchange").fetchone()[0]
            assert (mcp, model) == (2, 3), (mcp, model)
            code, out, err = mcp_tape("lint", cassette_of("pseudonymized"))
            assert code == 0, out + err
        checks.run("pseudonyms: the OpenAI Agents SDK (real OpenAI provider, the official Python SDK's client) "
                   "through the pytest plugin with --mcp-tape-pseudonymize: no original name, address, id, "
                   "phone, tenant id or domain, nor the key, in any byte of the cassettes or the export; lint "
                   "finds nothing", recorded_pseudonymized)

        def same_key_same_pseudonyms():
            record("again", "--mcp-tape-pseudonymize")
            first, again = people_in(export("pseudonymized")), people_in(export("again"))
            assert again == first, (again, first)
            assert len({person[0] for person in first}) == 6, first
            record("other-key", "--mcp-tape-pseudonymize", key=OTHER_PSEUDONYM_KEY)
            other = people_in(export("other-key"))
            assert all(a != b for mine, theirs in zip(first, other) for a, b in zip(mine, theirs)), (first, other)
        checks.run("pseudonyms: recorded again with the same key, the same six people's pseudonyms (six apart); "
                   "with another key, others for every name, address, id, phone and the tenant",
                   same_key_same_pseudonyms)

        def in_the_clear_then_pseudonymized():
            record("clear")
            code, out, err = mcp_tape("lint", cassette_of("clear"))
            assert code == 1, out + err
            for kind in (" email ", " guid ", " name ", " phone "):
                assert kind in out, f"lint names{kind}: {out}"
            assert "northwind.io" not in out, out
            code, out, err = mcp_tape("pseudonymize", os.path.join(work, "clear"))
            assert code == 0, out + err
            code, out, err = mcp_tape("lint", cassette_of("clear"))
            assert code == 0, out + err
            assert people_in(export("clear")) == people_in(export("pseudonymized")), \
                "pseudonymize gives what recording gives"
        checks.run("pseudonyms: recorded without the flag, lint exits 1 naming email, guid, name and phone and "
                   "no whole address; mcp-tape pseudonymize makes it lint clean, as recording with the key "
                   "stores it", in_the_clear_then_pseudonymized)
    finally:
        model_server.stop()
        people.stop()

    vitest_project = tempfile.mkdtemp(prefix=".vitest-pseudonyms-", dir=HERE)
    try:
        # The helper as the npm package ships it; vitest, the SDKs and the AI SDK from the interop install above.
        shutil.copytree(os.path.join(ROOT, "packaging", "npm", "mcp-tape"),
                        os.path.join(vitest_project, "node_modules", "mcp-tape"), ignore=shutil.ignore_patterns("bin"))
        with open(os.path.join(vitest_project, "people.test.mjs"), "w") as test:
            test.write(VITEST_TEST)

        def vitest(key, **variables):
            command = [h.args_node, os.path.join(HERE, "node_modules", "vitest", "vitest.mjs"), "run"]
            environment = dict(env, NO_COLOR="1", **variables)
            environment.pop("OPENAI_API_KEY")
            environment.update({"MCP_TAPE_PSEUDONYM_KEY": key} if key else {})
            environment.update({"OPENAI_API_KEY": KEY} if key else {})
            done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  env=environment, cwd=vitest_project, timeout=h.CLIENT_TIMEOUT_S)
            assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
            return done.stdout + done.stderr

        model_server = h.Daemon(None, None, [python, os.path.join(HERE, "model_server.py"), "--key", KEY])
        people = h.Daemon(None, None, [python, os.path.join(HERE, "people_server.py")])
        try:
            def vitest_records():
                out = vitest(PSEUDONYM_KEY, MCP_TAPE_MODE="all", MCP_TAPE_UPSTREAM=people.url("/mcp"),
                             MCP_TAPE_MODEL=f"openai={model_server.url('/v1')}")
                assert "ANSWER Answered Aleksander Brightwater (aleksander.brightwater@northwind.io)" in out, out
                stored = all_bytes(os.path.join(vitest_project, "cassettes"))
                for original in originals():
                    assert original not in stored, f"{original} is in the vitest cassette"
                recorded = [os.path.join(place, name) for place, _, names in
                            os.walk(os.path.join(vitest_project, "cassettes")) for name in names]
                assert len(recorded) == 1 and recorded[0].endswith(".sqlite"), recorded
                vitest_cassette = recorded[0]
                code, out, err = mcp_tape("lint", vitest_cassette)
                assert code == 0, out + err
                code, out, err = mcp_tape("export", vitest_cassette)
                assert people_in(out) == people_in(export("pseudonymized")), "other pseudonyms than pytest's"
            checks.run("pseudonyms: the official TypeScript SDK's client and the Vercel AI SDK (its real OpenAI "
                       "provider) through the vitest helper with useTape({ pseudonymize: true }): no original byte "
                       "of the six people in the cassette, lint clean, the same pseudonyms as the Python run's",
                       vitest_records)
        finally:
            model_server.stop()
            people.stop()

        def vitest_replays():
            out = vitest(None)
            assert "ANSWER Answered " in out and "Aleksander" not in out, out
        checks.run("pseudonyms: the vitest test replays with both servers stopped and no key", vitest_replays)
    finally:
        shutil.rmtree(vitest_project, ignore_errors=True)

    def replays_offline():
        for cassettes in ("pseudonymized", "clear"):
            out = pytest(cassettes, key=None, dropped=["OPENAI_API_KEY"])
            assert "1 passed" in out, out
            assert "Answered " in out and "Aleksander" not in out, out
    checks.run("pseudonyms: the agent's test replays on both pseudonymized cassettes with both servers stopped "
               "and no key", replays_offline)
    shutil.rmtree(work, ignore_errors=True)
