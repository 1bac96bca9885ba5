"""Records the demo cassette: agent365_upstream.py behind `mcp-tape record`,
driven by the official Python SDK's round-trip flow in the stateless
(`auto`) and handshake (`legacy`) eras. See record-demo.sh."""

import argparse
import asyncio
import secrets
import sys

import clients
from harness import UPSTREAM, Daemon

# Calls beyond the round-trip flow, so the demo answers more of each catalogue.
MORE_CALLS = {
    "mcp_MailTools": [
        ("FlagEmail", {"messageId": "AAMkAGI2TG94AAA=", "flagStatus": "Flagged"}),
        ("GetAttachments", {"messageId": "AAMkAGI2TG93AAA="}),
        ("ReplyToMessage", {"id": "AAMkAGI2TG93AAA=", "comment": "Thanks, looking now."}),
        ("CreateDraftMessage", {"subject": "Renewal", "body": "Draft for Lee.", "to": ["lee.gu@contoso.com"]}),
    ],
    "mcp_CalendarTools": [
        ("GetRooms", {}),
        ("FindMeetingTimes", {"attendeeEmails": ["adele.vance@contoso.com"], "meetingDuration": "PT1H"}),
        ("CreateEvent", {"subject": "Budget follow-up", "attendeeEmails": ["adele.vance@contoso.com"],
                         "startDateTime": "2026-03-02T17:00:00Z", "endDateTime": "2026-03-02T18:00:00Z",
                         "isOnlineMeeting": True}),
        ("AcceptEvent", {"eventId": "evt-102", "comment": "See you there."}),
    ],
    "mcp_MeServer": [
        ("GetUserDetails", {"userIdentifier": "adele.vance@contoso.com"}),
        ("GetDirectReportsDetails", {"userId": "me"}),
        ("GetMultipleUsersDetails", {"searchValues": ["Sales", "Retail"], "propertyToSearchBy": "department"}),
    ],
    "mcp_KnowledgeTools": [
        ("retrieve_federated_knowledge", {"consumerId": "agent-1"}),
        ("query_federated_knowledge", {"consumerId": "agent-1", "query": "What are the expenses rules?"}),
    ],
}


async def more_calls(base, token):
    for server, calls in MORE_CALLS.items():
        async with clients.connect(base, server, "legacy", token) as client:
            for name, arguments in calls:
                await client.call_tool(name, arguments)
    async with clients.connect(base, "mcp_WritingPrompts", "legacy", token) as client:
        await client.get_prompt("summarize_thread", {"thread": "Adele: budget is 4% over on travel."})
    async with clients.connect(base, "mcp_PolicyLibrary", "legacy", token) as client:
        await client.read_resource("policy://expenses")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--binary", required=True)
    parser.add_argument("--cassettes", required=True)
    parser.add_argument("--name", required=True)
    args = parser.parse_args()
    token = "demo." + secrets.token_urlsafe(32)
    upstream = Daemon(None, None, [sys.executable, UPSTREAM, "--token", token])
    try:
        recorder = Daemon(None, None, [args.binary, "record", "--upstream", upstream.base,
                                       "--cassettes", args.cassettes, "--name", args.name, "--port", "0"])
        try:
            for mode in ["auto", "legacy"]:
                asyncio.run(clients.round_trip_flow(clients.http_connector(recorder.base, mode, token)))
            asyncio.run(more_calls(recorder.base, token))
        finally:
            code, log = recorder.stop()
    finally:
        upstream.stop()
    sys.stderr.write(log.splitlines()[-1] + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
