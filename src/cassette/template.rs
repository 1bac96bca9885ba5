//! Answer templates: a tool's answer text with `{{argument}}` holes, filled
//! from whatever arguments a call brings (imported Agent 365 mocks, or
//! written by hand). A hole's name is trimmed and matched to a top-level
//! argument case-insensitively; a string argument goes in as its text,
//! other JSON as its JSON text. A template that is JSON stays JSON: inside
//! a JSON string a value is escaped as string content, outside one a string
//! goes in as a JSON string. A hole no argument fills stays as written.

use serde_json::Value;

/// Where a hole sits in a template that is JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    /// The template is not JSON: text goes in as it is.
    Text,
    /// Inside a JSON string literal.
    InString,
    /// Where a JSON value goes.
    Value,
}

/// One piece of a parsed template.
#[derive(Debug, PartialEq)]
enum Piece<'a> {
    Literal(&'a str),
    /// A hole: its name (trimmed), and the text it was written as.
    Hole {
        name: &'a str,
        written: &'a str,
    },
}

/// `template` with its holes filled from `arguments` (a call's
/// `params.arguments`).
pub fn render(template: &str, arguments: Option<&Value>) -> String {
    let pieces = parse(template);
    let json = is_json(&pieces);
    let mut out = String::with_capacity(template.len());
    let mut in_string = false;
    for piece in &pieces {
        match piece {
            Piece::Literal(text) => {
                if json {
                    in_string = string_state_after(text, in_string);
                }
                out.push_str(text);
            }
            Piece::Hole { name, written } => {
                let place = match (json, in_string) {
                    (false, _) => Place::Text,
                    (true, true) => Place::InString,
                    (true, false) => Place::Value,
                };
                match argument(arguments, name) {
                    Some(value) => out.push_str(&fill(value, place)),
                    None => out.push_str(written),
                }
            }
        }
    }
    out
}

/// The distinct hole names of `template`, in order of first use.
pub fn holes(template: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for piece in parse(template) {
        if let Piece::Hole { name, .. } = piece
            && !names.iter().any(|known| known.eq_ignore_ascii_case(name))
        {
            names.push(name.to_owned());
        }
    }
    names
}

fn parse(template: &str) -> Vec<Piece<'_>> {
    let mut pieces = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        let Some(close) = rest[open + 2..].find("}}") else { break };
        let inner = &rest[open + 2..open + 2 + close];
        let name = inner.trim();
        if name.is_empty() || name.contains(['{', '}']) {
            // Not a hole ("{{}}", or JSON that merely starts with "{{"): literal text.
            pieces.push(Piece::Literal(&rest[..open + 1]));
            rest = &rest[open + 1..];
            continue;
        }
        if open > 0 {
            pieces.push(Piece::Literal(&rest[..open]));
        }
        pieces.push(Piece::Hole { name, written: &rest[open..open + 2 + close + 2] });
        rest = &rest[open + 2 + close + 2..];
    }
    if !rest.is_empty() {
        pieces.push(Piece::Literal(rest));
    }
    pieces
}

/// Whether the template is JSON once each hole holds a value of its place
/// (`null` where a value goes, nothing inside a string).
fn is_json(pieces: &[Piece]) -> bool {
    let mut probe = String::new();
    let mut in_string = false;
    for piece in pieces {
        match piece {
            Piece::Literal(text) => {
                in_string = string_state_after(text, in_string);
                probe.push_str(text);
            }
            Piece::Hole { .. } if in_string => {}
            Piece::Hole { .. } => probe.push_str("null"),
        }
    }
    let start = probe.trim_start();
    (start.starts_with('{') || start.starts_with('[')) && serde_json::from_str::<Value>(&probe).is_ok()
}

/// Whether JSON text `text`, begun inside a string or not, ends inside one.
fn string_state_after(text: &str, mut in_string: bool) -> bool {
    let mut escaped = false;
    for c in text.chars() {
        match (in_string, escaped, c) {
            (true, true, _) => escaped = false,
            (true, false, '\\') => escaped = true,
            (true, false, '"') => in_string = false,
            (false, _, '"') => in_string = true,
            _ => {}
        }
    }
    in_string
}

/// The top-level argument `name` names, compared without case.
fn argument<'a>(arguments: Option<&'a Value>, name: &str) -> Option<&'a Value> {
    let object = arguments?.as_object()?;
    object.get(name).or_else(|| object.iter().find(|(key, _)| key.eq_ignore_ascii_case(name)).map(|(_, v)| v))
}

fn fill(value: &Value, place: Place) -> String {
    let text = match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    match place {
        Place::Text => text,
        Place::InString => {
            // The string's JSON form without its quotes: escaped content.
            let quoted = Value::String(text).to_string();
            quoted[1..quoted.len() - 1].to_owned()
        }
        Place::Value if value.is_string() => Value::String(text).to_string(),
        Place::Value => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_templates_take_strings_as_text_and_other_json_as_json() {
        let arguments = json!({"Name": "Adele", "count": 3, "tags": ["a", "b"], "ok": true});
        let rendered = render("Hi {{ name }}: {{count}} {{tags}} {{ok}} {{missing}}", Some(&arguments));
        assert_eq!(rendered, r#"Hi Adele: 3 ["a","b"] true {{missing}}"#);
        assert_eq!(render("no holes", None), "no holes");
        assert_eq!(holes("{{a}} {{ b }} {{A}}"), ["a", "b"]);
    }

    #[test]
    fn a_json_template_stays_json_whatever_the_arguments_hold() {
        let template = r#"{"subject": "Re: {{subject}}", "to": {{to}}, "note": "{{note}}", "n": {{n}}}"#;
        let hostile = json!({"subject": "say \"hi\" \\ now\n", "to": "a@b", "note": {"x": "\""}, "n": 5});
        let rendered = render(template, Some(&hostile));
        let parsed: Value = serde_json::from_str(&rendered).unwrap_or_else(|e| panic!("{rendered}: {e}"));
        assert_eq!(parsed["subject"], "Re: say \"hi\" \\ now\n");
        assert_eq!(parsed["to"], "a@b");
        assert_eq!(parsed["note"], r#"{"x":"\""}"#);
        assert_eq!(parsed["n"], 5);
        // An unfilled hole stays visible (and a JSON template then may not parse, as written).
        assert!(render(template, Some(&json!({}))).contains("{{to}}"));
    }

    #[test]
    fn text_that_only_looks_like_a_hole_is_left_alone() {
        assert_eq!(render("{{}} and {{{a}}}", Some(&json!({"a": 1}))), "{{}} and {1}");
        assert_eq!(render("{{open", Some(&json!({"open": 1}))), "{{open");
    }
}
