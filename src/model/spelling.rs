//! Numbers as their sender spelled them. serde_json reads `1e2`, `1.50`,
//! `-0` or `1E+21` into a number it then writes as `100.0`, `1.5`, `0` or
//! `1e21`; the recorded server wrote the first, so replay must send the
//! first. [`Spellings::of`] finds, in a message's text, each number whose
//! spelling serde_json would not give back, by its place; [`as_sent`]
//! writes a value compactly in its own member order with those numbers as
//! they were spelled (when the value still holds the same number there:
//! normalization replaces ids and progress tokens with placeholders and
//! scrubs secrets, and never writes a number). Most messages have none, and
//! then nothing is kept and writing is serde_json's.

use std::collections::HashMap;

use serde_json::{Number, Value};

/// One hop from a JSON value to a member or item of it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Hop {
    Key(Box<str>),
    Index(usize),
}

/// The numbers of one message whose sender spelled them otherwise than
/// serde_json writes them: each one's place and its text.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Spellings(Vec<(Box<[Hop]>, Box<str>)>);

impl Spellings {
    /// The numbers of the JSON `text` spelled otherwise than serde_json
    /// writes them; none for text that is not JSON.
    pub fn of(text: &str) -> Spellings {
        let mut found = Vec::new();
        let mut scan = Scan { text: text.as_bytes(), at: 0, path: Vec::new(), found: &mut found };
        if scan.value().is_none() {
            found.clear();
        }
        Spellings(found)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Those under `prefix`, with their places from there.
    pub fn under(&self, prefix: &[Hop]) -> Spellings {
        Spellings(
            self.0
                .iter()
                .filter_map(|(place, text)| Some((place.strip_prefix(prefix)?.into(), text.clone())))
                .collect(),
        )
    }

    /// Adds `inner`'s, which are from `prefix` on.
    pub fn add_under(&mut self, prefix: &[Hop], inner: &Spellings) {
        for (place, text) in &inner.0 {
            self.0.push((prefix.iter().chain(place.iter()).cloned().collect(), text.clone()));
        }
    }
}

/// The spellings of one message by place, looked up once per number written.
type ByPlace<'a> = HashMap<&'a [Hop], &'a str>;

/// `value` as compact JSON text in its own member order, each number
/// `spellings` names (and `value` still holds) as its sender spelled it.
pub fn as_sent(value: &Value, spellings: &Spellings) -> String {
    if spellings.is_empty() {
        // A Value always serializes (its map keys are strings).
        return serde_json::to_string(value).unwrap_or_default();
    }
    let by_place: ByPlace<'_> = spellings.0.iter().map(|(place, text)| (&**place, &**text)).collect();
    let mut out = String::new();
    write(value, &by_place, &mut Vec::new(), &mut out);
    out
}

/// The spelling at `place`, if there is one and it spells `number`.
fn spelled_at<'a>(by_place: &ByPlace<'a>, place: &[Hop], number: &Number) -> Option<&'a str> {
    let text = *by_place.get(place)?;
    let spelled: Number = serde_json::from_str(text).ok()?;
    (spelled == *number).then_some(text)
}

fn write(value: &Value, by_place: &ByPlace<'_>, path: &mut Vec<Hop>, out: &mut String) {
    match value {
        Value::Number(number) => match spelled_at(by_place, path, number) {
            Some(spelled) => out.push_str(spelled),
            None => out.push_str(&number.to_string()),
        },
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                path.push(Hop::Index(index));
                write(item, by_place, path, out);
                path.pop();
            }
            out.push(']');
        }
        Value::Object(members) => {
            out.push('{');
            for (index, (key, member)) in members.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                path.push(Hop::Key(key.as_str().into()));
                write(member, by_place, path, out);
                path.pop();
            }
            out.push('}');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// A reader of JSON text that notes each number serde_json would spell
/// otherwise; `None` where the text is not JSON.
struct Scan<'a, 'f> {
    text: &'a [u8],
    at: usize,
    path: Vec<Hop>,
    found: &'f mut Vec<(Box<[Hop]>, Box<str>)>,
}

impl Scan<'_, '_> {
    fn skip_space(&mut self) {
        while self.text.get(self.at).is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn value(&mut self) -> Option<()> {
        self.skip_space();
        match *self.text.get(self.at)? {
            b'{' => self.object(),
            b'[' => self.array(),
            b'"' => self.string().map(drop),
            b'-' | b'0'..=b'9' => self.number(),
            _ => self.word(),
        }
    }

    fn object(&mut self) -> Option<()> {
        self.at += 1;
        self.skip_space();
        if self.text.get(self.at) == Some(&b'}') {
            self.at += 1;
            return Some(());
        }
        loop {
            self.skip_space();
            let key = self.string()?;
            let key: String = serde_json::from_slice(key).ok()?;
            self.skip_space();
            (self.text.get(self.at) == Some(&b':')).then_some(())?;
            self.at += 1;
            self.path.push(Hop::Key(key.into()));
            self.value()?;
            self.path.pop();
            self.skip_space();
            match self.text.get(self.at)? {
                b',' => self.at += 1,
                b'}' => {
                    self.at += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    fn array(&mut self) -> Option<()> {
        self.at += 1;
        self.skip_space();
        if self.text.get(self.at) == Some(&b']') {
            self.at += 1;
            return Some(());
        }
        let mut index = 0;
        loop {
            self.path.push(Hop::Index(index));
            self.value()?;
            self.path.pop();
            index += 1;
            self.skip_space();
            match self.text.get(self.at)? {
                b',' => self.at += 1,
                b']' => {
                    self.at += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// A string token, quotes included.
    fn string(&mut self) -> Option<&[u8]> {
        let start = self.at;
        (self.text.get(self.at) == Some(&b'"')).then_some(())?;
        self.at += 1;
        loop {
            match *self.text.get(self.at)? {
                b'"' => break,
                b'\\' => self.at += 2,
                _ => self.at += 1,
            }
        }
        self.at += 1;
        Some(&self.text[start..self.at])
    }

    fn number(&mut self) -> Option<()> {
        let start = self.at;
        while self
            .text
            .get(self.at)
            .is_some_and(|b| matches!(b, b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9'))
        {
            self.at += 1;
        }
        let spelled = std::str::from_utf8(&self.text[start..self.at]).ok()?;
        let number: Number = serde_json::from_str(spelled).ok()?;
        if number.to_string() != spelled {
            self.found.push((self.path.clone().into(), spelled.into()));
        }
        Some(())
    }

    fn word(&mut self) -> Option<()> {
        let rest = &self.text[self.at..];
        let length = [&b"true"[..], b"false", b"null"].into_iter().find(|word| rest.starts_with(word))?.len();
        self.at += length;
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    #[test]
    fn numbers_keep_their_spelling_where_the_value_still_holds_them() {
        let sent =
            r#"{"id":7,"result":{"n":1e2,"f":1.50,"z":-0,"big":12345678901234567890123,"k":[1E+21,2.0,3]}}"#;
        let spellings = Spellings::of(sent);
        let value: Value = serde_json::from_str(sent).unwrap();
        assert_eq!(as_sent(&value, &spellings), sent);
        // serde_json alone respells them.
        assert_ne!(serde_json::to_string(&value).unwrap(), sent);
        // A number normalization replaced is written as it now is.
        let mut changed = value.clone();
        changed["result"]["n"] = json!("{{placeholder}}");
        changed["id"] = json!(8);
        let written = as_sent(&changed, &spellings);
        assert!(written.starts_with(r#"{"id":8,"result":{"n":"{{placeholder}}","f":1.50,"#), "{written}");
    }

    #[test]
    fn most_messages_keep_nothing() {
        let sent = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"1e2 \" \\"}],"x":1.5,"y":-3}}"#;
        assert!(Spellings::of(sent).is_empty());
        assert!(Spellings::of("not json 1e2").is_empty());
    }

    #[test]
    fn places_are_read_through_spaces_escapes_and_nesting() {
        let sent = "{ \"a\\\"b\" : [ 1 , { \"c\" : 1.0e0 } ] , \"d\":[[ ],{}, 5E1 ] }";
        let spellings = Spellings::of(sent);
        let value: Value = serde_json::from_str(sent).unwrap();
        assert_eq!(as_sent(&value, &spellings), r#"{"a\"b":[1,{"c":1.0e0}],"d":[[],{},5E1]}"#);
        let under = spellings.under(&[Hop::Key("d".into())]);
        assert_eq!(as_sent(&value["d"], &under), "[[],{},5E1]");
    }

    /// A number as a sender may spell it: sign, digits, a fraction with
    /// trailing zeros, an exponent in either case with or without a sign.
    fn spelled_number() -> impl Strategy<Value = String> {
        ("-?", "[1-9][0-9]{0,8}|0", prop::option::of("[0-9]{1,4}"), prop::option::of("[eE][+-]?[0-9]{1,2}"))
            .prop_map(|(sign, whole, fraction, exponent)| {
                let fraction = fraction.map(|f| format!(".{f}")).unwrap_or_default();
                format!("{sign}{whole}{fraction}{}", exponent.unwrap_or_default())
            })
    }

    proptest! {
        /// Whatever the spelling, the written text reads back as the same
        /// value, and spells each number as it was sent.
        #[test]
        fn as_sent_gives_back_the_senders_text(numbers in prop::collection::vec(spelled_number(), 1..8)) {
            let sent = format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"values\":[{}],\"first\":{}}}}}",
                numbers.join(","),
                numbers[0]
            );
            let value: Value = serde_json::from_str(&sent).unwrap();
            let written = as_sent(&value, &Spellings::of(&sent));
            prop_assert_eq!(&written, &sent);
            let back: Value = serde_json::from_str(&written).unwrap();
            prop_assert_eq!(back, value);
        }
    }
}
