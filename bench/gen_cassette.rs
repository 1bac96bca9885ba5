//! Writes a benchmark cassette through mcp-tape's store API: N recorded
//! `tools/call lookup {"n": i}` exchanges with JSON answers on server
//! mcp_Bench, plus one `tools/call progress` SSE exchange with three
//! progress notifications.
//!
//! Usage: gen-cassette N PATH

use mcp_tape::cassette::store::Cassette;
use mcp_tape::model::{Direction, Era, RawExchange, RecordedMessage, Status, StreamShape};
use mcp_tape::normalize::Rules;
use serde_json::{Value, json};

fn exchange(tool: &str, arguments: Value, content_type: &str, messages: Vec<Value>) -> RawExchange {
    RawExchange {
        server: "mcp_Bench".into(),
        era: Era::Handshake,
        protocol_version: "2025-06-18".into(),
        request: json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments, "_meta": {"progressToken": 1}}}),
        status: Status::OK,
        content_type: content_type.into(),
        messages: messages
            .into_iter()
            .enumerate()
            .map(|(i, body)| RecordedMessage::new(i as u64, Direction::Server, body))
            .collect(),
        asides: Vec::new(),
        stream: StreamShape::default(),
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(count), Some(path)) = (args.next().and_then(|n| n.parse::<u64>().ok()), args.next()) else {
        eprintln!("usage: gen-cassette N PATH");
        std::process::exit(2);
    };
    let mut cassette = Cassette::open(path.as_ref()).unwrap_or_else(|e| {
        eprintln!("gen-cassette: {e}");
        std::process::exit(1)
    });
    let rules = Rules::default();
    for n in 0..count {
        let text = format!(
            "{{\"id\":\"AAMk{n:08}\",\"subject\":\"Weekly report {n}\",\"from\":\"adele.vance@contoso.com\",\"bodyPreview\":\"Numbers for week {n} are attached; travel is on plan and the pipeline grew.\"}}"
        );
        let answer =
            json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": text}]}});
        let raw = exchange("lookup", json!({"n": n}), "application/json", vec![answer]);
        cassette.insert(&rules.exchange(raw)).expect("insert");
    }
    let progress = |step: u64| {
        json!({"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": 1, "progress": step, "total": 3}})
    };
    let done = json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "done"}]}});
    let streamed = exchange(
        "progress",
        json!({}),
        "text/event-stream",
        vec![progress(1), progress(2), progress(3), done],
    );
    cassette.insert(&rules.exchange(streamed)).expect("insert");
}
