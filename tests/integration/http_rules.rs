//! The replay contract's mock rows and HTTP rules, over raw HTTP against an
//! empty replay (no cassettes), in both protocol eras.

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::*;

const PATHS: [&str; 4] = [
    "/agents/servers/mcp_Unknown",
    "/agents/servers/mcp_Unknown/",
    "/mcp",
    "/agents/tenants/t1/servers/mcp_X",
];

#[tokio::test]
async fn initialize_negotiates_and_opens_distinct_sessions() {
    let (_c, replay) = Replayer::empty().await;
    for path in PATHS {
        let url = replay.url(path);
        for (asked, expected) in [
            ("2025-06-18", "2025-06-18"),
            ("2024-11-05", "2024-11-05"),
            ("2025-09-01", "2025-06-18"),
            ("2099-01-01", "2025-11-25"),
            ("1999-01-01", "2025-11-25"),
        ] {
            let reply =
                call(&url, &[], "initialize", json!({"protocolVersion": asked, "capabilities": {}})).await;
            assert_eq!(reply.status, 200);
            let result = &reply.json()["result"];
            assert_eq!(result["protocolVersion"], expected, "asked {asked}");
            assert_eq!(result["serverInfo"]["name"], "mcp-tape");
            assert_eq!(
                result["capabilities"],
                json!({"tools": {}, "prompts": {}, "resources": {"subscribe": true}, "logging": {}, "completions": {}})
            );
        }
        let (a, b) = (initialize(&url).await, initialize(&url).await);
        assert_ne!(a, b);
        assert!(a.len() >= 32 && a.bytes().all(|c| (0x21..=0x7e).contains(&c)), "{a}");
    }
    replay.stop().await.unwrap();
}

#[tokio::test]
async fn handshake_mock_answers_every_row_with_the_callers_id() {
    let (_c, replay) = Replayer::empty().await;
    for path in PATHS {
        let url = replay.url(path);
        let session = initialize(&url).await;
        let s = [("mcp-session-id", session.as_str()), ("mcp-protocol-version", "2025-06-18")];
        let note = post(&url, &s, r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).await;
        assert_eq!((note.status, note.text.as_str()), (202, ""));
        let client_reply = post(&url, &s, r#"{"jsonrpc":"2.0","id":"srv-1","result":{}}"#).await;
        assert_eq!((client_reply.status, client_reply.text.as_str()), (202, ""));

        for (method, params, expected) in [
            ("ping", json!({}), json!({})),
            ("tools/list", json!({}), json!({"tools": []})),
            ("prompts/list", json!({}), json!({"prompts": []})),
            ("resources/list", json!({}), json!({"resources": []})),
            ("resources/templates/list", json!({}), json!({"resourceTemplates": []})),
            ("logging/setLevel", json!({"level": "debug"}), json!({})),
            ("resources/subscribe", json!({"uri": "test://w"}), json!({})),
            ("resources/unsubscribe", json!({"uri": "test://w"}), json!({})),
            (
                "completion/complete",
                json!({"ref": {"type": "ref/prompt", "name": "p"}, "argument": {"name": "a", "value": "v"}}),
                json!({"completion": {"values": [], "total": 0, "hasMore": false}}),
            ),
        ] {
            let body =
                json!({"jsonrpc": "2.0", "id": format!("id-{method}"), "method": method, "params": params});
            let reply = post(&url, &s, &body.to_string()).await;
            assert_eq!(reply.status, 200, "{method}");
            assert_eq!(
                reply.json(),
                json!({"jsonrpc": "2.0", "id": format!("id-{method}"), "result": expected})
            );
        }

        for (method, params, code) in [
            ("tools/call", json!({"name": "SendEmail", "arguments": {}}), -32602),
            ("prompts/get", json!({"name": "summarize"}), -32602),
            ("resources/read", json!({"uri": "test://missing"}), -32002),
            ("sampling/createMessage", json!({}), -32601),
            ("server/discover", json!({}), -32601),
        ] {
            let body = json!({"jsonrpc": "2.0", "id": 99, "method": method, "params": params});
            let reply = post(&url, &s, &body.to_string()).await;
            assert_eq!(reply.status, 200, "{method}");
            let answer = reply.json();
            assert_eq!(
                (answer["id"].clone(), answer["error"]["code"].clone()),
                (json!(99), json!(code)),
                "{method}"
            );
        }
        let unknown_tool = call(&url, &s, "tools/call", json!({"name": "SendEmail"})).await.json();
        assert_eq!(unknown_tool["error"]["message"], "Unknown tool: SendEmail");
        let missing = call(&url, &s, "resources/read", json!({"uri": "test://missing"})).await.json();
        assert_eq!(missing["error"]["data"]["uri"], "test://missing");
    }
    replay.stop().await.unwrap();
}

#[tokio::test]
async fn requests_without_a_session_are_answered() {
    let (_c, replay) = Replayer::empty().await;
    let reply = call(&replay.url("/agents/servers/mcp_MailTools"), &[], "tools/list", json!({})).await;
    assert_eq!((reply.status, reply.json()["result"].clone()), (200, json!({"tools": []})));
    replay.stop().await.unwrap();
}

#[tokio::test]
async fn get_and_delete_follow_the_session_rules() {
    let (_c, replay) = Replayer::empty().await;
    let url = replay.url("/mcp");
    let session = initialize(&url).await;
    let get = reqwest::Client::new()
        .get(&url)
        .header("mcp-session-id", &session)
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(get.status(), 200, "a session's standalone stream");
    assert_eq!(get.headers()["content-type"], "text/event-stream");
    drop(get);
    let sessionless = raw(Method::GET, &url, &[("accept", "text/event-stream")], String::new()).await;
    assert_eq!(sessionless.status, 405, "no stream outside a session");
    assert_eq!(sessionless.json()["id"], Value::Null);

    let unknown = [("mcp-session-id", "never-issued")];
    assert_eq!(raw(Method::GET, &url, &unknown, String::new()).await.status, 404);
    assert_eq!(raw(Method::DELETE, &url, &unknown, String::new()).await.status, 404);
    assert_eq!(raw(Method::DELETE, &url, &[], String::new()).await.status, 400);
    let unknown_post = call(&url, &unknown, "ping", json!({})).await;
    assert_eq!((unknown_post.status, unknown_post.json()["id"].clone()), (404, json!(1)));

    let s = [("mcp-session-id", session.as_str())];
    assert_eq!(call(&url, &s, "ping", json!({})).await.status, 200);
    assert_eq!(raw(Method::DELETE, &url, &s, String::new()).await.status, 200);
    assert_eq!(call(&url, &s, "ping", json!({})).await.status, 404, "an ended session is gone");
    let note = post(&url, &s, r#"{"jsonrpc":"2.0","method":"notifications/cancelled"}"#).await;
    assert_eq!(note.status, 404);
    assert_eq!(raw(Method::DELETE, &url, &s, String::new()).await.status, 404);
    assert_eq!(raw(Method::PUT, &url, &[], String::new()).await.status, 405);
    replay.stop().await.unwrap();
}

/// A DELETE sent to another server's path once ended a session opened on
/// this one: only the path that opened a session ends it.
#[tokio::test]
async fn a_session_ends_only_on_the_path_that_opened_it() {
    let (_c, replay) = Replayer::empty().await;
    let (mail, calendar) =
        (replay.url("/agents/servers/mcp_MailTools"), replay.url("/agents/servers/mcp_CalendarTools"));
    let session = initialize(&mail).await;
    let s = [("mcp-session-id", session.as_str())];
    assert_eq!(raw(Method::DELETE, &calendar, &s, String::new()).await.status, 404);
    assert_eq!(call(&mail, &s, "ping", json!({})).await.status, 200, "the session goes on");
    assert_eq!(raw(Method::DELETE, &mail, &s, String::new()).await.status, 200);
    assert_eq!(call(&mail, &s, "ping", json!({})).await.status, 404);
    replay.stop().await.unwrap();
}

#[tokio::test]
async fn bad_input_gets_a_clear_error_and_the_daemon_keeps_serving() {
    let (_c, replay) = Replayer::empty().await;
    let url = replay.url("/agents/servers/mcp_Unknown");

    let parse = post(&url, &[], "{\"jsonrpc\": \"2.0\", \"id\": 1, ").await;
    assert_eq!(parse.status, 400);
    assert_eq!(
        (parse.json()["id"].clone(), parse.json()["error"]["code"].clone()),
        (Value::Null, json!(-32700))
    );

    let not_a_request = post(&url, &[], r#"{"jsonrpc":"2.0","id":5}"#).await;
    assert_eq!((not_a_request.status, not_a_request.json()["error"]["code"].clone()), (400, json!(-32600)));
    assert_eq!(not_a_request.json()["id"], 5, "the id that could be read is echoed");
    let batch = post(&url, &[], r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#).await;
    assert_eq!((batch.status, batch.json()["error"]["code"].clone()), (400, json!(-32600)));
    let null_id = post(&url, &[], r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#).await;
    assert_eq!(null_id.status, 400);
    let scalar = post(&url, &[], "42").await;
    assert_eq!(scalar.json()["error"]["code"], -32600);

    let huge =
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"pad":"{}"}}}}"#, "x".repeat(5 << 20));
    let too_large = post(&url, &[], &huge).await;
    assert_eq!((too_large.status, too_large.json()["error"]["code"].clone()), (413, json!(-32600)));

    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    assert_eq!(post(&url, &[("content-type", "text/plain")], ping).await.status, 415);
    assert_eq!(raw(Method::POST, &url, &[], ping.into()).await.status, 415, "no content type");
    assert_eq!(post(&url, &[("accept", "image/png")], ping).await.status, 406);
    let sse_only = post(&url, &[("accept", "text/event-stream")], ping).await;
    assert_eq!(sse_only.events(), [json!({"jsonrpc": "2.0", "id": 1, "result": {}})]);

    let bad_version = post(&url, &[("mcp-protocol-version", "not-a-version")], ping).await;
    assert_eq!(bad_version.status, 400);
    let bad_version = post(&url, &[("mcp-protocol-version", "2099-01-01")], ping).await;
    assert_eq!((bad_version.status, bad_version.json()["error"]["code"].clone()), (400, json!(-32022)));

    let garbage = reqwest::Client::new()
        .post(&url)
        .header("content-type", "application/json")
        .header("mcp-session-id", reqwest::header::HeaderValue::from_bytes(b"\xff\xfe").unwrap())
        .body(ping)
        .send()
        .await
        .unwrap();
    assert_eq!(garbage.status(), 400);

    assert_eq!(post(&url, &[], ping).await.json()["result"], json!({}), "still serving");
    replay.stop().await.unwrap();
}

#[tokio::test]
async fn foreign_host_or_origin_is_forbidden() {
    let (_c, replay) = Replayer::empty().await;
    let url = replay.url("/mcp");
    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let port = replay.addr.port().to_string();
    let evil_host = format!("evil.example.com:{port}");
    for headers in [
        vec![("host", evil_host.as_str())],
        vec![("origin", "http://evil.example.com")],
        vec![("origin", "null")],
        vec![("host", evil_host.as_str()), ("origin", "http://evil.example.com")],
    ] {
        let reply = post(&url, &headers, ping).await;
        assert_eq!(reply.status, 403, "{headers:?}");
        assert_eq!(reply.json()["error"]["code"], -32600);
    }
    let local_host = format!("localhost:{port}");
    for headers in [
        vec![("host", local_host.as_str())],
        vec![("origin", "http://localhost:3000")],
        vec![("origin", "http://127.0.0.1")],
        vec![("origin", "http://[::1]:8080")],
    ] {
        assert_eq!(post(&url, &headers, ping).await.status, 200, "{headers:?}");
    }
    replay.stop().await.unwrap();

    let cassettes = Cassettes::new();
    let options = Options { allowed_hosts: vec!["tape.test".into()], ..Options::default() };
    let replay = Replayer::start_with(&[cassettes.path()], options).await;
    let url = replay.url("/mcp");
    assert_eq!(post(&url, &[("origin", "http://tape.test:9")], ping).await.status, 200);
    assert_eq!(post(&url, &[("origin", "http://other.test")], ping).await.status, 403);
    replay.stop().await.unwrap();
}

#[tokio::test]
async fn stateless_mock_answers_with_era_fields_and_statuses() {
    let (_c, replay) = Replayer::empty().await;
    for path in PATHS {
        let url = replay.url(path);
        let discover = stateless(&url, "server/discover", json!({})).await;
        assert_eq!(discover.status, 200);
        let result = &discover.json()["result"];
        assert_eq!(result["supportedVersions"], json!(["2026-07-28"]));
        assert_eq!((result["resultType"].clone(), result["ttlMs"].clone()), (json!("complete"), json!(0)));
        assert_eq!(result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "mcp-tape");
        assert_eq!(
            result["capabilities"],
            json!({"tools": {}, "prompts": {}, "resources": {}, "completions": {}})
        );

        for (method, field) in [
            ("tools/list", "tools"),
            ("prompts/list", "prompts"),
            ("resources/list", "resources"),
            ("resources/templates/list", "resourceTemplates"),
        ] {
            let reply = stateless(&url, method, json!({})).await;
            let result = &reply.json()["result"];
            assert_eq!((reply.status, result[field].clone()), (200, json!([])), "{method}");
            assert_eq!(
                (result["cacheScope"].clone(), result["resultType"].clone()),
                (json!("private"), json!("complete"))
            );
        }
        let completion = stateless(
            &url,
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "p"}, "argument": {"name": "a", "value": ""}}),
        )
        .await;
        assert_eq!(completion.json()["result"]["completion"]["values"], json!([]));
        assert!(completion.json()["result"].get("ttlMs").is_none(), "completions are not cacheable");

        for (method, extra, status, code) in [
            ("tools/call", json!({"name": "SendEmail", "arguments": {}}), 400, -32602),
            ("prompts/get", json!({"name": "p"}), 400, -32602),
            ("resources/read", json!({"uri": "test://missing"}), 400, -32602),
            ("ping", json!({}), 404, -32601),
            ("logging/setLevel", json!({"level": "info"}), 404, -32601),
            ("initialize", json!({}), 404, -32601),
            ("resources/subscribe", json!({"uri": "x"}), 404, -32601),
        ] {
            let reply = stateless(&url, method, extra).await;
            assert_eq!(
                (reply.status, reply.json()["error"]["code"].clone()),
                (status, json!(code)),
                "{method}"
            );
            assert_eq!(reply.json()["id"], 1);
        }
        let note = post(
            &url,
            &[("mcp-protocol-version", "2026-07-28"), ("mcp-method", "notifications/x")],
            r#"{"jsonrpc":"2.0","method":"notifications/x"}"#,
        )
        .await;
        assert_eq!(note.status, 202);
        let v = [("mcp-protocol-version", "2026-07-28")];
        assert_eq!(raw(Method::GET, &url, &v, String::new()).await.status, 405);
        assert_eq!(raw(Method::DELETE, &url, &v, String::new()).await.status, 405);
    }
    replay.stop().await.unwrap();
}

#[tokio::test]
async fn stateless_checks_reject_inconsistent_requests() {
    let (_c, replay) = Replayer::empty().await;
    let url = replay.url("/agents/servers/mcp_MailTools");
    let version = ("mcp-protocol-version", "2026-07-28");
    let no_envelope = call(&url, &[version, ("mcp-method", "tools/list")], "tools/list", json!({})).await;
    assert_eq!((no_envelope.status, no_envelope.json()["error"]["code"].clone()), (400, json!(-32602)));
    let wrong_method =
        call(&url, &[version, ("mcp-method", "tools/call")], "tools/list", enveloped(json!({}))).await;
    assert_eq!((wrong_method.status, wrong_method.json()["error"]["code"].clone()), (400, json!(-32020)));
    let no_method = call(&url, &[version], "tools/list", enveloped(json!({}))).await;
    assert_eq!(no_method.json()["error"]["code"], -32020);
    let wrong_name = call(
        &url,
        &[version, ("mcp-method", "tools/call"), ("mcp-name", "Other")],
        "tools/call",
        enveloped(json!({"name": "SendEmail"})),
    )
    .await;
    assert_eq!((wrong_name.status, wrong_name.json()["error"]["code"].clone()), (400, json!(-32020)));
    assert_eq!(wrong_name.json()["id"], 1);
    let mut mismatched = enveloped(json!({}));
    mismatched["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2025-11-25");
    let version_mismatch =
        call(&url, &[version, ("mcp-method", "tools/list")], "tools/list", mismatched).await;
    assert_eq!(version_mismatch.json()["error"]["code"], -32020);
    let unsupported = call(
        &url,
        &[("mcp-protocol-version", "2027-01-01"), ("mcp-method", "tools/list")],
        "tools/list",
        enveloped(json!({})),
    )
    .await;
    let error = &unsupported.json()["error"];
    assert_eq!((unsupported.status, error["code"].clone()), (400, json!(-32022)));
    assert_eq!(error["data"], json!({"supported": ["2026-07-28"], "requested": "2027-01-01"}));
    let stray_session = call(
        &url,
        &[version, ("mcp-method", "tools/list"), ("mcp-session-id", "whatever")],
        "tools/list",
        enveloped(json!({})),
    )
    .await;
    assert_eq!(stray_session.status, 200, "the stateless era ignores session ids");
    replay.stop().await.unwrap();
}

#[tokio::test]
async fn health_and_gateway_list_the_recorded_servers() {
    let cassettes = Cassettes::new();
    cassettes.write(
        "demo",
        vec![
            tool_call("mcp_MailTools", "GetMessage", json!({"id": "1"}), "hello"),
            tool_call("mcp_MeServer", "GetMyDetails", json!({}), "me"),
            tool_call("/mcp", "echo", json!({}), "echo"),
        ],
    );
    let replay = Replayer::start(&[cassettes.path()]).await;
    let health = raw(Method::GET, &replay.url("/health"), &[], String::new()).await.json();
    assert_eq!(health["status"], "ok");
    assert_eq!(health["exchanges"], 3);

    let object = raw(Method::GET, &replay.url("/agents/agent-1/mcpServers"), &[], String::new()).await.json();
    let servers = object["mcpServers"].as_array().unwrap();
    let names: Vec<&str> = servers.iter().map(|s| s["mcpServerName"].as_str().unwrap()).collect();
    assert_eq!(names, ["mcp_MailTools", "mcp_MeServer"]);
    assert_eq!(servers[0]["url"], replay.url("/agents/servers/mcp_MailTools"));
    let array =
        raw(Method::GET, &replay.url("/agents/v2/agent-1/mcpServers/"), &[], String::new()).await.json();
    assert_eq!(array.as_array().unwrap(), servers);
    replay.stop().await.unwrap();
}

/// A huge announced Content-Length was once read (the client held the slot
/// until a timeout) instead of refused at once.
#[tokio::test]
async fn a_huge_announced_body_is_refused_before_it_is_read() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (_cassettes, replay) = Replayer::empty().await;
    let address = replay.url("").trim_start_matches("http://").to_owned();
    let mut peer = tokio::net::TcpStream::connect(&address).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: 10000000000\r\n\r\n"
    );
    peer.write_all(head.as_bytes()).await.unwrap();
    let mut answer = [0u8; 12];
    tokio::time::timeout(std::time::Duration::from_secs(30), peer.read_exact(&mut answer))
        .await
        .expect("answered without the body")
        .unwrap();
    assert_eq!(&answer, b"HTTP/1.1 413");
    replay.stop().await.unwrap();
}

/// An HTTP/1.1 request without `Host` was served; RFC 9112 §3.2 says 400
/// (an HTTP/1.0 one, which may lack it, is still served).
#[tokio::test]
async fn an_http_1_1_request_without_host_gets_400() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (_cassettes, replay) = Replayer::empty().await;
    let address = replay.url("").trim_start_matches("http://").to_owned();
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
    for (version, status) in [("HTTP/1.1", "400"), ("HTTP/1.0", "200")] {
        let mut peer = tokio::net::TcpStream::connect(&address).await.unwrap();
        let request = format!(
            "POST /mcp {version}\r\nContent-Type: application/json\r\nAccept: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        peer.write_all(request.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        tokio::time::timeout(std::time::Duration::from_secs(30), peer.read_to_end(&mut answer))
            .await
            .expect("answered")
            .unwrap();
        let answer = String::from_utf8_lossy(&answer);
        let status_line = answer.lines().next().unwrap_or_default();
        assert!(status_line.contains(&format!(" {status} ")), "{version}: {answer}");
    }
    replay.stop().await.unwrap();
}

/// Connections that sent nothing, half a request head or half a body once
/// held their slot forever (1030 of them starved every later client).
#[tokio::test]
async fn silent_and_stalled_connections_are_closed() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let cassettes = Cassettes::new();
    let idle = std::time::Duration::from_millis(300);
    let replay =
        Replayer::start_with(&[cassettes.path()], Options { idle_timeout: idle, ..Options::default() }).await;
    let address = replay.url("").trim_start_matches("http://").to_owned();
    let patience = std::time::Duration::from_secs(30);
    let prelude = format!(
        "POST /mcp HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: 40\r\n\r\n{{\"jsonrpc\""
    );
    for sent in ["", "PRI * HTTP/2.0\r\n", prelude.as_str()] {
        let mut peer = tokio::net::TcpStream::connect(&address).await.unwrap();
        let began = std::time::Instant::now();
        peer.write_all(sent.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        tokio::time::timeout(patience, peer.read_to_end(&mut answer))
            .await
            .unwrap_or_else(|_| panic!("still open {patience:?} after sending {sent:?}"))
            .unwrap();
        // Closed by the idle limit: not before it, and not by a refusal of what was sent.
        assert!(
            began.elapsed() >= idle,
            "{sent:?}: closed after {:?}, before the idle limit",
            began.elapsed()
        );
        let answer = String::from_utf8_lossy(&answer);
        if sent.starts_with("POST") {
            assert!(answer.starts_with("HTTP/1.1 408"), "a stalled body gets 408: {answer}");
        } else {
            assert!(answer.is_empty(), "{sent:?}: closed with no answer, got {answer}");
        }
    }
    let ping = call(&replay.url("/mcp"), &[], "ping", json!({})).await;
    assert_eq!(ping.status, 200, "the daemon serves on");
    replay.stop().await.unwrap();
}

/// A request head that trickles in a byte at a time keeps the connection
/// from looking idle; the head itself gets the header limit (10 s, or the
/// idle timeout when shorter, as here).
#[tokio::test]
async fn a_request_head_that_trickles_in_is_cut_off() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let cassettes = Cassettes::new();
    let idle = std::time::Duration::from_millis(300);
    let replay =
        Replayer::start_with(&[cassettes.path()], Options { idle_timeout: idle, ..Options::default() }).await;
    let address = replay.url("").trim_start_matches("http://").to_owned();
    let peer = tokio::net::TcpStream::connect(&address).await.unwrap();
    let (mut from_server, mut to_server) = peer.into_split();
    let began = std::time::Instant::now();
    let trickle = tokio::spawn(async move {
        to_server.write_all(b"POST /mcp HTTP/1.1\r\nX-Slow: ").await?;
        for _ in 0..200 {
            tokio::time::sleep(std::time::Duration::from_millis(30)).await;
            to_server.write_all(b"a").await?;
        }
        Ok::<_, std::io::Error>(())
    });
    let mut answer = Vec::new();
    let read = tokio::time::timeout(std::time::Duration::from_secs(5), from_server.read_to_end(&mut answer))
        .await
        .expect("a trickling request head is cut off within 5 s");
    assert!(began.elapsed() >= idle, "cut off after {:?}, before the limit", began.elapsed());
    let answer = String::from_utf8_lossy(&answer);
    assert!(read.is_ok(), "the connection ends, not reset: {read:?}");
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 408"),
        "cut off with a 408 or nothing: {answer}"
    );
    trickle.abort();
    let ping = call(&replay.url("/mcp"), &[], "ping", json!({})).await;
    assert_eq!(ping.status, 200, "the daemon serves on");
    replay.stop().await.unwrap();
}

/// Numeric ids once came back re-serialized: `123456789012345678901234567890`
/// as `1.2345678901234568e+29`, `-0` as `-0.0`, `1e2` as `100.0`. The
/// caller's id must come back exactly as sent.
#[tokio::test]
async fn ids_come_back_exactly_as_sent() {
    let cassettes = Cassettes::new();
    cassettes.write("ids", vec![tool_call("mcp_Ids", "echo", json!({}), "recorded")]);
    let replay = Replayer::start(&[cassettes.path()]).await;
    let url = replay.url("/agents/servers/mcp_Ids");
    for id in ["123456789012345678901234567890", "-0", "1e2", "2.00", "-7"] {
        for (method, params) in [
            ("ping", "{}"),
            ("tools/call", r#"{"name":"echo","arguments":{}}"#),
            ("tools/call", r#"{"name":"unknown","arguments":{}}"#),
        ] {
            let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#);
            let reply = post(&url, &[("accept", "application/json")], &body).await;
            assert!(
                reply.text.contains(&format!(r#""id":{id},"#))
                    || reply.text.contains(&format!(r#""id":{id}}}"#)),
                "{method} with id {id}: {}",
                reply.text
            );
        }
    }
    replay.stop().await.unwrap();
}

/// A fractional id (`1.5`) was served; MCP ids are strings or integers.
#[tokio::test]
async fn a_fractional_id_is_an_invalid_request() {
    let (_cassettes, replay) = Replayer::empty().await;
    let reply = post(
        &replay.url("/mcp"),
        &[("accept", "application/json")],
        r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#,
    )
    .await;
    assert_eq!(reply.status, 400, "{reply:?}");
    assert_eq!(
        (reply.json()["id"].clone(), reply.json()["error"]["code"].clone()),
        (Value::Null, json!(-32600))
    );
    replay.stop().await.unwrap();
}

/// A new connection that sends nothing, or only the HTTP/2 preface, held
/// its slot until the idle timeout: now its first request must come within
/// the header limit (10 s; the idle timeout here is a minute).
#[tokio::test]
async fn a_connection_with_no_first_request_is_closed_at_the_header_limit() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let cassettes = Cassettes::new();
    let idle = std::time::Duration::from_secs(60);
    let replay =
        Replayer::start_with(&[cassettes.path()], Options { idle_timeout: idle, ..Options::default() }).await;
    let address = replay.url("").trim_start_matches("http://").to_owned();
    let opened: Vec<_> = ["", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"]
        .into_iter()
        .map(|sent| {
            let address = address.clone();
            tokio::spawn(async move {
                let mut peer = tokio::net::TcpStream::connect(&address).await.unwrap();
                peer.write_all(sent.as_bytes()).await.unwrap();
                let mut answer = Vec::new();
                // Well before the idle timeout: only the header limit can close it.
                tokio::time::timeout(std::time::Duration::from_secs(30), peer.read_to_end(&mut answer))
                    .await
                    .unwrap_or_else(|_| panic!("still open 30 s after sending {sent:?}"))
                    .ok();
            })
        })
        .collect();
    for peer in opened {
        peer.await.unwrap();
    }
    replay.stop().await.unwrap();
}

/// An HTTP/2 connection that sends only pings was never closed: pings and
/// settings move bytes but are no request.
#[tokio::test]
async fn an_http2_connection_that_only_pings_is_closed_when_idle() {
    let cassettes = Cassettes::new();
    let idle = std::time::Duration::from_millis(300);
    let replay =
        Replayer::start_with(&[cassettes.path()], Options { idle_timeout: idle, ..Options::default() }).await;
    let address = replay.url("").trim_start_matches("http://").to_owned();
    let stream = tokio::net::TcpStream::connect(&address).await.unwrap();
    let (mut sender, connection) =
        hyper::client::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
            .timer(hyper_util::rt::TokioTimer::new())
            .keep_alive_interval(std::time::Duration::from_millis(50))
            .keep_alive_while_idle(true)
            .handshake::<_, http_body_util::Full<bytes::Bytes>>(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap();
    let connection = tokio::spawn(connection);
    let request = hyper::Request::post(format!("http://{address}/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .body(http_body_util::Full::new(bytes::Bytes::from(
            json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string(),
        )))
        .unwrap();
    let answered = sender.send_request(request).await.unwrap();
    assert_eq!(answered.status(), 200);
    drop(answered);
    // From now on the client only pings, every 50 ms.
    tokio::time::timeout(std::time::Duration::from_secs(30), connection)
        .await
        .expect("a connection that only pings is closed once idle")
        .unwrap()
        .ok();
    replay.stop().await.unwrap();
}

/// At the connection cap, a new client waited behind idle keep-alive
/// connections for their idle timeout; now an idle one makes room.
#[tokio::test]
async fn at_the_connection_cap_an_idle_connection_makes_room() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let cassettes = Cassettes::new();
    let idle = std::time::Duration::from_secs(120);
    let replay =
        Replayer::start_with(&[cassettes.path()], Options { idle_timeout: idle, ..Options::default() }).await;
    let address = replay.url("").trim_start_matches("http://").to_owned();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nAccept: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    // Every slot taken by a keep-alive connection that made one request and went quiet.
    let mut quiet = Vec::new();
    for _ in 0..mcp_tape::limits::MAX_CONNECTIONS {
        let mut peer = tokio::net::TcpStream::connect(&address).await.unwrap();
        peer.write_all(request.as_bytes()).await.unwrap();
        let mut answer = [0u8; 12];
        peer.read_exact(&mut answer).await.unwrap();
        assert_eq!(&answer, b"HTTP/1.1 200");
        quiet.push(peer);
    }
    // Well before the idle timeout (two minutes): only a reclaimed slot can serve it.
    let served = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        call(&replay.url("/mcp"), &[], "ping", json!({})),
    )
    .await
    .expect("a new client is served at the cap");
    assert_eq!(served.status, 200);
    drop(quiet);
    replay.stop().await.unwrap();
}

/// A chunked body that sends a byte every half second never stalled (each
/// wait is under the idle timeout), so it held its connection for as long
/// as it liked; a body now has a deadline that grows with what arrived.
#[tokio::test]
async fn a_body_that_trickles_in_gets_408() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let cassettes = Cassettes::new();
    let idle = std::time::Duration::from_secs(60);
    let replay =
        Replayer::start_with(&[cassettes.path()], Options { idle_timeout: idle, ..Options::default() }).await;
    let address = replay.url("").trim_start_matches("http://").to_owned();
    let peer = tokio::net::TcpStream::connect(&address).await.unwrap();
    let (mut from_server, mut to_server) = peer.into_split();
    let trickle = tokio::spawn(async move {
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\n\
             Accept: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        );
        to_server.write_all(head.as_bytes()).await?;
        for _ in 0..120 {
            to_server.write_all(b"1\r\n \r\n").await?;
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
        Ok::<_, std::io::Error>(())
    });
    let mut answer = vec![0u8; 12];
    tokio::time::timeout(std::time::Duration::from_secs(30), from_server.read_exact(&mut answer))
        .await
        .expect("the trickling body was answered before it ended")
        .unwrap();
    assert_eq!(&answer, b"HTTP/1.1 408");
    trickle.abort();
    replay.stop().await.unwrap();
}
