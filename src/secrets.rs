//! Secret shapes: what a credential looks like when nothing says it is one
//! (no key name, no header). `mcp-tape lint` looks for them in stored
//! cassettes; `--redact-pattern builtin` scrubs them as they are stored.
//! The shapes are public facts (the formats providers document for their
//! keys and tokens); the expressions are ours.

use regex::Regex;
use serde_json::Value;

use crate::error::Error;

/// The built-in shapes: (kind, expression).
const BUILTIN: [(&str, &str); 11] = [
    ("aws-access-key-id", r"\b(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}\b"),
    ("github-token", r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b"),
    ("slack-token", r"\bxox[abposr]-[A-Za-z0-9-]{10,250}"),
    ("slack-webhook", r"https://hooks\.slack\.com/services/T[A-Z0-9]+/B[A-Z0-9]+/[A-Za-z0-9]{16,}"),
    ("jwt", r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"),
    ("private-key", r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"),
    ("azure-storage-connection-string", r"(?i)\bAccountName=[^;\s]+;\s*AccountKey=[A-Za-z0-9+/]{86}=="),
    ("azure-storage-account-key", r"\bAccountKey=[A-Za-z0-9+/]{86}=="),
    ("azure-sas-signature", r"[?&]sv=\d{4}-\d{2}-\d{2}&[^\s]*\bsig=[A-Za-z0-9%+/=]{40,}"),
    // Project, service-account and admin keys, and the older keys that carry "OpenAI" in base64.
    (
        "openai-api-key",
        r"\bsk-(?:(?:proj|svcacct|admin)-[A-Za-z0-9_-]{40,}|[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20})",
    ),
    ("anthropic-api-key", r"\bsk-ant-[a-z]+[0-9]{2}-[A-Za-z0-9_-]{40,}"),
];

/// A compiled set of shapes, each with the kind it names.
#[derive(Clone, Debug, Default)]
pub struct Shapes {
    shapes: Vec<(String, Regex)>,
}

/// One place a shape matched: the kind and the text matched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    pub kind: String,
    pub text: String,
}

impl Shapes {
    /// The built-in shapes.
    pub fn builtin() -> Shapes {
        let shapes = BUILTIN
            .iter()
            .map(|(kind, expression)| {
                ((*kind).to_owned(), Regex::new(expression).expect("a built-in shape compiles"))
            })
            .collect();
        Shapes { shapes }
    }

    /// The shapes `--redact-pattern` names: `builtin` for the built-in set,
    /// anything else a regular expression (its kind is `pattern N`).
    ///
    /// # Errors
    ///
    /// An expression that does not compile, named with the reason.
    pub fn from_patterns(patterns: &[String]) -> Result<Shapes, Error> {
        let mut shapes = Vec::new();
        for (n, pattern) in patterns.iter().enumerate() {
            if pattern == "builtin" {
                shapes.extend(Shapes::builtin().shapes);
                continue;
            }
            let compiled = Regex::new(pattern)
                .map_err(|e| Error::Config(format!("--redact-pattern {pattern:?}: {e}")))?;
            if compiled.is_match("") {
                return Err(Error::Config(format!("--redact-pattern {pattern:?} matches empty text")));
            }
            shapes.push((format!("pattern {}", n + 1), compiled));
        }
        Ok(Shapes { shapes })
    }

    pub fn is_empty(&self) -> bool {
        self.shapes.is_empty()
    }

    /// Every match in `text`, in the order of the shapes.
    pub fn find(&self, text: &str) -> Vec<Found> {
        let mut found = Vec::new();
        for (kind, shape) in &self.shapes {
            for hit in shape.find_iter(text) {
                found.push(Found { kind: kind.clone(), text: hit.as_str().to_owned() });
            }
        }
        found
    }

    /// Whether any shape matches any string of `value`, at any depth.
    pub fn finds_in(&self, value: &Value) -> bool {
        match value {
            Value::String(text) => self.shapes.iter().any(|(_, shape)| shape.is_match(text)),
            Value::Array(items) => items.iter().any(|item| self.finds_in(item)),
            Value::Object(map) => map.values().any(|item| self.finds_in(item)),
            _ => false,
        }
    }

    /// Replaces every match in every string of `value`, at any depth, with
    /// `with`.
    pub fn scrub(&self, value: &mut Value, with: &str) {
        match value {
            Value::String(text) => self.scrub_text(text, with),
            Value::Array(items) => items.iter_mut().for_each(|item| self.scrub(item, with)),
            Value::Object(map) => map.values_mut().for_each(|item| self.scrub(item, with)),
            _ => {}
        }
    }

    /// Replaces every match in `text` with `with`.
    pub fn scrub_text(&self, text: &mut String, with: &str) {
        for (_, shape) in &self.shapes {
            if shape.is_match(text) {
                *text = shape.replace_all(text, with).into_owned();
            }
        }
    }
}

/// Bits of information per character of `text` (Shannon entropy of its
/// characters).
pub fn entropy(text: &str) -> f64 {
    let mut counts = std::collections::HashMap::new();
    let mut total = 0usize;
    for c in text.chars() {
        *counts.entry(c).or_insert(0usize) += 1;
        total += 1;
    }
    if total == 0 {
        return 0.0;
    }
    counts
        .values()
        .map(|&n| {
            let p = n as f64 / total as f64;
            -p * p.log2()
        })
        .sum()
}

/// Whether `value`, under a key that says it is a credential, looks like a
/// generated one: 16 characters or more with no space, and random enough
/// (hex digits at 3 bits a character over 32 characters, anything else at
/// 3.5 bits).
pub fn looks_generated(value: &str) -> bool {
    let length = value.chars().count();
    if length < 16 || value.chars().any(char::is_whitespace) {
        return false;
    }
    if value.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
        return length >= 32 && entropy(value) >= 3.0;
    }
    entropy(value) >= 3.5
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// One made-up value of each built-in kind (none is a live credential).
    pub(crate) fn planted() -> Vec<(&'static str, String)> {
        let key86 = "A".repeat(40) + &"b".repeat(40) + "012345";
        vec![
            ("aws-access-key-id", "AKIAIOSFODNN7EXAMPLE".into()),
            ("github-token", format!("ghp_{}", "a1B2c3D4e5".repeat(4))),
            ("slack-token", "xoxb-123456789012-abcdefABCDEF".into()),
            ("slack-webhook", "https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXXXXXXXXXX".into()),
            ("jwt", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTYifQ.c2lnbmF0dXJl".into()),
            ("private-key", "-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY-----".into()),
            (
                "azure-storage-connection-string",
                format!(
                    "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={key86}==;EndpointSuffix=core.windows.net"
                ),
            ),
            (
                "azure-sas-signature",
                format!("https://a.blob.core.windows.net/c?sv=2024-01-01&sp=r&sig={}", "Z".repeat(44)),
            ),
            ("openai-api-key", format!("sk-proj-{}", "Ab3_x9-Kq2".repeat(6))),
            ("openai-api-key", format!("sk-{}T3BlbkFJ{}", "aB3dE6gH9jK2mN5pQ8sT", "vW1yZ4bC7eF0hJ3kL6nP")),
            ("anthropic-api-key", format!("sk-ant-api03-{}", "Zx9-Yw8_Vu7T".repeat(8))),
        ]
    }

    #[test]
    fn each_builtin_kind_is_found_and_scrubbed() {
        let shapes = Shapes::builtin();
        for (kind, value) in planted() {
            let found = shapes.find(&format!("text before {value} and after"));
            assert!(found.iter().any(|f| f.kind == kind), "{kind}: {found:?}");
            let mut body = json!({"result": {"content": [{"text": format!("here: {value}")}]}});
            shapes.scrub(&mut body, "[GONE]");
            let text = body.pointer("/result/content/0/text").unwrap().as_str().unwrap();
            assert!(text.starts_with("here: ") && text.contains("[GONE]"), "{kind}: {text}");
            assert!(!shapes.finds_in(&body), "{kind}: nothing left after the scrub: {text}");
        }
    }

    #[test]
    fn ordinary_text_is_no_secret() {
        let shapes = Shapes::builtin();
        for text in ["hello world", "AKIA is a prefix", "eyJ.eyJ.", "ghp_short", "mcp-tape:request-id"] {
            assert!(shapes.find(text).is_empty(), "{text}");
        }
        assert!(!looks_generated("correct horse battery staple"));
        assert!(!looks_generated("aaaaaaaaaaaaaaaaaaaa"));
        assert!(!looks_generated("123e4567"));
        assert!(looks_generated("9fQ2x7LmZpR4tV8wK1sB"));
        assert!(looks_generated("3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d"));
    }

    #[test]
    fn user_patterns_compile_or_are_refused() {
        let shapes = Shapes::from_patterns(&["tok-[0-9]{6}".into(), "builtin".into()]).unwrap();
        assert_eq!(shapes.find("a tok-123456 b")[0].kind, "pattern 1");
        assert!(shapes.find("AKIAIOSFODNN7EXAMPLE").iter().any(|f| f.kind == "aws-access-key-id"));
        let bad = Shapes::from_patterns(&["(".into()]).unwrap_err().to_string();
        assert!(bad.contains("--redact-pattern \"(\""), "{bad}");
        let empty = Shapes::from_patterns(&["x*".into()]).unwrap_err().to_string();
        assert!(empty.contains("matches empty text"), "{empty}");
    }
}
