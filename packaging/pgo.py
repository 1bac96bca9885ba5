"""The workload a profile-guided build of mcp-tape learns from (packaging/pgo.sh):

    python3 packaging/pgo.py BINARY [--rounds N]

BINARY (an instrumented build) serves on loopback what users ask of it, N rounds (default 200):

- `replay cassettes/` over HTTP: each recorded session-era request of the demo in a session of
  each protocol version (answers as SSE, and as JSON for a client that takes only JSON), each
  stateless request with its routing headers, and the mock, miss and refusal answers (ping, an
  unknown tool, an unknown server, a bad session); beside the demo, a cassette with the agent's
  model (`/model/openai`: a chat completion as JSON and as a stream, imported at start);
- `record --model` in front of a second replay daemon (the upstream), the same sessions and model
  requests forwarded and stored in a fresh cassette (a tenth as many rounds);
- `replay --stdio` of one server's session (a twentieth as many, at least one).

Each daemon is stopped with SIGTERM (an instrumented binary writes its profile as it exits) and
must exit 0; any answer other than the expected status is an error. Only the standard library is
used, so that it runs on every release runner. Exits 1 with the reason if anything fails.
"""

import argparse
import http.client
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASSETTES = os.path.join(ROOT, "cassettes")
DEMO_JSONL = os.path.join(CASSETTES, "agent365-demo.jsonl")
DEMO_SQLITE = os.path.join(CASSETTES, "agent365-demo.sqlite")
VERSIONS = ("2025-06-18", "2025-11-25")
WAIT_S = 60
# The agent's model: a chat completion as an OpenAI client asks it, answered whole and streamed.
LLM_PATH = "/model/openai/chat/completions"
LLM_ASKED = {"model": "gpt-test", "messages": [{"role": "system", "content": "You plan meetings."},
                                                {"role": "user", "content": "Plan a review with Bob."}]}
LLM_ANSWER = {"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-test", "choices": [
    {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Tuesday at ten."}}]}
LLM_EVENTS = ['data: {"choices":[{"delta":{"content":"Tuesday"}}]}', "data: [DONE]"]


class Daemon:
    """`BINARY ARGS... --port 0`, once it says where it listens."""

    def __init__(self, command, log):
        self.proc = subprocess.Popen([*command, "--port", "0"], stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
        found = queue.Queue()

        def read():
            for raw in self.proc.stderr:
                line = raw.decode(errors="replace")
                log.write(line)
                if "listening on http://" in line:
                    found.put(line.split("listening on http://", 1)[1].split(",")[0].strip())
            found.put(None)

        threading.Thread(target=read, daemon=True).start()
        address = found.get(timeout=WAIT_S)
        if address is None:
            raise RuntimeError(f"{command[1]} ended before it listened (exit {self.proc.wait()})")
        self.host, port = address.rsplit(":", 1)
        self.port = int(port)
        self.base = f"http://{address}"

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=WAIT_S)
        if code != 0:
            raise RuntimeError(f"the daemon exited {code} on SIGTERM")


def recorded():
    """The demo's exchanges: (server, era, protocol version, request) in the cassette's order."""
    with open(DEMO_JSONL) as lines:
        for line in lines:
            exchange = json.loads(line)
            if "request" in exchange:
                yield exchange["server"], exchange["era"], exchange["protocolVersion"], exchange["request"]


def fresh(request, number):
    """`request` with id `number` and, where it asks for progress, a token of its own."""
    request = dict(request, id=number)
    meta = (request.get("params") or {}).get("_meta")
    if meta and "progressToken" in meta:
        request["params"] = dict(request["params"], _meta=dict(meta, progressToken=f"progress-{number}"))
    return request


class Client:
    """One keep-alive connection, POSTing JSON-RPC messages and checking each status."""

    def __init__(self, daemon):
        self.connection = http.client.HTTPConnection(daemon.host, daemon.port, timeout=WAIT_S)
        self.sent = 0

    def post(self, path, message, headers, expected=(200, 202)):
        self.sent += 1
        self.connection.request("POST", path, json.dumps(message).encode(), headers)
        answer = self.connection.getresponse()
        body = answer.read()
        if answer.status not in expected:
            raise RuntimeError(f"POST {path} {message.get('method')}: {answer.status} {body[:300]!r}")
        return answer

    def close(self):
        self.connection.close()


def session(client, server, version, requests, accept):
    """A session of `version` with `server`: initialize, initialized, then each of `requests`."""
    path = f"/agents/servers/{server}"
    headers = {"Content-Type": "application/json", "Accept": accept}
    opened = client.post(path, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "pgo", "version": "1"}}}, headers,
        expected=(200,))
    headers = dict(headers, **{"Mcp-Session-Id": opened.getheader("mcp-session-id"), "MCP-Protocol-Version": version})
    client.post(path, {"jsonrpc": "2.0", "method": "notifications/initialized"}, headers)
    for number, request in enumerate(requests, 1):
        client.post(path, fresh(request, number), headers)


def sessions(client, handshake):
    """Every recorded server's session in each version, as SSE and as JSON."""
    for server, requests in handshake.items():
        for version in VERSIONS:
            session(client, server, version, requests, "application/json, text/event-stream")
        session(client, server, VERSIONS[0], requests, "application/json")


def stateless(client, requests):
    for number, (server, version, request) in enumerate(requests, 1):
        request = fresh(request, number)
        params = request.get("params") or {}
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                   "MCP-Protocol-Version": version, "Mcp-Method": request["method"]}
        name = params.get("name", params.get("uri"))
        if name is not None:
            headers["Mcp-Name"] = name
        client.post(f"/agents/servers/{server}", request, headers)


def llm_cassette(binary, work):
    """A directory holding a cassette of the agent's model: LLM_ASKED answered whole, and streamed."""
    lines = os.path.join(work, "model.jsonl")
    stored = {"model": "openai", "method": "POST", "target": "/chat/completions", "status": 200}
    with open(lines, "w") as out:
        out.write(json.dumps(dict(stored, request=json.dumps(LLM_ASKED), contentType="application/json",
                                  body=json.dumps(LLM_ANSWER))) + "\n")
        out.write(json.dumps(dict(stored, request=json.dumps(dict(LLM_ASKED, stream=True)),
                                  contentType="text/event-stream", events=LLM_EVENTS, offsetsMs=[5, 9])) + "\n")
    directory = os.path.join(work, "model")
    os.makedirs(directory)
    subprocess.run([binary, "import", lines, "--cassette", os.path.join(directory, "model.sqlite")],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return directory


def llm(client):
    """The chat completion, whole and streamed."""
    plain = {"Content-Type": "application/json"}
    client.post(LLM_PATH, LLM_ASKED, plain, expected=(200,))
    client.post(LLM_PATH, dict(LLM_ASKED, stream=True), plain, expected=(200,))


def mocks_and_misses(client):
    """Answers no recording gives: a ping, an unknown tool, an unknown server, a session not known."""
    plain = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    client.post("/agents/servers/mcp_MailTools", {"jsonrpc": "2.0", "id": 1, "method": "ping"}, plain)
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "NoSuchTool", "arguments": {}}}
    client.post("/agents/servers/mcp_NoSuchServer", call, plain, expected=(200, 400, 404))
    lost = dict(plain, **{"Mcp-Session-Id": "not-a-session", "MCP-Protocol-Version": VERSIONS[0]})
    client.post("/agents/servers/mcp_MailTools", call, lost, expected=(404,))


def stdio(binary, server, requests):
    """`replay --stdio` of `server`'s session, each request once the one before it is answered."""
    lines = [{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": VERSIONS[1], "capabilities": {}, "clientInfo": {"name": "pgo", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        *(fresh(request, number) for number, request in enumerate(requests, 1))]
    process = subprocess.Popen([binary, "replay", "--stdio", DEMO_SQLITE, "--server", server],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        for line in lines:
            process.stdin.write(json.dumps(line).encode() + b"\n")
            process.stdin.flush()
            while "id" in line:
                said = process.stdout.readline()
                if not said:
                    raise RuntimeError(f"replay --stdio ended before it answered {line['method']}")
                if json.loads(said).get("id") == line["id"]:
                    break
        process.stdin.close()
        code = process.wait(timeout=WAIT_S)
    finally:
        process.kill()
    if code != 0:
        raise RuntimeError(f"replay --stdio exited {code}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("binary")
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    binary = os.path.abspath(args.binary)
    handshake, stateless_requests = {}, []
    for server, era, version, request in recorded():
        if era == "stateless":
            stateless_requests.append((server, version, request))
        elif request["method"] != "initialize":
            handshake.setdefault(server, []).append(request)
    work = tempfile.mkdtemp(prefix="mcp-tape-pgo-")
    sent, stdio_runs = 0, max(1, args.rounds // 20)
    started = []

    def start(command, log):
        started.append(Daemon(command, log))
        return started[-1]

    try:
        with open(os.path.join(work, "daemons.log"), "w") as log:
            model = llm_cassette(binary, work)
            replay = start([binary, "replay", CASSETTES, model], log)
            upstream = start([binary, "replay", CASSETTES, model], log)
            record = start([binary, "record", "--upstream", upstream.base, "--model",
                            f"openai={upstream.base}/model/openai", "--cassettes",
                            os.path.join(work, "recorded"), "--name", "pgo"], log)
            for daemon, recording in ((replay, False), (record, True)):
                client = Client(daemon)
                for _ in range(max(1, args.rounds // 10) if recording else args.rounds):
                    sessions(client, handshake)
                    llm(client)
                    if not recording:
                        stateless(client, stateless_requests)
                        mocks_and_misses(client)
                client.close()
                sent += client.sent
            for daemon in (record, upstream, replay):
                daemon.stop()
        server, requests = next(iter(handshake.items()))
        for _ in range(stdio_runs):
            stdio(binary, server, requests)
    except (OSError, RuntimeError, http.client.HTTPException, queue.Empty, subprocess.SubprocessError) as error:
        print(f"pgo: {error}\n(the daemons' log is in {work})", file=sys.stderr)
        return 1
    finally:
        # A daemon the run failed before stopping is not left behind (one stopped already has exited).
        for daemon in started:
            daemon.proc.kill()
    shutil.rmtree(work)
    print(f"pgo: {sent} HTTP requests; stdio sessions: {stdio_runs}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
