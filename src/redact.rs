//! What never reaches a cassette. Values under sensitive JSON keys become
//! `"[REDACTED]"`; record and replay apply the same rules before the match
//! key is computed, so a redacted recording still matches the live request
//! it came from. Credentials seen in request headers (the bearer token above
//! all) are scrubbed from every stored string, even where the upstream
//! echoed them back.

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

    /// Whether any key of `value`, at any depth, is sensitive.
    pub fn finds_sensitive(&self, value: &Value) -> bool {
        match value {
            Value::Object(map) => {
                map.iter().any(|(key, inner)| self.is_sensitive(key) || self.finds_sensitive(inner))
            }
            Value::Array(items) => items.iter().any(|item| self.finds_sensitive(item)),
            _ => false,
        }
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

/// Credentials shorter than this are not scrubbed from text: a short
/// placeholder such as `Bearer x` would otherwise corrupt every stored
/// string containing an `x`. Real tokens are far longer.
pub const MIN_SCRUBBED_SECRET_CHARS: usize = 8;

/// Request headers whose values are credentials, besides `Authorization`.
const CREDENTIAL_HEADERS: [&str; 3] = ["x-api-key", "api-key", "x-functions-key"];

/// The credential values in request headers, as (name, value) pairs: the
/// `Authorization` credentials (also without their scheme), API key headers,
/// and each cookie's value. Values too short to scrub safely are left out.
pub fn header_secrets<'a>(headers: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<String> {
    let mut secrets = Vec::new();
    for (name, value) in headers {
        let name = name.to_ascii_lowercase();
        let value = value.trim();
        if name == "authorization" || name == "proxy-authorization" {
            secrets.push(value.to_owned());
            if let Some((_, credentials)) = value.split_once(' ') {
                secrets.push(credentials.trim().to_owned());
            }
        } else if CREDENTIAL_HEADERS.contains(&name.as_str()) {
            secrets.push(value.to_owned());
        } else if name == "cookie" {
            secrets
                .extend(value.split(';').filter_map(|c| c.split_once('=')).map(|(_, v)| v.trim().to_owned()));
        }
    }
    secrets.retain(|s| s.chars().count() >= MIN_SCRUBBED_SECRET_CHARS);
    // Longest first, so a value containing a shorter secret goes whole.
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    secrets.dedup();
    secrets
}

/// Replaces every occurrence of each secret in every string and object key
/// of `value` with `"[REDACTED]"`.
pub fn scrub(value: &mut Value, secrets: &[String]) {
    if secrets.is_empty() {
        return;
    }
    let clean = |text: &str| {
        secrets.iter().fold(text.to_owned(), |text, secret| text.replace(secret.as_str(), REDACTED))
    };
    match value {
        Value::String(text) if secrets.iter().any(|s| text.contains(s.as_str())) => *text = clean(text),
        Value::Array(items) => items.iter_mut().for_each(|item| scrub(item, secrets)),
        Value::Object(map) => {
            let entries = std::mem::take(map);
            for (key, mut inner) in entries {
                scrub(&mut inner, secrets);
                map.insert(
                    if secrets.iter().any(|s| key.contains(s.as_str())) { clean(&key) } else { key },
                    inner,
                );
            }
        }
        _ => {}
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
        assert!(redactor.finds_sensitive(&value));
        assert!(!redactor.finds_sensitive(&json!({"a": [{"b": 1}], "_meta": {"progressToken": 1}})));
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
    fn header_secrets_and_scrubbing() {
        let token = "eyJhbGciOiJSUzI1NiJ9.payload.signature";
        let bearer = format!("Bearer {token}");
        let secrets = header_secrets([
            ("Authorization", bearer.as_str()),
            ("Cookie", "session=0123456789abcdef; theme=dark"),
            ("X-Api-Key", "short"),
            ("Accept", "application/json"),
        ]);
        assert_eq!(secrets, [bearer.clone(), token.to_owned(), "0123456789abcdef".to_owned()]);
        let mut value = json!({
            "content": [{"type": "text", "text": format!("you sent {bearer} and {token}")}],
            token: {"cookie-copy": "0123456789abcdef!"},
        });
        scrub(&mut value, &secrets);
        let text = value.to_string();
        assert!(!text.contains("payload.signature") && !text.contains("0123456789abcdef"), "{text}");
        assert_eq!(value["content"][0]["text"], "you sent [REDACTED] and [REDACTED]");
        assert_eq!(value["[REDACTED]"]["cookie-copy"], "[REDACTED]!");
    }

    #[test]
    fn user_keys_match_whole_keys_only() {
        let redactor = Redactor::new(&["name".into()]);
        assert!(redactor.is_sensitive("Name"));
        assert!(!redactor.is_sensitive("displayName"));
    }
}
