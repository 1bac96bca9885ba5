//! The JSON-RPC 2.0 envelope: classifying an incoming value as a request,
//! notification or response, and building answers. It knows nothing of MCP
//! (method names, eras) and does no I/O.

use std::borrow::Cow;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::util::Memo;

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
        match scan(text, cache) {
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

/// The usual request or notification read by a byte scan, without serde's
/// machinery: an object of `jsonrpc` (exactly `"2.0"`), `method` (a string
/// without escapes), `params` (an object or array) and, for a request, an
/// `id`, each once, member names without escapes. `None` for anything else,
/// which serde then reads (and judges). Nothing is taken on the scan's
/// word: the id and params are read by serde (params unless the cache holds
/// their very text, read before), and whatever does not read is left to
/// serde's path too.
fn scan<'a>(text: &'a str, cache: Option<&ParamsCache>) -> Option<Message> {
    let bytes = text.as_bytes();
    let mut at = skip_space(bytes, 0);
    if bytes.get(at) != Some(&b'{') {
        return None;
    }
    let [mut jsonrpc, mut id, mut method, mut params]: [Option<&'a str>; 4] = [None; 4];
    let mut known_params = None;
    at = skip_space(bytes, at + 1);
    loop {
        let name_end = plain_string_end(bytes, at)?;
        let name = &text[at + 1..name_end - 1];
        at = skip_space(bytes, name_end);
        if bytes.get(at) != Some(&b':') {
            return None;
        }
        let value_at = skip_space(bytes, at + 1);
        let (member, value_end) = match name {
            "jsonrpc" => (&mut jsonrpc, value_end(bytes, value_at)?),
            "id" => (&mut id, value_end(bytes, value_at)?),
            // Its text is the method: a string without escapes.
            "method" => (&mut method, plain_string_end(bytes, value_at)?),
            "params" => match cache.and_then(|cache| known_last_member(text, value_at, cache)) {
                // Params last, as read before: where they end is known without looking through them.
                Some((end, known)) => {
                    known_params = Some(known);
                    (&mut params, end)
                }
                None => (&mut params, value_end(bytes, value_at)?),
            },
            _ => return None,
        };
        if member.replace(&text[value_at..value_end]).is_some() {
            return None;
        }
        at = skip_space(bytes, value_end);
        match bytes.get(at) {
            Some(b',') => at = skip_space(bytes, at + 1),
            Some(b'}') if skip_space(bytes, at + 1) == bytes.len() => break,
            _ => return None,
        }
    }
    let method = method?;
    let method = method_named(&method[1..method.len() - 1]);
    if jsonrpc != Some(r#""2.0""#) {
        return None;
    }
    let params = match params {
        Some(_) if known_params.is_some() => known_params,
        Some(text) if text.starts_with(['{', '[']) => Some(read_params(text, cache).ok()?),
        Some(_) => return None,
        None => None,
    };
    match id {
        None => Some(Message::Notification { method, params }),
        Some(id) => Some(Message::Request { id: RequestId::from_text(id)?, method, params }),
    }
}

/// When the member value at `at` runs to the message's closing brace (the
/// last member) and is an object or array `cache` holds: where it ends, and
/// the params read before from it. The cache holds only texts that are one
/// JSON value each, and a value's end is fixed by where it starts: what
/// runs to the brace is the whole value only if it is such a text.
fn known_last_member(text: &str, at: usize, cache: &ParamsCache) -> Option<(usize, Params)> {
    const SPACE: [char; 4] = [' ', '\t', '\n', '\r'];
    let members = text.trim_end_matches(SPACE).strip_suffix('}')?.trim_end_matches(SPACE);
    let value =
        members.get(at..).filter(|value| value.starts_with(['{', '[']) && value.ends_with(['}', ']']))?;
    Some((members.len(), cache.find(value, Option::clone)?))
}

/// Params from their text, through `cache` when there is one.
fn read_params(text: &str, cache: Option<&ParamsCache>) -> serde_json::Result<Params> {
    cache.map_or_else(|| Params::from_text(text), |cache| read_cached(text, cache))
}

/// Where the JSON whitespace from `at` ends.
fn skip_space(bytes: &[u8], mut at: usize) -> usize {
    while matches!(bytes.get(at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        at += 1;
    }
    at
}

/// Just past the string that starts at `at` (escapes skipped, not
/// checked); `None` when no string starts there or it does not end.
fn string_end(bytes: &[u8], at: usize) -> Option<usize> {
    if bytes.get(at) != Some(&b'"') {
        return None;
    }
    let mut at = at + 1;
    loop {
        at = plain_text_end(bytes, at);
        match *bytes.get(at)? {
            b'"' => return Some(at + 1),
            b'\\' => at += 2,
            _ => return None, // a control character
        }
    }
}

/// Just past the string without escapes that starts at `at`; `None` when
/// no such string starts there.
fn plain_string_end(bytes: &[u8], at: usize) -> Option<usize> {
    if bytes.get(at) != Some(&b'"') {
        return None;
    }
    let end = plain_text_end(bytes, at + 1);
    (bytes.get(end) == Some(&b'"')).then_some(end + 1)
}

/// Where the plain text of a string from `at` ends: its first quote,
/// backslash or control character, else `bytes.len()` (or `at`, past it).
/// Eight bytes are looked at a time: a request's text is mostly strings.
fn plain_text_end(bytes: &[u8], mut at: usize) -> usize {
    const ONES: u64 = u64::from_le_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_le_bytes([0x80; 8]);
    // The high bit of each byte of `word` below `limit` (<= 0x80), and maybe of bytes above the
    // lowest such byte (a borrow carries): the lowest bit set is always a true one.
    let below = |word: u64, limit: u8| word.wrapping_sub(ONES * u64::from(limit)) & !word & HIGHS;
    while let Some(eight) = bytes.get(at..at + 8) {
        let word = u64::from_le_bytes(eight.try_into().unwrap_or_default());
        let found = below(word ^ (ONES * u64::from(b'"')), 1)
            | below(word ^ (ONES * u64::from(b'\\')), 1)
            | below(word, 0x20);
        if found != 0 {
            return at + (found.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    while bytes.get(at).is_some_and(|&b| b != b'"' && b != b'\\' && b >= 0x20) {
        at += 1;
    }
    at
}

/// Just past the value that starts at `at`: a string, an object or array
/// (brackets counted, strings skipped), or a bare word (number, literal).
fn value_end(bytes: &[u8], at: usize) -> Option<usize> {
    match *bytes.get(at)? {
        b'"' => string_end(bytes, at),
        b'{' | b'[' => {
            let (mut depth, mut at) = (0usize, at);
            loop {
                match *bytes.get(at)? {
                    b'"' => {
                        at = string_end(bytes, at)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(at + 1);
                        }
                    }
                    _ => {}
                }
                at += 1;
            }
        }
        _ => {
            let end = at
                + bytes[at..]
                    .iter()
                    .position(|b| matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))?;
            (end > at).then_some(end)
        }
    }
}

/// `text` as JSON's natural number (`0`, or digits without a leading
/// zero) that fits a `u64`, as serde reads it; `None` for anything else.
fn natural(text: &str) -> Option<u64> {
    let digits = text.as_bytes();
    if digits.is_empty() || digits.len() > 1 && digits[0] == b'0' {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &digit| {
        let digit = digit.checked_sub(b'0').filter(|d| *d <= 9)?;
        n.checked_mul(10)?.checked_add(u64::from(digit))
    })
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

    /// The shortcuts of the byte scan against what they stand for.
    mod shortcuts {
        use super::*;
        use proptest::prelude::*;

        /// [`plain_text_end`] a byte at a time.
        fn plain_text_end_bytewise(bytes: &[u8], mut at: usize) -> usize {
            while bytes.get(at).is_some_and(|&b| b != b'"' && b != b'\\' && b >= 0x20) {
                at += 1;
            }
            at
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(4000))]
            #[test]
            fn plain_text_ends_where_a_bytewise_look_says(
                bytes in prop::collection::vec(
                    prop::sample::select(vec![b'a', b'"', b'\\', b' ', 0x00, 0x1f, 0x21, 0x5b, 0x5d, 0x7f, 0x80, 0xa2, 0xff]),
                    0..40,
                ),
                at in 0..44usize,
            ) {
                prop_assert_eq!(plain_text_end(&bytes, at), plain_text_end_bytewise(&bytes, at), "{:?} from {}", bytes, at);
            }

            #[test]
            fn natural_numbers_are_read_as_serde_reads_them(text in "-?[0-9]{0,22}|[0-9.eE+-]{0,6}") {
                let by_serde = serde_json::from_str::<Value>(&text).ok().and_then(|value| value.as_u64());
                prop_assert_eq!(natural(&text), by_serde, "{}", text);
            }
        }
    }

    /// The byte scan reads a message exactly as serde does, or leaves it
    /// to serde: never another answer, whatever the members, their order,
    /// spacing, escapes, repeats and values (well-formed or not).
    mod scan_agrees_with_serde {
        use super::*;
        use proptest::prelude::*;

        const NAMES: [&str; 7] = ["jsonrpc", "id", "method", "params", "i\\u0064", "extra", "result"];
        const VALUES: [&[&str]; 7] = [
            &[r#""2.0""#, r#""1.0""#, "2.0", r#""2\u002e0""#, "null"],
            &[
                "1",
                "-0",
                "1e2",
                r#""a""#,
                r#""a\"b""#,
                "null",
                "{}",
                "[1]",
                "01",
                "1.",
                "tru",
                "123456789012345678901234567890",
                "0",
                "00",
                "-5",
                "18446744073709551615",
                "18446744073709551616",
            ],
            &[
                r#""m""#,
                r#""a\nb""#,
                r#""tools/call""#,
                "1",
                r#""é""#,
                r#""\u0074""#,
                r#""""#,
                "[]",
                "\"a\tb\"",
            ],
            &[
                "{}",
                r#"{"a":[1,{"b":"}"}]}"#,
                "[1,2]",
                "3",
                r#"{"a":}"#,
                r#"{"a":1"#,
                r#""x""#,
                r#"{"s":"\""}"#,
                "{\"n\":[[]]}",
            ],
            &["1", r#""x""#],
            &["null", "{}", r#""é""#],
            &["{}", "1"],
        ];
        const SPACE: [&str; 4] = ["", " ", "\n\t ", "\r"];
        const SEPARATORS: [&str; 4] = [",", ",", ",", " "];
        const ENDS: [&str; 5] = ["}", "}", "} ", "},", "}x"];

        fn message(members: &[(usize, usize, usize, usize)], end: usize) -> String {
            let mut text = String::from("{");
            for (n, (name, value, space, separator)) in members.iter().enumerate() {
                if n > 0 {
                    text.push_str(SEPARATORS[*separator % SEPARATORS.len()]);
                }
                let values = VALUES[*name % NAMES.len()];
                let space = SPACE[*space % SPACE.len()];
                text.push_str(&format!(
                    "{space}\"{}\"{space}:{space}{}{space}",
                    NAMES[*name % NAMES.len()],
                    values[*value % values.len()]
                ));
            }
            text.push_str(ENDS[end % ENDS.len()]);
            text
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(4000))]
            #[test]
            fn on_any_message(
                members in prop::collection::vec((0..7usize, 0..12usize, 0..4usize, 0..4usize), 0..6),
                end in 0..5usize,
            ) {
                let text = message(&members, end);
                let cache = ParamsCache::default();
                let scanned = Message::read(text.as_bytes(), Some(&cache));
                let by_serde = Message::read_by_serde(&text, None);
                prop_assert_eq!(format!("{scanned:?}"), format!("{by_serde:?}"), "{}", text);
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(2000))]
            /// Params read through the cache of params read before give what
            /// a plain read gives, the first time and the next, whatever
            /// params of other messages the cache holds: the params that end
            /// a message are found there without a look through them.
            #[test]
            fn the_params_cache_agrees_with_a_plain_read(
                members in prop::collection::vec((0..7usize, 0..12usize, 0..4usize, 0..4usize), 0..6),
                end in 0..5usize,
            ) {
                let text = message(&members, end);
                let plain = format!("{:?}", Message::from_slice(text.as_bytes()));
                let cache = ParamsCache::default();
                for params in VALUES[3] {
                    let other = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{params}}}"#);
                    let _ = Message::from_slice_cached(other.as_bytes(), &cache);
                }
                for _ in 0..2 {
                    let cached = Message::from_slice_cached(text.as_bytes(), &cache);
                    prop_assert_eq!(format!("{cached:?}"), plain.clone(), "{}", text);
                }
            }
        }

        /// A request or notification the byte scan reads, its members in any
        /// order: (where params go among the others, which params, spacing,
        /// whether an id follows them).
        fn scannable(params_at: usize, params: &str, space: &str, id_after: bool) -> String {
            let mut members = vec![r#""jsonrpc":"2.0""#.to_owned(), r#""method":"tools/call""#.to_owned()];
            members.insert(params_at % 3, format!(r#""params":{space}{params}"#));
            if id_after {
                members.push(r#""id":{}"#.to_owned());
            }
            format!("{{{space}{}{space}}}{space}", members.join(&format!(",{space}")))
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(1000))]
            /// Params that end a message are taken from the cache without a
            /// look through them: never other params than a plain read finds,
            /// whatever texts the cache holds and whatever follows them.
            #[test]
            fn params_found_at_the_end_are_the_params_read(
                params_at in 0..3usize,
                params in prop::sample::select(vec![
                    "{}", "[1,2]", r#"{"a":[1,{"b":"}"}]}"#, r#"{"s":"\""}"#, r#"{"x":"}"}"#, "[{}]", r#"{"a":1}"#,
                ]),
                space in prop::sample::select(vec!["", " ", "\n\t "]),
                id_after in proptest::bool::ANY,
            ) {
                let cache = ParamsCache::default();
                for known in ["{}", "[1,2]", r#"{"a":1}"#, "[{}]", r#"{"x":"}"}"#, r#"{"a":1},"id":{}"#] {
                    let other = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{known}}}"#);
                    let _ = Message::from_slice_cached(other.as_bytes(), &cache);
                }
                let text = scannable(params_at, params, space, id_after);
                let plain = format!("{:?}", Message::from_slice(text.as_bytes()));
                for _ in 0..2 {
                    let cached = Message::from_slice_cached(text.as_bytes(), &cache);
                    prop_assert_eq!(format!("{cached:?}"), plain.clone(), "{}", text);
                }
            }
        }

        #[test]
        fn on_the_usual_request() {
            let text =
                r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t","arguments":{"n":1}}}"#;
            assert!(scan(text, None).is_some(), "the usual request is scanned");
            assert_eq!(
                format!("{:?}", Message::from_slice(text.as_bytes())),
                format!("{:?}", Message::read_by_serde(text, None))
            );
        }
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
