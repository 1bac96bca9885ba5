"""A stand-in for an agent's test suite under `mcp-tape test`: it finds the
tape through the environment, as a real suite does, makes the tool calls it
is given, prints what came back, and ends the way it is told.

    ci_agent.py ENV_FILE CALLS END

ENV_FILE: where to write the MCP_TAPE_URL and MCP_PLATFORM_ENDPOINT it saw
("-": nowhere). CALLS: a JSON list of [path, tool, arguments]; a "tool" with a
slash, or "ping", is a method, sent with the arguments as its params. END: an exit
code; "signal" (it kills itself with SIGTERM); or "wait" (it prints "ready"
and waits for SIGTERM, then exits 7). With AGENT_TOKEN set, calls carry it
as a bearer token. Only the Python standard library is used.
"""

import json
import os
import signal
import sys
import urllib.error
import urllib.request


def call(base, path, tool, arguments, number):
    body = {"jsonrpc": "2.0", "id": number, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}}
    if "/" in tool or tool == "ping":
        body = {"jsonrpc": "2.0", "id": number, "method": tool, "params": arguments}
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if os.environ.get("AGENT_TOKEN"):
        headers["Authorization"] = "Bearer " + os.environ["AGENT_TOKEN"]
    request = urllib.request.Request(base + path, data=json.dumps(body).encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return json.loads(answer.read())
    except urllib.error.HTTPError as failed:
        return {"httpStatus": failed.code, "body": failed.read().decode(errors="replace")}


def main():
    env_file, calls, end = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
    seen = {name: os.environ.get(name) for name in ("MCP_TAPE_URL", "MCP_PLATFORM_ENDPOINT")}
    if env_file != "-":
        with open(env_file, "w") as out:
            json.dump(seen, out)
    answers = [call(seen["MCP_TAPE_URL"], path, tool, arguments, i + 1)
               for i, (path, tool, arguments) in enumerate(calls)]
    print(json.dumps(answers), flush=True)
    if end == "signal":
        os.kill(os.getpid(), signal.SIGTERM)
    elif end == "wait":
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(7))
        print("ready", flush=True)
        signal.pause()
    sys.exit(int(end))


main()
