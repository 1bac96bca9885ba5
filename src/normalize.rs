//! Normalization: the match key, and turning a raw exchange into the
//! stored form. The same [`Rules`] serve record and replay, so a
//! request computes the same key on both sides.
//!
//! Match key = sha256 over (server, method, canonical params), where the
//! canonical params are the params after redaction, with `_meta` and the
//! user's `--ignore-param` JSON pointers removed, keys sorted. `initialize`
//! and `server/discover` match on server and method alone. The JSON-RPC id
//! is never part of a key.
//!
//! In a stored exchange the caller's JSON-RPC id and progress token are
//! replaced by [`ID_PLACEHOLDER`] and [`PROGRESS_TOKEN_PLACEHOLDER`], so
//! replay can stamp in the new caller's. Normalizing twice changes nothing.

use std::sync::Arc;

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::error::Error;
use crate::limits::MAX_DIFFERENCES_TOLD;
use crate::model::{
    Direction, Exchange, MatchKey, Provenance, RawExchange, RecordedMessage, canonical_json,
    canonical_json_without,
};
use crate::pseudonym::Pseudonyms;
use crate::redact::{self, Redactor};
use crate::secrets::Shapes;
use crate::{jsonrpc, mcp};

/// Stands for the caller's JSON-RPC id in a stored exchange.
pub const ID_PLACEHOLDER: &str = "mcp-tape:request-id";
/// Stands for the caller's progress token in a stored exchange.
pub const PROGRESS_TOKEN_PLACEHOLDER: &str = "mcp-tape:progress-token";

/// The id placeholder as a stored message's text holds it.
const ID_FIELD: &str = "\"id\":\"mcp-tape:request-id\"";
/// The progress-token placeholder as a stored message's text holds it.
const TOKEN_FIELD: &str = "\"progressToken\":\"mcp-tape:progress-token\"";

/// Where a stored message (compact JSON text) holds the id placeholder:
/// found once when a recording is loaded, so that stamping needs no search.
pub fn id_placeholder_at(json: &str) -> Option<usize> {
    json.find(ID_FIELD)
}

/// A stored message (compact JSON text) with the caller's JSON-RPC id and
/// progress token (both as JSON text) in place of the placeholders; `id_at`
/// is [`id_placeholder_at`] of `json`.
pub fn stamp(json: &str, id_at: Option<usize>, id: &str, progress_token: Option<&str>) -> String {
    let mut stamped = String::with_capacity(json.len() + id.len());
    match id_at.and_then(|at| Some((json.get(..at)?, json.get(at..)?.strip_prefix(ID_FIELD)?))) {
        Some((before, after)) => {
            stamped.push_str(before);
            stamped.push_str("\"id\":");
            stamped.push_str(id);
            stamped.push_str(after);
        }
        None => stamped.push_str(json),
    }
    if let Some(token) = progress_token
        && stamped.contains(TOKEN_FIELD)
    {
        stamped = stamped.replace(TOKEN_FIELD, &format!("\"progressToken\":{token}"));
    }
    stamped
}

/// Whether a stored message carries the progress-token placeholder.
pub fn has_progress_placeholder(json: &str) -> bool {
    json.contains(PROGRESS_TOKEN_PLACEHOLDER)
}

/// Settings shared by record and replay so that match keys agree.
#[derive(Clone, Debug, Default)]
pub struct Normalization {
    /// Extra body keys whose values are redacted (`--redact-key`).
    pub redact_keys: Vec<String>,
    /// JSON pointers into params left out of the match key (`--ignore-param`).
    pub ignore_params: Vec<String>,
    /// Text shapes scrubbed from every stored string and before matching
    /// (`--redact-pattern`: `builtin`, or a regular expression).
    pub redact_patterns: Vec<String>,
    /// What a recording stores is pseudonymized (`--pseudonymize`,
    /// `MCP_TAPE_PSEUDONYMIZE=1`).
    pub pseudonymize: bool,
}

/// The user's normalization settings, shared by record and replay.
#[derive(Clone, Debug, Default)]
pub struct Rules {
    redactor: Redactor,
    /// JSON pointers into params (`--ignore-param`) left out of the key.
    ignore_params: Vec<String>,
    /// What is stored is pseudonymized with these (`--pseudonymize`).
    pseudonyms: Option<Arc<Pseudonyms>>,
}

impl Rules {
    /// The rules `normalization` asks for.
    ///
    /// # Errors
    ///
    /// A `--redact-pattern` that is no regular expression.
    pub fn new(normalization: &Normalization) -> Result<Rules, Error> {
        let shapes = Shapes::from_patterns(&normalization.redact_patterns)?;
        Ok(Rules {
            redactor: Redactor::new(&normalization.redact_keys, shapes),
            ignore_params: normalization.ignore_params.clone(),
            pseudonyms: None,
        })
    }

    /// The same rules, pseudonymizing what is stored with `pseudonyms`.
    pub fn with_pseudonyms(self, pseudonyms: Arc<Pseudonyms>) -> Rules {
        Rules { pseudonyms: Some(pseudonyms), ..self }
    }

    /// The pseudonyms what is stored is given, when it is.
    pub fn pseudonyms(&self) -> Option<&Pseudonyms> {
        self.pseudonyms.as_deref()
    }

    /// Whether [`Rules::redact`] would change `value`.
    pub fn needs_redaction(&self, value: &Value) -> bool {
        self.redactor.finds_sensitive(value)
    }

    /// Redacts sensitive values in a request's params or an answer, in place.
    pub fn redact(&self, value: &mut Value) {
        self.redactor.redact(value);
    }

    /// Redacts a message in place, its text too when it is held as its
    /// text ([`RecordedMessage::shallow`]).
    pub fn redact_message(&self, message: &mut RecordedMessage) {
        redact::edit_message(message, &self.redactor, |body| self.redact(body));
    }

    /// Redacts text that is not JSON in place: the secret shapes in it.
    pub fn redact_text(&self, text: &mut String) {
        self.redactor.redact_text(text);
    }

    /// The values [`Rules::redact`] would blank in `value`.
    pub fn sensitive_values(&self, value: &Value) -> Vec<String> {
        self.redactor.sensitive_values(value)
    }

    /// The params as the key sees them: `_meta` and ignored pointers
    /// removed; absent or `null` params are the same as `{}` (clients differ
    /// in which they send). Expects params already redacted.
    pub fn canonical_params(&self, params: Option<&Value>) -> Value {
        let mut params = match params {
            None | Some(Value::Null) => Value::Object(serde_json::Map::new()),
            Some(params) => params.clone(),
        };
        if let Some(map) = params.as_object_mut() {
            map.remove("_meta");
        }
        for pointer in &self.ignore_params {
            remove_pointer(&mut params, pointer);
        }
        params
    }

    /// The match key of a request of `method` to `server` with (redacted) `params`.
    pub fn match_key(&self, server: &str, method: &str, params: Option<&Value>) -> MatchKey {
        if matches!(method, "initialize" | "server/discover") {
            return key_of(server, method, "");
        }
        let canonical = match params {
            // What canonical_params gives, without copying the params when nothing is ignored.
            _ if !self.ignore_params.is_empty() => canonical_json(&self.canonical_params(params)),
            None | Some(Value::Null) => "{}".to_owned(),
            Some(params) => canonical_json_without(params, "_meta"),
        };
        key_of(server, method, &canonical)
    }

    /// The stored form of a raw exchange: redacted, with the caller's id and
    /// progress token replaced by placeholders, and its match key.
    pub fn exchange(&self, raw: RawExchange) -> Exchange {
        let mut request = raw.request;
        self.redact(&mut request);
        let id = request.get("id").cloned();
        let token = mcp::progress_token(request.get("params")).cloned();
        if id.is_some() {
            request["id"] = ID_PLACEHOLDER.into();
        }
        if token.is_some() {
            request["params"]["_meta"]["progressToken"] = PROGRESS_TOKEN_PLACEHOLDER.into();
        }
        let mut messages: Vec<RecordedMessage> = raw
            .messages
            .into_iter()
            .map(|mut message| {
                self.redact_message(&mut message);
                if message.direction == Direction::Server {
                    stamp_placeholders(&mut message.body, id.as_ref(), token.as_ref());
                }
                message
            })
            .collect();
        let mut asides = raw.asides;
        for aside in &mut asides {
            self.redact_message(&mut aside.message);
        }
        if let Some(pseudonyms) = &self.pseudonyms {
            pseudonyms.learn_exchange(&request, &messages, &asides);
            pseudonyms.pseudonymize_exchange(&mut request, &mut messages, &mut asides);
        }
        let method = request.get("method").and_then(Value::as_str).unwrap_or_default().to_owned();
        Exchange {
            key: self.match_key(&raw.server, &method, request.get("params")),
            server: raw.server,
            era: raw.era,
            protocol_version: raw.protocol_version,
            method,
            request,
            status: raw.status,
            content_type: raw.content_type,
            messages,
            asides,
            stream: raw.stream,
            provenance: Provenance::default(),
            source: None,
        }
    }
}

/// The match key of a request of `method` to `server` whose params (a
/// model request's body) are `canonical` (their canonical JSON; empty for
/// a handshake, whose params do not count).
pub fn key_of(server: &str, method: &str, canonical: &str) -> MatchKey {
    let mut hash = Sha256::new();
    for part in [server, method] {
        hash.update(part.as_bytes());
        hash.update([0]);
    }
    hash.update(canonical.as_bytes());
    MatchKey::from_digest(hash.finalize().into())
}

/// In an upstream message: the answer to the caller's request gets the id
/// placeholder, a progress notification for the caller's token the token
/// placeholder.
fn stamp_placeholders(body: &mut Value, id: Option<&Value>, token: Option<&Value>) {
    let is_response = body.get("method").is_none();
    if is_response && body.get("id").zip(id).is_some_and(|(answer, asked)| jsonrpc::answers(answer, asked)) {
        body["id"] = ID_PLACEHOLDER.into();
    }
    let is_progress = body.get("method").and_then(Value::as_str) == Some("notifications/progress");
    if is_progress && token.is_some() && body.get("params").and_then(|p| p.get("progressToken")) == token {
        body["params"]["progressToken"] = PROGRESS_TOKEN_PLACEHOLDER.into();
    }
}

/// One field where two canonical params differ.
#[derive(Clone, Debug, PartialEq)]
pub struct Difference {
    /// JSON pointer into params; `""` for the params as a whole.
    pub pointer: String,
    /// `None` where the field is absent on that side.
    pub recorded: Option<Value>,
    pub requested: Option<Value>,
}

/// Bytes of a value a told difference shows at most.
const VALUE_SHOWN: usize = 120;

impl Difference {
    /// As miss errors and reports carry it: `{"pointer", "recorded", "requested"}`.
    pub fn to_json(&self) -> Value {
        serde_json::json!({"pointer": self.pointer, "recorded": self.recorded, "requested": self.requested})
    }

    /// Read back from [`Difference::to_json`]'s form.
    pub fn from_json(value: &Value) -> Option<Difference> {
        Some(Difference {
            pointer: value.get("pointer")?.as_str()?.to_owned(),
            recorded: value.get("recorded").filter(|v| !v.is_null()).cloned(),
            requested: value.get("requested").filter(|v| !v.is_null()).cloned(),
        })
    }
}

impl std::fmt::Display for Difference {
    /// `POINTER (recorded A, requested B)`, long values cut, control
    /// characters escaped (it is logged and shown to models); the empty
    /// pointer, the value as a whole, is `the root`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let side =
            |value: &Option<Value>| value.as_ref().map_or("absent".to_owned(), |v| cut(&v.to_string()));
        let at = if self.pointer.is_empty() { "the root" } else { &self.pointer };
        write!(
            f,
            "{} (recorded {}, requested {})",
            crate::util::printable(at),
            crate::util::printable(&side(&self.recorded)),
            crate::util::printable(&side(&self.requested))
        )
    }
}

/// `differences` told one after another, comma-separated: the first
/// [`MAX_DIFFERENCES_TOLD`], then how many more there are (a request with
/// thousands of extra arguments must not make a line of thousands).
pub fn describe(differences: &[Difference]) -> String {
    told(differences.iter().map(Difference::to_string), differences.len())
}

/// The first [`MAX_DIFFERENCES_TOLD`] of `items`, comma-separated, then
/// how many more of `total` there are.
pub fn told(items: impl IntoIterator<Item = String>, total: usize) -> String {
    let mut told: Vec<String> = items.into_iter().take(MAX_DIFFERENCES_TOLD).collect();
    if total > told.len() {
        told.push(format!("and {} more", total - told.len()));
    }
    told.join(", ")
}

/// `text` cut to `VALUE_SHOWN` bytes, saying how long it was.
pub fn cut(text: &str) -> String {
    crate::util::clip(text, VALUE_SHOWN).into_owned()
}

/// Items of an array, and members of an object, an echoed value keeps.
const ITEMS_SHOWN: usize = 32;

/// `value` as an error or report may echo it without growing with it:
/// each string (and member name) longer than `max` bytes cut to a prefix
/// and its length, each array and object cut to its first `ITEMS_SHOWN`
/// items with a last one saying how many there were.
pub fn clipped(value: &Value, max: usize) -> Value {
    let clip = |text: &str| crate::util::clip(text, max).into_owned();
    match value {
        Value::String(text) if text.len() > max => Value::String(clip(text)),
        Value::Array(items) => {
            let mut kept: Vec<Value> = items.iter().take(ITEMS_SHOWN).map(|v| clipped(v, max)).collect();
            if items.len() > ITEMS_SHOWN {
                kept.push(Value::String(format!("… ({} items)", items.len())));
            }
            Value::Array(kept)
        }
        Value::Object(map) => {
            let mut kept: serde_json::Map<String, Value> =
                map.iter().take(ITEMS_SHOWN).map(|(k, v)| (clip(k), clipped(v, max))).collect();
            if map.len() > ITEMS_SHOWN {
                kept.insert("…".into(), Value::String(format!("({} members)", map.len())));
            }
            Value::Object(kept)
        }
        other => other.clone(),
    }
}

/// The RFC 6901 pointer to member (or index) `key` of what `pointer` points at.
pub fn pointer_child(pointer: &str, key: &str) -> String {
    let mut child = pointer.to_owned();
    push_child(&mut child, key);
    child
}

/// The fields where `recorded` and `requested` differ, leaf by leaf through
/// objects (and arrays of equal length), in pointer order.
pub fn differences(recorded: &Value, requested: &Value) -> Vec<Difference> {
    first_differences(recorded, requested, usize::MAX).0
}

/// The first `keep` of [`differences`], and how many there are in all:
/// those past `keep` are counted, not built (no pointer text, no copies of
/// values), so a request of many leaves costs a count.
pub fn first_differences(recorded: &Value, requested: &Value, keep: usize) -> (Vec<Difference>, usize) {
    let mut walk = Walk { found: Vec::new(), keep, count: 0 };
    walk.diff(&mut String::new(), Some(recorded), Some(requested));
    (walk.found, walk.count)
}

/// Where [`first_differences`] has got to.
struct Walk {
    found: Vec<Difference>,
    keep: usize,
    count: usize,
}

impl Walk {
    /// Compares the values at `pointer` (extended for each child, and back).
    fn diff(&mut self, pointer: &mut String, recorded: Option<&Value>, requested: Option<&Value>) {
        let into = |walk: &mut Walk, pointer: &mut String, key: &str, a, b| {
            let at = pointer.len();
            push_child(pointer, key);
            walk.diff(pointer, a, b);
            pointer.truncate(at);
        };
        match (recorded, requested) {
            (Some(a), Some(b)) if a == b => {}
            (Some(Value::Object(a)), Some(Value::Object(b))) => {
                let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
                for key in keys {
                    into(self, pointer, key, a.get(key), b.get(key));
                }
            }
            (Some(Value::Array(a)), Some(Value::Array(b))) if a.len() == b.len() => {
                for (i, (x, y)) in a.iter().zip(b).enumerate() {
                    into(self, pointer, &i.to_string(), Some(x), Some(y));
                }
            }
            _ => {
                self.count += 1;
                if self.found.len() < self.keep {
                    let (recorded, requested) = (recorded.cloned(), requested.cloned());
                    self.found.push(Difference { pointer: pointer.clone(), recorded, requested });
                }
            }
        }
    }
}

/// Appends to `pointer` the RFC 6901 reference token of member (or index) `key`.
fn push_child(pointer: &mut String, key: &str) {
    pointer.push('/');
    if !key.contains(['~', '/']) {
        return pointer.push_str(key);
    }
    for c in key.chars() {
        match c {
            '~' => pointer.push_str("~0"),
            '/' => pointer.push_str("~1"),
            c => pointer.push(c),
        }
    }
}

/// Removes the value at an RFC 6901 JSON pointer, if there is one.
fn remove_pointer(value: &mut Value, pointer: &str) {
    let Some((parent, last)) = pointer.rsplit_once('/') else {
        return;
    };
    let last = last.replace("~1", "/").replace("~0", "~");
    match value.pointer_mut(parent) {
        Some(Value::Object(map)) => {
            map.remove(&last);
        }
        Some(Value::Array(items)) => {
            if let Ok(index) = last.parse::<usize>()
                && index < items.len()
            {
                items.remove(index);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::model::{Aside, Channel, Era, RecordedMessage, Status, StreamShape};
    use serde_json::json;

    /// A recorded `tools/call` of `tool` on `server` answered with one text block.
    pub(crate) fn sample(server: &str, tool: &str, text: &str) -> Exchange {
        Rules::default().exchange(RawExchange {
            server: server.into(),
            era: Era::Handshake,
            protocol_version: "2025-06-18".into(),
            request: json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool}}),
            status: Status::OK,
            content_type: "application/json".into(),
            messages: vec![RecordedMessage {
                offset_ms: 3,
                direction: Direction::Server,
                body: json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": text}]}}),
                written: None,
                shallow: false,
            }],
            asides: Vec::new(),
            stream: StreamShape::default(),
        })
    }

    #[test]
    fn key_ignores_meta_id_and_key_order_but_not_arguments() {
        let rules = Rules::default();
        let one = json!({"name": "t", "arguments": {"a": 1, "b": 2}, "_meta": {"progressToken": 1}});
        let two = json!({"arguments": {"b": 2, "a": 1}, "name": "t"});
        let three = json!({"name": "t", "arguments": {"a": 1, "b": 3}});
        let key = |p: &Value| rules.match_key("s", "tools/call", Some(p));
        assert_eq!(key(&one), key(&two));
        assert_ne!(key(&one), key(&three));
        assert_ne!(key(&one), rules.match_key("other", "tools/call", Some(&one)));
        assert_eq!(
            rules.match_key("s", "initialize", Some(&json!({"protocolVersion": "a"}))),
            rules.match_key("s", "initialize", Some(&json!({"protocolVersion": "b"})))
        );
    }

    #[test]
    fn absent_null_empty_and_meta_only_params_share_a_key() {
        let rules = Rules::default();
        let key = |p: Option<&Value>| rules.match_key("s", "tools/list", p);
        let none = key(None);
        assert_eq!(key(Some(&Value::Null)), none);
        assert_eq!(key(Some(&json!({}))), none);
        assert_eq!(key(Some(&json!({"_meta": {"progressToken": 1}}))), none);
        assert_ne!(key(Some(&json!({"cursor": "2"}))), none);
    }

    #[test]
    fn ignored_pointers_leave_the_key() {
        let ignore_params = vec!["/arguments/requestId".into(), "/arguments/list/0".into()];
        let rules = Rules::new(&Normalization { ignore_params, ..Normalization::default() }).unwrap();
        let a = json!({"name": "t", "arguments": {"requestId": "1", "list": [9, 1]}});
        let b = json!({"name": "t", "arguments": {"requestId": "2", "list": [8, 1]}});
        assert_eq!(
            rules.match_key("s", "tools/call", Some(&a)),
            rules.match_key("s", "tools/call", Some(&b))
        );
    }

    #[test]
    fn differences_name_each_leaf() {
        let recorded = json!({"name": "t", "arguments": {"a": 1, "list": [1, 2], "gone": true, "x/y": 0}});
        let requested = json!({"name": "t", "arguments": {"a": 2, "list": [1, 3], "new": "n", "x/y": 0}});
        let pointers: Vec<_> = differences(&recorded, &requested).into_iter().map(|d| d.pointer).collect();
        assert_eq!(pointers, ["/arguments/a", "/arguments/gone", "/arguments/list/1", "/arguments/new"]);
        assert!(differences(&recorded, &recorded).is_empty());
        assert_eq!(differences(&json!(null), &json!({}))[0].pointer, "");
        let all: Vec<_> = differences(&recorded, &requested).into_iter().map(|d| d.pointer).collect();
        for keep in 0..6 {
            let (first, count) = first_differences(&recorded, &requested, keep);
            let first: Vec<_> = first.into_iter().map(|d| d.pointer).collect();
            assert_eq!((first.as_slice(), count), (&all[..keep.min(4)], 4), "keep {keep}");
        }
        assert_eq!(pointer_child("/a", "x~y/z"), "/a/x~0y~1z");
    }

    #[test]
    fn differences_are_told_up_to_a_bound_then_counted() {
        let requested: serde_json::Map<String, Value> =
            (0..10_000).map(|n| (format!("k{n}"), json!(n))).collect();
        let found = differences(&json!({}), &Value::Object(requested));
        let told = describe(&found);
        assert_eq!(told.matches("(recorded absent").count(), MAX_DIFFERENCES_TOLD, "{told}");
        assert!(told.ends_with(&format!("and {} more", 10_000 - MAX_DIFFERENCES_TOLD)), "{told}");
        assert!(told.len() < 1024, "{} bytes", told.len());
    }

    fn raw() -> RawExchange {
        RawExchange {
            server: "s".into(),
            era: Era::Handshake,
            protocol_version: "2025-06-18".into(),
            request: json!({"jsonrpc": "2.0", "id": 41, "method": "tools/call",
                "params": {"name": "t", "arguments": {"password": "hunter2"}, "_meta": {"progressToken": "p1"}}}),
            status: Status::OK,
            content_type: "text/event-stream".into(),
            messages: vec![
                RecordedMessage {
                    offset_ms: 1,
                    direction: Direction::Server,
                    body: json!({"jsonrpc": "2.0", "method": "notifications/progress",
                        "params": {"progressToken": "p1", "progress": 1}}),
                    written: None,
                    shallow: false,
                },
                RecordedMessage {
                    offset_ms: 2,
                    direction: Direction::Server,
                    body: json!({"jsonrpc": "2.0", "id": 41, "result": {"secret": "s3"}}),
                    written: None,
                    shallow: false,
                },
            ],
            asides: vec![Aside {
                after: Some("notifications/initialized".into()),
                in_flight: false,
                channel: Channel::Standalone,
                message: RecordedMessage {
                    offset_ms: 5,
                    direction: Direction::Server,
                    body: json!({"jsonrpc": "2.0", "method": "notifications/message",
                        "params": {"level": "info", "data": {"secret": "s4"}}}),
                    written: None,
                    shallow: false,
                },
            }],
            stream: StreamShape::default(),
        }
    }

    #[test]
    fn exchange_uses_placeholders_and_redacts() {
        let exchange = Rules::default().exchange(raw());
        assert_eq!(exchange.request["id"], ID_PLACEHOLDER);
        assert_eq!(exchange.request["params"]["arguments"]["password"], "[REDACTED]");
        assert_eq!(exchange.messages[0].body["params"]["progressToken"], PROGRESS_TOKEN_PLACEHOLDER);
        assert_eq!(exchange.messages[1].body["id"], ID_PLACEHOLDER);
        assert_eq!(exchange.messages[1].body["result"]["secret"], "[REDACTED]");
        assert_eq!(exchange.asides[0].message.body["params"]["data"]["secret"], "[REDACTED]", "asides too");
        let live = json!({"name": "t", "arguments": {"password": "[REDACTED]"}});
        assert_eq!(exchange.key, Rules::default().match_key("s", "tools/call", Some(&live)));
    }

    #[test]
    fn stamping_fills_the_placeholders_of_stored_text() {
        let exchange = Rules::default().exchange(raw());
        let progress = canonical_json(&exchange.messages[0].body);
        let answer = canonical_json(&exchange.messages[1].body);
        let stamp = |json: &str, id, token| stamp(json, id_placeholder_at(json), id, token);
        let stamped: Value = serde_json::from_str(&stamp(&progress, "7", Some("\"tok\""))).unwrap();
        assert_eq!(stamped["params"]["progressToken"], "tok");
        let stamped: Value = serde_json::from_str(&stamp(&answer, "\"caller-1\"", None)).unwrap();
        assert_eq!(stamped["id"], "caller-1");
        assert_eq!(super::stamp(&answer, Some(0), "9", None), answer, "a wrong offset stamps nothing");
        assert_eq!(super::stamp(&answer, Some(answer.len() + 5), "9", None), answer);
        assert!(has_progress_placeholder(&progress) && !has_progress_placeholder(&answer));
    }

    #[test]
    fn normalizing_twice_changes_nothing() {
        let rules = Rules::default();
        let once = rules.exchange(raw());
        let again = rules.exchange(RawExchange {
            request: once.request.clone(),
            messages: once.messages.clone(),
            ..raw()
        });
        assert_eq!(once, again);
    }
}
