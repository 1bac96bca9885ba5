//! `mcp-tape lint`: stored requests, answers and asides (and service
//! answers, answer templates and the agent's model exchanges) searched for
//! what a user did not mean to commit: secrets (the built-in [`Shapes`]
//! anywhere in a string, and random-looking values under key names that
//! say they are credentials) and personal data that is not pseudonymized
//! ([`pseudonym::find`]: addresses, GUIDs, people's names, phone numbers,
//! listed terms). A string that is itself JSON (a tool's text result) is
//! searched inside too, so its key names count.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::cassette::store;
use crate::error::Error;
use crate::model::{Exchange, LlmAnswer, LlmExchange};
use crate::pseudonym::{self, Scope};
use crate::secrets::{self, Shapes};

/// Where in a cassette a finding is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Place {
    /// An exchange, by its row.
    Exchange(i64),
    /// An Agent 365 service answer, by its route.
    Service(String),
    /// An answer template, by its tool.
    Template(String),
    /// An exchange with the agent's model: its model's name and its place
    /// among the cassette's model exchanges (from 1).
    Llm(String, usize),
}

/// One secret found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub cassette: PathBuf,
    pub place: Place,
    /// The JSON pointer to the string in what the place stores; a string
    /// that held JSON is followed by the pointer inside it (`/text /apiKey`).
    pub pointer: String,
    pub kind: String,
    /// The first characters and the length, never the whole value.
    pub preview: String,
}

/// What a lint run looked at and found.
#[derive(Debug, Default)]
pub struct Linted {
    pub cassettes: usize,
    pub exchanges: usize,
    pub findings: Vec<Finding>,
}

/// Searches every cassette under `paths` (files, or directories of them).
///
/// # Errors
///
/// A path that is no cassette, or a cassette that cannot be read.
pub fn lint(paths: &[PathBuf], personal: &pseudonym::Settings) -> Result<Linted, Error> {
    let shapes = Shapes::builtin();
    let mut linted = Linted::default();
    for file in store::cassette_files(paths)? {
        let loaded = store::load(std::slice::from_ref(&file))?;
        linted.cassettes += 1;
        linted.exchanges += loaded.exchanges.len();
        let mut search = Search { shapes: &shapes, personal, cassette: &file, found: &mut linted.findings };
        for exchange in &loaded.exchanges {
            search.exchange(exchange);
        }
        for answer in &loaded.service_answers {
            let place = Place::Service(answer.route.as_str().to_owned());
            search.text(&place, "/body", &answer.body, None);
            search.personal_text(&place, "/body", &answer.body, Scope::Data);
        }
        for template in &loaded.templates {
            let place = Place::Template(template.tool.clone());
            search.text(&place, "/text", &template.text, None);
            search.personal_text(&place, "/text", &template.text, Scope::Data);
            search.value(&place, "/inputSchema", &template.input_schema, None);
        }
        for (n, exchange) in loaded.llm_exchanges.iter().enumerate() {
            search.llm(&Place::Llm(exchange.model.clone(), n + 1), exchange);
        }
    }
    Ok(linted)
}

struct Search<'a> {
    shapes: &'a Shapes,
    /// What personal data is besides the built-in members.
    personal: &'a pseudonym::Settings,
    cassette: &'a Path,
    found: &'a mut Vec<Finding>,
}

impl Search<'_> {
    fn exchange(&mut self, exchange: &Exchange) {
        let place = Place::Exchange(exchange.source.as_ref().map_or(0, |source| source.row));
        self.value(&place, "/request", &exchange.request, None);
        self.personal(&place, "/request", &exchange.request, Scope::Mcp);
        for (n, message) in exchange.messages.iter().enumerate() {
            let pointer = format!("/messages/{n}/body");
            self.value(&place, &pointer, &message.body, None);
            self.personal(&place, &pointer, &message.body, Scope::Mcp);
        }
        for (n, aside) in exchange.asides.iter().enumerate() {
            let pointer = format!("/asides/{n}/body");
            self.value(&place, &pointer, &aside.message.body, None);
            self.personal(&place, &pointer, &aside.message.body, Scope::Mcp);
        }
    }

    /// The personal data in `value` (a message of `scope`) at `pointer`.
    fn personal(&mut self, place: &Place, pointer: &str, value: &Value, scope: Scope) {
        for found in pseudonym::find(value, scope, self.personal) {
            self.note(
                place,
                &format!("{pointer}{}", found.pointer),
                found.kind.as_str().to_owned(),
                &found.value,
            );
        }
    }

    /// The personal data in `text`: as JSON when it is JSON, else as text.
    fn personal_text(&mut self, place: &Place, pointer: &str, text: &str, scope: Scope) {
        match serde_json::from_str::<Value>(text) {
            Ok(value) if value.is_object() || value.is_array() => {
                self.personal(place, pointer, &value, scope)
            }
            _ => self.personal(place, pointer, &Value::String(text.to_owned()), Scope::Data),
        }
    }

    fn llm(&mut self, place: &Place, exchange: &LlmExchange) {
        self.text(place, "/target", &exchange.target, None);
        self.text(place, "/request", &exchange.request, None);
        self.personal_text(place, "/request", &exchange.request, Scope::Model);
        match &exchange.answer {
            LlmAnswer::Whole(body) => {
                self.text(place, "/body", body, None);
                self.personal_text(place, "/body", body, Scope::Model);
            }
            LlmAnswer::Events(events) => {
                for (n, event) in events.iter().enumerate() {
                    let data =
                        event.text.lines().filter_map(|line| line.strip_prefix("data:")).collect::<Vec<_>>();
                    let (pointer, data) = (format!("/events/{n}"), data.join("\n"));
                    self.text(place, &pointer, data.trim_start(), None);
                    self.personal_text(place, &pointer, data.trim_start(), Scope::Model);
                }
            }
        }
    }

    /// Every string of `value` at `pointer`, the key it stands under
    /// (if any) saying whether it is meant to be a credential.
    fn value(&mut self, place: &Place, pointer: &str, value: &Value, key: Option<&str>) {
        match value {
            Value::String(text) => self.text(place, pointer, text, key),
            Value::Array(items) => {
                for (n, item) in items.iter().enumerate() {
                    self.value(place, &format!("{pointer}/{n}"), item, key);
                }
            }
            Value::Object(map) => {
                for (name, item) in map {
                    self.value(place, &format!("{pointer}/{}", escape(name)), item, Some(name));
                }
            }
            _ => {}
        }
    }

    fn text(&mut self, place: &Place, pointer: &str, text: &str, key: Option<&str>) {
        let mut shaped = false;
        for found in self.shapes.find(text) {
            shaped = true;
            self.note(place, pointer, found.kind, &found.text);
        }
        if !shaped && key.is_some_and(says_credential) && secrets::looks_generated(text) {
            self.note(place, pointer, "high-entropy-secret".into(), text);
        }
        let trimmed = text.trim_start();
        if (trimmed.starts_with('{') || trimmed.starts_with('['))
            && let Ok(inner) = serde_json::from_str::<Value>(text)
        {
            self.value(place, &format!("{pointer} "), &inner, None);
        }
    }

    fn note(&mut self, place: &Place, pointer: &str, kind: String, secret: &str) {
        let pointer = if pointer.ends_with(' ') { format!("{pointer}/") } else { pointer.to_owned() };
        self.found.push(Finding {
            cassette: self.cassette.to_path_buf(),
            place: place.clone(),
            pointer,
            kind,
            preview: preview(secret),
        });
    }
}

/// A key name that says its value is a credential (compared on its
/// lowercase letters and digits; `progressToken` is a protocol field).
fn says_credential(key: &str) -> bool {
    let folded: String =
        key.chars().filter(char::is_ascii_alphanumeric).map(|c| c.to_ascii_lowercase()).collect();
    folded != "progresstoken"
        && (["secret", "token", "password", "passwd", "credential"].iter().any(|word| folded.contains(word))
            || folded.ends_with("key")
            || folded == "authorization"
            || folded == "signature")
}

/// A JSON pointer segment (RFC 6901).
fn escape(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

/// The first four characters and the length: enough to find it, not to use it.
fn preview(secret: &str) -> String {
    let head: String = secret.chars().take(4).collect();
    format!("{head}… ({} chars)", secret.chars().count())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_key_names() {
        for key in ["apiKey", "client_secret", "accessToken", "X-Api-Key", "password", "signature"] {
            assert!(says_credential(key), "{key}");
        }
        for key in ["progressToken", "name", "keyboard", "monkeys"] {
            assert!(!says_credential(key), "{key}");
        }
        assert_eq!(escape("a/b~c"), "a~1b~0c");
        assert_eq!(preview("AKIAIOSFODNN7EXAMPLE"), "AKIA… (20 chars)");
    }
}
