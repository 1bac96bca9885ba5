//! The byte scan of the usual request beside serde (a speed piece:
//! BENCHMARKS.md): the members of a request or notification found in one
//! pass over its bytes, each value still read by serde, and anything
//! unusual left to serde's own path.

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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

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
}
