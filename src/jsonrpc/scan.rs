//! The one hand-written JSON reader, in two uses. The byte scan of the
//! usual request beside serde ([`scan`], a speed piece: BENCHMARKS.md):
//! its members found in one pass, each value still read by serde, anything
//! unusual left to serde's own path. And JSON as its sender wrote it
//! ([`rewrite`], [`splice`], [`edit`]): serde_json reads `1e2`, `1.50`,
//! `-0`, `"caf\u00e9"` or a 30-digit integer into values it would write as
//! `100.0`, `1.5`, `0`, `"café"` and a float; the recorded server wrote the
//! first, and an agent framework hands an LLM the text, so a cassette keeps
//! and replay sends the first. Whoever changes a message (record's
//! placeholders and scrubbing, replay's era conversion) changes its parsed
//! value and rewrites the sender's text to say it: what the value still
//! holds keeps its bytes, only what changed is written by serde_json, in one
//! pass over the text.

use std::borrow::Cow;
use std::collections::HashSet;

use serde_json::{Map, Number, Value};

use super::{Message, Params, ParamsCache, RequestId, method_named, read_params};

/// The usual request or notification read by a byte scan, without serde's
/// machinery: an object of `jsonrpc` (exactly `"2.0"`), `method` (a string
/// without escapes), `params` (an object or array) and, for a request, an
/// `id`, each once, member names without escapes. `None` for anything else,
/// which serde then reads (and judges). Nothing is taken on the scan's
/// word: the id and params are read by serde (params unless the cache holds
/// their very text, read before), and whatever does not read is left to
/// serde's path too.
pub(super) fn scan<'a>(text: &'a str, cache: Option<&ParamsCache>) -> Option<Message> {
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
            let end = word_end(bytes, at);
            (end > at).then_some(end)
        }
    }
}

/// Just past the bare word (a number, `true`, `false`, `null`) that starts
/// at `at`: `at` itself when none does.
fn word_end(bytes: &[u8], mut at: usize) -> usize {
    while bytes.get(at).is_some_and(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'+' | b'.')) {
        at += 1;
    }
    at
}

/// `text` as JSON's natural number (`0`, or digits without a leading
/// zero) that fits a `u64`, as serde reads it; `None` for anything else.
pub(super) fn natural(text: &str) -> Option<u64> {
    let digits = text.as_bytes();
    if digits.is_empty() || digits.len() > 1 && digits[0] == b'0' {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &digit| {
        let digit = digit.checked_sub(b'0').filter(|d| *d <= 9)?;
        n.checked_mul(10)?.checked_add(u64::from(digit))
    })
}

/// `value` as compact JSON in the words of `text` (JSON that `value` was
/// read from, or a part of it): each part of `value` that `text` spells at
/// the same place is copied from `text`; parts `value` changed, added or
/// dropped are written, added or left out; white space between tokens
/// goes. Text that is not JSON gives serde_json's writing of `value`.
pub fn rewrite(text: &str, value: &Value) -> String {
    let mut out = String::with_capacity(text.len());
    let mut reader = TextReader { text: text.as_bytes(), at: 0 };
    let whole = reader.rewrite(value, &mut out).is_some() && {
        reader.skip_space();
        reader.at == text.len()
    };
    if whole {
        out
    } else {
        // A Value always serializes (its map keys are strings).
        serde_json::to_string(value).unwrap_or_default()
    }
}

/// `text`, a JSON object, with each top-level member `value` holds
/// written from its text as [`rewrite`] writes it, and each member it does
/// not hold kept as written: a message held as its text
/// ([`RecordedMessage::shallow`](crate::model::RecordedMessage::shallow)),
/// with its small members as record changed them. Members `value` holds
/// and the text does not are added; text that is not an object is
/// [`rewrite`]'s.
pub fn splice(text: &str, value: &Value) -> String {
    let Value::Object(map) = value else { return rewrite(text, value) };
    let mut out = String::with_capacity(text.len());
    let mut reader = TextReader { text: text.as_bytes(), at: 0 };
    reader.skip_space();
    let whole = reader.text.get(reader.at) == Some(&b'{')
        && reader.object(map, &mut out, Others::Kept).is_some()
        && {
            reader.skip_space();
            reader.at == text.len()
        };
    if whole { out } else { rewrite(text, value) }
}

/// What becomes of an object's members that the value does not hold.
#[derive(Clone, Copy)]
enum Others {
    /// Left out: the value dropped them ([`rewrite`]).
    Dropped,
    /// Kept as written: the value holds only some members ([`splice`]).
    Kept,
}

/// What [`edit`] changes in a message's text.
pub trait Edit {
    /// The new content of a string (`text`, unescaped; `key`: an object's
    /// key), or `None` to keep it as written.
    fn string(&self, text: &str, key: bool) -> Option<String>;

    /// What replaces the value of the member `key` (as [`Edit::string`]
    /// left it), if anything does: the text of a string.
    fn blank(&self, key: &str) -> Option<&str>;
}

/// `text`, JSON that serde_json reads, with `edit` applied to each string,
/// key and member at any depth, in one pass over the text and with no tree
/// of it: what a message too large to hold as one goes through. Written as
/// [`rewrite`] writes: compact, what `edit` left alone keeps its bytes
/// (a repeated key included), what it changed is written by serde_json.
/// `None` when `text` is not JSON.
pub fn edit(text: &str, edit: &impl Edit) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let mut reader = TextReader { text: text.as_bytes(), at: 0 };
    reader.edit(edit, &mut out)?;
    reader.skip_space();
    (reader.at == text.len()).then_some(out)
}

/// A string token's content, unescaped; `None` when it is not a string.
fn unescape(token: &str) -> Option<Cow<'_, str>> {
    let inner = token.strip_prefix('"')?.strip_suffix('"')?;
    if inner.contains('\\') {
        serde_json::from_str::<String>(token).ok().map(Cow::Owned)
    } else {
        Some(Cow::Borrowed(inner))
    }
}

/// The keys of an object already written, so that a key the text repeats
/// is written once.
enum Written<'v> {
    Few(Vec<&'v str>),
    Many(HashSet<&'v str>),
}

impl<'v> Written<'v> {
    /// Past this many members a set beats a search.
    const FEW: usize = 16;

    fn for_members(count: usize) -> Written<'v> {
        if count <= Self::FEW {
            Written::Few(Vec::with_capacity(count))
        } else {
            Written::Many(HashSet::new())
        }
    }

    /// Notes `key`; false when it was noted before.
    fn note(&mut self, key: &'v str) -> bool {
        match self {
            Written::Few(keys) if keys.contains(&key) => false,
            Written::Few(keys) => {
                keys.push(key);
                true
            }
            Written::Many(keys) => keys.insert(key),
        }
    }

    fn has(&self, key: &str) -> bool {
        match self {
            Written::Few(keys) => keys.contains(&key),
            Written::Many(keys) => keys.contains(key),
        }
    }

    fn len(&self) -> usize {
        match self {
            Written::Few(keys) => keys.len(),
            Written::Many(keys) => keys.len(),
        }
    }
}

/// A reader of JSON text that copies what still holds and steps over the rest.
struct TextReader<'t> {
    text: &'t [u8],
    at: usize,
}

impl<'t> TextReader<'t> {
    fn skip_space(&mut self) {
        self.at = skip_space(self.text, self.at);
    }

    fn expect(&mut self, byte: u8) -> Option<()> {
        (self.text.get(self.at) == Some(&byte)).then(|| self.at += 1)
    }

    /// Just inside an opening bracket: true at its `close` (stepped over).
    fn empty(&mut self, close: u8) -> bool {
        self.skip_space();
        self.expect(close).is_some()
    }

    /// After a member or item: true at the closing
    /// `close` (stepped over), false at a comma (stepped over).
    fn ends(&mut self, close: u8) -> Option<bool> {
        self.skip_space();
        match *self.text.get(self.at)? {
            b',' => {
                self.at += 1;
                Some(false)
            }
            b if b == close => {
                self.at += 1;
                Some(true)
            }
            _ => None,
        }
    }

    /// The text of `start..self.at` (token bounds are ASCII, so always whole characters).
    fn since(&self, start: usize) -> Option<&'t str> {
        std::str::from_utf8(&self.text[start..self.at]).ok()
    }

    /// A string token, quotes included.
    fn string_token(&mut self) -> Option<&'t str> {
        let start = self.at;
        self.at = string_end(self.text, self.at)?;
        self.since(start)
    }

    /// An object member's key token (quotes included), the colon after it
    /// stepped over.
    fn member_key(&mut self) -> Option<&'t str> {
        self.skip_space();
        let token = self.string_token()?;
        self.skip_space();
        self.expect(b':')?;
        Some(token)
    }

    /// A number token (or a word: `true`, `false`, `null`).
    fn bare_token(&mut self) -> Option<&'t str> {
        let start = self.at;
        self.at = word_end(self.text, start);
        (self.at > start).then(|| self.since(start))?
    }

    /// Steps over one value, however deep, without a stack.
    fn skip_value(&mut self) -> Option<()> {
        self.skip_space();
        self.at = value_end(self.text, self.at)?;
        Some(())
    }

    /// Writes the value here into `out` as [`edit`] has it.
    fn edit(&mut self, edit: &impl Edit, out: &mut String) -> Option<()> {
        self.skip_space();
        match *self.text.get(self.at)? {
            b'{' => {
                self.at += 1;
                out.push('{');
                let mut first = true;
                if !self.empty(b'}') {
                    loop {
                        let token = self.member_key()?;
                        if !first {
                            out.push(',');
                        }
                        first = false;
                        let key = match edit.string(&unescape(token)?, true) {
                            Some(key) => {
                                write_string(&key, out);
                                Cow::Owned(key)
                            }
                            None => {
                                out.push_str(token);
                                unescape(token)?
                            }
                        };
                        out.push(':');
                        match edit.blank(&key) {
                            Some(with) => {
                                self.skip_value()?;
                                write_string(with, out);
                            }
                            None => self.edit(edit, out)?,
                        }
                        if self.ends(b'}')? {
                            break;
                        }
                    }
                }
                out.push('}');
            }
            b'[' => {
                self.at += 1;
                out.push('[');
                let mut first = true;
                if !self.empty(b']') {
                    loop {
                        if !first {
                            out.push(',');
                        }
                        first = false;
                        self.edit(edit, out)?;
                        if self.ends(b']')? {
                            break;
                        }
                    }
                }
                out.push(']');
            }
            b'"' => {
                let token = self.string_token()?;
                match edit.string(&unescape(token)?, false) {
                    Some(text) => write_string(&text, out),
                    None => out.push_str(token),
                }
            }
            _ => out.push_str(self.bare_token()?),
        }
        Some(())
    }

    /// Writes `now` into `out` in the words of the value the text holds here.
    fn rewrite(&mut self, now: &Value, out: &mut String) -> Option<()> {
        self.skip_space();
        match (*self.text.get(self.at)?, now) {
            (b'{', Value::Object(map)) => self.object(map, out, Others::Dropped),
            (b'[', Value::Array(items)) => self.array(items, out),
            (b'"', Value::String(string)) => {
                let token = self.string_token()?;
                match unescape(token)? == string.as_str() {
                    true => out.push_str(token),
                    false => write(now, out),
                }
                Some(())
            }
            (b'-' | b'0'..=b'9', Value::Number(number)) => {
                let token = self.bare_token()?;
                match serde_json::from_str::<Number>(token).ok().as_ref() == Some(number) {
                    true => out.push_str(token),
                    false => write(now, out),
                }
                Some(())
            }
            _ => {
                self.skip_value()?;
                write(now, out);
                Some(())
            }
        }
    }

    /// Writes `map` into `out` in the words of the object the text holds
    /// here; what becomes of the text's members `map` does not hold:
    /// `others`.
    fn object(&mut self, map: &Map<String, Value>, out: &mut String, others: Others) -> Option<()> {
        self.at += 1;
        out.push('{');
        let mut written = Written::for_members(map.len());
        let mut first = true;
        let mut comma = |out: &mut String| {
            if !std::mem::take(&mut first) {
                out.push(',');
            }
        };
        if !self.empty(b'}') {
            loop {
                let token = self.member_key()?;
                match (map.get_key_value(unescape(token)?.as_ref()), others) {
                    (Some((key, value)), _) if written.note(key) => {
                        comma(out);
                        out.push_str(token);
                        out.push(':');
                        self.rewrite(value, out)?;
                    }
                    (None, Others::Kept) => {
                        comma(out);
                        out.push_str(token);
                        out.push(':');
                        self.skip_space();
                        let start = self.at;
                        self.skip_value()?;
                        out.push_str(self.since(start)?);
                    }
                    _ => self.skip_value()?,
                }
                if self.ends(b'}')? {
                    break;
                }
            }
        }
        if written.len() < map.len() {
            for (key, value) in map.iter().filter(|(key, _)| !written.has(key)) {
                comma(out);
                write_string(key, out);
                out.push(':');
                write(value, out);
            }
        }
        out.push('}');
        Some(())
    }

    fn array(&mut self, items: &[Value], out: &mut String) -> Option<()> {
        self.at += 1;
        out.push('[');
        let mut read = 0;
        if !self.empty(b']') {
            loop {
                match items.get(read) {
                    Some(item) => {
                        if read > 0 {
                            out.push(',');
                        }
                        self.rewrite(item, out)?;
                    }
                    None => self.skip_value()?,
                }
                read += 1;
                if self.ends(b']')? {
                    break;
                }
            }
        }
        for (index, item) in items.iter().enumerate().skip(read) {
            if index > 0 {
                out.push(',');
            }
            write(item, out);
        }
        out.push(']');
        Some(())
    }
}

/// serde_json's compact writing of `value`.
fn write_string(text: &str, out: &mut String) {
    // A string always serializes.
    out.push_str(&serde_json::to_string(text).unwrap_or_default());
}

fn write(value: &Value, out: &mut String) {
    // A Value always serializes (its map keys are strings).
    out.push_str(&serde_json::to_string(value).unwrap_or_default());
}

#[cfg(test)]
mod tests;
