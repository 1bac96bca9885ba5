"""A stand-in for the Microsoft 365 MCP servers that Agent 365 agents call,
written on the official Python MCP SDK, for recording tests and the demo
cassette. Nothing here talks to Microsoft: the mailbox, calendar, directory
and knowledge base are small made-up data sets.

Servers, at /agents/servers/{name}:
- mcp_MailTools (SSE answers; SearchMessages reports progress; GetMessage of
  an unknown id returns an isError result), mcp_CalendarTools and
  mcp_MeServer (JSON answers), mcp_KnowledgeTools (SSE): the tool names and
  parameters of the real servers' 2026-02-28 catalogues;
- mcp_WritingPrompts: prompts only; mcp_PolicyLibrary: resources only.

Every request needs `Authorization: Bearer TOKEN` unless --no-auth. Values
that change on every call on purpose: `currentDateTime` and `sentDateTime`.
With --gzip, answers are compressed for clients that accept gzip (JSON
answers; Starlette leaves event streams alone), as servers behind gateways
do. With --unavailable NAME, server NAME answers 503, as a gateway in front
of a server that is down does.

Prints "listening on http://127.0.0.1:PORT" once the port is bound.

With --stdio NAME, serves the one server NAME on stdin/stdout instead: any
of the above, or mcp_Concierge (stdio only), whose book_room tool asks the
client which room (elicitation) before it answers.
"""

import argparse
import asyncio
import contextlib
import datetime
import hashlib
import json
import logging
import socket
import sys

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.gzip import GZipMiddleware

VOLATILE_KEYS = ("currentDateTime", "sentDateTime")

MAILBOX = {
    "AAMkAGI2TG93AAA=": {
        "subject": "Q3 budget review",
        "from": "adele.vance@contoso.com",
        "receivedDateTime": "2026-02-24T09:12:00Z",
        "body": "Hi team, please review the attached Q3 numbers before Thursday's sync. Travel is 4% over plan.",
        "isRead": False,
        "attachments": [{"id": "att-1", "name": "q3-budget.xlsx", "size": 48211}],
    },
    "AAMkAGI2TG94AAA=": {
        "subject": "Invoice INV-1077 from Fabrikam",
        "from": "billing@fabrikam.com",
        "receivedDateTime": "2026-02-25T15:40:00Z",
        "body": "Invoice INV-1077 for 12,400.00 USD is due on 2026-03-01.",
        "isRead": True,
        "attachments": [],
    },
}

EVENTS = [
    {"id": "evt-101", "subject": "Q3 budget sync", "start": "2026-02-26T16:00:00Z", "end": "2026-02-26T16:30:00Z",
     "attendees": ["adele.vance@contoso.com", "megan.bowen@contoso.com"], "location": "Teams"},
    {"id": "evt-102", "subject": "Fabrikam renewal call", "start": "2026-02-27T18:00:00Z",
     "end": "2026-02-27T19:00:00Z", "attendees": ["lee.gu@contoso.com"], "location": "Room 4.12"},
]

PEOPLE = {
    "megan.bowen@contoso.com": {"displayName": "Megan Bowen", "jobTitle": "Marketing Manager",
                                "department": "Marketing", "officeLocation": "Redmond 18/2111",
                                "manager": "miriam.graham@contoso.com"},
    "adele.vance@contoso.com": {"displayName": "Adele Vance", "jobTitle": "Retail Manager", "department": "Retail",
                                "officeLocation": "Seattle 22/1101", "manager": "megan.bowen@contoso.com"},
    "miriam.graham@contoso.com": {"displayName": "Miriam Graham", "jobTitle": "Director", "department": "Sales",
                                  "officeLocation": "Redmond 18/1102", "manager": None},
}
ME = "megan.bowen@contoso.com"

KNOWLEDGE = {
    "vpn": "Connect with the Contoso VPN client; choose the nearest region and sign in with your work account.",
    "expenses": "Submit expenses within 30 days in the Expenses app; receipts are needed above 25 USD.",
}


def as_text(value):
    """Real servers answer with one text block holding JSON."""
    return json.dumps(value, sort_keys=True)


def now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")


def short_id(*parts):
    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:12]


def text_tools(mcp):
    """A decorator that registers a tool answering with plain text blocks."""
    return lambda description: mcp.tool(description=description, structured_output=False)


def mail_server():
    mcp = MCPServer(name="mcp_MailTools", version="2026.2", instructions="Work with the signed-in user's mailbox.")

    tool = text_tools(mcp)

    @tool("Send a new email, optionally with attachments, to people named by address or display name.")
    def SendEmailWithAttachments(to: list[str] | None = None, cc: list[str] | None = None,
                                 bcc: list[str] | None = None, subject: str = "", body: str = "",
                                 attachmentUris: list[str] | None = None, directAttachments: list[dict] | None = None,
                                 directAttachmentFilePaths: list[str] | None = None) -> str:
        recipients = (to or []) + (cc or []) + (bcc or [])
        return as_text({"status": "sent", "messageId": "AAMk" + short_id(subject, recipients),
                        "recipients": recipients, "sentDateTime": now()})

    @tool("Search the mailbox in natural language and summarize the messages that match.")
    async def SearchMessages(message: str, ctx: Context, conversationId: str | None = None) -> str:
        await ctx.report_progress(1, 3, "searching the mailbox")
        words = [w.lower() for w in message.split() if len(w) > 3]
        hits = [{"id": mid, "subject": m["subject"], "from": m["from"]} for mid, m in MAILBOX.items()
                if any(w in (m["subject"] + " " + m["body"]).lower() for w in words)]
        await ctx.report_progress(2, 3, "ranking results")
        await ctx.report_progress(3, 3, "summarizing")
        return as_text({"conversationId": conversationId or "conv-" + short_id(message), "value": hits,
                        "reply": f"Found {len(hits)} message(s) about '{message}'."})

    @tool("Get one message by its id; bodyPreviewOnly trims the body to a short preview.")
    def GetMessage(id: str, preferHtml: bool = False, bodyPreviewOnly: bool = False) -> str:
        if id not in MAILBOX:
            raise ToolError(f"The message {id} was not found in the mailbox.")
        found = dict(MAILBOX[id], id=id)
        if bodyPreviewOnly:
            found["body"] = found["body"][:40]
        if preferHtml:
            found["body"] = f"<p>{found['body']}</p>"
        return as_text(found)

    def reply_tool(name, what):
        @mcp.tool(name=name, description=f"{what} the message with the given id, adding a comment.",
                  structured_output=False)
        def reply(id: str, comment: str = "", preferHtml: bool = False, toRecipients: list[str] | None = None,
                  ccRecipients: list[str] | None = None, bccRecipients: list[str] | None = None) -> str:
            return as_text({"status": "sent", "inReplyTo": id, "comment": comment, "action": name})

    reply_tool("ReplyToMessage", "Reply to the sender of")
    reply_tool("ReplyAllToMessage", "Reply to everyone on")

    @tool("Set the follow-up flag of a message: NotFlagged, Flagged or Complete.")
    def FlagEmail(messageId: str, flagStatus: str, mailboxAddress: str | None = None) -> str:
        if flagStatus not in ("NotFlagged", "Flagged", "Complete"):
            raise ToolError("flagStatus must be NotFlagged, Flagged or Complete.")
        return as_text({"id": messageId, "flag": {"flagStatus": flagStatus}})

    @tool("Create a draft message to send later with SendDraftMessage.")
    def CreateDraftMessage(subject: str = "", body: str = "", to: list[str] | None = None,
                           cc: list[str] | None = None, bcc: list[str] | None = None,
                           contentType: str = "Text") -> str:
        return as_text({"id": "draft-" + short_id(subject, to), "isDraft": True, "subject": subject})

    @tool("Send a draft message created earlier.")
    def SendDraftMessage(id: str) -> str:
        return as_text({"status": "sent", "id": id})

    @tool("Change the subject, body or recipients of a draft message.")
    def UpdateDraft(messageId: str, subject: str | None = None, body: str | None = None,
                    to: list[str] | None = None, cc: list[str] | None = None) -> str:
        return as_text({"id": messageId, "updated": True})

    @tool("Attach files, given by URI, to a draft message.")
    def AddDraftAttachments(messageId: str, attachmentUris: list[str]) -> str:
        return as_text({"id": messageId, "attached": len(attachmentUris)})

    @tool("List the attachments of a message.")
    def GetAttachments(messageId: str) -> str:
        return as_text({"value": MAILBOX.get(messageId, {}).get("attachments", [])})

    @tool("Download one attachment of a message as base64.")
    def DownloadAttachment(messageId: str, attachmentId: str) -> str:
        return as_text({"id": attachmentId, "contentBytes": "UEsDBBQAAAAIAA==", "contentType": "application/zip"})

    def upload_tool(name):
        @mcp.tool(name=name, description="Attach a file, given as base64, to a draft message.",
                  structured_output=False)
        def upload(messageId: str, fileName: str, contentBase64: str, contentType: str | None = None) -> str:
            return as_text({"id": "att-" + short_id(messageId, fileName), "name": fileName,
                            "size": len(contentBase64) * 3 // 4})

    upload_tool("UploadAttachment")
    upload_tool("UploadLargeAttachment")

    @tool("Remove one attachment from a draft message.")
    def DeleteAttachment(messageId: str, attachmentId: str) -> str:
        return as_text({"id": attachmentId, "deleted": True})

    @tool("Change the subject, body, categories or importance of a message.")
    def UpdateMessage(id: str, subject: str | None = None, body: str | None = None, contentType: str | None = None,
                      categories: list[str] | None = None, importance: str | None = None) -> str:
        return as_text({"id": id, "updated": True})

    @tool("Move a message to Deleted Items.")
    def DeleteMessage(id: str) -> str:
        return as_text({"id": id, "deleted": True})

    def forward_tool(name):
        @mcp.tool(name=name, description="Forward a message to more recipients with an introduction.",
                  structured_output=False)
        def forward(messageId: str, introComment: str = "", preferHtml: bool = False,
                    additionalTo: list[str] | None = None, additionalCc: list[str] | None = None,
                    additionalBcc: list[str] | None = None, attachmentUris: list[str] | None = None,
                    directAttachments: list[dict] | None = None,
                    directAttachmentFilePaths: list[str] | None = None) -> str:
            return as_text({"status": "sent", "forwarded": messageId, "to": additionalTo or []})

    forward_tool("ForwardMessage")
    forward_tool("ForwardMessageWithFullThread")

    def thread_reply_tool(name, reply_all):
        @mcp.tool(name=name, description="Reply with the whole conversation thread included.",
                  structured_output=False)
        def thread_reply(messageId: str, comment: str = "", replyAll: bool = reply_all,
                         includeOriginalNonInlineAttachments: bool = False) -> str:
            return as_text({"status": "sent", "inReplyTo": messageId, "replyAll": replyAll})

    thread_reply_tool("ReplyWithFullThread", False)
    thread_reply_tool("ReplyAllWithFullThread", True)
    return mcp


def calendar_server():
    mcp = MCPServer(name="mcp_CalendarTools", version="2026.2")

    tool = text_tools(mcp)

    @tool("List the signed-in user's calendar events (series masters, not occurrences).")
    def ListEvents(startDateTime: str | None = None, endDateTime: str | None = None,
                   meetingTitle: str | None = None, attendeeEmails: dict | None = None, timeZone: str | None = None,
                   select: str | None = None, top: dict | None = None, orderby: str | None = None) -> str:
        found = [e for e in EVENTS if not meetingTitle or meetingTitle.lower() in e["subject"].lower()]
        return as_text({"value": found})

    @tool("List the events of a user's calendar between two times, occurrences included.")
    def ListCalendarView(userIdentifier: str, startDateTime: str | None = None, endDateTime: str | None = None,
                         timeZone: str | None = None, subject: str | None = None, select: str | None = None,
                         top: dict | None = None, orderby: str | None = None) -> str:
        return as_text({"user": userIdentifier, "value": EVENTS})

    @tool("Create a meeting and send invitations to the attendees.")
    def CreateEvent(subject: str, attendeeEmails: list[str], startDateTime: str, endDateTime: str,
                    timeZone: str | None = None, bodyContent: str | None = None, bodyContentType: str | None = None,
                    location: str | None = None, isOnlineMeeting: bool = False,
                    onlineMeetingProvider: str | None = None, allowNewTimeProposals: dict | None = None,
                    recurrence: dict | None = None, importance: str | None = None, sensitivity: str | None = None,
                    showAs: str | None = None, responseRequested: bool = True) -> str:
        return as_text({"id": "evt-" + short_id(subject, startDateTime), "subject": subject,
                        "start": startDateTime, "end": endDateTime, "attendees": attendeeEmails,
                        "onlineMeeting": {"joinUrl": "https://teams.example/meet/" + short_id(subject)}
                        if isOnlineMeeting else None})

    @tool("Change an event's time, attendees, body or location.")
    def UpdateEvent(eventId: str, subject: str | None = None, startDateTime: str | None = None,
                    endDateTime: str | None = None, timeZone: str | None = None,
                    attendeesToAdd: list[str] | None = None, attendeesToRemove: list[str] | None = None,
                    body: str | None = None, location: str | None = None, recurrence: dict | None = None,
                    importance: str | None = None, sensitivity: str | None = None, showAs: str | None = None,
                    responseRequested: dict | None = None) -> str:
        return as_text({"id": eventId, "updated": True})

    @tool("Suggest meeting times when the attendees are free.")
    def FindMeetingTimes(userIdentifier: str | None = None, attendeeEmails: list[str] | None = None,
                         meetingDuration: str = "PT1H", startDateTime: str | None = None,
                         endDateTime: str | None = None, timeZone: str | None = None,
                         maxCandidates: dict | None = None, isOrganizerOptional: bool = False,
                         returnSuggestionReasons: bool = False, minimumAttendeePercentage: dict | None = None) -> str:
        return as_text({"meetingTimeSuggestions": [
            {"start": "2026-03-02T17:00:00Z", "end": "2026-03-02T18:00:00Z", "confidence": 100},
            {"start": "2026-03-03T21:00:00Z", "end": "2026-03-03T22:00:00Z", "confidence": 80}]})

    def respond_tool(name, response):
        @mcp.tool(name=name, description=f"{response.capitalize()} a meeting invitation, with an optional comment.",
                  structured_output=False)
        def respond(eventId: str, comment: str | None = None, sendResponse: bool = True) -> str:
            return as_text({"id": eventId, "response": response})

    respond_tool("AcceptEvent", "accept")
    respond_tool("TentativelyAcceptEvent", "tentatively accept")
    respond_tool("DeclineEvent", "decline")

    @tool("Cancel a meeting you organize and notify the attendees.")
    def CancelEvent(eventId: str, comment: str | None = None) -> str:
        return as_text({"id": eventId, "cancelled": True})

    @tool("Delete an event from the calendar.")
    def DeleteEventById(eventId: str) -> str:
        return as_text({"id": eventId, "deleted": True})

    @tool("Forward a meeting invitation to more people.")
    def ForwardEvent(eventId: str, recipientEmails: list[str], comment: str | None = None) -> str:
        return as_text({"id": eventId, "forwardedTo": recipientEmails})

    @tool("Get a user's time zone, working hours and the current date and time there.")
    def GetUserDateAndTimeZoneSettings(userIdentifier: str | None = None) -> str:
        return as_text({"timeZone": "Pacific Standard Time", "workingHours": {"start": "08:00", "end": "17:00"},
                        "currentDateTime": now()})

    @tool("List the bookable meeting rooms.")
    def GetRooms() -> str:
        return as_text({"value": [{"displayName": "Room 4.12", "emailAddress": "room412@contoso.com", "capacity": 8},
                                  {"displayName": "Lakeview", "emailAddress": "lakeview@contoso.com",
                                   "capacity": 16}]})

    return mcp


def me_server():
    mcp = MCPServer(name="mcp_MeServer", version="2026.2")

    tool = text_tools(mcp)

    def pick(person, select):
        if not select:
            return person
        return {k: v for k, v in person.items() if k in select.split(",")}

    def lookup(user):
        if user == "me":
            user = ME
        if user not in PEOPLE:
            raise ToolError(f"No user {user} in the directory.")
        return user, PEOPLE[user]

    @tool("Get the signed-in user's profile.")
    def GetMyDetails(select: str | None = None, expand: str | None = None) -> str:
        return as_text(dict(pick(PEOPLE[ME], select), mail=ME))

    @tool("Get one user's profile by email, id or display name.")
    def GetUserDetails(userIdentifier: str, select: str | None = None, expand: str | None = None) -> str:
        mail, person = lookup(userIdentifier)
        return as_text(dict(pick(person, select), mail=mail))

    @tool("Find several users by a property such as displayName or department.")
    def GetMultipleUsersDetails(searchValues: list[str], propertyToSearchBy: str = "displayName",
                                select: str | None = None, expand: str | None = None, top: dict | None = None,
                                orderby: str | None = None) -> str:
        found = [dict(pick(p, select), mail=m) for m, p in PEOPLE.items()
                 if any(v.lower() in str(p.get(propertyToSearchBy, "")).lower() for v in searchValues)]
        return as_text({"value": found})

    @tool("Get a user's manager.")
    def GetManagerDetails(userId: str, select: str | None = None) -> str:
        _, person = lookup(userId)
        if not person["manager"]:
            return as_text({"value": None})
        return as_text(dict(pick(PEOPLE[person["manager"]], select), mail=person["manager"]))

    @tool("List the people who report to a user.")
    def GetDirectReportsDetails(userId: str, select: str | None = None) -> str:
        mail, _ = lookup(userId)
        return as_text({"value": [dict(pick(p, select), mail=m) for m, p in PEOPLE.items() if p["manager"] == mail]})

    return mcp


def knowledge_server():
    mcp = MCPServer(name="mcp_KnowledgeTools", version="2026.2")

    tool = text_tools(mcp)

    @tool("Register a knowledge source (a SharePoint site, a file share, ...) for a consumer.")
    def configure_federated_knowledge(consumerId: str, knowledgeConfig: str, sourceType: str, displayName: str,
                                      description: str, hints: str | None = None) -> str:
        return as_text({"consumerId": consumerId, "searchConfigurationId": "cfg-" + short_id(consumerId, displayName),
                        "status": "configured"})

    @tool("Ask the consumer's knowledge sources a question.")
    async def query_federated_knowledge(consumerId: str, query: str, ctx: Context, maxResults: int = 5,
                                        summarize: bool = True, searchConfigs: str | None = None) -> str:
        await ctx.report_progress(1, 2, "searching sources")
        hits = [{"source": key, "snippet": text} for key, text in KNOWLEDGE.items() if key in query.lower()]
        await ctx.report_progress(2, 2, "summarizing")
        return as_text({"results": hits[:maxResults],
                        "summary": hits[0]["snippet"] if hits and summarize else None})

    @tool("List the knowledge sources configured for a consumer.")
    def retrieve_federated_knowledge(consumerId: str) -> str:
        return as_text({"consumerId": consumerId, "configurations": [
            {"searchConfigurationId": "cfg-handbook", "displayName": "Employee handbook"}]})

    @tool("Start indexing one configured knowledge source.")
    def ingest_federated_knowledge(consumerId: str, searchConfigurationId: str) -> str:
        return as_text({"searchConfigurationId": searchConfigurationId, "status": "ingesting"})

    @tool("Remove one configured knowledge source.")
    def delete_federated_knowledge(consumerId: str, searchConfigurationId: str) -> str:
        return as_text({"searchConfigurationId": searchConfigurationId, "status": "deleted"})

    return mcp


def prompts_server():
    mcp = MCPServer(name="mcp_WritingPrompts", version="1.0")

    @mcp.prompt(description="Summarize an email thread in three bullet points.")
    def summarize_thread(thread: str) -> str:
        return f"Summarize this email thread in three short bullet points:\n\n{thread}"

    @mcp.prompt(description="Draft a reply in the given tone that covers the given points.")
    def draft_reply(tone: str, points: str) -> str:
        return f"Write a {tone} reply to the last message that covers: {points}."

    return mcp


def resources_server():
    mcp = MCPServer(name="mcp_PolicyLibrary", version="1.0")

    @mcp.resource("policy://travel", name="travel", description="The travel policy.", mime_type="text/markdown")
    def travel() -> str:
        return "# Travel\n\nBook economy for flights under 6 hours. Hotels up to 220 USD a night."

    @mcp.resource("policy://expenses", name="expenses", description="The expenses policy.", mime_type="text/markdown")
    def expenses() -> str:
        return "# Expenses\n\n" + KNOWLEDGE["expenses"]

    return mcp


def concierge_server():
    mcp = MCPServer(name="mcp_Concierge", version="1.0")

    class RoomChoice(BaseModel):
        room: str = Field(description="The room to book")

    @mcp.tool(description="Book a meeting room; asks which one.")
    async def book_room(when: str, ctx: Context) -> str:
        answer = await ctx.elicit(f"Which room for {when}?", schema=RoomChoice)
        if answer.action != "accept" or answer.data is None:
            return as_text({"booked": None, "action": answer.action})
        return as_text({"booked": answer.data.room, "when": when})

    return mcp


SERVERS = [
    (mail_server, False),
    (calendar_server, True),
    (me_server, True),
    (knowledge_server, False),
    (prompts_server, False),
    (resources_server, True),
]


class BearerAuth:
    """Refuses any request without `Authorization: Bearer TOKEN` (401)."""

    def __init__(self, app, token):
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != self.expected:
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")]})
            await send({"type": "http.response.body", "body": b'{"error":"invalid_token"}'})
            return
        await self.app(scope, receive, send)


class Unavailable:
    """Answers 503 (plain text, as a gateway does) for the servers named, at their paths."""

    def __init__(self, app, names):
        self.app = app
        self.paths = {f"/agents/servers/{name}" for name in names}

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["path"].rstrip("/") in self.paths:
            await send({"type": "http.response.start", "status": 503,
                        "headers": [(b"content-type", b"text/plain; charset=utf-8")]})
            await send({"type": "http.response.body", "body": b"503 Service Unavailable\n"})
            return
        await self.app(scope, receive, send)


def build_app(token, gzip=False, unavailable=(), any_host=False):
    from mcp.server.transport_security import TransportSecuritySettings

    # The SDK refuses a Host other than 127.0.0.1:PORT (DNS rebinding); mcp-recorder sends it without the port.
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False) if any_host else None
    servers = []
    routes = []
    for make, json_response in SERVERS:
        server = make()
        app = server.streamable_http_app(streamable_http_path=f"/agents/servers/{server.name}",
                                         json_response=json_response, transport_security=security)
        servers.append(server)
        routes.extend(app.routes)

    @contextlib.asynccontextmanager
    async def lifespan(_app):
        async with contextlib.AsyncExitStack() as stack:
            for server in servers:
                await stack.enter_async_context(server.session_manager.run())
            yield

    middleware = [Middleware(GZipMiddleware, minimum_size=1)] if gzip else []
    app = Starlette(routes=routes, lifespan=lifespan, middleware=middleware)
    app = Unavailable(app, unavailable) if unavailable else app
    return app if token is None else BearerAuth(app, token)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--token", help="the bearer token every request must carry")
    parser.add_argument("--no-auth", action="store_true", help="accept requests without a token")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--stdio", metavar="NAME", help="serve the server NAME on stdin/stdout instead")
    parser.add_argument("--gzip", action="store_true", help="compress answers for clients that accept gzip")
    parser.add_argument("--any-host", action="store_true", help="take any Host header (no DNS-rebinding check)")
    parser.add_argument("--unavailable", metavar="NAME", action="append", default=[],
                        help="answer 503 for server NAME (repeatable)")
    args = parser.parse_args()
    if args.stdio is not None:
        by_name = {make().name: make for make in [make for make, _ in SERVERS] + [concierge_server]}
        if args.stdio not in by_name:
            parser.error(f"--stdio: one of {sorted(by_name)}")
        # Tool and prompt errors are part of the flows; their tracebacks are noise here.
        logging.disable(logging.CRITICAL)
        by_name[args.stdio]().run("stdio")
        return
    if (args.token is None) == (not args.no_auth):
        parser.error("give exactly one of --token and --no-auth")
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", args.port))
    listener.listen(128)
    print(f"listening on http://127.0.0.1:{listener.getsockname()[1]}", file=sys.stderr, flush=True)
    config = uvicorn.Config(build_app(args.token, args.gzip, args.unavailable, args.any_host), log_level="warning", lifespan="on")
    asyncio.run(uvicorn.Server(config).serve(sockets=[listener]))


if __name__ == "__main__":
    main()
