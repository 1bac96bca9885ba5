//! Cassettes as canonical JSON Lines, for review in a pull request: one
//! exchange per line, keys sorted, in recorded order. Import reads the same
//! form back through the store's writer (normalizing again, which changes
//! nothing for exported lines).

use std::io::{BufRead, Write};

use serde_json::{Value, json};

use crate::error::Error;
use crate::mcp::Era;
use crate::normalize::{RawExchange, Rules, canonical_json};
use crate::store::{Cassette, Direction, Exchange, RecordedMessage};

/// Writes every exchange of `exchanges` as one line each.
///
/// # Errors
///
/// Write failures of `out`.
pub fn export(exchanges: &[Exchange], out: &mut impl Write) -> std::io::Result<()> {
    for exchange in exchanges {
        let messages: Vec<Value> = exchange
            .messages
            .iter()
            .map(|m| {
                json!({
                    "offsetMs": m.offset_ms,
                    "direction": match m.direction { Direction::Server => "server", Direction::Client => "client" },
                    "body": m.body,
                })
            })
            .collect();
        let line = json!({
            "server": exchange.server,
            "era": exchange.era.as_str(),
            "protocolVersion": exchange.protocol_version,
            "request": exchange.request,
            "status": exchange.status,
            "contentType": exchange.content_type,
            "messages": messages,
        });
        writeln!(out, "{}", canonical_json(&line))?;
    }
    Ok(())
}

/// Reads JSON Lines and writes each exchange into `cassette`. Every line is
/// checked before the first is written, so bad input writes nothing.
///
/// # Errors
///
/// The first bad line (by number and reason), or a store failure.
pub fn import(input: impl BufRead, cassette: &mut Cassette) -> Result<usize, Error> {
    let rules = Rules::default();
    let mut exchanges = Vec::new();
    for (index, line) in input.lines().enumerate() {
        let bad = |why: String| Error::Config(format!("line {}: {why}", index + 1));
        let line = line.map_err(|e| bad(e.to_string()))?;
        if line.trim().is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(&line).map_err(|e| bad(format!("not JSON: {e}")))?;
        exchanges.push(rules.exchange(parse_line(&value).map_err(bad)?));
    }
    for exchange in &exchanges {
        cassette.insert(exchange)?;
    }
    Ok(exchanges.len())
}

fn parse_line(value: &Value) -> Result<RawExchange, String> {
    let text = |key: &str| value.get(key).and_then(Value::as_str).ok_or(format!("{key:?} must be a string"));
    let era = Era::parse(text("era")?).ok_or("\"era\" must be \"handshake\" or \"stateless\"")?;
    let request = value.get("request").filter(|r| r.get("method").is_some_and(Value::is_string));
    let status = value.get("status").and_then(Value::as_u64).filter(|s| (100..600).contains(s));
    let mut messages = Vec::new();
    for message in value.get("messages").and_then(Value::as_array).ok_or("\"messages\" must be an array")? {
        messages.push(RecordedMessage {
            offset_ms: message.get("offsetMs").and_then(Value::as_u64).unwrap_or(0),
            direction: match message.get("direction").and_then(Value::as_str) {
                Some("server") => Direction::Server,
                Some("client") => Direction::Client,
                _ => return Err("each message needs \"direction\": \"server\" or \"client\"".into()),
            },
            body: message.get("body").cloned().ok_or("each message needs a \"body\"")?,
        });
    }
    Ok(RawExchange {
        server: text("server")?.to_owned(),
        era,
        protocol_version: text("protocolVersion")?.to_owned(),
        request: request.cloned().ok_or("\"request\" must be a JSON-RPC request with a \"method\"")?,
        status: status.ok_or("\"status\" must be an HTTP status code")? as u16,
        content_type: text("contentType")?.to_owned(),
        messages,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = r#"{"contentType":"application/json","era":"handshake","messages":[{"body":{"id":5,"jsonrpc":"2.0","result":{"tools":[]}},"direction":"server","offsetMs":2}],"protocolVersion":"2025-06-18","request":{"id":5,"jsonrpc":"2.0","method":"tools/list"},"server":"mcp_MeServer","status":200}"#;

    #[test]
    fn import_then_export_round_trips_in_canonical_form() {
        let mut cassette = Cassette::open_in_memory().unwrap();
        assert_eq!(import(format!("{LINE}\n\n").as_bytes(), &mut cassette).unwrap(), 1);
        let exchanges = cassette.exchanges().unwrap();
        let mut first = Vec::new();
        export(&exchanges, &mut first).unwrap();
        let mut again = Cassette::open_in_memory().unwrap();
        import(first.as_slice(), &mut again).unwrap();
        let mut second = Vec::new();
        export(&again.exchanges().unwrap(), &mut second).unwrap();
        assert_eq!(first, second);
        assert!(String::from_utf8(first).unwrap().contains("\"id\":\"mcp-tape:request-id\""));
    }

    #[test]
    fn bad_lines_are_named_and_nothing_is_written() {
        let mut cassette = Cassette::open_in_memory().unwrap();
        let input = format!("{LINE}\n{{\"era\":\"later\"}}\n");
        let err = import(input.as_bytes(), &mut cassette).unwrap_err().to_string();
        assert!(err.starts_with("line 2:"), "{err}");
        assert!(cassette.exchanges().unwrap().is_empty());
    }
}
