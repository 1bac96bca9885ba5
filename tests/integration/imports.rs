//! `import --from FORMAT` and `export --to har` over the real binary: each
//! format's file (built here to the shape each tool documents; the interop
//! part imports files the real tools wrote) becomes the exchanges it holds,
//! a broken file of each is refused naming the file, entry and reason with
//! nothing written, a credential in a HAR header never reaches the
//! cassette, and a cassette written as HAR and read back is the same
//! cassette.

use std::path::Path;

use mcp_tape::cassette::store::Cassette;
use mcp_tape::model::{Direction, Era};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_mcp-tape");

fn mcp_tape(args: &[&str]) -> (bool, String) {
    let output = std::process::Command::new(BIN).args(args).output().unwrap();
    (output.status.success(), String::from_utf8_lossy(&output.stderr).into_owned())
}

fn import(format: &str, file: &Path, cassette: &Path) -> (bool, String) {
    mcp_tape(&["import", "--from", format, file.to_str().unwrap(), "--cassette", cassette.to_str().unwrap()])
}

/// A session as each tool would have seen it: `initialize`, its
/// `initialized` notification, `tools/list`, and a `tools/call` whose
/// answer came with a progress notification.
fn session() -> Vec<(bool, Value)> {
    vec![
        (
            true,
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}}),
        ),
        (
            false,
            json!({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
            "serverInfo": {"name": "s", "version": "1"}}}),
        ),
        (true, json!({"jsonrpc": "2.0", "method": "notifications/initialized"})),
        (true, json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})),
        (
            false,
            json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": [{"name": "search", "inputSchema": {"type": "object"}}]}}),
        ),
        (
            true,
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "search", "arguments": {"q": "budget"}, "_meta": {"progressToken": 7}}}),
        ),
        (
            false,
            json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 7, "progress": 1}}),
        ),
        (
            false,
            json!({"jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "text", "text": "3 found"}]}}),
        ),
    ]
}

/// What every format's file of [`session`] must import as.
fn assert_session(cassette: &Path, server: &str, what: &str) {
    let exchanges = Cassette::open(cassette).unwrap().exchanges().unwrap();
    let methods: Vec<&str> = exchanges.iter().map(|e| e.method.as_str()).collect();
    assert_eq!(methods, ["initialize", "tools/list", "tools/call"], "{what}");
    for exchange in &exchanges {
        assert_eq!((exchange.server.as_str(), exchange.era), (server, Era::Handshake), "{what}");
        assert_eq!(exchange.protocol_version, "2025-06-18", "{what}: {}", exchange.method);
        assert_eq!(exchange.request["id"], "mcp-tape:request-id");
    }
    let call = &exchanges[2];
    // mcp-recorder keeps a request's answer only, not what came before it on its stream.
    let progress = usize::from(what != "golden.json");
    assert_eq!(call.messages.len(), 1 + progress, "{what}: the progress notification went with its call");
    if progress == 1 {
        assert_eq!(call.messages[0].body["method"], "notifications/progress", "{what}");
    }
    assert_eq!(call.messages[progress].body["result"]["content"][0]["text"], "3 found");
    assert_eq!(call.messages[progress].body["id"], "mcp-tape:request-id");
}

fn har_of(session: &[(bool, Value)], url: &str, token: &str) -> Value {
    let mut entries = Vec::new();
    let mut pending: Option<(Value, Vec<Value>)> = None;
    let headers = json!([{"name": "Authorization", "value": format!("Bearer {token}")},
        {"name": "Content-Type", "value": "application/json"}]);
    let mut flush = |request: Value, answers: Vec<Value>| {
        let streamed = answers.len() > 1;
        let text: String = if streamed {
            answers.iter().map(|a| format!("event: message\ndata: {a}\n\n")).collect()
        } else {
            answers.first().map(Value::to_string).unwrap_or_default()
        };
        let status = if answers.is_empty() { 202 } else { 200 };
        let mime = if streamed { "text/event-stream" } else { "application/json" };
        entries.push(json!({
            "startedDateTime": "2026-11-26T10:00:00.000Z", "time": 3,
            "request": {"method": "POST", "url": url, "httpVersion": "HTTP/1.1", "cookies": [], "headers": headers,
                "queryString": [], "headersSize": -1, "bodySize": -1,
                "postData": {"mimeType": "application/json", "text": request.to_string()}},
            "response": {"status": status, "statusText": "OK", "httpVersion": "HTTP/1.1", "cookies": [],
                "headers": [{"name": "Content-Type", "value": mime}], "redirectURL": "", "headersSize": -1, "bodySize": -1,
                "content": {"size": text.len(), "mimeType": mime, "text": text}},
            "cache": {}, "timings": {"send": 0, "wait": 3, "receive": 0}
        }));
    };
    for (from_client, message) in session {
        if *from_client {
            if let Some((request, answers)) = pending.take() {
                flush(request, answers);
            }
            pending = Some((message.clone(), Vec::new()));
        } else if let Some((_, answers)) = pending.as_mut() {
            answers.push(message.clone());
        }
    }
    if let Some((request, answers)) = pending.take() {
        flush(request, answers);
    }
    entries.push(json!({
        "startedDateTime": "2026-11-26T10:00:01.000Z", "time": 1,
        "request": {"method": "GET", "url": "https://cdn.example/app.js", "httpVersion": "HTTP/2", "cookies": [],
            "headers": [], "queryString": [], "headersSize": -1, "bodySize": 0},
        "response": {"status": 200, "statusText": "", "httpVersion": "HTTP/2", "cookies": [], "headers": [],
            "redirectURL": "", "headersSize": -1, "bodySize": 1, "content": {"size": 1, "mimeType": "text/javascript", "text": ";"}},
        "cache": {}, "timings": {"send": 0, "wait": 1, "receive": 0}
    }));
    json!({"log": {"version": "1.2", "creator": {"name": "a test", "version": "1"}, "entries": entries}})
}

fn inspector_of(session: &[(bool, Value)]) -> Value {
    let mut entries: Vec<Value> = Vec::new();
    for (n, (from_client, message)) in session.iter().enumerate() {
        let timestamp = format!("2026-11-26T10:00:00.{:03}Z", n * 10);
        let is_request = message.get("method").is_some() && message.get("id").is_some();
        let is_answer = message.get("method").is_none();
        if is_answer {
            let asked = entries
                .iter_mut()
                .rev()
                .find(|e| e["message"]["id"] == message["id"] && e["direction"] == "request");
            let asked = asked.expect("an answer follows its request");
            let sent: usize = asked["id"].as_str().unwrap().trim_start_matches("entry-").parse().unwrap();
            asked["response"] = message.clone();
            asked["duration"] = json!((n - sent) * 10);
            continue;
        }
        entries.push(json!({
            "id": format!("entry-{n}"), "timestamp": timestamp,
            "direction": if is_request { "request" } else { "notification" },
            "origin": if *from_client { "client" } else { "server" },
            "message": message,
        }));
    }
    Value::Array(entries)
}

fn mcp_cassette_of(session: &[(bool, Value)]) -> String {
    let mut lines = vec![json!({"type": "header", "cassetteVersion": 2, "recorder": "mcp-cassette@0.2.0",
        "startedAt": "2026-11-26T10:00:00Z", "transport": "stdio", "command": ["node", "server.js"], "era": "legacy"})];
    for (n, (from_client, message)) in session.iter().enumerate() {
        lines.push(json!({"type": "frame", "t": n * 10, "dir": if *from_client { "c2s" } else { "s2c" }, "frame": message}));
    }
    lines.push(json!({"type": "raw", "t": 99, "dir": "s2c", "data": "a log line"}));
    lines.iter().map(|l| format!("{l}\n")).collect()
}

fn mcp_recorder_of(session: &[(bool, Value)]) -> Value {
    let mut interactions: Vec<Value> = Vec::new();
    for (from_client, message) in session {
        if *from_client {
            let kind = if message.get("id").is_some() { "jsonrpc_request" } else { "notification" };
            interactions.push(json!({"type": kind, "request": message, "response": null,
                "response_is_sse": false, "response_status": 202, "latency_ms": 0}));
        } else if message.get("method").is_none() {
            let last = interactions.last_mut().unwrap();
            last["response"] = message.clone();
            last["response_status"] = json!(200);
            last["latency_ms"] = json!(4);
        }
    }
    interactions.push(
        json!({"type": "lifecycle", "http_method": "DELETE", "http_path": "/mcp", "response_status": 200}),
    );
    json!({"version": "1.0", "metadata": {"recorded_at": "2026-11-26T10:00:00Z", "server_url": "http://127.0.0.1:8000/mcp",
        "transport_type": "http", "protocol_version": "2025-06-18"}, "interactions": interactions})
}

fn mcp_vcr_ndjson_of(session: &[(bool, Value)]) -> String {
    let mut lines = vec![json!({"_type": "meta", "version": 1, "recorded_at": "2026-11-26T10:00:00Z",
        "session_id": "0a1b2c3d", "server_command": ["python", "server.py"], "schema_version": "1.0"})];
    for (n, (from_client, message)) in session.iter().enumerate() {
        lines.push(json!({"t": n * 10, "dir": if *from_client { "c2s" } else { "s2c" }, "payload": message}));
    }
    lines.iter().map(|l| format!("{l}\n")).collect()
}

/// The same transcript as YAML, as Python's `yaml.safe_dump` writes it
/// (keys sorted, block style).
fn mcp_vcr_yaml_of(session: &[(bool, Value)]) -> String {
    let mut yaml = String::from(
        "messages:\n- dir: c2s\n  payload:\n    id: 0\n    jsonrpc: '2.0'\n    method: initialize\n    params:\n      capabilities: {}\n      clientInfo:\n        name: c\n        version: '1'\n      protocolVersion: '2025-06-18'\n  t: 0\n",
    );
    // The rest as flow mappings (JSON is YAML): what matters here is reading both styles.
    for (n, (from_client, message)) in session.iter().enumerate().skip(1) {
        let dir = if *from_client { "c2s" } else { "s2c" };
        yaml.push_str(&format!("- dir: {dir}\n  payload: {message}\n  t: {}\n", n * 10));
    }
    yaml.push_str("meta:\n  recorded_at: '2026-11-26T10:00:00Z'\n  schema_version: '1.0'\n  server_command:\n  - python\n  - server.py\n  session_id: 0a1b2c3d\n  version: 1\n");
    yaml
}

#[test]
fn each_format_imports_the_session_it_holds() {
    let dir = tempfile::tempdir().unwrap();
    let session = session();
    let files: Vec<(&str, &str, String, &str)> = vec![
        (
            "har",
            "session.har",
            har_of(&session, "https://agent365.example/agents/servers/mcp_MailTools", "t0ken-abcdefgh")
                .to_string(),
            "mcp_MailTools",
        ),
        (
            "inspector",
            "inspector-protocol-mail%20box-2026-11-26T10-00-00.000Z.json",
            inspector_of(&session).to_string(),
            "mail box",
        ),
        ("mcp-cassette", "mail.cassette.jsonl", mcp_cassette_of(&session), "mail.cassette"),
        ("mcp-recorder", "golden.json", mcp_recorder_of(&session).to_string(), "/mcp"),
        ("mcp-vcr", "session.ndjson", mcp_vcr_ndjson_of(&session), "session"),
        ("mcp-vcr", "session.yaml", mcp_vcr_yaml_of(&session), "session"),
    ];
    for (format, name, text, server) in files {
        let file = dir.path().join(name);
        std::fs::write(&file, text).unwrap();
        let cassette = dir.path().join(format!("{name}.sqlite"));
        let (ok, stderr) = import(format, &file, &cassette);
        assert!(ok, "{format}: {stderr}");
        assert!(stderr.contains("imported 3 exchanges"), "{format}: {stderr}");
        assert_session(&cassette, server, name);
        let named = dir.path().join(format!("{name}.named.sqlite"));
        let (ok, stderr) = mcp_tape(&[
            "import",
            "--from",
            format,
            file.to_str().unwrap(),
            "--server",
            "mcp_Named",
            "--cassette",
            named.to_str().unwrap(),
        ]);
        assert!(ok, "{format}: {stderr}");
        assert_session(&named, "mcp_Named", name);
    }
}

#[test]
fn a_broken_file_of_each_format_is_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let session = session();
    let mut har = har_of(&session, "http://127.0.0.1:9/mcp", "t0ken-abcdefgh");
    har["log"]["entries"][2]["response"]["content"]["text"] =
        json!("{\"jsonrpc\": \"2.0\", \"id\": 1, \"result\": ");
    let mut inspector = inspector_of(&session);
    inspector[2]["timestamp"] = json!("yesterday");
    let mut vcr: Vec<String> = mcp_vcr_ndjson_of(&session).lines().map(str::to_owned).collect();
    vcr[3] = r#"{"t": 30, "dir": "sideways", "payload": {}}"#.into();
    let broken: Vec<(&str, String, &str)> = vec![
        ("har", har.to_string(), "entry 3: the response body is not JSON"),
        ("har", "{\"log\": {}}".into(), "not a HAR file"),
        ("inspector", inspector.to_string(), "entry 3: \"timestamp\" is not an ISO 8601 time"),
        (
            "mcp-cassette",
            mcp_cassette_of(&session).replacen("\"type\":\"header\"", "\"type\":\"frame\"", 1),
            "line 1",
        ),
        (
            "mcp-recorder",
            mcp_recorder_of(&session).to_string().replace("\"1.0\"", "\"2.0\""),
            "format version \"2.0\"",
        ),
        ("mcp-vcr", vcr.join("\n"), "line 4: \"dir\" must be \"c2s\" or \"s2c\""),
        ("mcp-vcr", mcp_vcr_yaml_of(&session).replace("  t: 10\n", "  t: [10\n"), "neither NDJSON nor YAML"),
    ];
    for (n, (format, text, why)) in broken.into_iter().enumerate() {
        let good = dir.path().join(format!("good-{n}.har"));
        std::fs::write(&good, har_of(&session, "http://127.0.0.1:9/mcp", "t0ken-abcdefgh").to_string())
            .unwrap();
        let file = dir.path().join(format!("broken-{n}"));
        std::fs::write(&file, text).unwrap();
        let cassette = dir.path().join(format!("out-{n}.sqlite"));
        let (ok, stderr) = import(format, &file, &cassette);
        assert!(!ok, "{format}: a broken file was taken");
        assert!(stderr.contains(&file.display().to_string()) && stderr.contains(why), "{format}: {stderr}");
        // No file where none was (else `test --mode once` would replay an empty cassette), nor beside it.
        assert!(!cassette.exists(), "{format}: a refused import left {}", cassette.display());
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with(&format!("out-{n}")))
            .collect();
        assert!(left.is_empty(), "{format}: {left:?}");
        if format == "har" {
            // A good file beside a broken one: all or nothing across files too.
            let (ok, _) = mcp_tape(&[
                "import",
                "--from",
                "har",
                good.to_str().unwrap(),
                file.to_str().unwrap(),
                "--cassette",
                cassette.to_str().unwrap(),
            ]);
            assert!(!ok);
            assert!(!cassette.exists(), "nothing of the good file");
        }
    }
}

#[test]
fn credentials_a_har_carries_never_reach_the_cassette() {
    let dir = tempfile::tempdir().unwrap();
    let token = "eyJhbGciOiJub25lIn0.c2VjcmV0LXRva2Vu.c2ln";
    let mut session = session();
    // The server echoes the bearer token and a short password from the arguments.
    session[5].1["params"]["arguments"]["password"] = json!("hunter2");
    session[7].1["result"]["content"][0]["text"] = json!(format!("3 found for Bearer {token} with hunter2"));
    let file = dir.path().join("leaky.har");
    std::fs::write(
        &file,
        har_of(&session, "http://127.0.0.1:9/agents/servers/mcp_MailTools", token).to_string(),
    )
    .unwrap();
    let cassette = dir.path().join("out.sqlite");
    let (ok, stderr) = import("har", &file, &cassette);
    assert!(ok, "{stderr}");
    let bytes = std::fs::read(&cassette).unwrap();
    for secret in [token, "hunter2"] {
        assert!(!bytes.windows(secret.len()).any(|w| w == secret.as_bytes()), "{secret} is in the cassette");
    }
    let exchanges = Cassette::open(&cassette).unwrap().exchanges().unwrap();
    assert_eq!(
        exchanges[2].messages[1].body["result"]["content"][0]["text"],
        "3 found for [REDACTED] with [REDACTED]"
    );
}

#[test]
fn a_cassette_written_as_har_and_read_back_is_the_same_cassette() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    // The shipped demo (both eras, JSON and SSE answers), and lines with what HTTP has no field for:
    // asides, a stream's shape, a server request with the client's reply, provenance.
    let extra = [
        json!({"asides": [{"after": "notifications/initialized", "body": {"id": 0, "jsonrpc": "2.0", "method": "roots/list"},
                "channel": "standalone", "direction": "server", "offsetMs": 3}],
            "contentType": "text/event-stream", "era": "handshake",
            "messages": [{"body": {"id": 1, "jsonrpc": "2.0", "result": {"protocolVersion": "2025-11-25"}}, "direction": "server", "offsetMs": 2}],
            "protocolVersion": "2025-11-25", "request": {"id": 1, "jsonrpc": "2.0", "method": "initialize"},
            "server": "/mcp", "status": 200, "stream": {"closedAfter": 0, "primed": true, "retryMs": 500},
            "recordedAt": 1_790_000_000, "recordedBy": "0.1.0", "recordedFrom": "http://127.0.0.1:9"}),
        json!({"contentType": "text/event-stream", "era": "handshake",
            "messages": [
                {"body": {"id": 5, "jsonrpc": "2.0", "method": "elicitation/create", "params": {"message": "Sure?"}}, "direction": "server", "offsetMs": 1},
                {"body": {"id": 5, "jsonrpc": "2.0", "result": {"action": "accept"}}, "direction": "client", "offsetMs": 4},
                {"body": {"id": 2, "jsonrpc": "2.0", "result": {"content": []}}, "direction": "server", "offsetMs": 6}],
            "protocolVersion": "2025-11-25", "request": {"id": 2, "jsonrpc": "2.0", "method": "tools/call", "params": {"name": "ask"}},
            "server": "/mcp", "status": 200}),
    ];
    let lines: String = extra.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(path("extra.jsonl"), lines).unwrap();
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("cassettes/agent365-demo.jsonl");
    for (jsonl, name) in [(demo.to_str().unwrap().to_owned(), "demo"), (path("extra.jsonl"), "extra")] {
        let original = path(&format!("{name}.sqlite"));
        assert!(mcp_tape(&["import", &jsonl, "--cassette", &original]).0);
        let har = path(&format!("{name}.har"));
        let (ok, stderr) = mcp_tape(&["export", &original, "--to", "har", "-o", &har]);
        assert!(ok, "{stderr}");
        let written: Value = serde_json::from_str(&std::fs::read_to_string(&har).unwrap()).unwrap();
        assert_eq!(written["log"]["version"], "1.2");
        let again = path(&format!("{name}-again.sqlite"));
        let (ok, stderr) = import("har", Path::new(&har), Path::new(&again));
        assert!(ok, "{stderr}");
        let (before, after) = (path(&format!("{name}.jsonl")), path(&format!("{name}-again.jsonl")));
        assert!(mcp_tape(&["export", &original, "-o", &before]).0);
        assert!(mcp_tape(&["export", &again, "-o", &after]).0);
        let (before, after) = (std::fs::read(&before).unwrap(), std::fs::read(&after).unwrap());
        assert!(!before.is_empty());
        assert!(before == after, "{name}: JSON Lines differ after the HAR round trip");
    }
    let exchanges = Cassette::open(Path::new(&path("extra-again.sqlite"))).unwrap().exchanges().unwrap();
    assert_eq!(exchanges[1].messages[1].direction, Direction::Client, "the client's reply kept its place");
}

/// What the server said on a HAR's `GET` stream becomes asides of the
/// exchange before it, after the client notification sent since (as record
/// stores them), and the client's reply to a server request there joins it.
#[test]
fn a_har_standalone_stream_is_kept_as_asides() {
    let dir = tempfile::tempdir().unwrap();
    let url = "http://127.0.0.1:9/agents/servers/mcp_Files";
    let mut har = har_of(&session()[..3], url, "t0ken-abcdefgh");
    let roots = json!({"jsonrpc": "2.0", "id": 0, "method": "roots/list"});
    let changed = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
    let stream = format!(
        "id: s-0\ndata: \n\nevent: message\nid: s-1\ndata: {changed}\n\nevent: message\nid: s-2\ndata: {roots}\n\n"
    );
    let reply = json!({"jsonrpc": "2.0", "id": 0, "result": {"roots": []}});
    let entries = har["log"]["entries"].as_array_mut().unwrap();
    entries.insert(2, json!({
        "startedDateTime": "2026-11-26T10:00:00.500Z", "time": 9,
        "request": {"method": "GET", "url": url, "httpVersion": "HTTP/1.1", "cookies": [],
            "headers": [{"name": "Accept", "value": "text/event-stream"}, {"name": "Mcp-Session-Id", "value": "s"}],
            "queryString": [], "headersSize": -1, "bodySize": 0},
        "response": {"status": 200, "statusText": "OK", "httpVersion": "HTTP/1.1", "cookies": [],
            "headers": [{"name": "Content-Type", "value": "text/event-stream"}], "redirectURL": "", "headersSize": -1,
            "bodySize": -1, "content": {"size": stream.len(), "mimeType": "text/event-stream", "text": stream}},
        "cache": {}, "timings": {"send": 0, "wait": 9, "receive": 0}
    }));
    let mut post = entries[1].clone();
    post["request"]["postData"]["text"] = json!(reply.to_string());
    entries.insert(3, post);
    let file = dir.path().join("stream.har");
    std::fs::write(&file, har.to_string()).unwrap();
    let cassette = dir.path().join("out.sqlite");
    let (ok, stderr) = import("har", &file, &cassette);
    assert!(ok, "{stderr}");
    let exchanges = Cassette::open(&cassette).unwrap().exchanges().unwrap();
    assert_eq!(exchanges.len(), 1, "initialize alone: the rest is notifications, a GET and a reply");
    let asides: Vec<(Option<&str>, Direction, &Value)> = exchanges[0]
        .asides
        .iter()
        .map(|a| (a.after.as_deref(), a.message.direction, &a.message.body))
        .collect();
    let after = Some("notifications/initialized");
    assert_eq!(
        asides,
        [
            (after, Direction::Server, &changed),
            (after, Direction::Server, &roots),
            (after, Direction::Client, &reply)
        ]
    );
}
