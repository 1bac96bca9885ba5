//! What a server says on its own, no answer to any request: recorded over
//! stdio (a shell one-liner that speaks between exchanges) and over HTTP
//! (the standalone GET stream), and replayed at the same point over stdio,
//! over HTTP and across the two; a recorded change notification on the
//! 2026-07-28 subscription streams that asked for it; and the Agent 365 mock
//! server's path.

use std::path::Path;
use std::time::Duration;

use mcp_tape::cassette::store::Cassette;
use mcp_tape::model::{Aside, Channel, Direction, Era, RecordedMessage};
use serde_json::{Value, json};

use crate::stdio::Peer;
use crate::support::*;

const PATIENCE: Duration = Duration::from_secs(30);

const LIST_CHANGED: &str = r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#;
const ROOTS: &str = r#"{"jsonrpc":"2.0","id":"roots-1","method":"roots/list"}"#;

/// A stdio server in one line of shell: it answers `initialize`, then on
/// `notifications/initialized` says `tools/list_changed` and asks for the
/// client's roots, and answers the `ping` that follows the reply.
fn chatty_server() -> String {
    let init = r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"chatty","version":"1"}}}"#;
    let pong = r#"{"jsonrpc":"2.0","id":1,"result":{}}"#;
    format!(
        "read l; echo '{init}'; read l; echo '{LIST_CHANGED}'; echo '{ROOTS}'; read l; read l; echo '{pong}'; cat >/dev/null"
    )
}

pub(crate) fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
        "capabilities": {"roots": {}}, "clientInfo": {"name": "asides-test", "version": "1"}}})
}

pub(crate) fn initialized() -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
}

fn roots_reply() -> Value {
    json!({"jsonrpc": "2.0", "id": "roots-1", "result": {"roots": [{"uri": "file:///tmp", "name": "tmp"}]}})
}

/// The client's side of the conversation over stdio: what it received, in order.
async fn converse(peer: &mut Peer) -> Vec<Value> {
    let mut seen = Vec::new();
    peer.send(initialize()).await;
    seen.push(peer.next().await);
    peer.send(initialized()).await;
    seen.push(peer.next().await);
    seen.push(peer.next().await);
    peer.send(roots_reply()).await;
    peer.send(json!({"jsonrpc": "2.0", "id": 1, "method": "ping"})).await;
    seen.push(peer.next().await);
    seen
}

/// Records the chatty server over stdio into `into/chatty.sqlite`; returns
/// what the client received.
pub(crate) async fn record_chatty(into: &Path) -> Vec<Value> {
    let args = [
        "record",
        "--stdio",
        "--cassettes",
        into.to_str().unwrap(),
        "--name",
        "chatty",
        "--server",
        "mcp_Chatty",
    ];
    let script = chatty_server();
    let args: Vec<&str> = args.into_iter().chain(["--", "sh", "-c", &script]).collect();
    let mut record = Peer::spawn(&args, &[]);
    let seen = converse(&mut record).await;
    let (status, log) = record.close().await;
    assert!(status.success(), "{log}");
    seen
}

#[tokio::test]
async fn stdio_record_stores_what_the_server_says_between_exchanges_and_replay_says_it_again() {
    let into = tempfile::tempdir().unwrap();
    let direct = record_chatty(into.path()).await;
    assert_eq!(direct[1], serde_json::from_str::<Value>(LIST_CHANGED).unwrap(), "{direct:?}");
    assert_eq!(direct[2], serde_json::from_str::<Value>(ROOTS).unwrap(), "{direct:?}");

    let cassette = into.path().join("chatty.sqlite");
    let exchanges = Cassette::open(&cassette).unwrap().exchanges().unwrap();
    let init = exchanges.iter().find(|e| e.method == "initialize").expect("initialize stored");
    let stored: Vec<(Option<&str>, Direction, &Value)> =
        init.asides.iter().map(|a| (a.after.as_deref(), a.message.direction, &a.message.body)).collect();
    let after = Some("notifications/initialized");
    assert_eq!(
        stored,
        [
            (after, Direction::Server, &serde_json::from_str::<Value>(LIST_CHANGED).unwrap()),
            (after, Direction::Server, &serde_json::from_str::<Value>(ROOTS).unwrap()),
            (after, Direction::Client, &roots_reply()),
        ],
        "after initialized, on the standalone stream, the client's reply with them"
    );
    assert!(init.asides.iter().all(|a| a.channel == Channel::Standalone));

    let mut replay = Peer::spawn(&["replay", "--stdio", cassette.to_str().unwrap()], &[]);
    let replayed = converse(&mut replay).await;
    assert_eq!(replayed, direct, "replay over stdio says the same at the same points");
    let (status, log) = replay.close().await;
    assert!(status.success(), "{log}");
}

/// Reads SSE `data:` events from a GET stream until `count` have come.
async fn events(stream: &mut reqwest::Response, count: usize) -> Vec<Value> {
    let mut text = String::new();
    let mut found = Vec::new();
    while found.len() < count {
        let chunk = tokio::time::timeout(PATIENCE, stream.chunk()).await.expect("an event in time");
        text.push_str(std::str::from_utf8(&chunk.unwrap().expect("the stream goes on")).unwrap());
        while let Some(end) = text.find("\n\n") {
            let event: String = text.drain(..end + 2).collect();
            let data: Vec<&str> = event.lines().filter_map(|l| l.strip_prefix("data: ")).collect();
            if !data.is_empty() {
                found.push(serde_json::from_str(&data.join("\n")).unwrap());
            }
        }
    }
    found
}

/// Over HTTP at `url`: initialize, `initialized`, then the GET stream; the
/// client's reply to the roots request; returns what came on the stream.
async fn converse_over_http(url: &str) -> Vec<Value> {
    let init = post(url, &[], &initialize().to_string()).await;
    assert_eq!(init.status, 200, "{init:?}");
    let session = init.header("mcp-session-id").expect("a session").to_owned();
    let headers = [("mcp-session-id", session.as_str())];
    let accepted = post(url, &headers, &initialized().to_string()).await;
    assert_eq!(accepted.status, 202, "{accepted:?}");
    let mut stream = get_stream(url, &session).await;
    let said = events(&mut stream, 2).await;
    let replied = post(url, &headers, &roots_reply().to_string()).await;
    assert_eq!(replied.status, 202, "{replied:?}");
    said
}

#[tokio::test]
async fn a_stdio_recording_served_over_http_says_it_on_the_get_stream_and_record_keeps_that_stream() {
    let into = tempfile::tempdir().unwrap();
    let direct = record_chatty(into.path()).await;
    let replay = Replayer::start(&[into.path()]).await;
    let said = converse_over_http(&replay.url("/agents/servers/mcp_Chatty")).await;
    assert_eq!(said, direct[1..3], "what stdio said between exchanges comes on the GET stream");

    // Recorded over HTTP in turn (replay as the upstream): the GET stream is stored.
    let again = tempfile::tempdir().unwrap();
    let recorder = Recorder::start(&replay.url(""), again.path(), RecordOptions::default()).await;
    let relayed = converse_over_http(&recorder.url("/agents/servers/mcp_Chatty")).await;
    assert_eq!(relayed, said, "record relays the GET stream");
    let exchanges = recorder.stop().await;
    let init = exchanges.iter().find(|e| e.method == "initialize").unwrap();
    let directions: Vec<Direction> = init.asides.iter().map(|a| a.message.direction).collect();
    assert_eq!(directions, [Direction::Server, Direction::Server, Direction::Client], "{:?}", init.asides);
    replay.stop().await.unwrap();

    let replay = Replayer::start(&[again.path()]).await;
    assert_eq!(converse_over_http(&replay.url("/agents/servers/mcp_Chatty")).await, said, "and replays it");
    replay.stop().await.unwrap();
}

#[tokio::test]
async fn the_agent365_mock_servers_path_is_the_same_server() {
    let cassettes = Cassettes::new();
    cassettes.write("mail", vec![tool_call("mcp_MailTools", "GetMessage", json!({"id": "1"}), "Hello")]);
    let replay = Replayer::start(&[cassettes.path()]).await;
    for path in ["/agents/servers/mcp_MailTools", "/mcp-mock/agents/servers/mcp_MailTools"] {
        let url = replay.url(path);
        let session = crate::support::initialize(&url).await;
        let headers = [("mcp-session-id", session.as_str())];
        let answer =
            call(&url, &headers, "tools/call", json!({"name": "GetMessage", "arguments": {"id": "1"}})).await;
        assert_eq!(answer.json()["result"]["content"][0]["text"], "Hello", "{path}: {answer:?}");
    }
    replay.stop().await.unwrap();
}

/// A stateless recording: `server/discover` declaring that the tool list
/// changes, and a call after which the server announced such a change on
/// its open `subscriptions/listen` stream (subscription 5 then).
fn changing_server(cassettes: &Cassettes) {
    let discover = exchange(
        "mcp_Changing",
        Era::Stateless,
        json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover"}),
        "application/json",
        vec![json!({"jsonrpc": "2.0", "id": 1, "result": {
            "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {"listChanged": true}},
            "serverInfo": {"name": "changing", "version": "1"}}})],
    );
    let mut change = exchange(
        "mcp_Changing",
        Era::Stateless,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "add_tool", "arguments": {}}}),
        "application/json",
        vec![json!({"jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "text", "text": "added"}]}})],
    );
    change.asides.push(Aside {
        after: None,
        in_flight: false,
        channel: Channel::Subscription,
        message: RecordedMessage {
            offset_ms: 1,
            direction: Direction::Server,
            body: json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
                "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": 5}}}),
            written: None,
            shallow: false,
        },
    });
    cassettes.write("changing", vec![discover, change]);
}

/// The next SSE event's data on `stream`, parsed.
async fn next_event(stream: &mut reqwest::Response) -> Value {
    events(stream, 1).await.remove(0)
}

#[tokio::test]
async fn a_subscription_stream_gets_the_recorded_change_after_the_call_that_made_it() {
    let cassettes = Cassettes::new();
    changing_server(&cassettes);
    let replay = Replayer::start(&[cassettes.path()]).await;
    let url = replay.url("/agents/servers/mcp_Changing");
    let listen = |id: u64, kinds: Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen",
            "params": enveloped(json!({"notifications": kinds}))})
    };
    let headers = [("mcp-protocol-version", "2026-07-28"), ("mcp-method", "subscriptions/listen")];
    let asked = json!({"toolsListChanged": true, "promptsListChanged": true});
    let mut tools = open_stream(&url, &headers, &listen(41, asked)).await;
    let ack = next_event(&mut tools).await;
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(ack["params"]["notifications"], json!({"toolsListChanged": true}), "what the server declared");
    let mut prompts = open_stream(&url, &headers, &listen(42, json!({"promptsListChanged": true}))).await;
    assert_eq!(next_event(&mut prompts).await["params"]["notifications"], json!({}));

    let added = stateless(&url, "tools/call", json!({"name": "add_tool", "arguments": {}})).await;
    assert_eq!(added.json()["result"]["content"][0]["text"], "added", "{added:?}");
    let changed = next_event(&mut tools).await;
    assert_eq!(changed["method"], "notifications/tools/list_changed");
    assert_eq!(changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 41, "this stream's id");
    let quiet = tokio::time::timeout(Duration::from_millis(300), prompts.chunk()).await;
    assert!(quiet.is_err(), "a stream that asked for prompts only hears nothing: {quiet:?}");
    drop((tools, prompts));
    replay.stop().await.unwrap();
}

/// Root cause: a message the server sent on its GET stream while a call
/// was in flight was stored as following that call's answer, so replay
/// said it after the answer and the client filed it under the next
/// operation. Asides said in flight are marked and replayed before the
/// answer.
#[tokio::test]
async fn what_the_server_says_while_a_call_is_in_flight_is_replayed_before_its_answer() {
    let upstream = crate::upstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let recorder = Recorder::start(&upstream.url(), dir.path(), RecordOptions::default()).await;
    let url = recorder.url("/agents/servers/mcp_Fixture");
    let bearer = format!("Bearer {}", crate::upstream::TOKEN);
    let auth = [("authorization", bearer.as_str())];
    let init = post(&url, &auth, &initialize().to_string()).await;
    let session = init.header("mcp-session-id").expect("a session").to_owned();
    let headers = [("authorization", bearer.as_str()), ("mcp-session-id", session.as_str())];
    let mut stream = reqwest::Client::new()
        .get(&url)
        .header("accept", "text/event-stream")
        .header("authorization", &bearer)
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "tells_first", "arguments": {}}});
    let (call_url, call_headers) = (url.clone(), headers.map(|(k, v)| (k, v.to_owned())));
    let answer = tokio::spawn(async move {
        let headers: Vec<(&str, &str)> = call_headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        post(&call_url, &headers, &call.to_string()).await
    });
    let said = events(&mut stream, 1).await;
    assert_eq!(said[0]["params"]["data"], "while you wait", "relayed while the call waits: {said:?}");
    upstream.state.gate.notify_one();
    let answer = answer.await.unwrap();
    assert_eq!(answer.json()["result"]["content"][0]["text"], "told", "{answer:?}");
    drop(stream);
    let exchanges = recorder.stop().await;
    let call = exchanges.iter().find(|e| e.method == "tools/call").expect("the call stored");
    let kept: Vec<(bool, Option<&str>, &Value)> = call
        .asides
        .iter()
        .map(|a| (a.in_flight, a.after.as_deref(), &a.message.body["params"]["data"]))
        .collect();
    assert_eq!(kept, [(true, None, &json!("while you wait"))], "stored as said in flight");

    // Over stdio there is one stream: the log line comes before the answer, as it did.
    let cassette = dir.path().join("recorded.sqlite");
    let mut replay =
        Peer::spawn(&["replay", "--stdio", cassette.to_str().unwrap(), "--server", "mcp_Fixture"], &[]);
    replay.send(initialize()).await;
    replay.next().await;
    replay.send(initialized()).await;
    replay
        .send(json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
        "params": {"name": "tells_first", "arguments": {}}}))
        .await;
    let first = replay.next().await;
    let second = replay.next().await;
    assert_eq!(first["params"]["data"], "while you wait", "the log line first: {first} then {second}");
    assert_eq!(
        (second["id"].clone(), second["result"]["content"][0]["text"].clone()),
        (json!(8), json!("told"))
    );
    let (status, log) = replay.close().await;
    assert!(status.success(), "{log}");

    // Over HTTP it goes on the session's GET stream.
    let replay = Replayer::start(&[dir.path()]).await;
    let url = replay.url("/agents/servers/mcp_Fixture");
    let init = post(&url, &[], &initialize().to_string()).await;
    let session = init.header("mcp-session-id").expect("a session").to_owned();
    let mut stream = get_stream(&url, &session).await;
    let call = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
        "params": {"name": "tells_first", "arguments": {}}});
    let answer = post(&url, &[("mcp-session-id", session.as_str())], &call.to_string()).await;
    assert_eq!(answer.json()["result"]["content"][0]["text"], "told", "{answer:?}");
    let said = events(&mut stream, 1).await;
    assert_eq!(said[0]["params"]["data"], "while you wait");
    replay.stop().await.unwrap();
}

/// Root cause: what the server said on its GET stream right after an
/// answer waited for that answer's commit 1 s at most, and looked for the
/// answer 10 ms: with a commit slower than that (a busy disk or machine)
/// the client heard the log line before the answer, as it never does
/// directly (93 of 95 real-server checks beside two busy cores). It now
/// waits until the answer is written to the client. Here the commit is
/// held up by another connection holding the cassette's write lock.
#[tokio::test]
async fn what_the_server_says_after_an_answer_waits_for_the_answer_however_slow_its_commit() {
    let upstream = crate::upstream::start().await;
    let dir = Cassettes::new();
    let recorder = Recorder::start(&upstream.url(), dir.path(), RecordOptions::default()).await;
    let url = recorder.url("/agents/servers/mcp_Fixture");
    let bearer = format!("Bearer {}", crate::upstream::TOKEN);
    let init = post(&url, &[("authorization", bearer.as_str())], &initialize().to_string()).await;
    let session = init.header("mcp-session-id").expect("a session").to_owned();
    let mut stream = get_stream(&url, &session).await;
    let holder = rusqlite::Connection::open(dir.path().join("recorded.sqlite")).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "answers_then_tells", "arguments": {}}});
    let answer = tokio::spawn(async move {
        let headers = [("authorization", bearer.as_str()), ("mcp-session-id", session.as_str())];
        post(&url, &headers, &call.to_string()).await
    });
    // Three times as long as the wait was bounded before, well within the writer's 5 s for a lock.
    let early = tokio::time::timeout(Duration::from_secs(3), events(&mut stream, 1)).await;
    assert!(early.is_err(), "the log line went out before the answer: {early:?}");
    holder.execute_batch("ROLLBACK").unwrap();
    let answer = answer.await.unwrap();
    assert_eq!(answer.json()["result"]["content"][0]["text"], "answered", "{answer:?}");
    let said = events(&mut stream, 1).await;
    assert_eq!(said[0]["params"]["data"], "after the answer");
    drop(stream);
    let exchanges = recorder.stop().await;
    let call = exchanges.iter().find(|e| e.method == "tools/call").expect("the call stored");
    let kept: Vec<(bool, &Value)> =
        call.asides.iter().map(|a| (a.in_flight, &a.message.body["params"]["data"])).collect();
    assert_eq!(kept, [(false, &json!("after the answer"))], "stored as said after the answer");
}

/// A notification of a resource update, `uri` padded with `padding` bytes.
fn resource_updated(uri: &str, padding: usize) -> RecordedMessage {
    RecordedMessage {
        offset_ms: 1,
        direction: Direction::Server,
        body: json!({"jsonrpc": "2.0", "method": "notifications/resources/updated",
            "params": {"uri": uri, "padding": "p".repeat(padding)}}),
        written: None,
        shallow: false,
    }
}

/// Opens the GET stream of `session` at `path` with a small receive
/// buffer and reads up to the end of its headers.
async fn small_get_stream(addr: std::net::SocketAddr, path: &str, session: &str) -> tokio::net::TcpStream {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stream = socket.connect(addr).await.unwrap();
    let head = format!(
        "GET {path} HTTP/1.1\r\nhost: {addr}\r\naccept: text/event-stream\r\nmcp-session-id: {session}\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let byte = tokio::time::timeout(PATIENCE, stream.read_u8()).await.expect("headers in time");
        head.push(byte.expect("the GET stream's headers"));
    }
    assert!(head.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&head));
    stream
}

/// Root cause: what a recording's server said after an answer went out on
/// the GET stream's task once that answer was written, racing the client's
/// next request, whose answer could reach the client first (the official
/// Python SDK then saw a log message one answer late). The session's next
/// answer now waits until what was said is on the client's connection
/// (for a while: a client that does not read its GET stream is not held up
/// for good). Here the client reads its GET stream late, after a message
/// larger than the socket holds: the next answer waits for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_server_said_after_an_answer_reaches_the_client_before_the_next_answer() {
    use tokio::io::AsyncReadExt;
    // Larger than the kernel lets the replay's socket buffer: twice the most
    // it grows to (Linux says; 4 MiB where it does not).
    let most = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_wmem").ok();
    let most = most.and_then(|t| t.split_whitespace().nth(2)?.parse::<usize>().ok()).unwrap_or(4 << 20);
    let large = 2 * most;
    let cassettes = Cassettes::new();
    let mut telling = tool_call("mcp_Telling", "tells_after", json!({}), "told");
    for message in [resource_updated("file:///large", large), resource_updated("file:///last", 0)] {
        telling.asides.push(Aside { after: None, in_flight: false, channel: Channel::Standalone, message });
    }
    cassettes.write("telling", vec![telling, tool_call("mcp_Telling", "next", json!({}), "next")]);
    let replay = Replayer::start(&[cassettes.path()]).await;
    let path = "/agents/servers/mcp_Telling";
    let url = replay.url(path);
    let session = crate::support::initialize(&url).await;
    let mut stream = small_get_stream(replay.addr, path, &session).await;
    let headers = [("mcp-session-id", session.as_str())];
    let told = call(&url, &headers, "tools/call", json!({"name": "tells_after", "arguments": {}})).await;
    assert_eq!(told.json()["result"]["content"][0]["text"], "told", "{told:?}");
    // A notification between the two calls does not let the next answer go first.
    let noted = json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"});
    assert_eq!(post(&url, &headers, &noted.to_string()).await.status, 202);

    let (next_url, next_session) = (url.clone(), session.clone());
    let asked = std::time::Instant::now();
    let mut next = tokio::spawn(async move {
        let headers = [("mcp-session-id", next_session.as_str())];
        call(&next_url, &headers, "tools/call", json!({"name": "next", "arguments": {}})).await
    });
    let early = tokio::time::timeout(Duration::from_millis(300), &mut next).await.ok();
    // Past the wait's cap the answer goes anyway: a machine that stalled this long tells nothing.
    assert!(
        early.is_none() || asked.elapsed() >= mcp_tape::limits::MAX_ASIDE_WRITE_WAIT,
        "the next answer came before what was said after the first: {early:?}"
    );
    let last = b"file:///last";
    let (mut read, mut looked) = (Vec::new(), 0);
    let mut buffer = vec![0u8; 1 << 16];
    while !read[looked..].windows(last.len()).any(|w| w == last) {
        looked = read.len().saturating_sub(last.len());
        let got =
            tokio::time::timeout(PATIENCE, stream.read(&mut buffer)).await.expect("the GET stream in time");
        let got = got.expect("the GET stream goes on");
        assert!(got > 0, "the GET stream ended early");
        read.extend_from_slice(&buffer[..got]);
    }
    assert!(read.len() > large, "the large message came first");
    let next = match early {
        Some(answered) => answered.unwrap(),
        None => tokio::time::timeout(PATIENCE, next).await.expect("the next answer in time").unwrap(),
    };
    assert_eq!(next.json()["result"]["content"][0]["text"], "next", "{next:?}");
    replay.stop().await.unwrap();
}
