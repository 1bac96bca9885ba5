//! The byte scan and the writing of JSON as its sender wrote it, each
//! against what it stands for.

mod scanning {
    use crate::jsonrpc::scan::*;
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

mod written {
    use proptest::prelude::*;
    use serde_json::json;

    use crate::jsonrpc::scan::*;

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
