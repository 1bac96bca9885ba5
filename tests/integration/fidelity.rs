//! Replay fidelity: server→client requests re-enacted mid-stream, log
//! notifications per the caller's level, recorded pacing, era conversion of
//! stateless recordings, and many concurrent sessions on one cassette.

use std::time::{Duration, Instant};

use mcp_tape::config::Pace;
use mcp_tape::model::{Direction, Era, RawExchange, RecordedMessage, Status, StreamShape};
use serde_json::{Value, json};

use crate::support::*;

const SERVER: &str = "/agents/servers/mcp_Fixture";

fn streamed(tool: &str, messages: Vec<(u64, Direction, Value)>) -> RawExchange {
    RawExchange {
        server: "mcp_Fixture".into(),
        era: Era::Handshake,
        protocol_version: "2025-06-18".into(),
        request: json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": tool, "arguments": {}}}),
        status: Status::OK,
        content_type: "text/event-stream".into(),
        messages: messages
            .into_iter()
            .map(|(offset_ms, direction, body)| RecordedMessage::new(offset_ms, direction, body))
            .collect(),
        asides: Vec::new(),
        stream: StreamShape::default(),
    }
}

fn log_at(level: &str) -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": level, "data": level}})
}

fn done(text: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 9, "result": {"content": [{"type": "text", "text": text}]}})
}

fn tool(name: &str) -> Value {
    json!({"name": name, "arguments": {}})
}

#[tokio::test]
async fn server_requests_are_re_enacted_and_wait_for_the_reply() {
    let cassettes = Cassettes::new();
    let ask =
        json!({"jsonrpc": "2.0", "id": 0, "method": "elicitation/create", "params": {"message": "Name?"}});
    let reply =
        json!({"jsonrpc": "2.0", "id": 0, "result": {"action": "accept", "content": {"name": "Ada"}}});
    cassettes.write(
        "fixture",
        vec![streamed(
            "ask",
            vec![
                (0, Direction::Server, ask.clone()),
                (5, Direction::Client, reply.clone()),
                (9, Direction::Server, done("Hi Ada")),
            ],
        )],
    );
    let replay = Replayer::start(&[cassettes.path()]).await;
    let url = replay.url(SERVER);
    let session = initialize(&url).await;
    let body = json!({"jsonrpc": "2.0", "id": "c-1", "method": "tools/call", "params": tool("ask")});
    let mut stream = open_stream(&url, &[("mcp-session-id", &session)], &body).await;
    let first = next_chunk(&mut stream).await;
    assert!(first.contains("elicitation/create") && !first.contains("Hi Ada"), "{first}");
    let accepted = post(&url, &[("mcp-session-id", &session)], &reply.to_string()).await;
    assert_eq!((accepted.status, accepted.text.as_str()), (202, ""));
    let rest = stream.text().await.unwrap();
    assert!(rest.contains("Hi Ada") && rest.contains("\"c-1\""), "{rest}");
    replay.stop().await.unwrap();
}

#[tokio::test]
async fn log_notifications_follow_the_callers_level_in_each_era() {
    let cassettes = Cassettes::new();
    let logs = |era: Era| {
        let mut exchange = streamed(
            "logs",
            vec![
                (0, Direction::Server, log_at("debug")),
                (1, Direction::Server, log_at("error")),
                (2, Direction::Server, done("ok")),
            ],
        );
        exchange.era = era;
        exchange
    };
    cassettes.write("fixture", vec![logs(Era::Handshake)]);
    let replay = Replayer::start(&[cassettes.path()]).await;
    let url = replay.url(SERVER);
    let levels = |events: Vec<Value>| -> Vec<String> {
        events
            .iter()
            .filter_map(|e| e.pointer("/params/level").and_then(Value::as_str))
            .map(str::to_owned)
            .collect()
    };

    let session = initialize(&url).await;
    let s = [("mcp-session-id", session.as_str())];
    assert_eq!(levels(call(&url, &s, "tools/call", tool("logs")).await.events()), ["debug", "error"]);
    call(&url, &s, "logging/setLevel", json!({"level": "warning"})).await;
    assert_eq!(levels(call(&url, &s, "tools/call", tool("logs")).await.events()), ["error"]);
    let other = initialize(&url).await;
    let o = [("mcp-session-id", other.as_str())];
    assert_eq!(
        levels(call(&url, &o, "tools/call", tool("logs")).await.events()),
        ["debug", "error"],
        "per session"
    );

    assert!(
        levels(stateless(&url, "tools/call", tool("logs")).await.events()).is_empty(),
        "no opt-in, no logs"
    );
    let mut params = enveloped(tool("logs"));
    params["_meta"]["io.modelcontextprotocol/logLevel"] = json!("info");
    let reply = call(
        &url,
        &[("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call"), ("mcp-name", "logs")],
        "tools/call",
        params,
    )
    .await;
    assert_eq!(levels(reply.events()), ["error"]);
    replay.stop().await.unwrap();
}

#[tokio::test]
async fn recorded_pace_keeps_the_gaps() {
    let cassettes = Cassettes::new();
    cassettes.write(
        "fixture",
        vec![streamed(
            "slow",
            vec![(0, Direction::Server, log_at("info")), (400, Direction::Server, done("late"))],
        )],
    );
    let options = Options { pace: Pace::Recorded, ..Options::default() };
    let replay = Replayer::start_with(&[cassettes.path()], options).await;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": tool("slow")});
    let mut stream = open_stream(&replay.url(SERVER), &[], &body).await;
    let first = next_chunk(&mut stream).await;
    let after_first = Instant::now();
    assert!(first.contains("notifications/message"));
    let rest = stream.text().await.unwrap();
    assert!(rest.contains("late"));
    assert!(
        after_first.elapsed() >= Duration::from_millis(300),
        "the 400 ms gap was kept: {:?}",
        after_first.elapsed()
    );
    replay.stop().await.unwrap();
}

#[tokio::test]
async fn stateless_recordings_lose_their_era_fields_for_handshake_clients() {
    let cassettes = Cassettes::new();
    let mut listed = exchange(
        "mcp_Fixture",
        Era::Stateless,
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}),
        "application/json",
        vec![json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": [], "resultType": "complete", "ttlMs": 5,
            "cacheScope": "public", "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "m", "version": "1"}}}})],
    );
    listed.status = Status::OK;
    cassettes.write("fixture", vec![listed]);
    let replay = Replayer::start(&[cassettes.path()]).await;
    let url = replay.url(SERVER);
    let handshake = call(&url, &[], "tools/list", json!({})).await.json();
    assert_eq!(handshake["result"], json!({"tools": []}));
    let modern = stateless(&url, "tools/list", json!({})).await.json();
    assert_eq!(
        (modern["result"]["ttlMs"].clone(), modern["result"]["cacheScope"].clone()),
        (json!(5), json!("public"))
    );
    replay.stop().await.unwrap();
}

#[tokio::test]
async fn each_era_gets_its_own_recording_and_the_recorded_server_info() {
    let cassettes = Cassettes::new();
    let upstream_info = json!({"name": "mcp_Fixture", "version": "3.1"});
    let initialize = exchange(
        "mcp_Fixture",
        Era::Handshake,
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}}),
        "application/json",
        vec![json!({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": "2025-06-18",
            "capabilities": {"tools": {}}, "serverInfo": upstream_info}})],
    );
    let mut modern = streamed("t", vec![(0, Direction::Server, done("stateless answer"))]);
    modern.era = Era::Stateless;
    recorded_with_envelope(&mut modern.request);
    let only_handshake = tool_call("mcp_Fixture", "u", json!({}), "converted");
    // Recorded stateless first: a handshake client must still get the handshake one.
    let cassette = vec![
        initialize,
        modern,
        streamed("t", vec![(0, Direction::Server, done("handshake answer"))]),
        only_handshake,
    ];
    cassettes.write("fixture", cassette);
    let replay = Replayer::start(&[cassettes.path()]).await;
    let url = replay.url(SERVER);
    let text = |reply: &Reply| reply.events().last().unwrap()["result"]["content"][0]["text"].clone();
    let old = call(&url, &[], "tools/call", tool("t")).await;
    assert_eq!(text(&old), "handshake answer");
    let new = stateless(&url, "tools/call", tool("t")).await;
    assert_eq!(text(&new), "stateless answer");
    let converted = stateless(&url, "tools/call", json!({"name": "u", "arguments": {}})).await.json();
    assert_eq!(converted["result"]["content"][0]["text"], "converted");
    assert_eq!(
        converted["result"]["_meta"]["io.modelcontextprotocol/serverInfo"], upstream_info,
        "the recorded server's identity, not mcp-tape's"
    );
    replay.stop().await.unwrap();
}

#[tokio::test]
async fn thirty_two_concurrent_sessions_each_get_their_own_recorded_order() {
    const CLIENTS: usize = 32;
    let cassettes = Cassettes::new();
    let step = |n: &str| tool_call("mcp_Fixture", "next_step", json!({}), n);
    cassettes.write("fixture", vec![step("one"), step("two"), step("three")]);
    let replay = Replayer::start(&[cassettes.path()]).await;
    let url = replay.url(SERVER);
    let mut clients = Vec::new();
    for client in 0..CLIENTS {
        let url = url.clone();
        clients.push(tokio::spawn(async move {
            let session = initialize(&url).await;
            let mut seen = Vec::new();
            for i in 0..4 {
                let id = format!("{client}-{i}");
                let body =
                    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": tool("next_step")});
                let answer = post(&url, &[("mcp-session-id", &session)], &body.to_string()).await.json();
                assert_eq!(answer["id"], id, "each answer carries its own caller's id");
                seen.push(answer["result"]["content"][0]["text"].as_str().unwrap().to_owned());
            }
            (session, seen)
        }));
    }
    let mut sessions = std::collections::BTreeSet::new();
    for client in clients {
        let (session, seen) = client.await.unwrap();
        assert_eq!(seen, ["one", "two", "three", "three"]);
        sessions.insert(session);
    }
    assert_eq!(sessions.len(), CLIENTS, "isolated sessions");
    replay.stop().await.unwrap();
}

#[tokio::test]
async fn stateless_input_required_round_trips_replay() {
    let cassettes = Cassettes::new();
    let stateless_call = |params: Value, result: Value| {
        exchange(
            "mcp_Fixture",
            Era::Stateless,
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}),
            "application/json",
            vec![json!({"jsonrpc": "2.0", "id": 1, "result": result})],
        )
    };
    let ask = json!({"resultType": "input_required", "requestState": "v1.sealed-state-from-the-upstream",
        "inputRequests": {"who": {"method": "elicitation/create",
            "params": {"message": "Name?", "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}}}}});
    let answered = json!({"name": "book_room", "arguments": {"room": "4.12"},
        "inputResponses": {"who": {"action": "accept", "content": {"name": "Ada"}}},
        "requestState": "v1.sealed-state-from-the-upstream"});
    cassettes.write(
        "fixture",
        vec![
            stateless_call(json!({"name": "book_room", "arguments": {"room": "4.12"}}), ask.clone()),
            stateless_call(
                answered.clone(),
                json!({"resultType": "complete", "content": [{"type": "text", "text": "Booked for Ada"}]}),
            ),
        ],
    );
    let replay = Replayer::start(&[cassettes.path()]).await;
    let url = replay.url(SERVER);
    let first = stateless(&url, "tools/call", json!({"name": "book_room", "arguments": {"room": "4.12"}}))
        .await
        .json();
    assert_eq!(first["result"]["resultType"], "input_required");
    let state = first["result"]["requestState"].clone();
    let retry = stateless(
        &url,
        "tools/call",
        json!({"name": "book_room", "arguments": {"room": "4.12"}, "requestState": state,
            "inputResponses": {"who": {"action": "accept", "content": {"name": "Ada"}}}}),
    )
    .await
    .json();
    assert_eq!(
        retry["result"]["content"][0]["text"], "Booked for Ada",
        "the retry matched on its responses and state"
    );
    let other = stateless(
        &url,
        "tools/call",
        json!({"name": "book_room", "arguments": {"room": "4.12"}, "requestState": state,
            "inputResponses": {"who": {"action": "accept", "content": {"name": "Bob"}}}}),
    )
    .await
    .json();
    assert_eq!(other["error"]["code"], -32001, "other input responses are a miss, not the recorded answer");
    replay.stop().await.unwrap();
}
