//! What never reaches a cassette, for the parts of it that live in JSON
//! bodies: values under sensitive keys become `"[REDACTED]"`. Record and
//! replay apply the same rules before the match key is computed, so a
//! redacted recording still matches the live request it came from.

use serde_json::Value;

/// What a redacted value is replaced with.
pub const REDACTED: &str = "[REDACTED]";

/// Key endings that mark a value as a credential, compared on the key's
/// lowercase alphanumerics (`api_key`, `X-Api-Key` and `apiKey` all end in
/// `apikey`).
const SENSITIVE_ENDINGS: [&str; 7] =
    ["token", "secret", "password", "passwd", "apikey", "authorization", "cookie"];

/// Keys that end like a credential but are protocol fields replay needs.
const PROTOCOL_KEYS: [&str; 1] = ["progresstoken"];

/// Decides which JSON object keys are sensitive and blanks their values.
#[derive(Clone, Debug, Default)]
pub struct Redactor {
    /// User-given keys (`--redact-key`), folded like the built-in endings;
    /// these match whole keys, not endings.
    extra: Vec<String>,
}

impl Redactor {
    pub fn new(extra_keys: &[String]) -> Redactor {
        Redactor { extra: extra_keys.iter().map(|k| fold(k)).collect() }
    }

    pub fn is_sensitive(&self, key: &str) -> bool {
        let folded = fold(key);
        if PROTOCOL_KEYS.contains(&folded.as_str()) {
            return false;
        }
        SENSITIVE_ENDINGS.iter().any(|ending| folded.ends_with(ending)) || self.extra.contains(&folded)
    }

    /// Replaces, at any depth, every value under a sensitive key.
    pub fn redact(&self, value: &mut Value) {
        match value {
            Value::Object(map) => {
                for (key, inner) in map.iter_mut() {
                    if self.is_sensitive(key) {
                        *inner = Value::String(REDACTED.into());
                    } else {
                        self.redact(inner);
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|item| self.redact(item)),
            _ => {}
        }
    }
}

fn fold(key: &str) -> String {
    key.chars().filter(char::is_ascii_alphanumeric).map(|c| c.to_ascii_lowercase()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn redacts_credentials_at_any_depth_and_keeps_protocol_fields() {
        let redactor = Redactor::new(&["ssn".into()]);
        let mut value = json!({
            "arguments": {"api_key": "k", "nested": [{"Password": "p", "SSN": "1"}], "maxTokens": 5},
            "_meta": {"progressToken": 3},
            "refresh-token": {"deep": "x"},
        });
        redactor.redact(&mut value);
        assert_eq!(
            value,
            json!({
                "arguments": {"api_key": REDACTED, "nested": [{"Password": REDACTED, "SSN": REDACTED}], "maxTokens": 5},
                "_meta": {"progressToken": 3},
                "refresh-token": REDACTED,
            })
        );
    }

    #[test]
    fn user_keys_match_whole_keys_only() {
        let redactor = Redactor::new(&["name".into()]);
        assert!(redactor.is_sensitive("Name"));
        assert!(!redactor.is_sensitive("displayName"));
    }
}
