//! One cassette holding both eras, replayed as the upstream answered. Once,
//! recorded answers that depended on a request's headers, session or
//! envelope (session not found, header mismatch, a missing envelope) were
//! matched like any other and answered later valid requests with the same
//! body; a recorded `-32021` answered clients that had declared the
//! capability; `Mcp-Param-*` headers went unchecked; and
//! `subscriptions/listen` got `-32601` from a server whose recorded
//! discover result advertised it.

use mcp_tape::model::{Era, Status};
use serde_json::{Value, json};

use crate::support::*;

const SERVER: &str = "/agents/servers/mcp_Dual";

fn answered(
    era: Era,
    method: &str,
    params: Value,
    status: u16,
    answer: Value,
) -> mcp_tape::model::RawExchange {
    let request = json!({"jsonrpc": "2.0", "id": 3, "method": method, "params": params});
    let mut exchange = exchange("mcp_Dual", era, request, "application/json", vec![answer]);
    exchange.status = Status::new(status).unwrap();
    exchange
}

fn error(id: Value, code: i32, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

fn result(value: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 3, "result": value})
}

#[tokio::test]
async fn recorded_rejections_never_answer_a_valid_request() {
    let cassettes = Cassettes::new();
    let mut no_envelope =
        answered(Era::Stateless, "tools/list", json!({}), 400, error(json!(3), -32602, "no _meta"));
    no_envelope.request = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {}});
    let tools = json!({"tools": [{"name": "echo", "description": "d", "inputSchema": {"type": "object"}}]});
    cassettes.write(
        "dual",
        vec![
            answered(
                Era::Handshake,
                "tools/list",
                json!({}),
                404,
                error(Value::Null, -32001, "Session not found"),
            ),
            no_envelope,
            answered(
                Era::Stateless,
                "tools/list",
                json!({}),
                400,
                error(json!(3), -32020, "Mcp-Method differs"),
            ),
            answered(Era::Stateless, "tools/list", json!({}), 200, result(tools.clone())),
            answered(Era::Handshake, "tools/list", json!({}), 200, result(tools.clone())),
        ],
    );
    let replay = Replayer::start(&[cassettes.path()]).await;
    let url = replay.url(SERVER);
    let session = initialize(&url).await;
    let handshake = call(&url, &[("mcp-session-id", &session)], "tools/list", json!({})).await;
    assert_eq!(
        (handshake.status, handshake.json()["result"]["tools"].clone()),
        (200, tools["tools"].clone())
    );
    let modern = stateless(&url, "tools/list", json!({})).await;
    assert_eq!(modern.status, 200, "{modern:?}");
    assert_eq!(modern.json()["result"]["tools"], tools["tools"]);
    replay.stop().await.unwrap();
}

#[tokio::test]
async fn a_recorded_capability_refusal_answers_only_clients_without_it() {
    let cassettes = Cassettes::new();
    let params = json!({"name": "summarize", "arguments": {}});
    let mut refusal = error(json!(3), -32021, "Missing required client capabilities: sampling");
    refusal["error"]["data"] = json!({"requiredCapabilities": {"sampling": {}}});
    let ask = json!({"resultType": "input_required", "inputRequests": {"s": {"method": "sampling/createMessage",
        "params": {"messages": [], "maxTokens": 5}}}});
    cassettes.write(
        "dual",
        vec![
            answered(Era::Stateless, "tools/call", params.clone(), 400, refusal),
            answered(Era::Stateless, "tools/call", params.clone(), 200, result(ask)),
        ],
    );
    let replay = Replayer::start(&[cassettes.path()]).await;
    let url = replay.url(SERVER);
    let without = stateless(&url, "tools/call", params.clone()).await;
    assert_eq!((without.status, without.json()["error"]["code"].clone()), (400, json!(-32021)));
    let mut declared = enveloped(params);
    declared["_meta"]["io.modelcontextprotocol/clientCapabilities"] = json!({"sampling": {}});
    let headers =
        [("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call"), ("mcp-name", "summarize")];
    let with = call(&url, &headers, "tools/call", declared).await;
    assert_eq!((with.status, with.json()["result"]["resultType"].clone()), (200, json!("input_required")));
    replay.stop().await.unwrap();
}

#[tokio::test]
async fn argument_headers_are_checked_against_the_recorded_schema() {
    let cassettes = Cassettes::new();
    let schema = json!({"type": "object", "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"}, "query": {"type": "string"}}});
    let listed = json!({"tools": [{"name": "find", "description": "d", "inputSchema": schema}]});
    let params = json!({"name": "find", "arguments": {"region": "Hello", "query": "q"}});
    cassettes.write(
        "dual",
        vec![
            answered(Era::Stateless, "tools/list", json!({}), 200, result(listed)),
            answered(Era::Stateless, "tools/call", params.clone(), 200, result(json!({"content": []}))),
        ],
    );
    let replay = Replayer::start(&[cassettes.path()]).await;
    let url = replay.url(SERVER);
    let headers = |param: Option<&'static str>| {
        let mut headers =
            vec![("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call"), ("mcp-name", "find")];
        headers.extend(param.map(|value| ("mcp-param-region", value)));
        headers
    };
    for (param, status) in [
        (Some("Hello"), 200),
        (Some("=?base64?SGVsbG8=?="), 200),
        (None, 400),
        (Some("=?base64?SGVsbG8?="), 400),
        (Some("Bye"), 400),
    ] {
        let reply = call(&url, &headers(param), "tools/call", enveloped(params.clone())).await;
        assert_eq!(reply.status, status, "{param:?}: {reply:?}");
        if status == 400 {
            assert_eq!(reply.json()["error"]["code"], -32020, "{param:?}");
        }
    }
    replay.stop().await.unwrap();
}

#[tokio::test]
async fn listen_is_acknowledged_with_the_callers_id() {
    let (_cassettes, replay) = Replayer::empty().await;
    let body = json!({"jsonrpc": "2.0", "id": 41, "method": "subscriptions/listen",
        "params": enveloped(json!({"notifications": {"toolsListChanged": true}}))});
    let headers = [("mcp-protocol-version", "2026-07-28"), ("mcp-method", "subscriptions/listen")];
    let mut stream = open_stream(&replay.url(SERVER), &headers, &body).await;
    assert_eq!(stream.headers()["content-type"], "text/event-stream");
    let first = next_chunk(&mut stream).await;
    let data = first.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
    let ack: Value = serde_json::from_str(data).unwrap();
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 41);
    assert_eq!(ack["params"]["notifications"], json!({}), "replay honours no change notifications");
    drop(stream);
    replay.stop().await.unwrap();
}

/// Root cause: replay converted a recorded answer to the caller's era by
/// reading it with serde_json, and sent `null` when that failed. Valid JSON
/// serde_json will not read (a lone surrogate, `1e999`, nesting past 128),
/// which a cassette may hold (its load checks syntax only), now goes out as
/// recorded in either era.
#[tokio::test]
async fn an_answer_serde_json_will_not_read_is_served_as_written_in_either_era() {
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    for unreadable in [r#""\ud800""#, "1e999", deep.as_str()] {
        let cassettes = Cassettes::new();
        let tools = json!({"tools": [], "note": "MARKER"});
        let path = cassettes
            .write("dual", vec![answered(Era::Handshake, "tools/list", json!({}), 200, result(tools))]);
        let holder = rusqlite::Connection::open(&path).unwrap();
        let changed = holder
            .execute("UPDATE message SET body = replace(body, '\"MARKER\"', ?1)", [unreadable])
            .unwrap();
        assert_eq!(changed, 1);
        drop(holder);
        let replay = Replayer::start(&[cassettes.path()]).await;
        let url = replay.url(SERVER);
        let session = initialize(&url).await;
        let handshake = call(&url, &[("mcp-session-id", &session)], "tools/list", json!({})).await;
        assert_eq!(handshake.status, 200, "{handshake:?}");
        assert!(handshake.text.contains(&format!("\"note\":{unreadable}")), "{handshake:?}");
        let modern = stateless(&url, "tools/list", json!({})).await;
        assert_eq!(modern.status, 200, "{modern:?}");
        assert!(modern.text.contains(&format!("\"note\":{unreadable}")), "{unreadable}: {modern:?}");
        replay.stop().await.unwrap();
    }
}
