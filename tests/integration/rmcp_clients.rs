//! The official Rust SDK (rmcp) as a real client of the replay server, in
//! both protocol eras: the handshake (`initialize`) and the stateless
//! (`server/discover`) lifecycle.

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ClientRequest, ProtocolVersion, ServerResult};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::json;

use crate::support::*;

fn error_code(result: Result<rmcp::model::CallToolResult, ServiceError>) -> i32 {
    match result {
        Err(ServiceError::McpError(error)) => error.code.0,
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    }
}

#[tokio::test]
async fn handshake_client_runs_the_empty_server_flow_on_both_paths() {
    let (_c, replay) = Replayer::empty().await;
    for path in ["/agents/servers/mcp_Unknown", "/mcp"] {
        let transport = StreamableHttpClientTransport::from_uri(replay.url(path));
        let client = ().serve(transport).await.expect("initialize");
        let info = client.peer_info().expect("server info");
        assert_eq!(info.server_info.as_ref().expect("serverInfo").name, "mcp-tape");
        assert!(client.list_all_tools().await.unwrap().is_empty());
        assert!(client.list_all_prompts().await.unwrap().is_empty());
        assert!(client.list_all_resources().await.unwrap().is_empty());
        let pong = client.send_request(ClientRequest::PingRequest(Default::default())).await.unwrap();
        assert!(matches!(pong, ServerResult::EmptyResult(_)), "{pong:?}");
        let call = client.call_tool(CallToolRequestParams::new("SendEmailWithAttachments")).await;
        assert_eq!(error_code(call), -32602);
        client.cancel().await.unwrap();
    }
    replay.stop().await.unwrap();
}

#[tokio::test]
async fn stateless_client_runs_the_empty_server_flow() {
    let (_c, replay) = Replayer::empty().await;
    let transport = StreamableHttpClientTransport::from_uri(replay.url("/agents/servers/mcp_Unknown"));
    let lifecycle = ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] };
    let client = ().serve_with_lifecycle(transport, lifecycle).await.expect("discover");
    assert!(client.list_all_tools().await.unwrap().is_empty());
    assert!(client.list_all_prompts().await.unwrap().is_empty());
    assert!(client.list_all_resources().await.unwrap().is_empty());
    let call = client.call_tool(CallToolRequestParams::new("GetMyDetails")).await;
    assert_eq!(error_code(call), -32602);
    client.cancel().await.unwrap();
    replay.stop().await.unwrap();
}

#[tokio::test]
async fn both_eras_get_the_recorded_results() {
    let cassettes = Cassettes::new();
    cassettes.write(
        "me",
        vec![tool_call(
            "mcp_MeServer",
            "GetMyDetails",
            json!({"select": "displayName"}),
            r#"{"displayName":"Megan Bowen"}"#,
        )],
    );
    let replay = Replayer::start(&[cassettes.path()]).await;
    let url = replay.url("/agents/servers/mcp_MeServer");
    let params = || {
        CallToolRequestParams::new("GetMyDetails")
            .with_arguments(json!({"select": "displayName"}).as_object().unwrap().clone())
    };
    let text = |result: rmcp::model::CallToolResult| {
        serde_json::to_value(&result.content[0]).unwrap()["text"].as_str().unwrap().to_owned()
    };

    let handshake = ().serve(StreamableHttpClientTransport::from_uri(url.clone())).await.unwrap();
    assert_eq!(text(handshake.call_tool(params()).await.unwrap()), r#"{"displayName":"Megan Bowen"}"#);
    let other = handshake.call_tool(CallToolRequestParams::new("GetMyDetails")).await;
    assert_eq!(error_code(other), -32001, "a known tool with other arguments is a miss");
    handshake.cancel().await.unwrap();

    let lifecycle = ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] };
    let stateless =
        ().serve_with_lifecycle(StreamableHttpClientTransport::from_uri(url), lifecycle).await.unwrap();
    assert_eq!(text(stateless.call_tool(params()).await.unwrap()), r#"{"displayName":"Megan Bowen"}"#);
    stateless.cancel().await.unwrap();
    replay.stop().await.unwrap();
}
