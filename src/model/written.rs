//! JSON as its sender wrote it. serde_json reads `1e2`, `1.50`, `-0`,
//! `"caf\u00e9"` or a 30-digit integer into values it would write as
//! `100.0`, `1.5`, `0`, `"café"` and a float; the recorded server wrote
//! the first, and an agent framework hands a model the text, so a cassette
//! keeps and replay sends the first. Whoever must change a message (record
//! puts placeholders in and scrubs secrets, replay converts between eras)
//! changes its parsed value and then [`rewrite`]s the sender's text to say
//! that value: every member, item and scalar the value still holds keeps
//! its bytes, and only what changed is written by serde_json. No place is
//! remembered beside the text; one pass over it does the work, so the cost
//! is linear in its size.

use std::borrow::Cow;
use std::collections::HashSet;

use serde_json::{Map, Number, Value};

/// `value` as compact JSON in the words of `text` (JSON that `value` was
/// read from, or a part of it): each part of `value` that `text` spells at
/// the same place is copied from `text`; parts `value` changed, added or
/// dropped are written, added or left out; white space between tokens
/// goes. Text that is not JSON gives serde_json's writing of `value`.
pub fn rewrite(text: &str, value: &Value) -> String {
    let mut out = String::with_capacity(text.len());
    let mut reader = Reader { text: text.as_bytes(), at: 0 };
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
    let mut reader = Reader { text: text.as_bytes(), at: 0 };
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
    let mut reader = Reader { text: text.as_bytes(), at: 0 };
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
struct Reader<'t> {
    text: &'t [u8],
    at: usize,
}

impl<'t> Reader<'t> {
    fn skip_space(&mut self) {
        while self.text.get(self.at).is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
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
        self.expect(b'"')?;
        loop {
            let rest = self.text.get(self.at..)?;
            let stop = memchr::memchr2(b'"', b'\\', rest)?;
            self.at += stop;
            if self.text[self.at] == b'"' {
                self.at += 1;
                return self.since(start);
            }
            self.at += 2;
        }
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
        while self
            .text
            .get(self.at)
            .is_some_and(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'+' | b'.'))
        {
            self.at += 1;
        }
        (self.at > start).then(|| self.since(start))?
    }

    /// Steps over one value, however deep, without a stack.
    fn skip_value(&mut self) -> Option<()> {
        let mut depth = 0usize;
        loop {
            self.skip_space();
            match *self.text.get(self.at)? {
                b'{' | b'[' => {
                    depth += 1;
                    self.at += 1;
                    continue;
                }
                b'}' | b']' => {
                    depth = depth.checked_sub(1)?;
                    self.at += 1;
                }
                b'"' => {
                    self.string_token()?;
                }
                b',' | b':' if depth > 0 => {
                    self.at += 1;
                    continue;
                }
                _ => {
                    self.bare_token()?;
                }
            }
            if depth == 0 {
                return Some(());
            }
        }
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
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    const SENT: &str = r#"{"jsonrpc":"2.0","id":7,"result":{"structuredContent":{"zeta":"w","price":1.50,"total":1e2,"tiny":1E-7,"neg0":-0,"big":123456789012345678901234567890,"esc":"caf\u00e9"}}}"#;

    #[test]
    fn what_still_holds_keeps_its_bytes() {
        let value: Value = serde_json::from_str(SENT).unwrap();
        assert_eq!(rewrite(SENT, &value), SENT);
        // serde_json alone says it otherwise, and the big integer is another number.
        let respelled = serde_json::to_string(&value).unwrap();
        assert!(respelled.contains("1.2345678901234568e+29") && respelled.contains("café"), "{respelled}");
    }

    #[test]
    fn only_what_changed_is_written_anew() {
        let mut value: Value = serde_json::from_str(SENT).unwrap();
        value["id"] = json!("mcp-tape:request-id");
        value["result"]["structuredContent"]["zeta"] = json!(1.50);
        value["result"].as_object_mut().unwrap().insert("resultType".into(), json!("complete"));
        value["result"]["structuredContent"].as_object_mut().unwrap().shift_remove("tiny");
        let written = rewrite(SENT, &value);
        assert_eq!(
            written,
            r#"{"jsonrpc":"2.0","id":"mcp-tape:request-id","result":{"structuredContent":{"zeta":1.5,"price":1.50,"total":1e2,"neg0":-0,"big":123456789012345678901234567890,"esc":"caf\u00e9"},"resultType":"complete"}}"#
        );
        assert_eq!(serde_json::from_str::<Value>(&written).unwrap(), value);
    }

    #[test]
    fn space_goes_arrays_grow_and_shrink_and_repeated_keys_are_written_once() {
        let text = "{ \"a\" : [ 1.0 , 2 , 3 ] , \"b\" : { } , \"a\" : [1.0,2,3] }";
        let mut value: Value = serde_json::from_str(text).unwrap();
        assert_eq!(rewrite(text, &value), r#"{"a":[1.0,2,3],"b":{}}"#);
        value["a"].as_array_mut().unwrap().push(json!(4));
        value["b"]["c"] = json!(null);
        assert_eq!(rewrite(text, &value), r#"{"a":[1.0,2,3,4],"b":{"c":null}}"#);
        value["a"].as_array_mut().unwrap().truncate(1);
        assert_eq!(rewrite(text, &value), r#"{"a":[1.0],"b":{"c":null}}"#);
        assert_eq!(rewrite("not json", &json!({"x": 1})), r#"{"x":1}"#);
        assert_eq!(rewrite("[1] [2]", &json!([1])), "[1]", "trailing text is not JSON");
    }

    /// A number as a sender may spell it: sign, digits, a fraction with
    /// trailing zeros, an exponent in either case with or without a sign.
    fn spelled_number() -> impl Strategy<Value = String> {
        ("-?", "[1-9][0-9]{0,30}|0", prop::option::of("[0-9]{1,4}"), prop::option::of("[eE][+-]?[0-9]{1,2}"))
            .prop_map(|(sign, whole, fraction, exponent)| {
                let fraction = fraction.map(|f| format!(".{f}")).unwrap_or_default();
                format!("{sign}{whole}{fraction}{}", exponent.unwrap_or_default())
            })
    }

    /// A string as a sender may escape it.
    fn spelled_string() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop_oneof![
                "[a-z ]{1,3}".prop_map(String::from),
                Just(r"\u00e9".to_owned()),
                Just(r"\/".to_owned()),
                Just(r#"\""#.to_owned()),
                Just("é".to_owned()),
            ],
            0..5,
        )
        .prop_map(|parts| format!("\"{}\"", parts.concat()))
    }

    proptest! {
        /// Whatever the spelling, the text comes back byte for byte, and
        /// one member changed changes only that member.
        #[test]
        fn the_senders_text_comes_back(
            numbers in prop::collection::vec(spelled_number(), 1..6),
            strings in prop::collection::vec(spelled_string(), 1..6),
        ) {
            let sent = format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"values\":[{}],\"texts\":[{}],\"first\":{}}}}}",
                numbers.join(","),
                strings.join(","),
                numbers[0]
            );
            let mut value: Value = serde_json::from_str(&sent).unwrap();
            prop_assert_eq!(rewrite(&sent, &value), sent.clone());
            value["id"] = json!("placeholder");
            let written = rewrite(&sent, &value);
            prop_assert_eq!(written.replacen("\"placeholder\"", "1", 1), sent);
            prop_assert_eq!(serde_json::from_str::<Value>(&written).unwrap(), value);
        }
    }
}
