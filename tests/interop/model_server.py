"""A scripted OpenAI-compatible model server of our own, for the checks of
the agent's model on the tape (models.py): it plays the four-step agent of
frameworks_agents.py from the messages it is sent, as a model would.

    python model_server.py --key KEY [--port N]

- `POST /v1/chat/completions` (OpenAI's Chat Completions) and
  `POST /openai/deployments/{name}/chat/completions?api-version=...` (Azure
  OpenAI's deployment path): with no tool result among the messages it calls
  `list_messages`; after that one, `create_event` with the subject of the
  first message the tool result lists; after that, `send_invite` with the
  event id the result names; then it answers in text. Offered other tools,
  it calls the first with the user's last word as `query`, then answers
  with the tool's result; offered `send_mail` (people_server.py's tools), it
  lists the mail, answers the first message's sender by name and address,
  then says so. `"stream": true` gets
  the same as Server-Sent Events (chunks, then `data: [DONE]`).
- `POST /v1/messages`: Anthropic's Messages shape, a text answer naming how
  many messages it was sent.

Every answer needs the key (`Authorization: Bearer KEY`, Azure's `api-key`,
Anthropic's `x-api-key`); without it, 401 in the API's own error shape. Each
request is appended, as JSON, to the file --seen names (if given), for the
checks to see what reached the server. Listens on 127.0.0.1 and says
"listening on http://127.0.0.1:PORT" on stderr once it is ready.
"""

import argparse
import json
import re
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

START = "2026-12-01T10:00:00Z"


def step_of(messages):
    """The tool results the model was shown so far, in order (each as the text it was handed)."""
    results = []
    for message in messages:
        if message.get("role") != "tool":
            continue
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
        results.append(content or "")
    return results


def next_move(messages, tools):
    """What the model does next: (tool name, arguments) or (None, the answer's text). With the four-step
    agent's tools on offer it plays that agent; with others, it calls the first with the last word the user
    wrote as its `query`, then answers with what the tool said."""
    results = step_of(messages)
    if "send_mail" in tools:
        return mail_move(results)
    if "list_messages" not in tools:
        if results:
            return None, f"Found {results[0]}"
        asked = next((m.get("content") for m in reversed(messages) if m.get("role") == "user"), "") or ""
        words = re.findall(r"\w+", asked if isinstance(asked, str) else json.dumps(asked))
        return (tools[0] if tools else "search"), {"query": (words[-1] if words else "").lower()}
    if not results:
        return "list_messages", {"folder": "inbox", "top": 3}
    if len(results) == 1:
        subject = re.search(r'"subject":\s*"([^"]+)"', results[0])
        return "create_event", {"subject": subject.group(1) if subject else "?", "start": START}
    if len(results) == 2:
        event = re.search(r"evt-[0-9a-f]{8}", results[1])
        return "send_invite", {"eventId": event.group(0) if event else "?", "to": "bob@contoso.com",
                               "body": "Join me for the review."}
    invited = re.search(r"evt-[0-9a-f]{8}", results[2])
    return None, f"Invited Bob to {invited.group(0) if invited else 'the review'}."


def mail_move(results):
    """The mail agent of pseudonyms.py: lists the mail, answers the sender of the first message by name and
    address, then says so, quoting both."""
    if not results:
        return "list_messages", {}
    listed = json.loads(results[0])
    # A framework may hand the tool's content item over whole, or the text as a JSON string.
    while not (isinstance(listed, dict) and "value" in listed):
        if isinstance(listed, str):
            listed = json.loads(listed)
        else:
            listed = json.loads(listed["text"] if isinstance(listed, dict) else listed[0]["text"])
    first = listed["value"][0]["from"]["emailAddress"]
    given = first["name"].split(" ")[0]
    if len(results) == 1:
        return "send_mail", {"to": first["address"], "body": f"Hi {given}, the budget is fine."}
    return None, f"Answered {first['name']} ({first['address']}): {given} has the budget."


def offered(request):
    """The names of the tools the request offers the model, in order."""
    return [tool.get("function", {}).get("name") for tool in request.get("tools") or [] if isinstance(tool, dict)]


def completion(messages, model, number, tools):
    tool, what = next_move(messages, tools)
    step = len(step_of(messages))
    if tool:
        message = {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call-{step}", "type": "function", "function": {"name": tool, "arguments": json.dumps(what)}}]}
        finish = "tool_calls"
    else:
        message = {"role": "assistant", "content": what}
        finish = "stop"
    return {"id": f"chatcmpl-{number}", "object": "chat.completion", "created": 1790000000 + number,
            "model": model, "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 10 * len(messages), "completion_tokens": 7, "total_tokens": 10 * len(messages) + 7}}


def chunks(messages, model, number, usage, tools):
    """The same answer as the chunks of a stream."""
    tool, what = next_move(messages, tools)
    step = len(step_of(messages))
    base = {"id": f"chatcmpl-{number}", "object": "chat.completion.chunk", "created": 1790000000 + number,
            "model": model}
    if tool:
        first = {"role": "assistant", "content": None, "tool_calls": [
            {"index": 0, "id": f"call-{step}", "type": "function", "function": {"name": tool, "arguments": ""}}]}
        deltas = [first, {"tool_calls": [{"index": 0, "function": {"arguments": json.dumps(what)}}]}]
        finish = "tool_calls"
    else:
        words = what.split(" ")
        deltas = [{"role": "assistant", "content": words[0]}] + [{"content": " " + word} for word in words[1:]]
        finish = "stop"
    out = [{**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]} for delta in deltas]
    out.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    if usage:
        out.append({**base, "choices": [], "usage": {"prompt_tokens": 10 * len(messages), "completion_tokens": 7,
                                                      "total_tokens": 10 * len(messages) + 7}})
    return out


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    key = None
    seen = None
    served = 0

    def log_message(self, *args):
        pass

    def answer(self, status, body, content_type="application/json"):
        data = body.encode()
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length)
        path = self.path.split("?", 1)[0]
        if Handler.seen:
            with open(Handler.seen, "a") as out:
                out.write(json.dumps({"target": self.path, "headers": dict(self.headers.items()),
                                      "body": raw.decode("utf-8", "replace")}) + "\n")
        anthropic = path == "/v1/messages"
        azure = re.fullmatch(r"/openai/deployments/[^/]+/chat/completions", path)
        if anthropic:
            given = self.headers.get("x-api-key")
        elif azure:
            given = self.headers.get("api-key")
        else:
            given = (self.headers.get("authorization") or "").removeprefix("Bearer ")
        if path != "/v1/chat/completions" and not anthropic and not azure:
            return self.answer(404, json.dumps({"error": {"message": f"no route {path}", "type": "not_found"}}))
        if given != Handler.key:
            if anthropic:
                error = {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}
            else:
                error = {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error",
                                   "param": None, "code": "invalid_api_key"}}
            return self.answer(401, json.dumps(error))
        request = json.loads(raw)
        Handler.served += 1
        number = Handler.served
        if anthropic:
            return self.answer(200, json.dumps({
                "id": f"msg_{number}", "type": "message", "role": "assistant", "model": request.get("model"),
                "content": [{"type": "text", "text": f"You sent {len(request.get('messages', []))} message(s)."}],
                "stop_reason": "end_turn", "stop_sequence": None,
                "usage": {"input_tokens": 12, "output_tokens": 6}}))
        messages, model = request.get("messages", []), request.get("model", "gpt-test")
        if not request.get("stream"):
            return self.answer(200, json.dumps(completion(messages, model, number, offered(request))))
        usage = bool((request.get("stream_options") or {}).get("include_usage"))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for chunk in [*(f"data: {json.dumps(c)}\n\n" for c in chunks(messages, model, number, usage, offered(request))),
                      "data: [DONE]\n\n"]:
            data = chunk.encode()
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--key", required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--seen")
    args = parser.parse_args()
    Handler.key, Handler.seen = args.key, args.seen
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    print(f"listening on http://127.0.0.1:{server.server_address[1]}", file=sys.stderr, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
