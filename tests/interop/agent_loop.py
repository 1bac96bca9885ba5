"""Match rules as agents meet them: the official Python SDK calling tools of
the shipped demo cassette with arguments nothing recorded.

- `rule_kinds`: one call per rule kind (exact after ignore and normalize,
  sequence, nearest) gets the recorded result; a call the rules do not
  cover stays a miss.
- `ScriptedModel` and `agent_run`: a stand-in for a model-driven agent. A
  seeded random "model" decides each run what to ask (a knowledge question
  worded anew, a meeting title in any case and spacing, a page size, which
  profile fields), and the agent makes those calls through the SDK. A run
  passes when every answer is the one recorded for what the model meant:
  the expected results are read from the demo cassette's JSON Lines (the
  input), by intent, never from mcp-tape's answers.
"""

import json
import random

from mcp.client.client import Client
from mcp.shared.exceptions import MCPError

# Questions are worded anew on every run: answer with the nearest recorded one.
NEAREST_QUESTION = """
[[match]]
server = "mcp_KnowledgeTools"
tool = "query_federated_knowledge"
by = "nearest"
"""

# The title's case and spacing and the page size do not change the answer.
SAME_EVENTS = """
[[match]]
server = "mcp_CalendarTools"
tool = "ListEvents"
ignore = ["/arguments/top"]
normalize = { "/arguments/meetingTitle" = ["case", "space"] }
"""

# The rules an agent's test suite would keep beside its cassette; the profile answer holds
# every field, whichever were selected.
AGENT_RULES = NEAREST_QUESTION + SAME_EVENTS + """
[[match]]
server = "mcp_MeServer"
tool = "GetMyDetails"
ignore = ["/arguments/select"]
"""

# One rule per kind, for `rule_kinds`.
KIND_RULES = SAME_EVENTS + """
[[match]]
server = "mcp_MeServer"
tool = "GetMyDetails"
by = "sequence"
""" + NEAREST_QUESTION

# What the model may mean, and the recorded call that answers each intent.
RECORDED = {
    "vpn": ("mcp_KnowledgeTools", "query_federated_knowledge",
            {"consumerId": "agent-1", "query": "How do I use the vpn?"}),
    "expenses": ("mcp_KnowledgeTools", "query_federated_knowledge",
                 {"consumerId": "agent-1", "query": "What are the expenses rules?"}),
    "events": ("mcp_CalendarTools", "ListEvents", {"meetingTitle": "budget"}),
    "me": ("mcp_MeServer", "GetMyDetails", {"select": "displayName,jobTitle"}),
}

VPN_FRAMES = ["How do I use {}?", "how do I use {} from home?", "How can I use {}?",
              "How do I use {}, please?", "How do I connect to {}?"]
# None of the wordings is the recorded one: every run's question differs from the recording.
VPN_THINGS = ["the VPN", "our vpn", "the Contoso VPN", "the company vpn"]
EXPENSE_FRAMES = ["What are the expenses rules now?", "what are the expense rules?",
                  "What are the expenses rules for {}?", "What are the rules for expenses?",
                  "What are the {} expenses rules?"]
EXPENSE_THINGS = ["March", "travel", "2026", "Q3"]
TITLES = ["Budget", "BUDGET", "  budget ", "budget  ", "Budget\t"]
PROFILE_FIELDS = ["displayName", "jobTitle", "mail", "officeLocation", "department"]


class ScriptedModel:
    """Decides one run's tool calls from a seed: each call is
    (intent, server, tool, arguments)."""

    def __init__(self, seed):
        self.random = random.Random(seed)

    def calls(self):
        pick = self.random.choice
        topic = pick(["vpn", "expenses"])
        if topic == "vpn":
            question = pick(VPN_FRAMES).format(pick(VPN_THINGS))
        else:
            question = pick(EXPENSE_FRAMES).format(pick(EXPENSE_THINGS))
        fields = self.random.sample(PROFILE_FIELDS, self.random.randint(1, 3))
        return [
            (topic, "mcp_KnowledgeTools", "query_federated_knowledge",
             {"consumerId": "agent-1", "query": question}),
            ("events", "mcp_CalendarTools", "ListEvents",
             {"meetingTitle": pick(TITLES), "top": self.random.randint(1, 50)}),
            ("me", "mcp_MeServer", "GetMyDetails", {"select": ",".join(fields)}),
        ]


def texts(result):
    return [block.text for block in result.content]


async def agent_run(connect, model, recorded_result):
    """One agent run: the model's calls through `connect(server)`; raises on
    the first answer that is not the one recorded for the model's intent.
    Returns the calls made."""
    calls = model.calls()
    for intent, server, tool, arguments in calls:
        async with connect(server) as client:
            try:
                result = await client.call_tool(tool, arguments)
            except MCPError as error:
                failure = error  # raised once the client is closed, not inside its task group
            else:
                failure = None
        if failure:
            raise failure
        if (missed := miss_text(result)) is not None:
            raise Missed(missed)
        expected = recorded_result(*RECORDED[intent])
        assert not result.is_error, (tool, arguments, texts(result))
        assert texts(result) == [block["text"] for block in expected["content"]], (intent, arguments, texts(result))
    return calls


async def rule_kinds(connect, recorded_result):
    """Each rule kind answers the SDK's call with other arguments with the
    recorded result; the sequence's second call, past its one recording,
    and a tool no rule covers are misses (failed calls naming them)."""
    async def call(server, tool, arguments):
        async with connect(server) as client:
            return texts(await client.call_tool(tool, arguments))

    def recorded(intent):
        return [block["text"] for block in recorded_result(*RECORDED[intent])["content"]]

    assert await call("mcp_CalendarTools", "ListEvents", {"meetingTitle": "  BUDGET ", "top": 7}) == recorded("events")
    assert await call("mcp_KnowledgeTools", "query_federated_knowledge",
                      {"consumerId": "agent-1", "query": "what are the expense rules for travel?"}) == recorded("expenses")
    assert await call("mcp_KnowledgeTools", "query_federated_knowledge",
                      {"consumerId": "agent-1", "query": "how do I connect to the VPN?"}) == recorded("vpn")
    async with connect("mcp_MeServer") as client:
        first = await client.call_tool("GetMyDetails", {"select": "mail"})
        assert texts(first) == recorded("me"), texts(first)
        await expect_miss(client.call_tool("GetMyDetails", {"select": "department"}), "past the last")
    async with connect("mcp_MailTools") as client:
        await expect_miss(client.call_tool("GetMessage", {"id": "AAMk-other"}), "GetMessage")


class Missed(AssertionError):
    """A call replay answered with a miss: a failed tool call (the default,
    `--on-miss tool-result`) whose text is the miss's message."""


def miss_text(result):
    """The miss's message if `result` is replay's failed call for a miss, else None."""
    text = " ".join(texts(result))
    return text if result.is_error and text.startswith("mcp-tape: no recorded answer for ") else None


async def expect_miss(call, words):
    """Awaits `call`, which must be replay's miss (a failed tool call) naming `words`."""
    result = await call
    text = miss_text(result)
    assert text is not None, f"expected a miss naming {words!r}, got {result}"
    assert words in text, text
    return text


async def listed_tool_under_mock(url, mode):
    """--on-miss mock: a listed tool with unrecorded arguments is a failed
    tool call (isError) naming the difference, not an unknown tool."""
    async with Client(url, mode=mode) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        assert "GetMyDetails" in names, names
        result = await client.call_tool("GetMyDetails", {"select": "mail,displayName"})
        assert result.is_error, result
        text = texts(result)[0]
        assert "no recorded answer for mcp_MeServer tools/call GetMyDetails" in text, text
        assert "/arguments/select" in text, text
        try:
            await client.call_tool("NoSuchTool", {})
        except MCPError as error:
            assert error.error.code == -32602, error.error
        else:
            raise AssertionError("an unlisted tool was answered")


def dumps(calls):
    return json.dumps([[intent, tool, arguments] for intent, _, tool, arguments in calls])
