//! A message from the upstream as the engine is shown it: parsed, with the
//! text it came as ([`AsWritten`]), and when it arrived ([`Arrived`]).

use std::time::{SystemTime, UNIX_EPOCH};

use std::collections::BTreeMap;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::limits::MAX_TREE_MESSAGE_BYTES;
use crate::model::Text;

/// One message as its sender wrote it: parsed, and the text it came as,
/// which the cassette keeps ([`scan::rewrite`](crate::jsonrpc::scan::rewrite)).
pub struct AsWritten {
    pub body: Value,
    pub written: Option<Text>,
    /// `body` holds only the message's small top-level members: it is
    /// larger than [`MAX_TREE_MESSAGE_BYTES`], and its text is the message.
    pub shallow: bool,
}

/// The most bytes a top-level member of a message held as text has and is
/// still read into its `body`.
const SHALLOW_MEMBER_BYTES: usize = 64 * 1024;

impl AsWritten {
    /// The JSON message `text`; `None` when it is not JSON serde_json
    /// reads (a lone surrogate, a number past f64, nesting past 128). Past
    /// [`MAX_TREE_MESSAGE_BYTES`], read without a tree of it: checked
    /// whole, its small top-level members read.
    pub fn read(text: &str) -> Option<AsWritten> {
        if text.len() <= MAX_TREE_MESSAGE_BYTES {
            let body = serde_json::from_str(text).ok()?;
            return Some(AsWritten { body, written: Some(text.into()), shallow: false });
        }
        AsWritten::read_shallow(text, SHALLOW_MEMBER_BYTES)
    }

    /// The JSON message `text` held as its text, its top-level members of
    /// at most `member_bytes` read; `None` when it is not a JSON object
    /// serde_json reads.
    fn read_shallow(text: &str, member_bytes: usize) -> Option<AsWritten> {
        serde_json::from_str::<Checked>(text).ok()?;
        let members = serde_json::from_str::<BTreeMap<String, &RawValue>>(text).ok()?;
        let small = members
            .into_iter()
            .filter(|(_, value)| value.get().len() <= member_bytes)
            .map(|(key, value)| Some((key, serde_json::from_str(value.get()).ok()?)))
            .collect::<Option<Map<String, Value>>>()?;
        Some(AsWritten { body: Value::Object(small), written: Some(text.into()), shallow: true })
    }
}

impl From<Value> for AsWritten {
    /// A message built here, from no sender's text.
    fn from(body: Value) -> AsWritten {
        AsWritten { body, written: None, shallow: false }
    }
}

/// JSON read as serde_json reads it into a tree (every string decoded,
/// every number converted), and nothing kept.
struct Checked;

impl<'de> Deserialize<'de> for Checked {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Checked, D::Error> {
        deserializer.deserialize_any(Checked)
    }
}

impl<'de> Visitor<'de> for Checked {
    type Value = Checked;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("JSON")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_str<E>(self, _: &str) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_unit<E>(self) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<Checked, A::Error> {
        while items.next_element::<Checked>()?.is_some() {}
        Ok(Checked)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut members: A) -> Result<Checked, A::Error> {
        while members.next_entry::<Checked, Checked>()?.is_some() {}
        Ok(Checked)
    }
}

/// When a message from the upstream arrived: the system clock's
/// nanoseconds when the kernel received its last byte, where the front
/// door can tell (so two connections' messages are ordered as they came,
/// not as they were read), else when the engine was shown it.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub struct Arrived(u64);

impl Arrived {
    /// At `nanos` past the epoch of the system clock.
    pub fn at(nanos: u64) -> Arrived {
        Arrived(nanos)
    }

    /// Nanoseconds past the epoch of the system clock.
    pub fn nanos(self) -> u64 {
        self.0
    }

    pub fn now() -> Arrived {
        let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        Arrived(u64::try_from(since.as_nanos()).unwrap_or(u64::MAX))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;
    use crate::model::{Direction, Era, RawExchange, RecordedMessage, Status, StreamShape};
    use crate::normalize::{Normalization, Rules};

    const SECRET: &str = "sekr3t-token-value-9876";

    /// A JSON value as a sender may write it: keys sensitive or not,
    /// strings holding the request's secret or a secret's shape, numbers
    /// spelled many ways, space between tokens.
    fn spelled() -> impl Strategy<Value = String> {
        let leaf = prop_oneof![
            "-?(0|[1-9][0-9]{0,25})(\\.[0-9]{1,3})?([eE][+-]?[0-9]{1,2})?".prop_map(String::from),
            Just("true".to_owned()),
            Just("null".to_owned()),
            prop::collection::vec(
                prop_oneof![
                    "[a-z ]{1,4}".prop_map(String::from),
                    Just(SECRET.to_owned()),
                    Just("ghp_0123456789abcdefghijABCDEFGHIJ012345".to_owned()),
                    Just(r"\u00e9".to_owned()),
                    Just(r#"\""#.to_owned()),
                ],
                0..4,
            )
            .prop_map(|parts| format!("\"{}\"", parts.concat())),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6)
                    .prop_map(|items| format!("[{}]", items.join(", "))),
                prop::collection::btree_map(
                    prop_oneof![
                        Just("text"),
                        Just("api_key"),
                        Just("password"),
                        Just("name"),
                        Just("n\\u0061me2")
                    ],
                    inner,
                    0..5,
                )
                .prop_map(|members| {
                    let members: Vec<String> =
                        members.into_iter().map(|(key, value)| format!("\"{key}\" : {value}")).collect();
                    format!("{{ {} }}", members.join(","))
                }),
            ]
        })
    }

    /// `message` as the cassette stores it: scrubbed of `SECRET`, redacted,
    /// its id the placeholder.
    fn stored(rules: &Rules, message: AsWritten) -> String {
        let AsWritten { body, written, shallow } = message;
        let mut raw = RawExchange {
            server: "s".into(),
            era: Era::Handshake,
            protocol_version: "2025-06-18".into(),
            request: json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "t"}}),
            status: Status::OK,
            content_type: "application/json".into(),
            messages: vec![RecordedMessage {
                offset_ms: 0,
                direction: Direction::Server,
                body,
                written,
                shallow,
            }],
            asides: Vec::new(),
            stream: StreamShape::default(),
        };
        crate::redact::scrub_exchange(&mut raw, &[SECRET.to_owned()]);
        rules.exchange(raw).messages[0].as_sent()
    }

    proptest! {
        /// A message held as its text is stored as the same message read
        /// into a tree is: the same bytes.
        #[test]
        fn held_as_text_or_as_a_tree_a_message_is_stored_alike(result in spelled(), other in spelled()) {
            let text = format!("{{\"jsonrpc\":\"2.0\", \"id\" : 7,\"result\":{result},\"other\":{other}}}");
            let normalization = Normalization { redact_patterns: vec!["builtin".into()], ..Normalization::default() };
            let rules = Rules::new(&normalization).unwrap();
            let tree = AsWritten::read(&text).unwrap();
            prop_assert!(!tree.shallow);
            let shallow = AsWritten::read_shallow(&text, 8).unwrap();
            prop_assert!(shallow.shallow);
            let stored_from_tree = stored(&rules, tree);
            prop_assert_eq!(&stored(&rules, shallow), &stored_from_tree);
            prop_assert!(!stored_from_tree.contains(SECRET));
        }
    }

    #[test]
    fn what_serde_json_does_not_read_is_not_read_held_as_text_either() {
        for text in [r#"{"id":1,"result":"\ud83d"}"#, r#"{"id":1,"result":1e999}"#, r#"{"id":1,"result":[}"#]
        {
            assert!(AsWritten::read_shallow(text, 8).is_none(), "{text}");
        }
        let deep = format!(r#"{{"id":1,"result":{}{}}}"#, "[".repeat(200), "]".repeat(200));
        assert!(AsWritten::read_shallow(&deep, 8).is_none());
    }
}
