//! Replaying recorded exchanges: id and progress-token stamping, JSON and
//! SSE framing, recorded order per session, misses that explain themselves,
//! and the era conversions of `initialize`/`server/discover`.

use mcp_tape::config::OnMiss;
use mcp_tape::model::{Era, Status};
use mcp_tape::normalize::Normalization;
use serde_json::{Value, json};

use crate::support::*;

const MAIL: &str = "/agents/servers/mcp_MailTools";

fn progress_call() -> mcp_tape::model::RawExchange {
    exchange(
        "mcp_MailTools",
        Era::Handshake,
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "SearchMessages", "arguments": {"message": "invoices"}, "_meta": {"progressToken": 3}}}),
        "text/event-stream",
        vec![
            json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 3, "progress": 1, "total": 2}}),
            json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "searching"}}),
            json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 3, "progress": 2, "total": 2}}),
            json!({"jsonrpc": "2.0", "id": 3, "result": {"content": [{"type": "text", "text": "2 invoices"}]}}),
        ],
    )
}

#[tokio::test]
async fn json_answers_carry_the_callers_id() {
    let cassettes = Cassettes::new();
    cassettes.write(
        "mail",
        vec![tool_call("mcp_MailTools", "GetMessage", json!({"id": "AAMk1"}), "Quarterly report")],
    );
    let replay = Replayer::start(&[cassettes.path()]).await;
    let body = json!({"jsonrpc": "2.0", "id": "caller-17", "method": "tools/call",
        "params": {"arguments": {"id": "AAMk1"}, "name": "GetMessage", "_meta": {"progressToken": "ignored"}}});
    let reply = post(&replay.url(MAIL), &[], &body.to_string()).await;
    assert_eq!(reply.header("content-type"), Some("application/json"));
    assert_eq!(
        reply.json(),
        json!({"jsonrpc": "2.0", "id": "caller-17", "result": {"content": [{"type": "text", "text": "Quarterly report"}]}})
    );
    replay.stop().await.unwrap();
}

#[tokio::test]
async fn sse_answers_replay_every_event_with_the_callers_token() {
    let cassettes = Cassettes::new();
    cassettes.write("mail", vec![progress_call()]);
    let replay = Replayer::start(&[cassettes.path()]).await;
    let url = replay.url(MAIL);
    let params =
        |meta: Value| json!({"name": "SearchMessages", "arguments": {"message": "invoices"}, "_meta": meta});

    let body = json!({"jsonrpc": "2.0", "id": 40, "method": "tools/call", "params": params(json!({"progressToken": "tok-9"}))});
    let events = post(&url, &[], &body.to_string()).await.events();
    assert_eq!(events.len(), 4);
    assert_eq!(events[0]["params"], json!({"progressToken": "tok-9", "progress": 1, "total": 2}));
    assert_eq!(events[1]["method"], "notifications/message");
    assert_eq!(events[2]["params"]["progressToken"], "tok-9");
    assert_eq!(events[3]["id"], 40);
    assert_eq!(events[3]["result"]["content"][0]["text"], "2 invoices");

    let body = json!({"jsonrpc": "2.0", "id": 41, "method": "tools/call", "params": params(json!({}))});
    let events = post(&url, &[], &body.to_string()).await.events();
    let methods: Vec<&str> = events.iter().filter_map(|e| e["method"].as_str()).collect();
    assert_eq!(methods, ["notifications/message"], "no progress for a caller that asked for none");
    assert_eq!(events.last().unwrap()["id"], 41);

    let json_only = post(&url, &[("accept", "application/json")], &body.to_string()).await;
    assert_eq!(json_only.json()["id"], 41, "a JSON-only client gets the final answer alone");
    assert_eq!(json_only.json()["result"]["content"][0]["text"], "2 invoices");
    replay.stop().await.unwrap();
}

#[tokio::test]
async fn repeated_requests_follow_recorded_order_per_session() {
    let cassettes = Cassettes::new();
    let unread = |n: &str| tool_call("mcp_MailTools", "CountUnread", json!({}), n);
    cassettes.write("mail", vec![unread("3"), unread("2"), unread("1")]);
    let replay = Replayer::start(&[cassettes.path()]).await;
    let url = replay.url(MAIL);
    let count = |session: String| {
        let url = url.clone();
        async move {
            let headers = [("mcp-session-id", session.as_str())];
            let reply =
                call(&url, &headers, "tools/call", json!({"name": "CountUnread", "arguments": {}})).await;
            reply.json()["result"]["content"][0]["text"].as_str().unwrap().to_owned()
        }
    };
    let first = initialize(&url).await;
    let second = initialize(&url).await;
    let mut seen = Vec::new();
    for _ in 0..4 {
        seen.push(count(first.clone()).await);
    }
    assert_eq!(seen, ["3", "2", "1", "1"], "recorded order, then the last one repeats");
    assert_eq!(count(second).await, "3", "another session starts from the beginning");
    replay.stop().await.unwrap();
}

#[tokio::test]
async fn stateless_replay_keeps_order_per_server_and_adds_era_fields() {
    let cassettes = Cassettes::new();
    let listed = |n: usize| {
        exchange(
            "mcp_CalendarTools",
            Era::Stateless,
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "ListEvents", "arguments": {}}}),
            "application/json",
            vec![
                json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": format!("{n} events")}]}}),
            ],
        )
    };
    cassettes.write("calendar", vec![listed(2), listed(5)]);
    let replay = Replayer::start(&[cassettes.path()]).await;
    let url = replay.url("/agents/servers/mcp_CalendarTools");
    let mut texts = Vec::new();
    for _ in 0..3 {
        let reply = stateless(&url, "tools/call", json!({"name": "ListEvents", "arguments": {}})).await;
        let result = reply.json()["result"].clone();
        assert_eq!(result["resultType"], "complete");
        assert!(result["_meta"]["io.modelcontextprotocol/serverInfo"].is_object());
        texts.push(result["content"][0]["text"].as_str().unwrap().to_owned());
    }
    assert_eq!(texts, ["2 events", "5 events", "5 events"]);
    replay.stop().await.unwrap();
}

#[tokio::test]
async fn misses_name_the_nearest_recording_and_what_differs() {
    let cassettes = Cassettes::new();
    cassettes.write(
        "mail",
        vec![
            tool_call("mcp_MailTools", "GetMessage", json!({"id": "AAMk1", "preferHtml": false}), "one"),
            tool_call("mcp_MailTools", "GetMessage", json!({"id": "AAMk2", "preferHtml": true}), "two"),
        ],
    );
    let options = Options { on_miss: OnMiss::Error, ..Options::default() };
    let replay = Replayer::start_with(&[cassettes.path()], options).await;
    let url = replay.url(MAIL);
    let reply = call(
        &url,
        &[],
        "tools/call",
        json!({"name": "GetMessage", "arguments": {"id": "AAMk9", "preferHtml": true}}),
    )
    .await;
    let error = &reply.json()["error"];
    assert_eq!(error["code"], -32001);
    let message = error["message"].as_str().unwrap();
    // What a framework that shows only the message shows: the tool, the first
    // differing pointer and both values.
    assert_eq!(
        message,
        "mcp-tape: no recorded answer for mcp_MailTools tools/call GetMessage: the nearest recording \
         differs at /arguments/id (recorded \"AAMk2\", requested \"AAMk9\"); 2 recorded request(s) of \
         this kind differ"
    );
    let nearest = &error["data"]["nearest"];
    assert_eq!(nearest[0]["params"]["arguments"]["id"], "AAMk2", "fewest differences first");
    assert_eq!(
        nearest[0]["differences"],
        json!([{"pointer": "/arguments/id", "recorded": "AAMk2", "requested": "AAMk9"}])
    );
    assert_eq!(nearest[1]["differences"].as_array().unwrap().len(), 2);

    let never_seen = call(&url, &[], "tools/call", json!({"name": "DeleteEverything"})).await;
    assert_eq!(never_seen.json()["error"]["code"], -32602, "a tool never seen is unknown, not a miss");
    replay.stop().await.unwrap();

    let options = Options { on_miss: OnMiss::Mock, ..Options::default() };
    let replay = Replayer::start_with(&[cassettes.path()], options).await;
    let arguments = json!({"id": "AAMk9", "preferHtml": true});
    let reply =
        call(&replay.url(MAIL), &[], "tools/call", json!({"name": "GetMessage", "arguments": arguments}))
            .await;
    let result = &reply.json()["result"];
    assert_eq!(result["isError"], true, "a listed tool with unrecorded arguments is a failed call: {result}");
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("no recorded answer for mcp_MailTools tools/call GetMessage"), "{text}");
    assert!(text.contains(r#"/arguments/id (recorded "AAMk2", requested "AAMk9")"#), "{text}");
    let never_seen = call(&replay.url(MAIL), &[], "tools/call", json!({"name": "DeleteEverything"})).await;
    assert_eq!(
        never_seen.json()["error"]["code"],
        -32602,
        "a tool never seen is still unknown under the mock"
    );
    replay.stop().await.unwrap();
}

#[tokio::test]
async fn ignored_params_and_redacted_values_still_match() {
    let cassettes = Cassettes::new();
    cassettes.write(
        "knowledge",
        vec![tool_call(
            "mcp_KnowledgeTools",
            "query_federated_knowledge",
            json!({"consumerId": "c1", "query": "vpn", "requestId": "r-1", "apiKey": "sk-live-123"}),
            "Use the VPN client.",
        )],
    );
    let normalization =
        Normalization { ignore_params: vec!["/arguments/requestId".into()], ..Normalization::default() };
    let replay =
        Replayer::start_with(&[cassettes.path()], Options { normalization, ..Options::default() }).await;
    let arguments = json!({"consumerId": "c1", "query": "vpn", "requestId": "r-2", "apiKey": "sk-other-456"});
    let reply = call(
        &replay.url("/agents/servers/mcp_KnowledgeTools"),
        &[],
        "tools/call",
        json!({"name": "query_federated_knowledge", "arguments": arguments}),
    )
    .await;
    assert_eq!(reply.json()["result"]["content"][0]["text"], "Use the VPN client.");
    replay.stop().await.unwrap();
}

#[tokio::test]
async fn initialize_and_discover_are_served_from_either_eras_recording() {
    let cassettes = Cassettes::new();
    let initialize = exchange(
        "mcp_MeServer",
        Era::Handshake,
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}}),
        "application/json",
        vec![json!({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": "2025-06-18",
            "capabilities": {"tools": {"listChanged": true}}, "serverInfo": {"name": "Me", "version": "9.1"}}})],
    );
    let discover = exchange(
        "mcp_Modern",
        Era::Stateless,
        json!({"jsonrpc": "2.0", "id": 0, "method": "server/discover", "params": {}}),
        "application/json",
        vec![
            json!({"jsonrpc": "2.0", "id": 0, "result": {"resultType": "complete", "supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {}}, "ttlMs": 60000, "cacheScope": "public",
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "Modern", "version": "3"}}}}),
        ],
    );
    let mut probe_failure = exchange(
        "mcp_Legacy",
        Era::Stateless,
        json!({"jsonrpc": "2.0", "id": 0, "method": "server/discover", "params": {}}),
        "application/json",
        vec![
            json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32000, "message": "Bad Request: Server not initialized"}}),
        ],
    );
    probe_failure.status = Status::new(400).unwrap();
    cassettes.write("mixed", vec![initialize, discover, probe_failure]);
    let replay = Replayer::start(&[cassettes.path()]).await;

    let me = replay.url("/agents/servers/mcp_MeServer");
    let init = call(&me, &[], "initialize", json!({"protocolVersion": "2024-11-05"})).await;
    assert_eq!(init.json()["result"]["protocolVersion"], "2024-11-05", "negotiated for this client");
    assert_eq!(init.json()["result"]["serverInfo"]["name"], "Me");
    assert!(init.header("mcp-session-id").is_some());
    let discovered = stateless(&me, "server/discover", json!({})).await.json()["result"].clone();
    assert_eq!(discovered["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "Me");
    assert_eq!(discovered["capabilities"], json!({"tools": {}}));

    let modern = replay.url("/agents/servers/mcp_Modern");
    let discovered = stateless(&modern, "server/discover", json!({})).await.json()["result"].clone();
    assert_eq!(
        (discovered["ttlMs"].clone(), discovered["cacheScope"].clone()),
        (json!(60000), json!("public"))
    );
    let init = call(&modern, &[], "initialize", json!({"protocolVersion": "2025-03-26"})).await.json();
    assert_eq!(init["result"]["serverInfo"]["name"], "Modern");
    assert_eq!(init["result"]["protocolVersion"], "2025-03-26");

    let legacy = stateless(&replay.url("/agents/servers/mcp_Legacy"), "server/discover", json!({})).await;
    assert_eq!(legacy.status, 400, "the recorded probe failure, so the client falls back");
    assert_eq!(legacy.json()["error"]["code"], -32000);
    replay.stop().await.unwrap();
}

#[tokio::test]
async fn methods_an_era_removed_are_not_found_even_when_recorded() {
    let cassettes = Cassettes::new();
    let handshake = |id: u64, method: &str, result: Value| {
        exchange(
            "mcp_MeServer",
            Era::Handshake,
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {}}),
            "application/json",
            vec![json!({"jsonrpc": "2.0", "id": id, "result": result})],
        )
    };
    cassettes.write(
        "me",
        vec![
            handshake(0, "initialize", json!({"protocolVersion": "2025-06-18", "capabilities": {}, "serverInfo": {"name": "Me", "version": "1"}})),
            handshake(1, "ping", json!({})),
            handshake(2, "logging/setLevel", json!({})),
        ],
    );
    let replay = Replayer::start(&[cassettes.path()]).await;
    let url = replay.url("/agents/servers/mcp_MeServer");
    for method in ["initialize", "ping", "logging/setLevel"] {
        let reply = stateless(&url, method, json!({})).await;
        assert_eq!((reply.status, reply.json()["error"]["code"].clone()), (404, json!(-32601)), "{method}");
    }
    assert_eq!(
        call(&url, &[], "ping", json!({})).await.json()["result"],
        json!({}),
        "still served to handshake clients"
    );
    replay.stop().await.unwrap();
}

/// A recorded `initialize` whose result is not an object (a damaged or
/// hand-edited cassette) once panicked every `initialize` to that server.
#[tokio::test]
async fn a_damaged_initialize_recording_is_answered_as_recorded() {
    let cassettes = Cassettes::new();
    cassettes.write(
        "damaged",
        vec![exchange(
            "mcp_Damaged",
            Era::Handshake,
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}}),
            "application/json",
            vec![json!({"jsonrpc": "2.0", "id": 0, "result": "not an object"})],
        )],
    );
    let replay = Replayer::start(&[cassettes.path()]).await;
    let url = replay.url("/agents/servers/mcp_Damaged");
    for _ in 0..2 {
        let reply = call(&url, &[], "initialize", json!({"protocolVersion": "2025-06-18"})).await;
        assert_eq!((reply.status, reply.json()["result"].clone()), (200, json!("not an object")));
    }
    replay.stop().await.unwrap();
}
