//! HAR 1.2 (the HTTP Archive format browsers, mitmproxy and Charles save):
//! read as exchanges, and a cassette written as one.
//!
//! Reading: each `POST` whose body is a JSON-RPC request with an id is an
//! exchange, its answer the response's JSON body or the messages of its
//! `text/event-stream` events; the server's name is the Agent 365 name in
//! the URL's path, else the path; a client's reply to a request the server
//! sent on a stream joins that exchange. What the server said on a `GET`
//! (standalone) stream becomes asides of the exchange before it on that
//! server, after the client notification sent since, as record stores it.
//! Bodies may be base64 (`encoding`). What has no place in a cassette is
//! counted and named: client notifications (record does not store them
//! either), `DELETE`s, batches, and everything that is not MCP.
//!
//! Writing: every exchange an entry, its request and answer as an MCP
//! client and server would have sent them (the answer as JSON or as SSE
//! events), so a HAR viewer shows the session. What HTTP has no field for
//! (offsets, asides, the stream's shape, provenance, the era) rides in the
//! entry's `_mcpTape` object (HAR allows custom fields that begin with
//! `_`), which reading takes back: a cassette written and read again is the
//! same cassette.

use base64::Engine as _;
use serde_json::{Map, Value, json};

use std::collections::HashMap;

use super::{ReadExchange, ReadFile, server_of_url};
use crate::cassette::store::Cassette;
use crate::model::{
    Aside, Channel, Direction, Era, Exchange, Provenance, RecordedMessage, StreamShape, Text,
};
use crate::sse;

/// Host of an entry's URL when the cassette does not say where it was recorded.
const UNKNOWN_HOST: &str = "http://mcp-tape.invalid";

/// Reads a HAR file.
pub fn read(text: &str) -> Result<ReadFile, String> {
    let har: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let entries = har
        .pointer("/log/entries")
        .and_then(Value::as_array)
        .ok_or("no \"log\".\"entries\" array: not a HAR file")?;
    let mut read = ReadFile::default();
    let mut notified = HashMap::new();
    for (n, entry) in entries.iter().enumerate() {
        let at = format!("entry {}", n + 1);
        entry_of(entry, at, &mut read, &mut notified)?;
    }
    Ok(read)
}

/// Reads one entry into `read`: an exchange, a reply joined to one, what
/// the server said on its standalone stream (asides of the exchange before),
/// or a count of what it was. `notified` holds, by server, the client
/// notification sent since its last exchange: what such asides came after.
fn entry_of(
    entry: &Value,
    at: String,
    read: &mut ReadFile,
    notified: &mut HashMap<String, Option<String>>,
) -> Result<(), String> {
    let bad = |why: &str| format!("{at}: {why}");
    let request = entry.get("request").ok_or_else(|| bad("no \"request\""))?;
    let response = entry.get("response").ok_or_else(|| bad("no \"response\""))?;
    let method = request.get("method").and_then(Value::as_str).ok_or_else(|| bad("no request \"method\""))?;
    let url = request.get("url").and_then(Value::as_str).ok_or_else(|| bad("no request \"url\""))?;
    let server = server_of_url(url);
    let headers = headers_of(request);
    let answer_type = response_type(response);
    match method {
        "POST" => {}
        "GET" if answer_type.starts_with("text/event-stream") => {
            let text = response
                .get("content")
                .map(|c| body_text(c, "content"))
                .transpose()
                .map_err(|why| bad(&why))?;
            let said = events_of(&text.unwrap_or_default()).map_err(|why| bad(&why))?;
            let before = read.heard.iter_mut().rev().find(|h| h.server.as_deref() == Some(server.as_str()));
            match before {
                Some(heard) => {
                    let after = notified.get(&server).cloned().flatten();
                    heard.asides.extend(said.into_iter().map(|(body, written)| Aside {
                        after: after.clone(),
                        in_flight: false,
                        channel: Channel::Standalone,
                        message: RecordedMessage {
                            written: Some(written),
                            ..RecordedMessage::new(0, Direction::Server, body)
                        },
                    }));
                }
                None if said.is_empty() => {}
                None => read.skip("server messages on a standalone stream before any exchange"),
            }
            return Ok(());
        }
        "DELETE" if headers.iter().any(|(n, _)| n == "mcp-session-id") => {
            read.skip("DELETE ending a session");
            return Ok(());
        }
        _ => {
            read.skip("not MCP");
            return Ok(());
        }
    }
    let Some(body) = request.get("postData").map(|p| body_text(p, "postData")).transpose()? else {
        read.skip("not MCP");
        return Ok(());
    };
    let Ok(message) = serde_json::from_str::<Value>(&body) else {
        read.skip("not MCP");
        return Ok(());
    };
    if message.is_array() {
        read.skip("JSON-RPC batch (no MCP version since 2025-06-18 has them)");
        return Ok(());
    }
    if message.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        read.skip("not MCP");
        return Ok(());
    }
    let (has_method, id) = (message.get("method").is_some_and(Value::is_string), message.get("id"));
    match (has_method, id) {
        (true, Some(_)) => {}
        (true, None) => {
            let method = message.get("method").and_then(Value::as_str).unwrap_or_default().to_owned();
            notified.insert(server, Some(method));
            read.skip("client notification (record does not store them either)");
            return Ok(());
        }
        (false, Some(id)) => {
            // HAR keeps no time per message: the reply takes the offset of the answer's last one so far.
            read.join_reply(id, message.clone(), |_, heard| heard.messages.last().map_or(0, |m| m.offset_ms));
            return Ok(());
        }
        (false, None) => {
            read.skip("not MCP");
            return Ok(());
        }
    }
    let status =
        response.get("status").and_then(Value::as_u64).ok_or_else(|| bad("no response \"status\""))?;
    let text = match response.get("content") {
        Some(content) if content.get("text").is_some() => {
            body_text(content, "content").map_err(|why| bad(&why))?
        }
        _ => String::new(),
    };
    let ours = entry.get("_mcpTape");
    let offsets: Vec<u64> = ours
        .and_then(|o| o.get("offsetsMs"))
        .and_then(Value::as_array)
        .map(|list| list.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default();
    let mut messages = Vec::new();
    if answer_type.starts_with("text/event-stream") {
        messages = events_of(&text).map_err(|why| bad(&why))?;
    } else if !text.trim().is_empty() {
        let body: Value =
            serde_json::from_str(&text).map_err(|e| bad(&format!("the response body is not JSON: {e}")))?;
        messages.push((body, text.into()));
    }
    if messages.is_empty() {
        read.skip(format!("request with no answer in the file (HTTP {status})"));
        return Ok(());
    }
    let messages: Vec<RecordedMessage> = messages
        .into_iter()
        .enumerate()
        .map(|(i, (body, written))| RecordedMessage {
            offset_ms: offsets.get(i).copied().unwrap_or(0),
            direction: Direction::Server,
            body,
            written: Some(written),
            shallow: false,
        })
        .collect();
    let session =
        header(&headers, "mcp-session-id").or_else(|| header(&headers_of(response), "mcp-session-id"));
    let mut heard = ReadExchange {
        at: at.clone(),
        server: Some(server),
        session,
        request: message,
        status: u16::try_from(status).ok(),
        content_type: Some(answer_type),
        messages,
        headers,
        ..ReadExchange::default()
    };
    if let Some(ours) = ours {
        extension(ours, &mut heard).map_err(|why| bad(&format!("\"_mcpTape\": {why}")))?;
    }
    read.heard.push(heard);
    Ok(())
}

/// The JSON-RPC messages of an SSE body's events (priming events, with no
/// data, left out).
fn events_of(text: &str) -> Result<Vec<(Value, Text)>, String> {
    let mut parser = sse::Parser::default();
    parser.push(text.as_bytes());
    parser.push(b"\n\n");
    let mut messages = Vec::new();
    while let Some((_, event)) = parser.next_event().map_err(|_| "an SSE event is too large")? {
        if event.data.is_empty() {
            continue;
        }
        let body: Value =
            serde_json::from_str(&event.data).map_err(|e| format!("an SSE event's data is not JSON: {e}"))?;
        messages.push((body, event.data.into()));
    }
    Ok(messages)
}

/// What an entry of ours keeps beside HTTP (see the module's text).
fn extension(ours: &Value, heard: &mut ReadExchange) -> Result<(), String> {
    let text = |key: &str| ours.get(key).and_then(Value::as_str).map(str::to_owned);
    if let Some(server) = text("server") {
        heard.server = Some(server);
    }
    if let Some(era) = text("era") {
        heard.era = Some(Era::parse(&era).ok_or("\"era\" must be \"handshake\" or \"stateless\"")?);
    }
    heard.protocol_version = text("protocolVersion");
    if let Some(replies) = ours.get("clientMessages").and_then(Value::as_array) {
        for reply in replies {
            let after =
                reply.get("after").and_then(Value::as_u64).ok_or("a client message needs \"after\"")?;
            let body = reply.get("body").cloned().ok_or("a client message needs \"body\"")?;
            let offset_ms = reply.get("offsetMs").and_then(Value::as_u64).unwrap_or(0);
            let at = usize::try_from(after)
                .ok()
                .filter(|a| *a <= heard.messages.len())
                .ok_or("\"after\" is past the answer")?;
            heard.messages.insert(at, RecordedMessage::new(offset_ms, Direction::Client, body));
        }
    }
    if let Some(line) = ours.get("asides") {
        let rest = crate::interchange::jsonl::parse_asides(line, &[])?;
        heard.asides = rest;
    }
    if let Some(stream) = ours.get("stream") {
        heard.stream = crate::interchange::jsonl::read_stream_shape(&json!({"stream": stream}))?;
    }
    heard.provenance = Provenance {
        recorded_at: ours.get("recordedAt").and_then(Value::as_i64),
        upstream: text("recordedFrom"),
        recorder: text("recordedBy"),
        keys_sorted: ours.get("keysSorted").and_then(Value::as_bool).unwrap_or(false),
    };
    Ok(())
}

/// A HAR `postData` or `content` body as text (base64 when `encoding` says so).
fn body_text(holder: &Value, what: &str) -> Result<String, String> {
    let text = holder.get("text").and_then(Value::as_str).unwrap_or_default();
    match holder.get("encoding").and_then(Value::as_str) {
        None | Some("") => Ok(text.to_owned()),
        Some("base64") => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(text.trim())
                .map_err(|e| format!("{what} is not the base64 its \"encoding\" says: {e}"))?;
            String::from_utf8(bytes).map_err(|_| format!("{what} is not UTF-8 text"))
        }
        Some(other) => Err(format!("{what} has an \"encoding\" of {other:?}; HAR knows base64")),
    }
}

/// A request's or response's headers as (lowercase name, value).
fn headers_of(message: &Value) -> Vec<(String, String)> {
    message
        .get("headers")
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(|h| {
                    Some((
                        h.get("name")?.as_str()?.to_ascii_lowercase(),
                        h.get("value")?.as_str()?.to_owned(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

fn header(headers: &[(String, String)], name: &str) -> Option<String> {
    headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone())
}

/// The response's media type: its `content.mimeType`, else its `Content-Type` header.
fn response_type(response: &Value) -> String {
    let mime = response.pointer("/content/mimeType").and_then(Value::as_str).filter(|m| !m.is_empty());
    mime.map(str::to_owned)
        .or_else(|| header(&headers_of(response), "content-type"))
        .unwrap_or_default()
        .to_ascii_lowercase()
}

/// Writes a cassette's exchanges to `out` as a HAR 1.2 document, one
/// entry at a time (each made, written and dropped before the next), so
/// that memory holds one entry however long the cassette.
///
/// # Errors
///
/// Write failures of `out`.
pub fn write(cassette: &Cassette, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    let creator = json!({"name": "mcp-tape", "version": env!("CARGO_PKG_VERSION")});
    write!(
        out,
        "{{\n  \"log\": {{\n    \"version\": \"1.2\",\n    \"creator\": {creator},\n    \"entries\": ["
    )?;
    let mut first = true;
    cassette.each_exchange(|exchange| {
        out.write_all(if std::mem::take(&mut first) { b"\n" } else { b",\n" })?;
        serde_json::to_writer_pretty(&mut *out, &entry(exchange)).map_err(std::io::Error::from)
    })?;
    writeln!(out, "\n    ]\n  }}\n}}")
}

/// One exchange as a HAR entry.
fn entry(exchange: &Exchange) -> Value {
    let path = if exchange.server.starts_with('/') {
        exchange.server.clone()
    } else {
        format!("/agents/servers/{}", exchange.server)
    };
    let host = exchange.provenance.upstream.as_deref().map_or(UNKNOWN_HOST.to_owned(), |up| {
        if up.contains("://") { up.trim_end_matches('/').to_owned() } else { format!("http://{up}") }
    });
    let request_text = exchange.request.to_string();
    let mut request_headers = vec![
        json!({"name": "Content-Type", "value": "application/json"}),
        json!({"name": "Accept", "value": "application/json, text/event-stream"}),
        json!({"name": "Mcp-Protocol-Version", "value": exchange.protocol_version}),
    ];
    if exchange.era == Era::Stateless {
        request_headers.push(json!({"name": "Mcp-Method", "value": exchange.method}));
    }
    let server_messages: Vec<&RecordedMessage> =
        exchange.messages.iter().filter(|m| m.direction == Direction::Server).collect();
    let streamed = exchange.content_type.starts_with("text/event-stream");
    let answer_text = if streamed {
        server_messages.iter().map(|m| sse::message_event(&m.as_sent())).collect::<String>()
    } else {
        server_messages.first().map(|m| m.as_sent()).unwrap_or_default()
    };
    let mut ours = Map::new();
    ours.insert("server".into(), exchange.server.clone().into());
    ours.insert("era".into(), exchange.era.as_str().into());
    ours.insert("protocolVersion".into(), exchange.protocol_version.clone().into());
    ours.insert("offsetsMs".into(), server_messages.iter().map(|m| m.offset_ms).collect::<Vec<_>>().into());
    let mut seen_server = 0;
    let mut replies = Vec::new();
    for message in &exchange.messages {
        match message.direction {
            Direction::Server => seen_server += 1,
            Direction::Client => replies.push(json!({
                "after": seen_server + replies.len(),
                "offsetMs": message.offset_ms,
                "body": message.body,
            })),
        }
    }
    if !replies.is_empty() {
        ours.insert("clientMessages".into(), replies.into());
    }
    if !exchange.asides.is_empty() {
        ours.insert("asides".into(), crate::interchange::jsonl::asides_line(&exchange.asides));
    }
    if exchange.stream != StreamShape::default() {
        ours.insert("stream".into(), crate::interchange::jsonl::stream_shape(&exchange.stream));
    }
    let known = &exchange.provenance;
    if let Some(at) = known.recorded_at {
        ours.insert("recordedAt".into(), at.into());
    }
    if let Some(upstream) = &known.upstream {
        ours.insert("recordedFrom".into(), upstream.as_str().into());
    }
    if let Some(recorder) = &known.recorder {
        ours.insert("recordedBy".into(), recorder.as_str().into());
    }
    if known.keys_sorted {
        ours.insert("keysSorted".into(), true.into());
    }
    let time = exchange.messages.last().map_or(0, |m| m.offset_ms);
    json!({
        "startedDateTime": iso_8601(known.recorded_at.unwrap_or(0)),
        "time": time,
        "request": {
            "method": "POST",
            "url": format!("{host}{path}"),
            "httpVersion": "HTTP/1.1",
            "cookies": [],
            "headers": request_headers,
            "queryString": [],
            "postData": {"mimeType": "application/json", "text": request_text},
            "headersSize": -1,
            "bodySize": request_text.len(),
        },
        "response": {
            "status": exchange.status.as_u16(),
            "statusText": "",
            "httpVersion": "HTTP/1.1",
            "cookies": [],
            "headers": [{"name": "Content-Type", "value": exchange.content_type}],
            "content": {"size": answer_text.len(), "mimeType": exchange.content_type, "text": answer_text},
            "redirectURL": "",
            "headersSize": -1,
            "bodySize": answer_text.len(),
        },
        "cache": {},
        "timings": {"send": 0, "wait": time, "receive": 0},
        "_mcpTape": ours,
    })
}

/// Seconds since 1970 as an ISO 8601 UTC time (`1970-01-01T00:00:00.000Z`).
fn iso_8601(seconds: i64) -> String {
    let (days, rest) = (seconds.div_euclid(86_400), seconds.rem_euclid(86_400));
    let (year, month, day) = crate::util::civil_from_days(days);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.000Z", rest / 3600, rest % 3600 / 60, rest % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_of_urls() {
        assert_eq!(iso_8601(1_790_000_000), "2026-09-21T14:13:20.000Z");
    }
}
