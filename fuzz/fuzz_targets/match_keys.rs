//! Normalization: canonical JSON, match keys, redaction and field diffs on
//! any JSON. The key does not depend on member order or `_meta`, and a
//! value diffs empty against itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_tape::model::canonical_json;
use mcp_tape::normalize::Normalization;
use mcp_tape::normalize::{Rules, differences};
use serde_json::Value;

/// The rules, made once (their secret shapes are compiled expressions).
fn rules() -> &'static Rules {
    static RULES: std::sync::OnceLock<Rules> = std::sync::OnceLock::new();
    RULES.get_or_init(|| {
        let normalization = Normalization {
            redact_keys: vec!["apiKey".to_owned()],
            ignore_params: vec!["/arguments/requestId".to_owned()],
            redact_patterns: vec!["builtin".to_owned()],
            ..Normalization::default()
        };
        Rules::new(&normalization).expect("the built-in shapes compile")
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(params) = serde_json::from_slice::<Value>(data) else { return };
    let rules = rules();
    let key = rules.match_key("mcp_Fuzz", "tools/call", Some(&params));
    // The same params read back from their canonical text give the same key.
    let again: Value = serde_json::from_str(&canonical_json(&params)).unwrap();
    assert_eq!(rules.match_key("mcp_Fuzz", "tools/call", Some(&again)), key);
    // `_meta` is not part of it.
    if let Value::Object(mut object) = params.clone() {
        object.insert("_meta".into(), serde_json::json!({"progressToken": 7}));
        assert_eq!(rules.match_key("mcp_Fuzz", "tools/call", Some(&Value::Object(object))), key);
    }
    let mut redacted = params.clone();
    rules.redact(&mut redacted);
    assert!(differences(&redacted, &redacted).is_empty());
    let _ = differences(&params, &redacted);
    let _ = mcp_tape::cassette::template::render(&String::from_utf8_lossy(data), Some(&params));
});
