//! The JSON-RPC 2.0 envelope: classifying an incoming value as a request,
//! notification or response, and building answers. It knows nothing of MCP
//! (method names, eras) and does no I/O.

pub mod scan;

use std::borrow::Cow;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::util::Memo;
use scan::natural;

/// A JSON-RPC error code. The protocol's own are associated constants;
/// MCP's live in `mcp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ErrorCode(pub i32);

impl ErrorCode {
    /// The body could not be parsed as JSON.
    pub const PARSE_ERROR: ErrorCode = ErrorCode(-32700);
    /// The JSON is not a valid JSON-RPC message.
    pub const INVALID_REQUEST: ErrorCode = ErrorCode(-32600);
    /// The method does not exist or is not offered.
    pub const METHOD_NOT_FOUND: ErrorCode = ErrorCode(-32601);
    /// The params are invalid for the method.
    pub const INVALID_PARAMS: ErrorCode = ErrorCode(-32602);
    /// Something failed inside the server.
    pub const INTERNAL_ERROR: ErrorCode = ErrorCode(-32603);

    /// The code of a JSON value, if it is an integer that fits.
    pub fn of(value: &Value) -> Option<ErrorCode> {
        value.as_i64().and_then(|code| i32::try_from(code).ok()).map(ErrorCode)
    }
}

/// A request id: a JSON string or number, with its JSON text as the caller
/// wrote it, so that it is echoed back exactly (`1e2` stays `1e2`, not
/// `100.0`; a 30-digit number keeps every digit).
#[derive(Clone, Debug, PartialEq)]
pub struct RequestId {
    value: Value,
    text: IdText,
}

/// A request id's text: the usual one, a natural number, kept in place.
#[derive(Clone, Debug, PartialEq)]
enum IdText {
    /// At most 20 digits (`u64::MAX` has 20).
    Digits {
        digits: [u8; 20],
        len: u8,
    },
    Written(Box<str>),
}

impl IdText {
    fn of(text: &str) -> IdText {
        let mut digits = [0; 20];
        match (digits.get_mut(..text.len()), u8::try_from(text.len())) {
            (Some(room), Ok(len)) if text.bytes().all(|b| b.is_ascii_digit()) => {
                room.copy_from_slice(text.as_bytes());
                IdText::Digits { digits, len }
            }
            _ => IdText::Written(text.into()),
        }
    }

    fn as_str(&self) -> &str {
        match self {
            // Digits only: always UTF-8.
            IdText::Digits { digits, len } => {
                std::str::from_utf8(&digits[..usize::from(*len)]).unwrap_or_default()
            }
            IdText::Written(text) => text,
        }
    }
}

impl RequestId {
    /// Accepts a string or a number (a test helper: no integer check); anything else (null included) is not an id.
    #[cfg(test)]
    pub fn from_value(value: &Value) -> Option<RequestId> {
        match value {
            Value::String(_) | Value::Number(_) => {
                Some(RequestId { value: value.clone(), text: IdText::of(&value.to_string()) })
            }
            _ => None,
        }
    }

    pub fn as_value(&self) -> &Value {
        &self.value
    }

    /// The id as JSON text, as the caller wrote it.
    pub fn json_text(&self) -> &str {
        self.text.as_str()
    }

    /// The id as the caller wrote it: its value and its very text.
    fn from_raw(raw: &RawValue) -> Option<RequestId> {
        RequestId::from_text(raw.get())
    }

    /// The id written as `text`, if that is a JSON string or an integer
    /// (MCP allows no other; `1e2` is one, `1.5` is not).
    fn from_text(text: &str) -> Option<RequestId> {
        // The usual id, a small natural number, read without serde.
        if let Some(n) = natural(text) {
            return Some(RequestId { value: Value::from(n), text: IdText::of(text) });
        }
        match serde_json::from_str(text).ok()? {
            Value::Number(n) if n.as_f64().is_some_and(|f| f.fract() != 0.0) => None,
            value @ (Value::String(_) | Value::Number(_)) => {
                Some(RequestId { value, text: IdText::of(text) })
            }
            _ => None,
        }
    }
}

/// Whether an answer's `id` answers a request's `id`: the same value, or
/// [`id_retyped`] (a server that answers `"7"` with `7`, or `7` with `"7"`,
/// answers the request it was given).
pub fn answers(answer: &Value, request: &Value) -> bool {
    answer == request || id_retyped(answer).as_ref() == Some(request)
}

/// The same id in the other JSON type: a natural number as the string of
/// its digits, such a string as the number; `None` for any other id.
pub fn id_retyped(id: &Value) -> Option<Value> {
    match id {
        Value::Number(number) => number.as_u64().map(|n| Value::String(n.to_string())),
        Value::String(text) => text.parse::<u64>().ok().filter(|n| n.to_string() == *text).map(Value::from),
        _ => None,
    }
}

/// A message's `params`: the value, and the JSON text it was read from
/// (which the engine's memo keys what it worked out by). Cloning shares it.
#[derive(Clone, Debug)]
pub struct Params(Arc<ParamsText>);

#[derive(Debug)]
struct ParamsText {
    value: Value,
    text: Box<str>,
}

impl Params {
    pub fn new(value: Value) -> Params {
        let text = value.to_string().into();
        Params(Arc::new(ParamsText { value, text }))
    }

    /// Params read from their JSON text.
    fn from_text(text: &str) -> serde_json::Result<Params> {
        let value = serde_json::from_str(text)?;
        Ok(Params(Arc::new(ParamsText { value, text: text.into() })))
    }

    pub fn value(&self) -> &Value {
        &self.0.value
    }

    /// The JSON text as the sender wrote it.
    pub fn text(&self) -> &str {
        &self.0.text
    }
}

impl Deref for Params {
    type Target = Value;

    fn deref(&self) -> &Value {
        &self.0.value
    }
}

impl PartialEq for Params {
    fn eq(&self, other: &Params) -> bool {
        self.0.value == other.0.value
    }
}

/// Params read before, by their text: a client that sends the same params
/// again (a test suite run against replay does little else) gets the value
/// read the first time instead of a new tree. Each text it holds was read
/// by serde as one JSON value (`read_cached` keeps no other), which
/// `scan` relies on to find where params end.
pub type ParamsCache = Memo<Option<Params>>;

/// The params written as `text`: the ones read before from the very same
/// text, else read now (which checks that it is JSON) and kept.
fn read_cached(text: &str, cache: &ParamsCache) -> serde_json::Result<Params> {
    if let Some(known) = cache.find(text, Option::clone) {
        return Ok(known);
    }
    let params = Params::from_text(text)?;
    cache.keep(text, |kept| *kept = Some(params.clone()));
    Ok(params)
}

/// A JSON-RPC error object. Protocol errors are data, not Rust errors.
#[derive(Clone, Debug, PartialEq)]
pub struct ErrorObject {
    pub code: ErrorCode,
    pub message: String,
    pub data: Option<Value>,
}

impl ErrorObject {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ErrorObject {
        ErrorObject { code, message: message.into(), data: None }
    }

    pub fn with_data(mut self, data: Value) -> ErrorObject {
        self.data = Some(data);
        self
    }

    fn to_value(&self) -> Value {
        let mut error = Map::new();
        error.insert("code".into(), self.code.0.into());
        error.insert("message".into(), self.message.clone().into());
        if let Some(data) = &self.data {
            error.insert("data".into(), data.clone());
        }
        Value::Object(error)
    }
}

/// One JSON-RPC message, classified.
#[derive(Clone, Debug, PartialEq)]
pub enum Message {
    /// Has a method and an id: expects an answer.
    Request { id: RequestId, method: Method, params: Option<Params> },
    /// Has a method and no id: gets no answer.
    Notification { method: Method, params: Option<Params> },
    /// Has `result` or `error` and no method: an answer to a request the
    /// other side sent.
    Response { id: Option<RequestId>, body: Value },
}

/// A message's method name; the usual MCP methods' names are not copied.
pub type Method = Cow<'static, str>;

/// The MCP methods that most messages name.
const USUAL_METHODS: [&str; 12] = [
    "tools/call",
    "tools/list",
    "resources/read",
    "resources/list",
    "prompts/get",
    "prompts/list",
    "initialize",
    "notifications/initialized",
    "ping",
    "notifications/cancelled",
    "notifications/progress",
    "completion/complete",
];

/// `name` as a [`Method`]: one of [`USUAL_METHODS`] is not copied.
fn method_named(name: &str) -> Method {
    match USUAL_METHODS.iter().find(|usual| **usual == name) {
        Some(usual) => Cow::Borrowed(usual),
        None => Cow::Owned(name.to_owned()),
    }
}

/// Why bytes are not one JSON-RPC message.
#[derive(Debug)]
pub enum Unreadable {
    /// Not JSON at all, with the parser's reason.
    NotJson(String),
    /// JSON, but not a JSON-RPC message: the error to send back, with the
    /// id when one could be read (the error boxed: a rare path, and the
    /// parse's `Result` stays small).
    NotJsonRpc(Option<RequestId>, Box<ErrorObject>),
}

impl Message {
    /// Parses and classifies one message from its JSON text, a request's id
    /// kept as written (`1e2` stays `1e2`, a 30-digit number keeps every
    /// digit). Only `params`, `result` and `error` are built as values.
    ///
    /// # Errors
    ///
    /// [`Unreadable`]: not JSON, or not one JSON-RPC message.
    pub fn from_slice(bytes: &[u8]) -> Result<Message, Unreadable> {
        Message::read(bytes, None)
    }

    /// [`Message::from_slice`], params read through `cache`.
    ///
    /// # Errors
    ///
    /// [`Unreadable`]: not JSON, or not one JSON-RPC message.
    pub fn from_slice_cached(bytes: &[u8], cache: &ParamsCache) -> Result<Message, Unreadable> {
        Message::read(bytes, Some(cache))
    }

    fn read(bytes: &[u8], cache: Option<&ParamsCache>) -> Result<Message, Unreadable> {
        let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
        if first != Some(&b'{') {
            serde_json::from_slice::<IgnoredAny>(bytes).map_err(|e| Unreadable::NotJson(e.to_string()))?;
            let why = if first == Some(&b'[') {
                "batches are not supported; send one message per POST"
            } else {
                "a JSON-RPC message must be a JSON object"
            };
            return Err(invalid(None, why));
        }
        // Checked as UTF-8 once here, so that the members read as their
        // text are not checked again one by one.
        let text = std::str::from_utf8(bytes).map_err(|e| Unreadable::NotJson(e.to_string()))?;
        match scan::scan(text, cache) {
            Some(message) => Ok(message),
            None => Message::read_by_serde(text, cache),
        }
    }

    /// Any message object, read by serde.
    fn read_by_serde(text: &str, cache: Option<&ParamsCache>) -> Result<Message, Unreadable> {
        let envelope: Envelope =
            serde_json::from_str(text).map_err(|e| Unreadable::NotJson(e.to_string()))?;
        envelope.classify(cache)
    }
}

/// Params from their text, through `cache` when there is one.
fn read_params(text: &str, cache: Option<&ParamsCache>) -> serde_json::Result<Params> {
    cache.map_or_else(|| Params::from_text(text), |cache| read_cached(text, cache))
}

fn invalid(id: Option<RequestId>, why: &str) -> Unreadable {
    Unreadable::NotJsonRpc(
        id,
        Box::new(ErrorObject::new(ErrorCode::INVALID_REQUEST, format!("Invalid request: {why}"))),
    )
}

/// The members of a message object as read: the envelope's own as their
/// text (nothing is built for them), the others kept for an answer's body.
#[derive(Default)]
struct Envelope<'a> {
    jsonrpc: Option<Text<'a>>,
    id: Option<&'a RawValue>,
    method: Option<Text<'a>>,
    params: Option<&'a RawValue>,
    rest: Map<String, Value>,
}

/// A member that must be a string: the string (borrowed when it has no
/// escapes), or the note that it was something else.
enum Text<'a> {
    Str(Cow<'a, str>),
    Other,
}

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(TextVisitor)
    }
}

struct TextVisitor;

impl<'de> Visitor<'de> for TextVisitor {
    type Value = Text<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Text<'de>, E> {
        Ok(Text::Str(Cow::Borrowed(text)))
    }

    fn visit_str<E>(self, text: &str) -> Result<Text<'de>, E> {
        Ok(Text::Str(Cow::Owned(text.to_owned())))
    }

    fn visit_string<E>(self, text: String) -> Result<Text<'de>, E> {
        Ok(Text::Str(Cow::Owned(text)))
    }

    fn visit_bool<E>(self, _: bool) -> Result<Text<'de>, E> {
        Ok(Text::Other)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Text<'de>, E> {
        Ok(Text::Other)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Text<'de>, E> {
        Ok(Text::Other)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Text<'de>, E> {
        Ok(Text::Other)
    }

    fn visit_unit<E>(self) -> Result<Text<'de>, E> {
        Ok(Text::Other)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut items: A) -> Result<Text<'de>, A::Error> {
        while items.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Text::Other)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut members: A) -> Result<Text<'de>, A::Error> {
        while members.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Text::Other)
    }
}

/// A member's value, built from its text.
fn value_of(raw: &RawValue) -> Value {
    serde_json::from_str(raw.get()).unwrap_or(Value::Null)
}

impl Envelope<'_> {
    fn classify(self, cache: Option<&ParamsCache>) -> Result<Message, Unreadable> {
        let id = self.id.and_then(RequestId::from_raw);
        if !matches!(&self.jsonrpc, Some(Text::Str(version)) if version == "2.0") {
            return Err(invalid(id, "\"jsonrpc\" must be \"2.0\""));
        }
        if self.params.is_some_and(|p| !p.get().starts_with(['{', '['])) {
            return Err(invalid(id, "\"params\" must be an object or an array"));
        }
        let params = || {
            let read = |raw: &RawValue| read_params(raw.get(), cache);
            self.params.map(read).transpose().map_err(|e| Unreadable::NotJson(e.to_string()))
        };
        match self.method {
            Some(Text::Str(method)) => {
                let method = method_named(&method);
                match (self.id, id) {
                    (None, _) => Ok(Message::Notification { method, params: params()? }),
                    (Some(_), Some(id)) => Ok(Message::Request { id, method, params: params()? }),
                    (Some(_), None) => Err(invalid(None, "\"id\" must be a string or an integer")),
                }
            }
            Some(Text::Other) => Err(invalid(id, "\"method\" must be a string")),
            None if self.rest.contains_key("result") || self.rest.contains_key("error") => {
                let mut body = self.rest;
                body.insert("jsonrpc".to_owned(), "2.0".into());
                for (name, raw) in [("params", self.params), ("id", self.id)] {
                    body.extend(raw.map(|raw| (name.to_owned(), value_of(raw))));
                }
                Ok(Message::Response { id, body: Value::Object(body) })
            }
            None => Err(invalid(id, "no \"method\", \"result\" or \"error\"")),
        }
    }
}

impl<'de> Deserialize<'de> for Envelope<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(EnvelopeVisitor)
    }
}

struct EnvelopeVisitor;

impl<'de> Visitor<'de> for EnvelopeVisitor {
    type Value = Envelope<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON-RPC message object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut members: A) -> Result<Envelope<'de>, A::Error> {
        // A repeated member counts once, its last value, as in a parsed object.
        let mut envelope = Envelope::default();
        while let Some(member) = members.next_key::<Member>()? {
            match member {
                Member::Jsonrpc => envelope.jsonrpc = Some(members.next_value()?),
                Member::Id => envelope.id = Some(members.next_value()?),
                Member::Method => envelope.method = Some(members.next_value()?),
                Member::Params => envelope.params = Some(members.next_value()?),
                Member::Other(name) => {
                    envelope.rest.insert(name, members.next_value()?);
                }
            }
        }
        Ok(envelope)
    }
}

/// A member name of a message object, the envelope's own without a copy.
enum Member {
    Jsonrpc,
    Id,
    Method,
    Params,
    Other(String),
}

impl<'de> Deserialize<'de> for Member {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_identifier(MemberVisitor)
    }
}

struct MemberVisitor;

impl Visitor<'_> for MemberVisitor {
    type Value = Member;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a member name")
    }

    fn visit_str<E: serde::de::Error>(self, name: &str) -> Result<Member, E> {
        Ok(match name {
            "jsonrpc" => Member::Jsonrpc,
            "id" => Member::Id,
            "method" => Member::Method,
            "params" => Member::Params,
            other => Member::Other(other.to_owned()),
        })
    }
}

/// A success answer to the request with `id`, as JSON text.
pub fn result(id: &RequestId, result: &Value) -> String {
    format!(r#"{{"id":{},"jsonrpc":"2.0","result":{result}}}"#, id.json_text())
}

/// An error answer as JSON text; `id` is `null` when the request's id could
/// not be read.
pub fn error(id: Option<&RequestId>, error: &ErrorObject) -> String {
    format!(
        r#"{{"error":{},"id":{},"jsonrpc":"2.0"}}"#,
        error.to_value(),
        id.map_or("null", RequestId::json_text)
    )
}

/// The error code of a response message, if it is an error answer.
pub fn error_code(message: &Value) -> Option<ErrorCode> {
    ErrorCode::of(message.get("error")?.get("code")?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(text: &str) -> Result<Message, (Option<RequestId>, Box<ErrorObject>)> {
        Message::from_slice(text.as_bytes()).map_err(|unreadable| match unreadable {
            Unreadable::NotJsonRpc(id, error) => (id, error),
            Unreadable::NotJson(why) => panic!("{text} is JSON: {why}"),
        })
    }

    /// A usual method's name is the static one; any other is copied, whatever it starts with.
    #[test]
    fn usual_method_names_are_not_copied() {
        for name in USUAL_METHODS {
            let text = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"{name}"}}"#);
            let Ok(Message::Request { method, .. }) = parse(&text) else { panic!("{text}") };
            assert!(matches!(method, Cow::Borrowed(usual) if usual == name), "{name}");
        }
        for name in ["tools/callx", "tools/cal", "ping ", "x/y"] {
            let text = format!(r#"{{"jsonrpc":"2.0","method":"{name}"}}"#);
            let Ok(Message::Notification { method, .. }) = parse(&text) else { panic!("{text}") };
            assert!(matches!(method, Cow::Owned(ref copied) if copied == name), "{name}");
        }
    }

    #[test]
    fn classifies_requests_notifications_and_responses() {
        let request = parse(r#"{"jsonrpc":"2.0","id":"a","method":"ping"}"#).unwrap();
        assert!(matches!(request, Message::Request { ref method, .. } if method == "ping"));
        let note = parse(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).unwrap();
        assert!(matches!(note, Message::Notification { .. }));
        let response = parse(r#"{"jsonrpc":"2.0","id":7,"result":{}}"#).unwrap();
        assert!(matches!(response, Message::Response { id: Some(_), .. }));
    }

    #[test]
    fn keeps_the_id_exactly() {
        let (most, past) = (u64::MAX.to_string(), (u128::from(u64::MAX) + 1).to_string());
        let ids = [
            "12.0",
            "1e2",
            "-0",
            "123456789012345678901234567890",
            "7",
            "0",
            r#""r-1""#,
            r#""12""#,
            &most,
            &past,
        ];
        for written in ids {
            let body = format!(r#"{{"jsonrpc":"2.0","id":{written},"method":"x"}}"#);
            let Message::Request { id, .. } = parse(&body).unwrap() else { panic!("not a request") };
            assert_eq!(id.json_text(), written);
            let answer = result(&id, &json!({}));
            assert!(answer.contains(&format!(r#""id":{written},"#)), "{answer}");
            assert_eq!(serde_json::from_str::<Value>(&answer).unwrap()["result"], json!({}));
        }
    }

    #[test]
    fn reads_members_as_a_parsed_object_would() {
        // An escaped member name is the same name; a repeated member counts with its last value.
        let text = r#"{"jsonrpc":"2.0","i\u0064":1,"method":"a","method":"b","params":{"x":[1]}}"#;
        let Ok(Message::Request { id, method, params }) = parse(text) else { panic!("not a request") };
        let params = params.map(|p| p.value().clone());
        assert_eq!((id.json_text(), &*method, params), ("1", "b", Some(json!({"x": [1]}))));
        let text = r#" {"result":{"ok":true},"id":"r 1","jsonrpc":"2.0","extra":null} "#;
        let Ok(Message::Response { id, body }) = parse(text) else { panic!("not a response") };
        assert_eq!(id.map(|id| id.json_text().to_owned()).as_deref(), Some(r#""r 1""#));
        assert_eq!(body, serde_json::from_str::<Value>(text).unwrap());
        assert!(matches!(Message::from_slice(b"{\"id\":1,"), Err(Unreadable::NotJson(_))));
        assert!(matches!(Message::from_slice(b"[1,"), Err(Unreadable::NotJson(_))));
    }

    #[test]
    fn the_params_cache_keeps_one_read_per_text_and_stays_bounded() {
        let cache = ParamsCache::default();
        let read = |params: &str| {
            let text = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{params}}}"#);
            match Message::from_slice_cached(text.as_bytes(), &cache) {
                Ok(Message::Request { params: Some(params), .. }) => params,
                other => panic!("{params}: {other:?}"),
            }
        };
        let first = read(r#"{"a":1}"#);
        assert_eq!(cache.len(), 1);
        assert_eq!((first.text(), read(r#"{"a":1}"#).text(), cache.len()), (r#"{"a":1}"#, r#"{"a":1}"#, 1));
        let spaced = read(r#"{"a": 1}"#);
        assert!(first == spaced && spaced.text() == r#"{"a": 1}"# && cache.len() == 2);
        for n in 0..ParamsCache::MAX_ENTRIES + 10 {
            read(&format!(r#"{{"n":{n}}}"#));
            assert!(cache.len() <= ParamsCache::MAX_ENTRIES);
        }
        let held = cache.len();
        let long = format!(r#"{{"s":"{}"}}"#, "x".repeat(ParamsCache::MAX_TEXT));
        assert_eq!(read(&long).text(), long);
        assert_eq!(cache.len(), held, "a text over the limit is not kept");
    }

    #[test]
    fn rejects_what_is_not_a_message_keeping_a_readable_id() {
        let (id, err) = parse(r#"{"jsonrpc":"1.0","id":3,"method":"x"}"#).unwrap_err();
        assert_eq!(id, RequestId::from_value(&json!(3)));
        assert_eq!(err.code, ErrorCode::INVALID_REQUEST);
        let (id, err) = parse(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#).unwrap_err();
        assert_eq!((id, err.code), (None, ErrorCode::INVALID_REQUEST));
        assert!(err.message.contains("batches"));
        let (_, err) = parse(r#"{"jsonrpc":"2.0","id":null,"method":"x"}"#).unwrap_err();
        assert_eq!(err.code, ErrorCode::INVALID_REQUEST);
        // MCP ids are strings or integers: a fraction is no id (it was accepted).
        let (id, err) = parse(r#"{"jsonrpc":"2.0","id":1.5,"method":"x"}"#).unwrap_err();
        assert_eq!((id, err.code), (None, ErrorCode::INVALID_REQUEST));
        assert!(err.message.contains("string or an integer"), "{}", err.message);
        assert!(parse(r#"{"jsonrpc":"2.0","id":1e2,"method":"x"}"#).is_ok());
        let (_, err) = parse(r#"{"jsonrpc":"2.0","id":1,"method":"x","params":3}"#).unwrap_err();
        assert_eq!(err.code, ErrorCode::INVALID_REQUEST);
        assert!(parse(r#""text""#).is_err());
    }

    #[test]
    fn error_answers_carry_null_when_no_id_was_read() {
        let answer: Value =
            serde_json::from_str(&error(None, &ErrorObject::new(ErrorCode::PARSE_ERROR, "Parse error")))
                .unwrap();
        assert_eq!(answer["id"], Value::Null);
        assert_eq!(error_code(&answer), Some(ErrorCode::PARSE_ERROR));
        let with_data = ErrorObject::new(ErrorCode::INVALID_PARAMS, "bad").with_data(json!({"uri": "x"}));
        let id = RequestId::from_value(&json!("r")).unwrap();
        let answer: Value = serde_json::from_str(&error(Some(&id), &with_data)).unwrap();
        assert_eq!(answer["error"]["data"]["uri"], "x");
    }
}
