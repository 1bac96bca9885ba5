//! Recordings that keep JSON-RPC messages rather than HTTP: the MCP
//! Inspector's protocol history, mcp-cassette's JSON Lines, mcp-recorder's
//! JSON and mcp-vcr's transcripts. Each is read into the messages in the
//! order they were sent ([`Turn`]), and [`pair`] makes exchanges of them as
//! record does on stdio: a request's answer ends its exchange; progress for
//! its token, other server messages and the server's requests (with the
//! client's replies) go with the request sent last while one is open, and
//! what the server says while none is open is an aside of the last one.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::Value;

use super::{ReadExchange, ReadFile};
use crate::limits::MAX_YAML_FLOW_DEPTH;
use crate::model::{Aside, Channel, Direction, Era, RecordedMessage, canonical_json};

/// One message of a transcript: when (milliseconds, on the file's own
/// clock), who sent it, and the message.
struct Turn {
    at_ms: i64,
    /// An answer a file keeps with its request, not where it came: at its
    /// millisecond it goes after the messages the file has in place.
    late: bool,
    from_client: bool,
    body: Value,
    /// Where in the file, for errors and for the exchange it opens.
    at: String,
}

/// The requests of a transcript still waiting for their answer, indexed
/// by id, progress token and place, so that pairing each message costs the
/// same however many are open.
#[derive(Default)]
struct Open {
    /// In the order they were sent: (index in `read.heard`, sent at).
    by_order: BTreeMap<u64, (usize, i64)>,
    /// By id (canonical JSON): the order numbers of those open with it.
    by_id: HashMap<String, BTreeSet<u64>>,
    /// By `_meta.progressToken` (canonical JSON), likewise.
    by_token: HashMap<String, BTreeSet<u64>>,
    /// By index in `read.heard`.
    by_index: HashMap<usize, u64>,
    next: u64,
}

impl Open {
    fn open(&mut self, id: &Value, token: Option<&Value>, index: usize, sent: i64) {
        let order = self.next;
        self.next += 1;
        self.by_order.insert(order, (index, sent));
        self.by_id.entry(canonical_json(id)).or_default().insert(order);
        if let Some(token) = token {
            self.by_token.entry(canonical_json(token)).or_default().insert(order);
        }
        self.by_index.insert(index, order);
    }

    /// The oldest open request with `id`, no longer open.
    fn close(&mut self, id: &Value, token_of: impl Fn(usize) -> Option<Value>) -> Option<(usize, i64)> {
        let orders = self.by_id.get_mut(&canonical_json(id))?;
        let order = orders.pop_first()?;
        let (index, sent) = self.by_order.remove(&order)?;
        if let Some(token) = token_of(index)
            && let Some(tokens) = self.by_token.get_mut(&canonical_json(&token))
        {
            tokens.remove(&order);
        }
        self.by_index.remove(&index);
        Some((index, sent))
    }

    /// The latest open request with progress token `token`.
    fn latest_with(&self, token: &Value) -> Option<(usize, i64)> {
        let order = self.by_token.get(&canonical_json(token))?.last()?;
        self.by_order.get(order).copied()
    }

    /// The latest open request.
    fn latest(&self) -> Option<(usize, i64)> {
        self.by_order.last_key_value().map(|(_, open)| *open)
    }

    /// When the request at `index` was sent, if it is open.
    fn sent(&self, index: usize) -> Option<i64> {
        self.by_order.get(self.by_index.get(&index)?).map(|(_, sent)| *sent)
    }
}

/// Pairs a transcript's messages into exchanges (see the module's text).
fn pair(mut said: Vec<Turn>, read: &mut ReadFile) {
    // Files written as things happened are in order already; a stable sort by time keeps ties in file order.
    said.sort_by_key(|s| (s.at_ms, s.late));
    let mut open = Open::default();
    let mut last: Option<usize> = None;
    for Turn { at_ms, from_client, body, at, .. } in said {
        let method = body.get("method").and_then(Value::as_str).map(str::to_owned);
        let id = body.get("id").cloned();
        let offset = |sent: i64| u64::try_from(at_ms - sent).unwrap_or(0);
        match (from_client, method, id) {
            (true, Some(_), Some(id)) => {
                let token = body.pointer("/params/_meta/progressToken").cloned();
                read.heard.push(ReadExchange { at, request: body, ..ReadExchange::default() });
                open.open(&id, token.as_ref(), read.heard.len() - 1, at_ms);
            }
            (true, Some(_), None) => read.skip("client notification (record does not store them either)"),
            (true, None, Some(id)) => {
                read.join_reply(&id, body, |index, _| offset(open.sent(index).unwrap_or(at_ms)));
            }
            (false, None, Some(id)) => {
                let token_of =
                    |index: usize| read.heard[index].request.pointer("/params/_meta/progressToken").cloned();
                match open.close(&id, token_of) {
                    Some((index, sent)) => {
                        read.heard[index].messages.push(RecordedMessage {
                            offset_ms: offset(sent),
                            direction: Direction::Server,
                            body,
                            written: None,
                            shallow: false,
                        });
                        last = Some(index);
                    }
                    None => read.skip("answer to a request the file does not hold"),
                }
            }
            (false, Some(_), _) => {
                let token = body.pointer("/params/progressToken");
                let owner = token.and_then(|token| open.latest_with(token)).or_else(|| open.latest());
                match (owner, last) {
                    (Some((index, sent)), _) => read.heard[index].messages.push(RecordedMessage {
                        offset_ms: offset(sent),
                        direction: Direction::Server,
                        body,
                        written: None,
                        shallow: false,
                    }),
                    (None, Some(index)) => {
                        let message = RecordedMessage::new(0, Direction::Server, body);
                        read.heard[index].asides.push(Aside {
                            after: None,
                            in_flight: false,
                            channel: Channel::Standalone,
                            message,
                        });
                    }
                    (None, None) => read.skip("server message before any request"),
                }
            }
            _ => read.skip("not a JSON-RPC message"),
        }
    }
    let before = read.heard.len();
    read.heard.retain(|heard| {
        heard.messages.iter().any(|m| m.direction == Direction::Server && m.body.get("method").is_none())
    });
    for _ in read.heard.len()..before {
        read.skip("request with no answer in the file");
    }
}

/// The MCP Inspector's protocol history (`inspector-protocol-*.json`, its
/// web client's "Export"): an array of entries `{id, timestamp, direction:
/// "request" | "response" | "notification", origin: "client" | "server",
/// message, response?, duration?}`, a request's answer kept with it.
pub fn inspector(text: &str) -> Result<ReadFile, String> {
    let entries: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let entries = entries.as_array().ok_or("not an array of protocol history entries")?;
    let mut said = Vec::new();
    for (n, entry) in entries.iter().enumerate() {
        let at = format!("entry {}", n + 1);
        let bad = |why: &str| format!("{at}: {why}");
        let time = entry.get("timestamp").and_then(Value::as_str).ok_or_else(|| bad("no \"timestamp\""))?;
        let at_ms = crate::util::parse_rfc3339_ms(time)
            .ok_or_else(|| bad("\"timestamp\" is not an ISO 8601 time"))?;
        let from_client = match entry.get("origin").and_then(Value::as_str) {
            Some("client") => true,
            Some("server") => false,
            _ => return Err(bad("\"origin\" must be \"client\" or \"server\"")),
        };
        if !matches!(
            entry.get("direction").and_then(Value::as_str),
            Some("request" | "response" | "notification")
        ) {
            return Err(bad("\"direction\" must be \"request\", \"response\" or \"notification\""));
        }
        let message =
            entry.get("message").filter(|m| m.is_object()).ok_or_else(|| bad("no \"message\" object"))?;
        said.push(Turn { late: false, at_ms, from_client, body: message.clone(), at: at.clone() });
        if let Some(response) = entry.get("response").filter(|r| r.is_object()) {
            let duration = entry.get("duration").and_then(Value::as_i64).unwrap_or(0);
            said.push(Turn {
                late: true,
                at_ms: at_ms + duration,
                from_client: !from_client,
                body: response.clone(),
                at,
            });
        }
    }
    let mut read = ReadFile::default();
    pair(said, &mut read);
    Ok(read)
}

/// The server of an Inspector export by its file name,
/// `inspector-protocol-{server}-{time}` (the server as the Inspector names
/// it, percent-encoded; the time with `-` for `:`).
pub fn inspector_server(stem: &str) -> Option<String> {
    let rest = stem.strip_prefix("inspector-protocol-")?;
    let time =
        regex::Regex::new(r"-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:\.\d+)?Z$").expect("a valid expression");
    let found = time.find(rest)?;
    let server = &rest[..found.start()];
    (!server.is_empty()).then(|| crate::util::percent_decode(server))
}

/// An mcp-cassette cassette: JSON Lines, a `header` line first (`era`:
/// `legacy` or `modern`, an HTTP recording's `url`), then `frame` lines
/// (`t`, `dir`: `c2s` | `s2c`, `frame`), `chunks` lines (an SSE answer:
/// each chunk a `t` and a `frame`) and `raw` lines (not JSON-RPC; left out).
pub fn mcp_cassette(text: &str) -> Result<ReadFile, String> {
    let mut read = ReadFile::default();
    let mut said = Vec::new();
    let mut era = None;
    let mut streamed = BTreeSet::new();
    for (n, line) in text.lines().enumerate() {
        let at = format!("line {}", n + 1);
        let bad = |why: &str| format!("{at}: {why}");
        if line.trim().is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(line).map_err(|e| bad(&format!("not JSON: {e}")))?;
        let from_client = || match value.get("dir").and_then(Value::as_str) {
            Some("c2s") => Ok(true),
            Some("s2c") => Ok(false),
            _ => Err(bad("\"dir\" must be \"c2s\" or \"s2c\"")),
        };
        let time = |v: &Value| v.get("t").and_then(Value::as_i64).ok_or_else(|| bad("no \"t\""));
        match value.get("type").and_then(Value::as_str) {
            Some("header") if n == 0 => {
                if !matches!(value.get("cassetteVersion").and_then(Value::as_u64), Some(1 | 2)) {
                    return Err(bad("\"cassetteVersion\" must be 1 or 2"));
                }
                era = match value.get("era").and_then(Value::as_str) {
                    None | Some("legacy") => Some(Era::Handshake),
                    Some("modern") => Some(Era::Stateless),
                    Some(other) => return Err(bad(&format!("an \"era\" of {other:?}"))),
                };
                if let Some(url) = value.get("url").and_then(Value::as_str) {
                    read.server = Some(super::server_of_url(url));
                }
            }
            Some("header") => return Err(bad("a second header")),
            _ if era.is_none() => return Err(bad("the first line must be the cassette's header")),
            Some("frame") => {
                let frame =
                    value.get("frame").filter(|f| f.is_object()).ok_or_else(|| bad("no \"frame\""))?;
                said.push(Turn {
                    late: false,
                    at_ms: time(&value)?,
                    from_client: from_client()?,
                    body: frame.clone(),
                    at,
                });
            }
            Some("chunks") => {
                let chunks =
                    value.get("chunks").and_then(Value::as_array).ok_or_else(|| bad("no \"chunks\""))?;
                if value.get("via").and_then(Value::as_str) == Some("get") {
                    read.skip("GET of a standalone SSE stream (what the server said on it)");
                    continue;
                }
                if let Some(id) = value.get("id") {
                    streamed.insert(id.to_string());
                }
                for chunk in chunks {
                    let frame = chunk
                        .get("frame")
                        .filter(|f| f.is_object())
                        .ok_or_else(|| bad("a chunk has no \"frame\""))?;
                    said.push(Turn {
                        late: false,
                        at_ms: time(chunk)?,
                        from_client: false,
                        body: frame.clone(),
                        at: at.clone(),
                    });
                }
            }
            Some("raw") => read.skip("raw line (not JSON-RPC)"),
            _ => read.skip("line of a type this version does not know"),
        }
    }
    if era.is_none() {
        return Err("empty: no header line".into());
    }
    pair(said, &mut read);
    for heard in &mut read.heard {
        heard.era = era;
        let id = heard.request.get("id").map(Value::to_string).unwrap_or_default();
        if streamed.contains(&id) {
            heard.content_type = Some("text/event-stream".into());
        }
    }
    Ok(read)
}

/// An mcp-recorder cassette: `{version: "1.x", metadata: {server_url,
/// protocol_version, ...}, interactions: [{type, request, response,
/// response_is_sse, response_status, latency_ms}]}`.
pub fn mcp_recorder(text: &str) -> Result<ReadFile, String> {
    let cassette: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let version = cassette
        .get("version")
        .and_then(Value::as_str)
        .ok_or("no \"version\": not an mcp-recorder cassette")?;
    if version.split('.').next() != Some("1") {
        return Err(format!("format version {version:?}; mcp-recorder's is 1.x"));
    }
    let interactions =
        cassette.get("interactions").and_then(Value::as_array).ok_or("no \"interactions\" array")?;
    let mut read = ReadFile::default();
    let url = cassette.pointer("/metadata/server_url").and_then(Value::as_str).filter(|u| u.contains("://"));
    read.server = url.map(super::server_of_url);
    for (n, interaction) in interactions.iter().enumerate() {
        let at = format!("interaction {}", n + 1);
        let bad = |why: &str| format!("{at}: {why}");
        match interaction.get("type").and_then(Value::as_str) {
            Some("jsonrpc_request") => {}
            Some("notification") => {
                read.skip("client notification (record does not store them either)");
                continue;
            }
            Some("lifecycle") => {
                let method = interaction.get("http_method").and_then(Value::as_str).unwrap_or("HTTP");
                read.skip(format!("{method} of the session's lifecycle"));
                continue;
            }
            _ => return Err(bad("\"type\" must be \"jsonrpc_request\", \"notification\" or \"lifecycle\"")),
        }
        let request =
            interaction.get("request").filter(|r| r.is_object()).ok_or_else(|| bad("no \"request\""))?;
        let Some(response) = interaction.get("response").filter(|r| r.is_object()) else {
            read.skip("request with no answer in the file");
            continue;
        };
        if response.get("method").is_some() {
            read.skip("streamed answer of which the file kept a notification, not the answer");
            continue;
        }
        let streamed = interaction.get("response_is_sse").and_then(Value::as_bool).unwrap_or(false);
        let status =
            interaction.get("response_status").and_then(Value::as_u64).and_then(|s| u16::try_from(s).ok());
        let latency = interaction.get("latency_ms").and_then(Value::as_u64).unwrap_or(0);
        read.heard.push(ReadExchange {
            at,
            request: request.clone(),
            status,
            content_type: Some(if streamed { "text/event-stream" } else { "application/json" }.into()),
            messages: vec![RecordedMessage {
                offset_ms: latency,
                direction: Direction::Server,
                body: response.clone(),
                written: None,
                shallow: false,
            }],
            ..ReadExchange::default()
        });
    }
    Ok(read)
}

/// An mcp-vcr transcript: NDJSON (a `{"_type": "meta", ...}` line, then one
/// `{t, dir: "c2s" | "s2c", payload}` per message) or YAML (`meta:` and
/// `messages:`, the same fields).
pub fn mcp_vcr(text: &str) -> Result<ReadFile, String> {
    let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or_default();
    let (meta, messages): (Value, Vec<(String, Value)>) = if first.trim_start().starts_with('{') {
        let mut meta = Value::Null;
        let mut messages = Vec::new();
        for (n, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let at = format!("line {}", n + 1);
            let value: Value = serde_json::from_str(line).map_err(|e| format!("{at}: not JSON: {e}"))?;
            if value.get("_type").and_then(Value::as_str) == Some("meta") {
                meta = value;
            } else {
                messages.push((at, value));
            }
        }
        (meta, messages)
    } else {
        if let Some(line) = flow_too_deep(text, MAX_YAML_FLOW_DEPTH) {
            return Err(format!("line {line}: YAML collections nested more than {MAX_YAML_FLOW_DEPTH} deep"));
        }
        let document: Value =
            serde_norway::from_str(text).map_err(|e| format!("neither NDJSON nor YAML: {e}"))?;
        let listed = document.get("messages").and_then(Value::as_array).cloned().unwrap_or_default();
        let messages =
            listed.into_iter().enumerate().map(|(n, m)| (format!("message {}", n + 1), m)).collect();
        (document.get("meta").cloned().unwrap_or(Value::Null), messages)
    };
    if !meta.is_object() {
        return Err("no meta section: not an mcp-vcr transcript".into());
    }
    if !matches!(meta.get("version").and_then(Value::as_u64), Some(0 | 1)) {
        return Err("meta \"version\" must be 0 or 1".into());
    }
    let mut said = Vec::new();
    for (at, message) in messages {
        let bad = |why: &str| format!("{at}: {why}");
        let from_client = match message.get("dir").and_then(Value::as_str) {
            Some("c2s") => true,
            Some("s2c") => false,
            _ => return Err(bad("\"dir\" must be \"c2s\" or \"s2c\"")),
        };
        let at_ms = message.get("t").and_then(Value::as_i64).ok_or_else(|| bad("no \"t\""))?;
        let body =
            message.get("payload").filter(|p| p.is_object()).ok_or_else(|| bad("no \"payload\" object"))?;
        said.push(Turn { at_ms, late: false, from_client, body: body.clone(), at });
    }
    let mut read = ReadFile::default();
    pair(said, &mut read);
    Ok(read)
}

/// The line (from 1) on which YAML `text` nests flow collections (`[`,
/// `{`) more than `limit` deep, read without parsing: outside a flow
/// collection one starts only where a value does (a line's start, after
/// `- ` or `: `); inside one every bracket outside a quoted string counts.
fn flow_too_deep(text: &str, limit: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (n, line) in text.lines().enumerate() {
        let mut chars = line.char_indices().peekable();
        if depth == 0 {
            // Block context: skip to where a value may open a flow collection.
            let rest = line.trim_start().trim_start_matches(['-', ' ']);
            let value = match rest.split_once(": ") {
                Some((_, value)) if !rest.starts_with(['[', '{']) => value.trim_start(),
                _ => rest,
            };
            if !value.starts_with(['[', '{']) {
                continue;
            }
            let from = line.len() - value.len();
            chars = line[from..].char_indices().peekable();
        }
        let mut quote = None;
        let mut previous = ' ';
        while let Some((_, c)) = chars.next() {
            match (quote, c) {
                (Some('"'), '\\') => {
                    chars.next();
                }
                (Some(open), c) if c == open => {
                    // '' inside a single-quoted string is a quote, not its end.
                    if open == '\'' && chars.peek().is_some_and(|(_, next)| *next == '\'') {
                        chars.next();
                    } else {
                        quote = None;
                    }
                }
                (Some(_), _) => {}
                (None, '"' | '\'') => quote = Some(c),
                (None, '#') if previous.is_whitespace() => break,
                (None, '[' | '{') => {
                    depth += 1;
                    if depth > limit {
                        return Some(n + 1);
                    }
                }
                (None, ']' | '}') => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        break;
                    }
                }
                _ => {}
            }
            previous = c;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_nested_past_the_bound_is_refused_before_it_is_parsed() {
        let deep =
            format!("meta: {{version: 1}}\nmessages: {}{}\n", "[".repeat(200_000), "]".repeat(200_000));
        let Err(error) = mcp_vcr(&deep) else { panic!("accepted") };
        assert_eq!(error, format!("line 2: YAML collections nested more than {MAX_YAML_FLOW_DEPTH} deep"));
        let at_the_bound = format!(
            "meta: {{version: 1}}\nmessages:\n  - {{t: 0, dir: c2s, payload: {{x: {}{}}}}}\n",
            "[".repeat(MAX_YAML_FLOW_DEPTH - 2),
            "]".repeat(MAX_YAML_FLOW_DEPTH - 2)
        );
        assert_eq!(flow_too_deep(&at_the_bound, MAX_YAML_FLOW_DEPTH), None);
        assert_eq!(flow_too_deep(&at_the_bound, MAX_YAML_FLOW_DEPTH - 1), Some(3));
    }

    #[test]
    fn brackets_in_strings_comments_and_plain_text_do_not_nest() {
        let brackets = "[".repeat(100);
        let text = format!(
            "meta: {{version: 1}}\nnote: a {brackets} b\nmessages: [\"{brackets}\", '{brackets}''', x] # {brackets}\n\
             quoted: {{\"k\\\"{brackets}\": 1}}\n"
        );
        assert_eq!(flow_too_deep(&text, 3), None);
    }
}
