//! The Agent 365 service endpoints that are not MCP: chat history and the
//! gateway's discovery listings, in replay and through record. The Agent
//! 365 SDKs once failed on each: replay refused the chat-message POST with
//! 400, its listings named an audience the SDKs read as a V2 server, record
//! refused non-JSON-RPC bodies, and record relayed the upstream's server
//! urls so the agent went around the recorder.

use mcp_tape::agent365::TOOLS_AUDIENCE;
use mcp_tape::cassette::store::Cassette;
use mcp_tape::model::ServiceRoute;
use reqwest::Method;
use serde_json::{Value, json};

use crate::support::{Cassettes, RecordOptions, Recorder, Replayer, raw, tool_call};
use crate::upstream::{self, TOKEN};

const CHAT_MESSAGE: &str = "/agents/real-time-threat-protection/chat-message";

fn chat_history() -> String {
    json!({
        "conversationId": "conv-1",
        "messageId": "msg-2",
        "userMessage": "What is on my calendar?",
        "chatHistory": [{"id": "msg-1", "role": "user", "content": "hello", "timestamp": "2026-11-23T10:00:00Z"}],
    })
    .to_string()
}

fn urls(listing: &Value) -> Vec<String> {
    let entries = listing.get("mcpServers").unwrap_or(listing);
    entries.as_array().unwrap().iter().map(|e| e["url"].as_str().unwrap().to_owned()).collect()
}

#[tokio::test]
async fn replay_answers_chat_history_and_lists_v1_servers() {
    let cassettes = Cassettes::new();
    cassettes.write("demo", vec![tool_call("mcp_MailTools", "GetMessage", json!({"id": "1"}), "hi")]);
    let replay = Replayer::start(&[cassettes.path()]).await;
    let json_headers = [("content-type", "application/json")];
    let chat = raw(Method::POST, &replay.url(CHAT_MESSAGE), &json_headers, chat_history()).await;
    assert_eq!((chat.status, chat.json()), (200, json!({})));
    let odd = raw(Method::POST, &replay.url(&format!("{CHAT_MESSAGE}/")), &[], "not json".into()).await;
    assert_eq!(odd.status, 200, "any body is taken: {}", odd.text);

    for path in ["/agents/agent-1/mcpServers", "/agents/v2/agent-1/mcpServers"] {
        let listing = raw(Method::GET, &replay.url(path), &[], String::new()).await.json();
        let entries = listing.get("mcpServers").unwrap_or(&listing).as_array().unwrap().clone();
        assert_eq!(entries.len(), 1, "{listing}");
        assert_eq!(entries[0]["audience"], TOOLS_AUDIENCE, "the V1 audience every SDK path accepts");
        assert_eq!(entries[0]["scope"], "McpServers.Mail.All");
        assert_eq!(entries[0]["url"], replay.url("/agents/servers/mcp_MailTools"));
    }
    replay.stop().await.unwrap();
}

#[tokio::test]
async fn record_forwards_any_body_and_points_listed_servers_at_itself() {
    let upstream = upstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let recorder = Recorder::start(&upstream.url(), dir.path(), RecordOptions::default()).await;
    let auth = format!("Bearer {TOKEN}");
    let headers = [("authorization", auth.as_str())];

    let text =
        raw(Method::POST, &recorder.url("/agents/servers/mcp_MailTools"), &headers, "hello".into()).await;
    assert_eq!(text.status, 202, "the upstream's own answer to a body that is not JSON-RPC");
    assert_eq!(upstream.state.seen.lock().unwrap().len(), 1, "forwarded, not refused");

    for (path, bare) in [("/agents/v2/agent-1/mcpServers", true), ("/agents/agent-1/mcpServers", false)] {
        let direct =
            raw(Method::GET, &format!("{}{path}", upstream.url()), &headers, String::new()).await.json();
        let through = raw(Method::GET, &recorder.url(path), &headers, String::new()).await;
        assert_eq!(through.status, 200);
        let listing = through.json();
        assert_eq!(listing.is_array(), bare, "the shape the upstream sent: {listing}");
        assert_eq!(
            urls(&listing),
            [recorder.url("/agents/servers/mcp_MailTools"), "https://tools.partner.example/mcp".into()],
            "only the urls at the upstream point at the recorder"
        );
        let mut expected = direct.clone();
        let first = if bare { &mut expected[0] } else { &mut expected["mcpServers"][0] };
        first["url"] = recorder.url("/agents/servers/mcp_MailTools").into();
        assert_eq!(listing, expected, "every other field as the upstream sent it");
    }
    let seen_gateway = upstream.state.seen.lock().unwrap().last().unwrap().headers.clone();
    assert_eq!(
        seen_gateway.get("accept-encoding").unwrap(),
        "identity",
        "a listing the recorder can rewrite"
    );

    let chat = raw(Method::POST, &recorder.url(CHAT_MESSAGE), &headers, chat_history()).await;
    assert_eq!((chat.status, chat.json()["received"].clone()), (200, json!("msg-2")));
    assert_eq!(chat.json()["caller"], auth, "relayed unchanged, credentials and all");
    assert_eq!(upstream.state.seen.lock().unwrap().len(), 6, "every request reached the upstream");

    let cassette = recorder.cassette.clone();
    assert!(recorder.stop().await.is_empty(), "no MCP exchange was made");
    let stored = Cassette::open(&cassette).unwrap().service_answers().unwrap();
    let routes: Vec<ServiceRoute> = stored.iter().map(|a| a.route).collect();
    use ServiceRoute::{ChatMessage, Gateway, GatewayV2};
    assert_eq!(routes, [GatewayV2, Gateway, ChatMessage]);
    assert_eq!(stored[2].body, r#"{"received":"msg-2","caller":"[REDACTED]"}"#, "in the upstream's order");
    for file in std::fs::read_dir(dir.path()).unwrap() {
        let bytes = std::fs::read(file.unwrap().path()).unwrap();
        assert!(!bytes.windows(TOKEN.len()).any(|w| w == TOKEN.as_bytes()), "the token reached the cassette");
    }

    let replay = Replayer::start(&[dir.path()]).await;
    let listing =
        raw(Method::GET, &replay.url("/agents/agent-9/mcpServers"), &[], String::new()).await.json();
    assert_eq!(
        urls(&listing),
        [replay.url("/agents/servers/mcp_MailTools"), "https://tools.partner.example/mcp".into()],
        "the recorded listing, its upstream urls pointed at the replay, in the shape asked for"
    );
    assert_eq!(listing["mcpServers"][0]["publisher"], "Microsoft");
    let chat = raw(Method::POST, &replay.url(CHAT_MESSAGE), &[], chat_history()).await;
    assert_eq!(chat.json(), json!({"received": "msg-2", "caller": "[REDACTED]"}), "the recorded answer");
    replay.stop().await.unwrap();
}
