"""Recordings from other tools, imported with `mcp-tape import --from` and
replayed to the official clients (part of interop.py).

- HAR: the Python SDK (auto, legacy) and the TypeScript SDK run the round
  trip flow against agent365_upstream.py (compressing answers) through
  mitmproxy's `mitmdump` as a reverse proxy, which saves the session as HAR;
  `import --from har` of that file, then `replay`: each client's transcript
  equals what it got through mitmdump. The same file rewritten the way
  browsers write HAR (base64 bodies, compression sizes, page and resource
  fields of their own, optional fields left out, unrelated entries) imports
  to the same exchanges; `export --to har` of the cassette imports back to
  the same JSON Lines.
- mcp-recorder: its `record` proxy between the Python SDK (auto, legacy)
  or the TypeScript SDK and the same upstream (taking any Host: mcp-recorder 0.5.0 sends it
  without the port), on one server (its cassettes keep no path);
  imported and replayed, the transcripts equal the ones through it.
- mcp-vcr: its `record` wrapper around our stdio fixture servers, the
  Python SDK (auto: NDJSON; legacy: YAML) and the TypeScript SDK (NDJSON)
  spawning it; imported, `replay --stdio` gives each client its transcript.
- The MCP Inspector and mcp-cassette: neither can write a file here (the
  Inspector exports from its web page, in a browser; mcp-cassette is not
  published on npm), so their files are built to the shapes their sources
  document from the mcp-vcr transcripts of those real sessions; each
  imports to the same JSON Lines as the mcp-vcr files, and replays to the
  Python SDK and the TypeScript SDK.
"""

import base64
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import clients


def listening_port(pid, timeout_s):
    """The TCP port process `pid` listens on, read from /proc once it
    listens (tools that take port 0 but do not say which port they got)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        inodes = set()
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
        for table in ["/proc/net/tcp", "/proc/net/tcp6"]:
            with open(table) as f:
                for row in list(f)[1:]:
                    fields = row.split()
                    if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                        return int(fields[1].split(":")[1], 16)
        time.sleep(0.05)
    raise RuntimeError(f"process {pid} did not listen within {timeout_s} s")


def stop(proc):
    """Ctrl-C, as a person stops these tools (they save their recording then); a second one if the
    first leaves it waiting on a connection (uvicorn's graceful shutdown waits for open streams)."""
    for wait_s in [10, 20]:
        proc.send_signal(signal.SIGINT)
        try:
            return proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            continue
    proc.kill()
    raise RuntimeError(f"{proc.args[0]} did not stop on two SIGINTs")


def jsonl_of(h, cassette):
    return h.run_process([h.args_binary, "export", cassette], h.CLIENT_TIMEOUT_S)


def agree(transcripts, name, through):
    stages = transcripts[name]
    assert through in stages and len(stages) >= 2, f"stages run: {list(stages)}"
    for stage, transcript in stages.items():
        differ = [(a, b) for a, b in zip(stages[through], transcript) if a != b]
        assert transcript == stages[through], f"{stage} differs at {json.dumps(differ[:1])[:3000]}"
    return stages[through]


def browser_style(har):
    """A HAR as browsers write it: response bodies in base64, compression
    sizes, their own `_` fields, a page, optional fields left out, and entries
    that are not MCP."""
    har = json.loads(json.dumps(har))
    log = har["log"]
    log["browser"] = {"name": "Chromium", "version": "131.0"}
    log["pages"] = [{"startedDateTime": log["entries"][0]["startedDateTime"], "id": "page_1",
                     "title": "agent", "pageTimings": {}}]
    for entry in log["entries"]:
        for optional in ["serverIPAddress", "connection", "comment"]:
            entry.pop(optional, None)
        entry["pageref"] = "page_1"
        entry["_resourceType"] = "fetch"
        content = entry["response"]["content"]
        text = content.get("text", "")
        if content.get("encoding") != "base64":
            content["text"] = base64.b64encode(text.encode()).decode()
            content["encoding"] = "base64"
            content["compression"] = max(0, len(text) - len(text) // 3)
        entry["response"]["_transferSize"] = len(text) // 3
        entry["timings"] = {"send": 0, "wait": entry["timings"].get("wait", 0), "receive": 0}
    stamp = log["entries"][0]["startedDateTime"]
    log["entries"].insert(0, {
        "startedDateTime": stamp, "time": 1, "pageref": "page_1",
        "request": {"method": "GET", "url": "http://127.0.0.1/app.js", "httpVersion": "http/1.1", "cookies": [],
                    "headers": [], "queryString": [], "headersSize": -1, "bodySize": 0},
        "response": {"status": 200, "statusText": "OK", "httpVersion": "http/1.1", "cookies": [], "headers": [],
                     "content": {"size": 9, "mimeType": "text/javascript", "text": "Y29uc29sZTs=", "encoding": "base64"},
                     "redirectURL": "", "headersSize": -1, "bodySize": 9},
        "cache": {}, "timings": {"send": 0, "wait": 1, "receive": 0}})
    return har


def har_flows(h, token):
    return {
        **{f"python-sdk {mode}": lambda base, mode=mode: h.python_flow(
            clients.round_trip_flow(clients.http_connector(base, mode, token))) for mode in ["auto", "legacy"]},
        "typescript-sdk": lambda base: json.loads(h.run_process(
            [h.args_node, "ts_client.mjs", base, "round-trip", token], h.CLIENT_TIMEOUT_S, h.node_env)),
    }


def through_tool(h, checks, upstream_args, tool_command, label, flows, transcripts):
    """Starts the fixture upstream with `upstream_args`, then the other tool's
    proxy (`tool_command(upstream base)`, on port 0, its log kept), runs each
    flow through it, and stops both: the tool writes its recording as it stops."""
    upstream = h.Daemon(None, None, [sys.executable, h.UPSTREAM, *upstream_args])
    with open(os.path.join(h.args_logs, f"{label}.log"), "w") as log:
        tool = subprocess.Popen(tool_command(upstream.base), stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        try:
            base = f"http://127.0.0.1:{listening_port(tool.pid, h.START_TIMEOUT_S)}"
            for name, flow in flows.items():
                def one(name=name, flow=flow):
                    transcripts[name][f"through {label}"] = flow(base)
                checks.run(f"imports: {name} through {label}", one)
        finally:
            # The upstream first: the streams the tool still relays end with it.
            upstream.stop()
            stop(tool)


def against_replay(h, checks, cassettes, label, flows, transcripts):
    """Each flow against `replay` of the imported cassettes; returns replay's exit code and log."""
    replayer = h.Daemon(h.args_binary, [cassettes])
    for name, flow in flows.items():
        def one(name=name, flow=flow):
            transcripts[name]["against replay of the import"] = flow(replayer.base)
        checks.run(f"imports: {name} against replay of the imported {label} recording", one)
    code, log = replayer.stop(os.path.join(h.args_logs, f"replay-imported-{label}.log"))
    for name in flows:
        checks.run(f"imports: {name} heard the same from replay as through {label}",
                   lambda name=name: agree(transcripts, name, f"through {label}"))
    return code, log


def from_har(h, checks, tools, work):
    token = "eyJhbGciOiJub25lIn0.har-" + os.urandom(12).hex()
    flows = har_flows(h, token)
    transcripts = {name: {} for name in flows}
    har_file = os.path.join(work, "session.har")
    mitmdump = os.path.join(tools, "venv-mitmproxy", "bin", "mitmdump")
    through_tool(h, checks, ["--token", token, "--gzip"],
                 lambda base: [mitmdump, "--mode", f"reverse:{base}", "--listen-host", "127.0.0.1",
                               "--listen-port", "0", "--set", f"hardump={har_file}", "-q"],
                 "mitmdump", flows, transcripts)

    cassettes = os.path.join(work, "har")
    os.makedirs(cassettes)
    cassette = os.path.join(cassettes, "session.sqlite")

    def imported():
        h.run_process([h.args_binary, "import", "--from", "har", har_file, "--cassette", cassette], h.CLIENT_TIMEOUT_S)
        with open(cassette, "rb") as f:
            assert token.encode() not in f.read(), "the bearer token is in the cassette"

    checks.run("imports: mitmdump's HAR imports; the bearer token is in no cassette byte", imported)
    code, log = against_replay(h, checks, cassettes, "mitmdump", flows, transcripts)

    def no_misses():
        assert code == 0 and "no misses" in log, log[-3000:]

    checks.run("imports: replay of the imported HAR had no misses", no_misses)

    def browser_and_round_trip():
        with open(har_file) as f:
            har = json.load(f)
        browser_file = os.path.join(work, "browser.har")
        with open(browser_file, "w") as f:
            json.dump(browser_style(har), f)
        browser = os.path.join(work, "browser.sqlite")
        h.run_process([h.args_binary, "import", "--from", "har", browser_file, "--cassette", browser], h.CLIENT_TIMEOUT_S)
        assert jsonl_of(h, browser) == jsonl_of(h, cassette), "the browser-style HAR imports otherwise"
        written = os.path.join(work, "exported.har")
        h.run_process([h.args_binary, "export", cassette, "--to", "har", "-o", written], h.CLIENT_TIMEOUT_S)
        again = os.path.join(work, "again.sqlite")
        h.run_process([h.args_binary, "import", "--from", "har", written, "--cassette", again], h.CLIENT_TIMEOUT_S)
        assert jsonl_of(h, again) == jsonl_of(h, cassette), "export --to har then import changed the exchanges"
        # A HAR tool reads what export wrote: mitmproxy loads it and saves it as HAR of its own, which
        # imports to the same exchanges (mitmproxy keeps no `_mcpTape`; this session had nothing there
        # that HTTP does not carry).
        resaved = os.path.join(work, "resaved.har")
        h.run_process([mitmdump, "-n", "-q", "-r", written, "--set", f"hardump={resaved}"], h.CLIENT_TIMEOUT_S)
        with open(resaved) as f:
            entries = json.load(f)["log"]["entries"]
        with open(written) as f:
            assert len(entries) == len(json.load(f)["log"]["entries"]), "mitmproxy read another number of entries"
        third = os.path.join(work, "resaved.sqlite")
        h.run_process([h.args_binary, "import", "--from", "har", resaved, "--cassette", third], h.CLIENT_TIMEOUT_S)
        assert jsonl_of(h, third) == jsonl_of(h, cassette), "mitmproxy's copy of the exported HAR imports otherwise"

    checks.run("imports: a browser-style HAR of the session imports the same; export --to har round-trips, "
               "and mitmproxy reads the exported HAR (its own HAR of it imports the same)", browser_and_round_trip)


def from_mcp_recorder(h, checks, tools, work):
    token = "eyJhbGciOiJub25lIn0.rec-" + os.urandom(12).hex()
    # One server (mcp-recorder keeps no path), one whose answers carry no progress: mcp-recorder 0.5.0
    # stores a streamed answer's first event, so a call with progress is not in its cassette.
    only = ["mcp_MeServer"]
    flows = {
        **{f"python-sdk {mode}": lambda base, mode=mode: h.python_flow(
            clients.round_trip_flow(clients.http_connector(base, mode, token), only)) for mode in ["auto", "legacy"]},
        "typescript-sdk": lambda base: json.loads(h.run_process(
            [h.args_node, "ts_client.mjs", base, "round-trip", token, ",".join(only)], h.CLIENT_TIMEOUT_S, h.node_env)),
    }
    transcripts = {name: {} for name in flows}
    recording = os.path.join(work, "recorder.json")
    recorder = os.path.join(tools, "venv-mcp-recorder", "bin", "mcp-recorder")
    through_tool(h, checks, ["--token", token, "--any-host"],
                 lambda base: [recorder, "record", "--target", base, "--port", "0", "--output", recording],
                 "mcp-recorder", flows, transcripts)
    cassettes = os.path.join(work, "recorder")
    os.makedirs(cassettes)
    h.run_process([h.args_binary, "import", "--from", "mcp-recorder", recording, "--server", "mcp_MeServer",
                   "--cassette", os.path.join(cassettes, "recorder.sqlite")], h.CLIENT_TIMEOUT_S)
    against_replay(h, checks, cassettes, "mcp-recorder", flows, transcripts)


def inspector_of(transcript):
    """An mcp-vcr transcript's messages as the Inspector's protocol history export."""
    start = 1_790_000_000_000
    stamp = lambda ms: time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime((start + ms) // 1000)) + f".{(start + ms) % 1000:03d}Z"
    entries, asked = [], {}
    for n, message in enumerate(transcript):
        body, from_client = message["payload"], message["dir"] == "c2s"
        origin = "client" if from_client else "server"
        if "method" not in body and "id" in body:
            entry = asked.pop((not from_client, json.dumps(body["id"])), None)
            if entry is not None:
                entry["response"] = body
                entry["duration"] = message["t"] - entry["_t"]
                continue
        direction = "request" if "method" in body and "id" in body else "notification" if "method" in body else "response"
        entry = {"id": f"e{n}", "timestamp": stamp(message["t"]), "direction": direction, "origin": origin,
                 "message": body, "_t": message["t"]}
        if direction == "request":
            asked[(from_client, json.dumps(body["id"]))] = entry
        entries.append(entry)
    for entry in entries:
        del entry["_t"]
    return entries


def mcp_cassette_of(transcript):
    handshake = any(m["payload"].get("method") == "initialize" for m in transcript)
    lines = [{"type": "header", "cassetteVersion": 2, "recorder": "mcp-cassette@0.1.1", "transport": "stdio",
              "startedAt": "2026-09-21T14:13:20Z", "command": ["python3", "server.py"],
              "era": "legacy" if handshake else "modern"}]
    for message in transcript:
        lines.append({"type": "frame", "t": message["t"], "dir": message["dir"], "frame": message["payload"]})
    return "".join(json.dumps(line) + "\n" for line in lines)


def read_vcr(path):
    """An mcp-vcr transcript's messages (NDJSON; YAML through the test's own reader is not needed:
    the YAML files are checked by importing them)."""
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip() and not line.startswith('{"_type"')]


def from_mcp_vcr(h, checks, tools, work):
    vcr = os.path.join(tools, "venv-mcp-vcr", "bin", "mcp-vcr")
    env = dict(os.environ, MCP_TAPE_LOG="warn")
    flows = {
        "python-sdk auto": ("ndjson", lambda command: h.python_flow(
            clients.round_trip_flow(clients.stdio_connector(command, "auto", env)))),
        "python-sdk legacy": ("yaml", lambda command: h.python_flow(
            clients.round_trip_flow(clients.stdio_connector(command, "legacy", env)))),
        "typescript-sdk v1": ("ndjson", lambda command: h.without_progress(json.loads(h.run_process(
            [h.args_node, "ts_stdio_client.mjs", "v1", "legacy", "round-trip", json.dumps(command)],
            h.CLIENT_TIMEOUT_S, dict(h.node_env, MCP_TAPE_LOG="warn"))))),
    }
    transcripts = {name: {} for name in flows}
    sessions = os.path.join(work, "vcr")
    files = []
    for name, (form, flow) in flows.items():
        folder = os.path.join(sessions, name.replace(" ", "-"))
        os.makedirs(folder)
        files.append((folder, form))
        command = [vcr, "record", "--no-redact", "--format", form, "-o", os.path.join(folder, "{server}." + form),
                   "--", sys.executable, h.UPSTREAM, "--stdio", "{server}"]

        def one(name=name, flow=flow, command=command):
            transcripts[name]["through mcp-vcr"] = flow(command)
        checks.run(f"imports: {name} spawning our stdio servers through mcp-vcr ({form})", one)
    cassettes = os.path.join(work, "from-vcr")
    os.makedirs(cassettes)
    cassette = os.path.join(cassettes, "vcr.sqlite")
    recorded = [os.path.join(folder, f) for folder, _ in files for f in sorted(os.listdir(folder))]
    h.run_process([h.args_binary, "import", "--from", "mcp-vcr", *recorded, "--cassette", cassette], h.CLIENT_TIMEOUT_S)
    replay = [h.args_binary, "replay", "--stdio", "--fail-on-miss", cassette, "--server", "{server}"]
    for name, (_, flow) in flows.items():
        def one(name=name, flow=flow):
            transcripts[name]["against replay --stdio of the imported transcripts"] = flow(replay)
        checks.run(f"imports: {name} against replay --stdio of the imported mcp-vcr transcripts", one)
        checks.run(f"imports: {name} heard the same from replay as through mcp-vcr",
                   lambda name=name: agree(transcripts, name, "through mcp-vcr"))

    # The Inspector's and mcp-cassette's shapes, built from the NDJSON transcripts of those sessions.
    ndjson = [path for path in recorded if path.endswith(".ndjson")]
    expected = os.path.join(work, "ndjson-only.sqlite")
    h.run_process([h.args_binary, "import", "--from", "mcp-vcr", *ndjson, "--cassette", expected], h.CLIENT_TIMEOUT_S)
    for form, build, suffix in [("inspector", lambda t: json.dumps(inspector_of(t)), ".json"),
                                ("mcp-cassette", mcp_cassette_of, ".jsonl")]:
        def built(form=form, build=build, suffix=suffix):
            paths = []
            for path in ndjson:
                server = os.path.basename(path).rsplit(".", 1)[0]
                name = f"inspector-protocol-{server}-2026-09-21T14-13-20.000Z" if form == "inspector" else server
                out = os.path.join(work, form, os.path.basename(os.path.dirname(path)), name + suffix)
                os.makedirs(os.path.dirname(out), exist_ok=True)
                with open(out, "w") as f:
                    f.write(build(read_vcr(path)))
                paths.append(out)
            folder = os.path.join(work, f"from-{form}")
            os.makedirs(folder)
            imported = os.path.join(folder, f"{form}.sqlite")
            h.run_process([h.args_binary, "import", "--from", form, *paths, "--cassette", imported], h.CLIENT_TIMEOUT_S)
            assert jsonl_of(h, imported) == jsonl_of(h, expected), f"{form} imports otherwise than mcp-vcr"
            replay = [h.args_binary, "replay", "--stdio", "--fail-on-miss", imported, "--server", "{server}"]
            for name in ["python-sdk auto", "typescript-sdk v1"]:
                replayed = flows[name][1](replay)
                assert replayed == transcripts[name]["through mcp-vcr"], f"replay to {name} differs"

        checks.run(f"imports: the same sessions as {form} files (built to its documented shape) import the same "
                   "and replay to the Python SDK and the TypeScript SDK", built)


def run(h, checks, tools):
    with tempfile.TemporaryDirectory() as work:
        from_har(h, checks, tools, work)
        from_mcp_recorder(h, checks, tools, work)
        from_mcp_vcr(h, checks, tools, work)
