//! Drift between two answers to the same request, and between two tool
//! catalogues: what `verify` (recording against the live server) and
//! `diff` (old cassette against new, the agent's model exchanges too) report. Pure: JSON in, findings out.
//!
//! A catalogue change is **breaking** (a tool removed, a required parameter
//! added, a parameter removed or its type changed, an output schema
//! narrowed: a property or a type removed), **additive** (a tool or an
//! optional parameter added, an output property added) or **cosmetic**
//! (descriptions, titles). An answer is the same, changed (where, by JSON
//! pointer), gone (it was an answer and is now an error saying the tool or
//! method is unknown), or its error changed shape (another code, or an
//! error where there was a result, or the reverse).

use std::collections::BTreeMap;
use std::fmt;

use serde_json::{Value, json};

use crate::config::FailOn;
use crate::engine::ledger::CaseKey;
use crate::engine::llm;
use crate::jsonrpc::ErrorCode;
use crate::model::{Direction, Exchange, LlmAnswer, LlmExchange, canonical_json};
use crate::normalize::{self, Difference};
use crate::util::printable;

/// How much a change matters to a client written against the old side.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Cosmetic,
    Additive,
    Breaking,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Cosmetic => "cosmetic",
            Severity::Additive => "additive",
            Severity::Breaking => "breaking",
        }
    }
}

/// One change to a server's tool catalogue.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Change {
    pub severity: Severity,
    pub server: String,
    pub tool: String,
    /// What changed, in words.
    pub what: String,
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {}: {}", self.severity.as_str(), self.server, self.tool, self.what)
    }
}

/// The changes from the `old` to the `new` `tools/list` result (each a
/// `{"tools": [...]}`) of `server`.
pub fn catalogue(server: &str, old: &Value, new: &Value) -> Vec<Change> {
    let tools = |result: &Value| -> BTreeMap<String, Value> {
        let listed = result.get("tools").and_then(Value::as_array).cloned().unwrap_or_default();
        listed.into_iter().filter_map(|t| Some((t.get("name")?.as_str()?.to_owned(), t))).collect()
    };
    let (old, new) = (tools(old), tools(new));
    let mut changes = Vec::new();
    let mut change = |severity, tool: &str, what: String| {
        changes.push(Change { severity, server: server.to_owned(), tool: tool.to_owned(), what });
    };
    for (name, before) in &old {
        let Some(after) = new.get(name) else {
            change(Severity::Breaking, name, "tool removed".into());
            continue;
        };
        for field in ["description", "title"] {
            if before.get(field) != after.get(field) {
                change(Severity::Cosmetic, name, format!("{field} changed"));
            }
        }
        let (input_before, input_after) = (schema(before, "inputSchema"), schema(after, "inputSchema"));
        for (parameter, severity, what) in compare_inputs(&input_before, &input_after) {
            change(severity, name, format!("parameter {parameter:?}: {what}"));
        }
        let (output_before, output_after) = (schema(before, "outputSchema"), schema(after, "outputSchema"));
        for (property, severity, what) in compare_outputs(&output_before, &output_after) {
            change(severity, name, format!("output {property:?}: {what}"));
        }
    }
    for name in new.keys().filter(|name| !old.contains_key(*name)) {
        change(Severity::Additive, name, "tool added".into());
    }
    changes.sort();
    changes
}

fn schema(tool: &Value, field: &str) -> Value {
    tool.get(field).cloned().unwrap_or(Value::Null)
}

/// A schema's properties and required names.
fn shape(schema: &Value) -> (BTreeMap<String, Value>, Vec<String>) {
    let properties = schema.get("properties").and_then(Value::as_object).cloned().unwrap_or_default();
    let required = schema.get("required").and_then(Value::as_array).cloned().unwrap_or_default();
    (properties.into_iter().collect(), required.iter().filter_map(Value::as_str).map(str::to_owned).collect())
}

fn types(property: &Value) -> Value {
    property.get("type").cloned().unwrap_or(Value::Null)
}

/// Changes to parameters: what a caller may send.
fn compare_inputs(before: &Value, after: &Value) -> Vec<(String, Severity, String)> {
    let (old, old_required) = shape(before);
    let (new, new_required) = shape(after);
    let mut found = removed_or_retyped(&old, &new, "removed");
    for (name, property) in &old {
        if let Some(now) = new.get(name)
            && types(property) == types(now)
            && property.get("description") != now.get("description")
        {
            found.push((name.clone(), Severity::Cosmetic, "description changed".into()));
        }
    }
    for name in &new_required {
        if !old_required.contains(name) {
            let what = if old.contains_key(name) { "now required" } else { "required parameter added" };
            found.push((name.clone(), Severity::Breaking, what.into()));
        }
    }
    for name in new.keys().filter(|name| !old.contains_key(*name) && !new_required.contains(name)) {
        found.push((name.clone(), Severity::Additive, "optional parameter added".into()));
    }
    found
}

/// The properties of `old` that `new` lacks (said as `removed`) or types otherwise: breaking.
fn removed_or_retyped(
    old: &BTreeMap<String, Value>,
    new: &BTreeMap<String, Value>,
    removed: &str,
) -> Vec<(String, Severity, String)> {
    let mut found = Vec::new();
    for (name, property) in old {
        match new.get(name) {
            None => found.push((name.clone(), Severity::Breaking, removed.to_owned())),
            Some(now) if types(property) != types(now) => found.push((
                name.clone(),
                Severity::Breaking,
                format!("type {} became {}", types(property), types(now)),
            )),
            Some(_) => {}
        }
    }
    found
}

/// Changes to the output schema: what a caller may rely on getting.
fn compare_outputs(before: &Value, after: &Value) -> Vec<(String, Severity, String)> {
    if before.is_null() && after.is_null() {
        return Vec::new();
    }
    let (old, _) = shape(before);
    let (new, _) = shape(after);
    let mut found = removed_or_retyped(&old, &new, "no longer in the output");
    for name in new.keys().filter(|name| !old.contains_key(*name)) {
        found.push((name.clone(), Severity::Additive, "added to the output".into()));
    }
    found
}

/// How an answer compares with its recording.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    Same,
    /// The fields that differ (pointers into the answer message).
    Changed(Vec<Difference>),
    /// The recording answered; now the tool or method is unknown.
    Gone {
        code: i64,
    },
    /// An error where there was none, none where there was one, or another code.
    ErrorShape {
        recorded: Option<i64>,
        now: Option<i64>,
    },
}

impl Verdict {
    pub fn name(&self) -> &'static str {
        match self {
            Verdict::Same => "same",
            Verdict::Changed(_) => "changed",
            Verdict::Gone { .. } => "gone",
            Verdict::ErrorShape { .. } => "error shape changed",
        }
    }

    pub fn to_json(&self) -> Value {
        match self {
            Verdict::Same => json!({"verdict": "same"}),
            Verdict::Changed(differences) => json!({"verdict": "changed", "differences": differences
                .iter()
                .map(|d| json!({"pointer": d.pointer, "recorded": d.recorded, "now": d.requested}))
                .collect::<Vec<_>>()}),
            Verdict::Gone { code } => json!({"verdict": "gone", "code": code}),
            Verdict::ErrorShape { recorded, now } => {
                json!({"verdict": "error shape changed", "recordedCode": recorded, "code": now})
            }
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Same => f.write_str("same"),
            Verdict::Changed(differences) => {
                f.write_str("changed:")?;
                for d in differences {
                    let shown =
                        |v: &Option<Value>| v.as_ref().map_or("(absent)".to_owned(), Value::to_string);
                    write!(f, " {} {} → {};", d.pointer, shown(&d.recorded), shown(&d.requested))?;
                }
                Ok(())
            }
            Verdict::Gone { code } => write!(f, "gone (now error {code})"),
            Verdict::ErrorShape { recorded, now } => {
                let code = |c: &Option<i64>| c.map_or("a result".to_owned(), |c| format!("error {c}"));
                write!(f, "error shape changed ({} → {})", code(recorded), code(now))
            }
        }
    }
}

/// Compares the answer `now` with the `recorded` one (both whole JSON-RPC
/// messages, ids aside), leaving out the fields at `ignored` pointers.
pub fn answer(recorded: &Value, now: &Value, ignored: &[String]) -> Verdict {
    let code = |message: &Value| message.pointer("/error/code").and_then(Value::as_i64);
    match (code(recorded), code(now)) {
        (None, Some(code)) if is_unknown(code) => return Verdict::Gone { code },
        (a, b) if a != b => return Verdict::ErrorShape { recorded: a, now: b },
        _ => {}
    }
    let masked = |message: &Value| {
        let mut message = message.clone();
        if let Some(object) = message.as_object_mut() {
            object.remove("id");
            object.remove("jsonrpc");
        }
        for pointer in ignored {
            if let Some(slot) = message.pointer_mut(pointer) {
                *slot = Value::Null;
            }
        }
        message
    };
    let differences = normalize::differences(&masked(recorded), &masked(now));
    if differences.is_empty() { Verdict::Same } else { Verdict::Changed(differences) }
}

/// What a comparison found: each compared exchange's verdict, recordings
/// only one side has, and the catalogue changes.
#[derive(Clone, Debug, Default)]
pub struct Findings {
    /// `server method [subject]` and its verdict.
    pub exchanges: Vec<(String, Verdict)>,
    /// Recordings only the old side has.
    pub removed: Vec<String>,
    /// Recordings only the new side has.
    pub added: Vec<String>,
    pub catalogue: Vec<Change>,
}

impl Findings {
    pub fn breaking(&self) -> usize {
        self.catalogue.iter().filter(|c| c.severity == Severity::Breaking).count()
    }

    fn changed(&self) -> usize {
        self.exchanges.iter().filter(|(_, v)| *v != Verdict::Same).count()
    }

    /// Whether these findings fail the command under `fail_on`.
    pub fn fails(&self, fail_on: FailOn) -> bool {
        match fail_on {
            FailOn::Breaking => self.breaking() > 0,
            FailOn::Changed => {
                self.breaking() > 0
                    || self.changed() > 0
                    || !self.catalogue.is_empty()
                    || !self.removed.is_empty()
                    || !self.added.is_empty()
            }
            FailOn::Never => false,
        }
    }

    fn counts(&self) -> String {
        let severity = |s: Severity| self.catalogue.iter().filter(|c| c.severity == s).count();
        format!(
            "{} exchanges compared, {} same, {} not; catalogue: {} breaking, {} additive, {} cosmetic",
            self.exchanges.len(),
            self.exchanges.len() - self.changed(),
            self.changed(),
            severity(Severity::Breaking),
            severity(Severity::Additive),
            severity(Severity::Cosmetic),
        )
    }

    pub fn text(&self) -> String {
        let mut lines: Vec<String> =
            self.catalogue.iter().map(|c| printable(&c.to_string()).into_owned()).collect();
        for (what, verdict) in &self.exchanges {
            lines.push(format!("{what}: {}", printable(&verdict.to_string())));
        }
        lines.extend(self.removed.iter().map(|what| format!("{what}: only in the old recordings")));
        lines.extend(self.added.iter().map(|what| format!("{what}: only in the new recordings")));
        lines.push(self.counts());
        lines.join("\n") + "\n"
    }

    pub fn json(&self) -> Value {
        json!({
            "catalogue": self.catalogue.iter().map(|c| json!({
                "severity": c.severity.as_str(), "server": c.server, "tool": c.tool, "change": c.what,
            })).collect::<Vec<_>>(),
            "exchanges": self.exchanges.iter().map(|(what, verdict)| {
                let mut entry = verdict.to_json();
                entry["exchange"] = what.clone().into();
                entry
            }).collect::<Vec<_>>(),
            "removed": self.removed,
            "added": self.added,
            "breaking": self.breaking(),
        })
    }

    /// For a pull request comment.
    pub fn markdown(&self) -> String {
        let cell = |text: &str| printable(text).replace('|', "\\|");
        let mut out = format!("### mcp-tape: recordings compared\n\n{}\n", self.counts());
        if !self.catalogue.is_empty() {
            out.push_str("\n| severity | server | tool | change |\n|---|---|---|---|\n");
            for c in &self.catalogue {
                let mark =
                    if c.severity == Severity::Breaking { "**breaking**" } else { c.severity.as_str() };
                out.push_str(&format!(
                    "| {mark} | {} | {} | {} |\n",
                    cell(&c.server),
                    cell(&c.tool),
                    cell(&c.what)
                ));
            }
        }
        let changed: Vec<&(String, Verdict)> =
            self.exchanges.iter().filter(|(_, v)| *v != Verdict::Same).collect();
        if !changed.is_empty() || !self.removed.is_empty() || !self.added.is_empty() {
            out.push_str("\n| exchange | verdict |\n|---|---|\n");
            for (what, verdict) in changed {
                out.push_str(&format!("| {} | {} |\n", cell(what), cell(&verdict.to_string())));
            }
            for what in &self.removed {
                out.push_str(&format!("| {} | only in the old recordings |\n", cell(what)));
            }
            for what in &self.added {
                out.push_str(&format!("| {} | only in the new recordings |\n", cell(what)));
            }
        }
        out
    }
}

/// Compares two sets of recordings: exchanges paired by server, era,
/// method, match key and order; each server's tool catalogue (its first
/// recorded `tools/list` result) classified.
pub fn cassettes(old: &[Exchange], new: &[Exchange], ignored: &[String]) -> Findings {
    let mut findings = Findings::default();
    let key = |e: &Exchange| (e.server.clone(), e.era.as_str(), e.method.clone(), e.key.to_hex());
    pair_up(&mut findings, old, new, key, label, |a, b| match (final_answer(a), final_answer(b)) {
        (Some(a), Some(b)) => answer(a, b, ignored),
        _ => Verdict::Same,
    });
    let catalogues = |exchanges: &[Exchange]| -> BTreeMap<String, Value> {
        let mut found = BTreeMap::new();
        for e in exchanges.iter().filter(|e| e.method == "tools/list") {
            if let Some(result) = final_answer(e).and_then(|a| a.get("result")) {
                found.entry(e.server.clone()).or_insert_with(|| result.clone());
            }
        }
        found
    };
    let (old_lists, new_lists) = (catalogues(old), catalogues(new));
    for (server, before) in &old_lists {
        let empty = json!({"tools": []});
        findings.catalogue.extend(catalogue(server, before, new_lists.get(server).unwrap_or(&empty)));
    }
    for (server, after) in new_lists.iter().filter(|(server, _)| !old_lists.contains_key(*server)) {
        findings.catalogue.extend(catalogue(server, &json!({"tools": []}), after));
    }
    findings.catalogue.sort();
    findings
}

/// Adds to `findings` the exchanges with the agent's model two sets of
/// recordings hold: paired by model, method, target and request (equal as
/// canonical JSON) and order, each answer compared as JSON (a stream as
/// its events' texts), fields at `ignored` pointers left out.
pub fn llms(findings: &mut Findings, old: &[LlmExchange], new: &[LlmExchange], ignored: &[String]) {
    let key = |e: &LlmExchange| {
        let request = serde_json::from_str::<Value>(&e.request)
            .map_or_else(|_| e.request.clone(), |v| canonical_json(&v));
        (e.model.clone(), e.method.clone(), e.target.clone(), request)
    };
    let label = |e: &LlmExchange| llm::case_of(&e.model, &e.method, &e.target).to_string();
    let as_json = |e: &LlmExchange| match &e.answer {
        LlmAnswer::Whole(body) => serde_json::from_str(body).unwrap_or_else(|_| Value::from(body.as_str())),
        LlmAnswer::Events(events) => events.iter().map(|event| Value::from(event.text.as_str())).collect(),
    };
    pair_up(findings, old, new, key, label, |a, b| answer(&as_json(a), &as_json(b), ignored));
}

/// Pairs the recordings of two sides by `key` and order (the n-th of a key
/// with the n-th): each pair's `verdict`, under the old one's `label`, and
/// the labels of those only one side holds.
fn pair_up<T, K: Ord>(
    findings: &mut Findings,
    old: &[T],
    new: &[T],
    key: impl Fn(&T) -> K,
    label: impl Fn(&T) -> String,
    verdict: impl Fn(&T, &T) -> Verdict,
) {
    let group = |recordings: &[T]| {
        let mut groups: BTreeMap<K, Vec<usize>> = BTreeMap::new();
        for (i, recording) in recordings.iter().enumerate() {
            groups.entry(key(recording)).or_default().push(i);
        }
        groups
    };
    let (old_groups, new_groups) = (group(old), group(new));
    for (key, olds) in &old_groups {
        let news = new_groups.get(key).map(Vec::as_slice).unwrap_or_default();
        for (n, &i) in olds.iter().enumerate() {
            match news.get(n) {
                Some(&j) => findings.exchanges.push((label(&old[i]), verdict(&old[i], &new[j]))),
                None => findings.removed.push(label(&old[i])),
            }
        }
    }
    for (key, news) in &new_groups {
        let known = old_groups.get(key).map_or(0, Vec::len);
        findings.added.extend(news.iter().skip(known).map(|&j| label(&new[j])));
    }
}

/// An exchange's final answer: its last server message that is not a
/// request or notification.
pub fn final_answer(exchange: &Exchange) -> Option<&Value> {
    exchange
        .messages
        .iter()
        .rev()
        .find(|m| m.direction == Direction::Server && m.body.get("method").is_none())
        .map(|m| &m.body)
}

/// `server method [subject]` of an exchange (its case, as a run's report
/// names it), a call's arguments after it, for a line of findings.
pub fn label(exchange: &Exchange) -> String {
    let params = exchange.request.get("params");
    let mut label = CaseKey::of(&exchange.server, &exchange.method, params).to_string();
    if exchange.method == "tools/call"
        && let Some(arguments) = params.and_then(|p| p.get("arguments"))
    {
        label.push(' ');
        label.push_str(&crate::model::canonical_json(arguments));
    }
    label
}

/// Whether an error code says the tool or method does not exist.
fn is_unknown(code: i64) -> bool {
    code == i64::from(ErrorCode::METHOD_NOT_FOUND.0) || code == i64::from(ErrorCode::INVALID_PARAMS.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, description: &str, properties: Value, required: Value) -> Value {
        json!({"name": name, "description": description,
            "inputSchema": {"type": "object", "properties": properties, "required": required}})
    }

    #[test]
    fn catalogue_changes_are_classified() {
        let old = json!({"tools": [
            tool("Send", "Sends mail", json!({"to": {"type": "string"}}), json!(["to"])),
            tool("Gone", "Old", json!({}), json!([])),
            tool("Retyped", "r", json!({"n": {"type": "number"}}), json!([])),
        ]});
        let new = json!({"tools": [
            tool("Send", "Sends an email", json!({"to": {"type": "string"}, "cc": {"type": "string"},
                "subject": {"type": "string"}}), json!(["to", "subject"])),
            tool("Retyped", "r", json!({"n": {"type": "string"}}), json!([])),
            tool("New", "n", json!({}), json!([])),
        ]});
        let found: Vec<String> = catalogue("mail", &old, &new).iter().map(ToString::to_string).collect();
        assert_eq!(
            found,
            [
                "cosmetic mail Send: description changed",
                "additive mail New: tool added",
                "additive mail Send: parameter \"cc\": optional parameter added",
                "breaking mail Gone: tool removed",
                "breaking mail Retyped: parameter \"n\": type \"number\" became \"string\"",
                "breaking mail Send: parameter \"subject\": required parameter added",
            ]
        );
    }

    #[test]
    fn a_narrowed_output_schema_breaks_and_a_wider_one_adds() {
        let with = |properties: Value| json!({"tools": [{"name": "t", "outputSchema": {"type": "object", "properties": properties}}]});
        let old = with(json!({"a": {"type": "string"}, "b": {"type": "string"}}));
        let new = with(json!({"a": {"type": "string"}, "c": {"type": "string"}}));
        let found: Vec<String> = catalogue("s", &old, &new).iter().map(ToString::to_string).collect();
        assert_eq!(
            found,
            [
                "additive s t: output \"c\": added to the output",
                "breaking s t: output \"b\": no longer in the output"
            ]
        );
    }

    #[test]
    fn answers_are_same_changed_gone_or_of_another_shape() {
        let ok = |text: &str, at: &str| json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": text}], "at": at}});
        let error = |code: i64| json!({"jsonrpc": "2.0", "id": 2, "error": {"code": code, "message": "x"}});
        assert_eq!(answer(&ok("a", "t1"), &ok("a", "t2"), &["/result/at".to_owned()]), Verdict::Same);
        let Verdict::Changed(found) = answer(&ok("a", "t"), &ok("b", "t"), &[]) else {
            panic!("not changed")
        };
        assert_eq!(found[0].pointer, "/result/content/0/text");
        assert_eq!(answer(&ok("a", "t"), &error(-32602), &[]), Verdict::Gone { code: -32602 });
        assert_eq!(
            answer(&ok("a", "t"), &error(-32603), &[]),
            Verdict::ErrorShape { recorded: None, now: Some(-32603) }
        );
        assert_eq!(answer(&error(-32001), &error(-32001), &[]), Verdict::Same);
    }

    #[test]
    fn model_exchanges_are_paired_by_request_and_their_answers_compared() {
        let exchange = |request: &str, body: &str| LlmExchange {
            model: "openai".into(),
            method: "POST".into(),
            target: "/chat/completions?api-version=1".into(),
            request: request.into(),
            status: crate::model::Status::OK,
            content_type: "application/json".into(),
            answer: LlmAnswer::Whole(body.into()),
            recorded_at: None,
            source: None,
        };
        let old = [exchange(r#"{"a":1,"b":2}"#, r#"{"text":"hi"}"#), exchange(r#"{"a":9}"#, "{}")];
        let new = [exchange(r#"{ "b": 2, "a": 1 }"#, r#"{"text":"hello"}"#), exchange(r#"{"a":7}"#, "{}")];
        let mut findings = Findings::default();
        llms(&mut findings, &old, &new, &[]);
        let label = "model openai POST /chat/completions";
        assert_eq!(findings.exchanges.len(), 1, "{findings:?}");
        assert_eq!(findings.exchanges[0].0, label);
        let Verdict::Changed(differences) = &findings.exchanges[0].1 else { panic!("{findings:?}") };
        assert_eq!(differences[0].pointer, "/text");
        assert_eq!(
            (findings.removed.as_slice(), findings.added.as_slice()),
            ([label.to_owned()].as_slice(), [label.to_owned()].as_slice())
        );
    }
}
