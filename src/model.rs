//! The domain: what a recording is, below everything that makes, stores or
//! serves one. An [`Exchange`] is one finished request with the ordered
//! messages of its answer; a [`ServiceAnswer`] is an Agent 365 service
//! endpoint's answer; [`Era`], [`Direction`], [`MatchKey`] and
//! [`ServiceRoute`] are the small types they are made of, each stored by
//! SQLite as text ([`ToSql`]/[`FromSql`]). A cassette holds JSON in two
//! forms: what a server or client said (its own text, byte for byte, with
//! only what record or replay changed written anew: [`scan::rewrite`];
//! an agent framework hands an LLM the text of what it read), and what is
//! compared ([`canonical_json`]: keys sorted, for requests and match keys).
//! An exchange with the agent's LLM is an [`LlmExchange`] ([`llm`]). No
//! I/O, no protocol rules: `normalize` makes exchanges, `store` keeps them,
//! `tape` indexes them.

pub mod llm;

use rusqlite::ToSql;
use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSqlOutput, ValueRef};
use serde_json::Value;

use crate::jsonrpc::scan;
use crate::limits::{MAX_JSON_ANSWER_BYTES, MAX_RECORDED_STREAM_BYTES};
pub use llm::{LlmAnswer, LlmEvent, LlmExchange, LlmSource};

/// An HTTP status as recorded: the number the upstream answered with.
/// What a status means, and which one an answer goes with, is the HTTP
/// front door's business; the cassette only keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Status(u16);

impl Status {
    pub const OK: Status = Status(200);
    pub const BAD_REQUEST: Status = Status(400);

    /// A status code, if `code` is one (three digits, 100 to 999).
    pub fn new(code: u16) -> Option<Status> {
        (100..1000).contains(&code).then_some(Status(code))
    }

    pub fn as_u16(self) -> u16 {
        self.0
    }

    /// 2xx.
    pub fn is_success(self) -> bool {
        (200..300).contains(&self.0)
    }
}

/// The two protocol generations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Era {
    /// `initialize`, sessions, versions up to 2025-11-25.
    Handshake,
    /// `server/discover`, per-request `_meta` envelope, 2026-07-28.
    Stateless,
}

impl Era {
    pub fn as_str(self) -> &'static str {
        match self {
            Era::Handshake => "handshake",
            Era::Stateless => "stateless",
        }
    }

    pub fn parse(text: &str) -> Option<Era> {
        match text {
            "handshake" => Some(Era::Handshake),
            "stateless" => Some(Era::Stateless),
            _ => None,
        }
    }
}

/// Who sent a recorded message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Upstream → client: notifications, server requests, the final answer.
    Server,
    /// Client → upstream: a reply to a server→client request.
    Client,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Server => "server",
            Direction::Client => "client",
        }
    }

    pub fn parse(text: &str) -> Option<Direction> {
        match text {
            "server" => Some(Direction::Server),
            "client" => Some(Direction::Client),
            _ => None,
        }
    }
}

/// sha256 over (server, method, canonical params): what a live request and
/// a recording must share to match (`normalize` computes it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct MatchKey([u8; 32]);

/// A digest is its own hash: a key is hashed as its first eight bytes, not
/// all 32 (a replayed request looks its key up in several maps). Keys that
/// are equal hash alike; the maps seed their hashers, so no client can aim
/// its keys at one bucket.
impl std::hash::Hash for MatchKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        let [a, b, c, d, e, f, g, h, ..] = self.0;
        state.write_u64(u64::from_le_bytes([a, b, c, d, e, f, g, h]));
    }
}

impl MatchKey {
    pub fn from_digest(digest: [u8; 32]) -> MatchKey {
        MatchKey(digest)
    }

    pub fn to_hex(&self) -> String {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut hex = String::with_capacity(64);
        for byte in self.0 {
            hex.push(char::from(DIGITS[usize::from(byte >> 4)]));
            hex.push(char::from(DIGITS[usize::from(byte & 0xf)]));
        }
        hex
    }

    pub fn from_hex(text: &str) -> Option<MatchKey> {
        if text.len() != 64 || !text.is_ascii() {
            return None;
        }
        let mut bytes = [0u8; 32];
        for (i, byte) in bytes.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
        }
        Some(MatchKey(bytes))
    }
}

/// A non-MCP endpoint of the Agent 365 service (see `agent365`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ServiceRoute {
    /// `GET /agents/{agentId}/mcpServers`: `{"mcpServers": [...]}` (.NET, Python).
    Gateway,
    /// `GET /agents/v2/{agentId}/mcpServers`: a bare array (Node, Python).
    GatewayV2,
    /// `POST /agents/real-time-threat-protection/chat-message`.
    ChatMessage,
}

impl ServiceRoute {
    /// The name a cassette stores.
    pub fn as_str(self) -> &'static str {
        match self {
            ServiceRoute::Gateway => "gateway",
            ServiceRoute::GatewayV2 => "gateway-v2",
            ServiceRoute::ChatMessage => "chat-message",
        }
    }

    pub fn parse(text: &str) -> Option<ServiceRoute> {
        [ServiceRoute::Gateway, ServiceRoute::GatewayV2, ServiceRoute::ChatMessage]
            .into_iter()
            .find(|route| route.as_str() == text)
    }

    pub fn is_gateway(self) -> bool {
        matches!(self, ServiceRoute::Gateway | ServiceRoute::GatewayV2)
    }
}

/// SQLite text for the small enums and the key, and back; a value that is
/// not one of ours is a conversion error naming it.
macro_rules! stored_as_text {
    ($type:ty, $to_text:expr, $from_text:expr, $what:literal) => {
        impl ToSql for $type {
            fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
                let text: String = $to_text(self).into();
                Ok(ToSqlOutput::from(text))
            }
        }

        impl FromSql for $type {
            fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
                let text = value.as_str()?;
                $from_text(text).ok_or_else(|| FromSqlError::Other(format!("{} {text:?}", $what).into()))
            }
        }
    };
}

stored_as_text!(Era, |e: &Era| e.as_str(), Era::parse, "unknown era");
stored_as_text!(Direction, |d: &Direction| d.as_str(), Direction::parse, "unknown direction");
stored_as_text!(MatchKey, MatchKey::to_hex, MatchKey::from_hex, "bad match key");
stored_as_text!(Channel, |c: &Channel| c.as_str(), Channel::parse, "unknown channel");
stored_as_text!(ServiceRoute, |r: &ServiceRoute| r.as_str(), ServiceRoute::parse, "unknown service route");

/// JSON as the cassette stores it, unparsed: a request canonical, a
/// message as sent. Replay keeps recordings in this form (smaller, and
/// served without re-serializing).
pub type Text = Box<str>;

/// One message of a recorded answer. `J` is how its JSON is held: parsed
/// ([`Value`], the default) or as stored ([`Text`]).
#[derive(Clone, Debug, PartialEq)]
pub struct RecordedMessage<J = Value> {
    /// Milliseconds after the request that the message was seen.
    pub offset_ms: u64,
    pub direction: Direction,
    pub body: J,
    /// The text `body` was read from, as its sender wrote it; `None` for a
    /// message made here, and always for [`Text`], which is that text.
    pub written: Option<Text>,
    /// `body` holds only the small top-level members of the message that
    /// `written` holds whole (one record read without a tree of it: past
    /// [`MAX_TREE_MESSAGE_BYTES`](crate::limits::MAX_TREE_MESSAGE_BYTES));
    /// what is done to the message is done to both.
    pub shallow: bool,
}

impl<J> RecordedMessage<J> {
    /// A message made here, from no sender's text.
    pub fn new(offset_ms: u64, direction: Direction, body: J) -> RecordedMessage<J> {
        RecordedMessage { offset_ms, direction, body, written: None, shallow: false }
    }
}

impl RecordedMessage {
    /// The body in its sender's words: the text it was read from, with
    /// what was changed since written anew ([`scan::rewrite`]).
    pub fn as_sent(&self) -> String {
        match &self.written {
            Some(text) if self.shallow => scan::splice(text, &self.body),
            Some(text) => scan::rewrite(text, &self.body),
            // A Value always serializes (its map keys are strings).
            None => serde_json::to_string(&self.body).unwrap_or_default(),
        }
    }
}

/// Which stream a server used for a message it sent on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Channel {
    /// The session's standalone stream: HTTP's GET stream, or stdio's one
    /// stream between answers.
    Standalone,
    /// A 2026-07-28 `subscriptions/listen` stream.
    Subscription,
}

impl Channel {
    pub fn as_str(self) -> &'static str {
        match self {
            Channel::Standalone => "standalone",
            Channel::Subscription => "subscription",
        }
    }

    pub fn parse(text: &str) -> Option<Channel> {
        match text {
            "standalone" => Some(Channel::Standalone),
            "subscription" => Some(Channel::Subscription),
            _ => None,
        }
    }
}

/// A message the server sent on its own after an exchange, no part of its
/// answer: a `list_changed` after `initialized`, a `roots/list` request (a
/// [`Direction::Client`] aside is the client's reply to it), a log line on
/// the GET stream.
#[derive(Clone, Debug, PartialEq)]
pub struct Aside<J = Value> {
    /// What it followed: `None`, the exchange's answer; else the method of
    /// the client notification that came after that answer.
    pub after: Option<String>,
    /// Said while the exchange was in flight, before its answer (with
    /// `after` `None`): replay says it before the answer.
    pub in_flight: bool,
    pub channel: Channel,
    /// `offset_ms` counts from the exchange's request (`after` is `None`)
    /// or from the client notification it followed.
    pub message: RecordedMessage<J>,
}

/// One finished, normalized request/answer pair: what a cassette holds.
#[derive(Clone, Debug, PartialEq)]
pub struct Exchange<J = Value> {
    pub server: String,
    pub era: Era,
    pub protocol_version: String,
    pub method: String,
    pub key: MatchKey,
    /// The normalized JSON-RPC request (id and progress token as placeholders).
    pub request: J,
    /// The HTTP status the answer came with (200 for a stdio recording).
    pub status: Status,
    pub content_type: String,
    pub messages: Vec<RecordedMessage<J>>,
    /// What the server said on its own after it, in order.
    pub asides: Vec<Aside<J>>,
    /// How its SSE stream was framed for a client to resume it.
    pub stream: StreamShape,
    /// When, from where and by which version it was recorded.
    pub provenance: Provenance,
    /// Where it was read from; `None` for one not stored yet.
    pub source: Option<Source>,
}

/// What an SSE answer's framing showed of resumption (SEP-1699, protocol
/// 2025-11-25): all default for a JSON answer, a stdio recording and one
/// made before cassette schema 7.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamShape {
    /// The stream opened with a priming event (an id and empty data).
    pub primed: bool,
    /// The `retry` (milliseconds) the server set for a reconnecting client.
    pub retry_ms: Option<u64>,
    /// The server closed the stream after this many of its messages,
    /// before the answer; the client resumed it (`GET` with
    /// `Last-Event-ID`) to get the rest.
    pub closed_after: Option<u32>,
}

/// When, from which upstream and by which mcp-tape an exchange was
/// recorded; each fact unknown (`None`) for exchanges from before cassette
/// schema 3 or imported without it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Provenance {
    /// Seconds since 1970-01-01 UTC.
    pub recorded_at: Option<i64>,
    /// `host[:port]` of an HTTP upstream, or `stdio:PROGRAM`; never credentials.
    pub upstream: Option<String>,
    /// The mcp-tape version that recorded it.
    pub recorder: Option<String>,
    /// Its messages were stored with their keys sorted (recorded before
    /// cassette schema 8), so their member order is not the server's.
    pub keys_sorted: bool,
}

/// One stored exchange's place: its cassette file and its row there, and
/// what the row held (its stored match key and occurrence), so that a
/// command acting on the row later can tell whether it still holds that.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Source {
    pub cassette: std::sync::Arc<std::path::Path>,
    pub row: i64,
    pub key: MatchKey,
    pub occurrence: i64,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}#{}", self.cassette.display(), self.row)
    }
}

impl Exchange<Text> {
    /// The same exchange with its JSON parsed.
    ///
    /// # Errors
    ///
    /// Why stored text does not parse.
    pub fn parse(self) -> Result<Exchange, String> {
        let parse =
            |text: &str| serde_json::from_str(text).map_err(|e| format!("stored JSON does not parse: {e}"));
        let mut messages = Vec::with_capacity(self.messages.len());
        for message in self.messages {
            messages.push(RecordedMessage {
                offset_ms: message.offset_ms,
                direction: message.direction,
                body: parse(&message.body)?,
                written: Some(message.body),
                shallow: false,
            });
        }
        let mut asides = Vec::with_capacity(self.asides.len());
        for aside in self.asides {
            let message = aside.message;
            asides.push(Aside {
                after: aside.after,
                in_flight: aside.in_flight,
                channel: aside.channel,
                message: RecordedMessage {
                    offset_ms: message.offset_ms,
                    direction: message.direction,
                    body: parse(&message.body)?,
                    written: Some(message.body),
                    shallow: false,
                },
            });
        }
        Ok(Exchange {
            request: parse(&self.request)?,
            server: self.server,
            era: self.era,
            protocol_version: self.protocol_version,
            method: self.method,
            key: self.key,
            status: self.status,
            content_type: self.content_type,
            messages,
            asides,
            stream: self.stream,
            provenance: self.provenance,
            source: self.source,
        })
    }
}

impl Exchange {
    /// Why record would not have stored this exchange's answer, if it
    /// would not: one message over [`MAX_JSON_ANSWER_BYTES`], or several
    /// (a stream) over [`MAX_RECORDED_STREAM_BYTES`] in all. An import
    /// stores no more than record does.
    pub fn over_record_bounds(&self) -> Option<String> {
        let sizes: Vec<usize> = self
            .messages
            .iter()
            .filter(|m| m.direction == Direction::Server)
            .map(|m| m.as_sent().len())
            .collect();
        let (bytes, bound) = match sizes.as_slice() {
            [one] => (*one, MAX_JSON_ANSWER_BYTES),
            many => (many.iter().sum(), MAX_RECORDED_STREAM_BYTES),
        };
        (bytes > bound).then(|| format!("the answer is {bytes} bytes, past the {bound} bytes record stores"))
    }

    /// The same exchange with its JSON as text, as a cassette holds it:
    /// the request canonical, each message as sent.
    pub fn to_text(&self) -> Exchange<Text> {
        Exchange {
            server: self.server.clone(),
            era: self.era,
            protocol_version: self.protocol_version.clone(),
            method: self.method.clone(),
            key: self.key,
            request: canonical_json(&self.request).into(),
            status: self.status,
            content_type: self.content_type.clone(),
            messages: self
                .messages
                .iter()
                .map(|m| RecordedMessage::new(m.offset_ms, m.direction, m.as_sent().into()))
                .collect(),
            asides: self
                .asides
                .iter()
                .map(|a| Aside {
                    after: a.after.clone(),
                    in_flight: a.in_flight,
                    channel: a.channel,
                    message: RecordedMessage::new(
                        a.message.offset_ms,
                        a.message.direction,
                        a.message.as_sent().into(),
                    ),
                })
                .collect(),
            stream: self.stream,
            provenance: self.provenance.clone(),
            source: self.source.clone(),
        }
    }
}

/// An exchange as it happened on the wire, before normalization.
#[derive(Clone, Debug)]
pub struct RawExchange {
    pub server: String,
    pub era: Era,
    pub protocol_version: String,
    /// The whole JSON-RPC request as the client sent it.
    pub request: Value,
    pub status: Status,
    pub content_type: String,
    pub messages: Vec<RecordedMessage>,
    /// What the server said on its own after the answer, while it was held.
    pub asides: Vec<Aside>,
    pub stream: StreamShape,
}

/// An answer to `tools/call` of one tool, whatever its arguments: the
/// text's `{{argument}}` holes are filled from the call (see `template`).
/// It also stands for the tool in `tools/list`.
#[derive(Clone, Debug, PartialEq)]
pub struct AnswerTemplate {
    pub server: String,
    pub tool: String,
    pub description: String,
    /// The tool's `inputSchema`.
    pub input_schema: Value,
    /// The answer's text content, with its holes.
    pub text: String,
    /// Milliseconds from the request to the answer (`--pace recorded`).
    pub delay_ms: u64,
    /// The calls that fail instead, if some do.
    pub failure: Option<TemplateFailure>,
}

/// The calls of a templated tool that fail (an Agent 365 mock's
/// `errorRate` and `statusCode`): a seeded share, each failing with the
/// mock server's error or an HTTP status.
#[derive(Clone, Debug, PartialEq)]
pub struct TemplateFailure {
    /// From 0 to 1.
    pub rate: f64,
    /// The seed of the draw (`faults::draw`).
    pub seed: u64,
    /// The HTTP status a failed call gets; `None`: the mock server's
    /// JSON-RPC error.
    pub status: Option<u16>,
}

/// The answer of an Agent 365 service endpoint that is not MCP (gateway
/// discovery, chat history), as record saw it.
#[derive(Clone, Debug, PartialEq)]
pub struct ServiceAnswer {
    pub route: ServiceRoute,
    /// Origin of the upstream it came from (`scheme://host:port`).
    pub upstream: String,
    pub status: Status,
    pub content_type: String,
    /// The body as text, scrubbed; canonical JSON when it is JSON.
    pub body: String,
}

/// JSON text with object keys sorted and no insignificant whitespace: equal
/// values give equal bytes, whatever order their keys arrived in.
pub fn canonical_json(value: &Value) -> String {
    canonical(value, None)
}

/// [`canonical_json`] of `value` without its top-level `key` (if it is an
/// object): what a copy with the key removed would give, without the copy.
pub fn canonical_json_without(value: &Value, key: &str) -> String {
    canonical(value, Some(key))
}

/// What [`write_canonical`] leaves out.
struct Form<'a> {
    /// A top-level member left out.
    skipped: Option<&'a str>,
}

fn canonical(value: &Value, skipped: Option<&str>) -> String {
    let mut out = Vec::with_capacity(256);
    write_canonical(value, &Form { skipped }, &mut out);
    // serde_json writes UTF-8 only, so this never falls back.
    String::from_utf8(out).unwrap_or_default()
}

/// `"key":value` pairs, comma-separated, each value canonical.
fn write_members<'a>(members: impl Iterator<Item = (&'a String, &'a Value)>, out: &mut Vec<u8>) {
    for (i, (key, inner)) in members.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let _ = serde_json::to_writer(&mut *out, key);
        out.push(b':');
        write_canonical(inner, &Form { skipped: None }, out);
    }
}

fn write_canonical(value: &Value, form: &Form<'_>, out: &mut Vec<u8>) {
    // Keys and scalars as serde_json writes them; a Vec takes every byte, so
    // these writes cannot fail.
    match value {
        Value::Object(map) => {
            // serde_json's map keeps the order members were read in (its
            // `preserve_order` feature), so the keys are sorted here; most
            // maps a client sends are small, and many already sorted.
            out.push(b'{');
            let shown = |(key, _): &(&String, &Value)| Some(key.as_str()) != form.skipped;
            if map.keys().is_sorted() {
                write_members(map.iter().filter(shown), out);
            } else {
                let mut entries: Vec<(&String, &Value)> = map.iter().filter(shown).collect();
                entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
                write_members(entries.into_iter(), out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, &Form { skipped: None }, out);
            }
            out.push(b']');
        }
        scalar => {
            let _ = serde_json::to_writer(out, scalar);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::Connection;

    /// Keys that share the bytes they are hashed by are still told apart,
    /// and each is found again.
    #[test]
    fn keys_hashed_alike_stay_apart() {
        let mut digest = [7u8; 32];
        let first = MatchKey::from_digest(digest);
        digest[31] = 8;
        let second = MatchKey::from_digest(digest);
        let mut map = crate::util::FastMap::default();
        map.insert(first, "first");
        map.insert(second, "second");
        assert_eq!(map.len(), 2);
        assert_eq!((map[&first], map[&second]), ("first", "second"));
        assert_eq!(map.get(&MatchKey::from_digest([7; 32])), Some(&"first"));
    }

    #[test]
    fn canonical_json_sorts_keys_at_every_depth() {
        let a: Value = serde_json::from_str(r#"{"b":1,"a":{"y":[{"d":1,"c":2}],"x":null}}"#).unwrap();
        assert_eq!(canonical_json(&a), r#"{"a":{"x":null,"y":[{"c":2,"d":1}]},"b":1}"#);
    }

    #[test]
    fn canonical_json_without_a_key_is_that_of_the_copy_without_it() {
        let value: Value = serde_json::from_str(
            r#"{"name":"t","_meta":{"progressToken":1},"arguments":{"_meta":"kept","s":"é\n\"q\"","n":1e2}}"#,
        )
        .unwrap();
        let mut copy = value.clone();
        copy.as_object_mut().unwrap().remove("_meta");
        assert_eq!(canonical_json_without(&value, "_meta"), canonical_json(&copy));
        assert!(canonical_json(&copy).contains(r#""_meta":"kept""#), "only the top level loses it");
        let list = serde_json::json!([{"_meta": 1}]);
        assert_eq!(canonical_json_without(&list, "_meta"), canonical_json(&list));
    }

    #[test]
    fn as_sent_keeps_the_senders_text_and_canonical_sorts_it() {
        let sent = r#"{"z":{"b":1.0,"a":[{"y":2,"x":-0.5}]},"id":"m1","from":"caf\u00e9","n":12345678901234567890,"e":1E2}"#;
        let value: Value = serde_json::from_str(sent).unwrap();
        let message = RecordedMessage {
            written: Some(sent.into()),
            ..RecordedMessage::new(0, Direction::Server, value)
        };
        assert_eq!(message.as_sent(), sent);
        assert_eq!(
            canonical_json(&message.body),
            r#"{"e":100.0,"from":"café","id":"m1","n":12345678901234567890,"z":{"a":[{"x":-0.5,"y":2}],"b":1.0}}"#
        );
        let made_here = RecordedMessage::new(0, Direction::Server, message.body.clone());
        assert_ne!(made_here.as_sent(), sent, "serde_json's words for a message with no text of its own");
    }

    #[test]
    fn an_answer_record_would_not_store_is_over_the_bounds() {
        let message = |bytes: usize| {
            RecordedMessage::new(0, Direction::Server, serde_json::json!({"result": "x".repeat(bytes)}))
        };
        let mut exchange = crate::normalize::tests::sample("s", "t", "x");
        exchange.messages =
            vec![message(MAX_RECORDED_STREAM_BYTES / 2 + 1), message(MAX_RECORDED_STREAM_BYTES / 2)];
        let why = exchange.over_record_bounds().expect("a stream past the bound");
        assert!(why.ends_with(&format!("past the {MAX_RECORDED_STREAM_BYTES} bytes record stores")), "{why}");
        exchange.messages.truncate(1);
        assert_eq!(exchange.over_record_bounds(), None, "one JSON answer may be larger");
    }

    #[test]
    fn match_key_round_trips_as_hex() {
        let key = MatchKey::from_digest([0xab; 32]);
        assert_eq!(MatchKey::from_hex(&key.to_hex()), Some(key));
        assert_eq!(MatchKey::from_hex("zz"), None);
        assert_eq!(MatchKey::from_hex(&"é".repeat(32)), None);
    }

    #[test]
    fn stored_types_round_trip_through_sqlite_and_refuse_strangers() {
        let conn = Connection::open_in_memory().unwrap();
        let key = MatchKey::from_digest([7; 32]);
        let back: (Era, Direction, MatchKey, ServiceRoute) = conn
            .query_row(
                "SELECT ?1, ?2, ?3, ?4",
                rusqlite::params![Era::Stateless, Direction::Client, key, ServiceRoute::GatewayV2],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .unwrap();
        assert_eq!(back, (Era::Stateless, Direction::Client, key, ServiceRoute::GatewayV2));
        let stranger = conn.query_row("SELECT 'medieval'", [], |r| r.get::<_, Era>(0)).unwrap_err();
        assert!(stranger.to_string().contains("unknown era \"medieval\""), "{stranger}");
        assert!(conn.query_row("SELECT 3", [], |r| r.get::<_, Direction>(0)).is_err());
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    /// Any JSON: scalars (finite numbers, any text), arrays and objects nested a few levels.
    pub(crate) fn json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>().prop_filter("JSON numbers are finite", |f| f.is_finite()).prop_map(Value::from),
            ".{0,12}".prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec((".{0,8}", inner), 0..6)
                    .prop_map(|entries| Value::Object(entries.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn canonical_json_reads_back_as_the_same_value_and_is_a_fixed_point(value in json()) {
            let text = canonical_json(&value);
            let again: Value = serde_json::from_str(&text).unwrap();
            prop_assert_eq!(&again, &value);
            prop_assert_eq!(canonical_json(&again), text);
        }

        #[test]
        fn canonical_json_does_not_depend_on_the_order_members_were_written(
            entries in prop::collection::vec(("[a-z]{1,4}", json()), 0..8)
        ) {
            let forward = Value::Object(entries.iter().cloned().collect());
            let backward = Value::Object(entries.iter().rev().cloned().collect());
            // Later members win in both; compare on the members both kept the same way.
            let kept: std::collections::BTreeMap<_, _> = entries.iter().cloned().collect();
            let reversed: std::collections::BTreeMap<_, _> = entries.iter().rev().cloned().collect();
            prop_assume!(kept == reversed);
            prop_assert_eq!(canonical_json(&forward), canonical_json(&backward));
        }

        #[test]
        fn leaving_out_a_member_is_the_same_as_removing_it(value in json(), key in "[a-z]{0,3}") {
            let mut copy = value.clone();
            if let Some(object) = copy.as_object_mut() {
                object.remove(&key);
            }
            prop_assert_eq!(canonical_json_without(&value, &key), canonical_json(&copy));
        }
    }
}
