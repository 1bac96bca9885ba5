//! The HTTP front door, request to response with no socket: replay of a
//! small cassette answers any method, path, headers and body with an HTTP
//! answer, never a panic; a JSON answer is JSON.
#![no_main]

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use libfuzzer_sys::fuzz_target;
use mcp_tape::cassette::store::Cassette;
use mcp_tape::cassette::tape::Tape;
use mcp_tape::config::{FrontDoor, OnMiss, Pace};
use mcp_tape::engine::replay::{Replay, ServiceAnswers};
use mcp_tape::engine::{Engine, Mode};
use mcp_tape::normalize::Rules;
use mcp_tape::transport::http::{App, handle};

const CASSETTE: &str = concat!(
    r#"{"contentType":"application/json","era":"handshake","messages":[{"body":{"id":"mcp-tape:request-id","jsonrpc":"2.0","result":{"content":[{"text":"hi","type":"text"}]}},"direction":"server","offsetMs":1}],"#,
    r#""protocolVersion":"2025-06-18","request":{"id":"mcp-tape:request-id","jsonrpc":"2.0","method":"tools/call","params":{"arguments":{"id":"1"},"name":"Get"}},"server":"mcp_Fuzz","status":200}"#,
);

fn setup() -> &'static (tokio::runtime::Runtime, Arc<App>) {
    static SETUP: OnceLock<(tokio::runtime::Runtime, Arc<App>)> = OnceLock::new();
    SETUP.get_or_init(|| {
        let mut cassette = Cassette::open_in_memory().unwrap();
        mcp_tape::interchange::jsonl::import(CASSETTE.as_bytes(), &mut cassette).unwrap();
        let rules = Rules::default();
        let tape = Tape::new(cassette.exchanges_as_text().unwrap(), &rules);
        let replay = Replay::new(tape, ServiceAnswers::default(), rules, OnMiss::Error, Pace::Instant);
        let front_door = FrontDoor {
            listen: "127.0.0.1:0".parse().unwrap(),
            allowed_hosts: Vec::new(),
            idle_timeout: Duration::from_secs(1),
        };
        let app = Arc::new(App::new(Engine::from(Mode::Replay(replay)), front_door));
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        (runtime, app)
    })
}

fuzz_target!(|data: &[u8]| {
    // Method and path on the first line, then "name: value" header lines, a blank line, the body.
    let text = String::from_utf8_lossy(data);
    let (head, body) = text.split_once("\n\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let (method, path) =
        lines.next().and_then(|l| l.split_once(' ')).unwrap_or(("POST", "/agents/servers/mcp_Fuzz"));
    let mut request = hyper::Request::builder().method(method).uri(path).header("host", "127.0.0.1");
    for line in lines {
        if let Some((name, value)) = line.split_once(':') {
            request = request.header(name.trim(), value.trim());
        }
    }
    let Ok(request) = request.body(Full::new(Bytes::from(body.to_owned()))) else { return };
    let (runtime, app) = setup();
    runtime.block_on(async {
        let response = handle(request, app, None).await;
        let json = response
            .headers()
            .get("content-type")
            .is_some_and(|t| t.as_bytes().starts_with(b"application/json"));
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        if json && !bytes.is_empty() {
            assert!(serde_json::from_slice::<serde_json::Value>(&bytes).is_ok(), "{bytes:?}");
        }
    });
});
