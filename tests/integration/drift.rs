//! `verify` and `diff` with the real binary: a recording made through
//! `record` from a fixture upstream whose tool catalogue the test then
//! changes (a tool removed, a required parameter added, a parameter's type
//! changed, a description changed, a tool's answer changed), verified
//! against the live fixture (classification, exit codes, `--update` then
//! clean, the token never stored) and compared with a second recording.

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::support::*;

const BIN: &str = env!("CARGO_BIN_EXE_mcp-tape");
const TOKEN: &str = "drift-fixture-token-7b1f0c";
const SERVER: &str = "/agents/servers/mcp_Fixture";

/// What the fixture serves; the test changes it between runs.
struct Catalogue {
    tools: Vec<Value>,
    /// Put into every tool call's answer.
    edition: u32,
    /// Tool calls answered, to tell whether verify made any.
    calls: usize,
}

fn tool(name: &str, description: &str, properties: Value, required: Value) -> Value {
    json!({"name": name, "description": description,
        "inputSchema": {"type": "object", "properties": properties, "required": required}})
}

fn first_edition() -> Vec<Value> {
    vec![
        tool("GetRooms", "Lists rooms", json!({"city": {"type": "string"}}), json!(["city"])),
        tool("SendMail", "Sends mail", json!({"to": {"type": "string"}}), json!(["to"])),
        tool("Count", "Counts", json!({"n": {"type": "number"}}), json!([])),
        tool("Retired", "Old", json!({}), json!([])),
    ]
}

async fn fixture(catalogue: Arc<Mutex<Catalogue>>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { return };
            let catalogue = Arc::clone(&catalogue);
            tokio::spawn(async move {
                let service = service_fn(move |request| answer(request, Arc::clone(&catalogue)));
                let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                let _ = builder.serve_connection(TokioIo::new(stream), service).await;
            });
        }
    });
    format!("http://{addr}")
}

async fn answer(
    request: Request<Incoming>,
    catalogue: Arc<Mutex<Catalogue>>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let authorized = request.headers().get("authorization").and_then(|v| v.to_str().ok())
        == Some(&format!("Bearer {TOKEN}"));
    let body: Value =
        serde_json::from_slice(&request.into_body().collect().await.unwrap().to_bytes()).unwrap_or_default();
    let reply = |status: u16, body: String| {
        let mut response = Response::new(Full::new(Bytes::from(body)));
        *response.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
        response.headers_mut().insert("content-type", "application/json".parse().unwrap());
        response.headers_mut().insert("mcp-session-id", "fixture-session".parse().unwrap());
        Ok(response)
    };
    if !authorized {
        return reply(401, "{}".into());
    }
    let id = body["id"].clone();
    let result = |result: Value| json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string();
    let mut catalogue = catalogue.lock().unwrap();
    match body["method"].as_str().unwrap_or_default() {
        "initialize" => reply(
            200,
            result(json!({"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
            "serverInfo": {"name": "fixture", "version": "1"}})),
        ),
        method if method.starts_with("notifications/") => reply(202, String::new()),
        "tools/list" => reply(200, result(json!({"tools": catalogue.tools}))),
        "tools/call" => {
            catalogue.calls += 1;
            let text = format!(
                "edition {} of {}",
                catalogue.edition,
                body["params"]["name"].as_str().unwrap_or_default()
            );
            reply(200, result(json!({"content": [{"type": "text", "text": text}]})))
        }
        _ => reply(
            200,
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "no"}}).to_string(),
        ),
    }
}

/// Records initialize, tools/list and one tools/call through the real record path.
async fn record_from(upstream: &str, dir: &Path) -> PathBuf {
    let recorder = Recorder::start(upstream, dir, RecordOptions::default()).await;
    let url = recorder.url(SERVER);
    let auth = ("authorization", format!("Bearer {TOKEN}"));
    let auth = [(auth.0, auth.1.as_str())];
    let init = call(
        &url,
        &auth,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}),
    )
    .await;
    let session = init.header("mcp-session-id").unwrap().to_owned();
    let with_session = [auth[0], ("mcp-session-id", session.as_str())];
    assert_eq!(call(&url, &with_session, "tools/list", json!({})).await.status, 200);
    assert_eq!(
        call(&url, &with_session, "tools/call", json!({"name": "GetRooms", "arguments": {"city": "Oslo"}}))
            .await
            .status,
        200
    );
    recorder.stop().await;
    dir.join("recorded.sqlite")
}

fn mcp_tape(args: &[&str]) -> (Option<i32>, String, String) {
    let output =
        std::process::Command::new(BIN).args(args).env_remove("MCP_TAPE_UPSTREAM_TOKEN").output().unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn second_edition(catalogue: &Mutex<Catalogue>) {
    let mut catalogue = catalogue.lock().unwrap();
    catalogue.tools = vec![
        tool(
            "GetRooms",
            "Lists the meeting rooms of a city",
            json!({"city": {"type": "string"}}),
            json!(["city"]),
        ),
        tool(
            "SendMail",
            "Sends mail",
            json!({"to": {"type": "string"}, "subject": {"type": "string"}}),
            json!(["to", "subject"]),
        ),
        tool("Count", "Counts", json!({"n": {"type": "string"}}), json!([])),
    ];
    catalogue.edition = 2;
}

// Multi-threaded: the binary runs as a blocking child while the fixture answers it on this runtime.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_classifies_drift_updates_and_is_then_clean() {
    let catalogue = Arc::new(Mutex::new(Catalogue { tools: first_edition(), edition: 1, calls: 0 }));
    let upstream = fixture(Arc::clone(&catalogue)).await;
    let dir = tempfile::tempdir().unwrap();
    let cassette = record_from(&upstream, dir.path()).await;
    let file = cassette.to_str().unwrap();
    let header = format!("Authorization: Bearer {TOKEN}");
    let verify = |extra: &[&str]| {
        let mut args = vec!["verify", file, "--upstream", &upstream, "--header", &header];
        args.extend_from_slice(extra);
        mcp_tape(&args)
    };

    let (code, out, err) = verify(&[]);
    assert_eq!(code, Some(0), "unchanged: {out}{err}");
    assert!(out.contains("mcp_Fixture tools/list: same"), "{out}");
    assert_eq!(catalogue.lock().unwrap().calls, 1, "no call re-sent without --include-calls");

    second_edition(&catalogue);
    let (code, out, err) = verify(&["--include-calls"]);
    assert_eq!(code, Some(1), "breaking drift: {out}{err}");
    for line in [
        "breaking mcp_Fixture Retired: tool removed",
        "breaking mcp_Fixture SendMail: parameter \"subject\": required parameter added",
        "breaking mcp_Fixture Count: parameter \"n\": type \"number\" became \"string\"",
        "cosmetic mcp_Fixture GetRooms: description changed",
        "mcp_Fixture tools/call GetRooms {\"city\":\"Oslo\"}: changed: /result/content/0/text \"edition 1 of GetRooms\" → \"edition 2 of GetRooms\";",
    ] {
        assert!(out.contains(line), "{line}\n{out}");
    }
    assert!(!out.contains(TOKEN) && !err.contains(TOKEN), "the token is never printed");
    let (_, json_out, _) = verify(&["--format", "json", "--fail-on", "never"]);
    let findings: Value = serde_json::from_str(&json_out).unwrap();
    assert_eq!(findings["breaking"], 3, "{findings}");

    let (code, _, err) = verify(&["--include-calls", "--update"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("rewrote 2 recordings"), "{err}");
    let (code, out, err) = verify(&["--include-calls"]);
    assert_eq!(code, Some(0), "clean after --update: {out}{err}");
    assert!(
        out.contains("2 exchanges compared, 2 same, 0 not; catalogue: 0 breaking, 0 additive, 0 cosmetic"),
        "{out}"
    );
    assert!(!std::fs::read(&cassette).unwrap().windows(TOKEN.len()).any(|w| w == TOKEN.as_bytes()));

    // Only a description changes: reported, but only --fail-on changed fails on it.
    catalogue.lock().unwrap().tools[0]["description"] = "Rooms".into();
    let (code, out, _) = verify(&[]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("cosmetic mcp_Fixture GetRooms: description changed"), "{out}");
    assert_eq!(verify(&["--fail-on", "changed"]).0, Some(1));
}

#[tokio::test]
async fn diff_compares_two_recordings_with_the_same_classification() {
    let catalogue = Arc::new(Mutex::new(Catalogue { tools: first_edition(), edition: 1, calls: 0 }));
    let upstream = fixture(Arc::clone(&catalogue)).await;
    let (before, after) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let old = record_from(&upstream, before.path()).await;
    second_edition(&catalogue);
    let new = record_from(&upstream, after.path()).await;
    let (old, new) = (old.to_str().unwrap(), new.to_str().unwrap());

    let (code, out, _) = mcp_tape(&["diff", old, new]);
    assert_eq!(code, Some(1), "breaking: {out}");
    assert!(out.contains("breaking mcp_Fixture Retired: tool removed"), "{out}");
    let (code, markdown, _) = mcp_tape(&["diff", old, new, "--format", "markdown", "--fail-on", "never"]);
    assert_eq!(code, Some(0));
    assert!(
        markdown.contains(
            "| **breaking** | mcp_Fixture | SendMail | parameter \"subject\": required parameter added |"
        ),
        "{markdown}"
    );
    assert!(
        markdown.contains("| mcp_Fixture tools/call GetRooms {\"city\":\"Oslo\"} | changed:"),
        "{markdown}"
    );
    let (_, json_out, _) = mcp_tape(&["diff", old, new, "--format", "json"]);
    let findings: Value = serde_json::from_str(&json_out).unwrap();
    assert_eq!(findings["breaking"], 3);
    let (code, same, _) = mcp_tape(&["diff", old, old]);
    assert_eq!(code, Some(0), "{same}");
    assert!(same.contains("0 not; catalogue: 0 breaking, 0 additive, 0 cosmetic"), "{same}");
}
