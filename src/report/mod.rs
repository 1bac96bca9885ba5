//! What a run exercised, told four ways: the summary printed at the end,
//! a JUnit XML file for CI systems (`--junit`), a JSON usage report
//! (`--report`) that `prune` reads back to remove recordings a passing run
//! never used and `rules suggest` reads for its misses, and an HTML page
//! for a person (`--html`, in [`html`]). Each says how the
//! requests of a case were answered: exactly, by which match rule (and
//! where a `nearest` pick differed), by a template, by the mock, or missed;
//! and which fault rule was injected into how many. A fault is not a miss:
//! it fails nothing by itself.

pub mod github;
pub mod html;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::cassette::tape::Tape;
use crate::engine::ledger::{Case, CaseKey, Usage};
use crate::engine::llm::LlmTape;
use crate::error::Error;
use crate::limits::MAX_OTHER_CASES;
use crate::model::{LlmExchange, LlmSource, MatchKey, Source};
use crate::normalize::{self, Difference};
use crate::util::printable;

/// Handshake plumbing answered from a recording but not a case of its own
/// worth pruning: kept whatever a run used.
const NEVER_UNUSED: [&str; 2] = ["initialize", "server/discover"];

/// Unused recordings the summary lists by name at most.
const UNUSED_LISTED: usize = 10;

/// A run's report: its usage, and the recordings it used and never used.
#[derive(Debug, Default)]
pub struct Report {
    pub usage: Usage,
    /// Recordings that answered at least once.
    pub used: Vec<Source>,
    /// Recordings that never answered, with the case each would answer.
    pub unused: Vec<(Source, CaseKey)>,
    /// Whether stale recordings fail the run (`--expired error`).
    pub stale_fails: bool,
    /// Exchanges with the agent's model that never answered.
    pub unused_llms: Vec<UnusedLlm>,
}

/// An exchange with the agent's model a run never used: its row, and what
/// the row held (for `prune` to check it still does).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct UnusedLlm {
    pub source: LlmSource,
    pub model: String,
    pub method: String,
    pub target: String,
    /// Hex sha256 of the request body as stored.
    pub request_digest: String,
}

impl UnusedLlm {
    /// Whether `exchange` holds what this says.
    pub fn holds(&self, exchange: &LlmExchange) -> bool {
        exchange.model == self.model
            && exchange.method == self.method
            && exchange.target == self.target
            && digest(&exchange.request) == self.request_digest
    }
}

/// Hex sha256 of `text`.
fn digest(text: &str) -> String {
    MatchKey::from_digest(Sha256::digest(text.as_bytes()).into()).to_hex()
}

impl Report {
    /// The report of a run with `usage` over `tape` (the recordings it
    /// could use; each knows whether it answered).
    pub fn new(usage: Usage, tape: Option<&Tape>, stale_fails: bool) -> Report {
        let (mut used, mut unused) = (Vec::new(), Vec::new());
        for recorded in tape.into_iter().flat_map(Tape::recordings) {
            let Some(source) = &recorded.source else { continue };
            if recorded.used.is_marked() {
                used.push(source.clone());
            } else if !NEVER_UNUSED.contains(&recorded.method.as_str()) {
                let case = CaseKey::named(&recorded.server, &recorded.method, recorded.subject.as_deref());
                unused.push((source.clone(), case));
            }
        }
        used.sort();
        unused.sort();
        Report { usage, used, unused, stale_fails, unused_llms: Vec::new() }
    }

    /// The same report, listing the exchanges with the agent's model of
    /// `models` that never answered.
    pub fn with_llms(self, llms: Option<&LlmTape>) -> Report {
        let mut unused_llms: Vec<UnusedLlm> = llms
            .into_iter()
            .flat_map(LlmTape::unused)
            .filter_map(|exchange| {
                Some(UnusedLlm {
                    source: exchange.source.clone()?,
                    model: exchange.model.clone(),
                    method: exchange.method.clone(),
                    target: exchange.target.clone(),
                    request_digest: digest(&exchange.request),
                })
            })
            .collect();
        unused_llms.sort();
        Report { unused_llms, ..self }
    }

    pub fn requests(&self) -> u64 {
        self.usage.cases.values().map(Case::requests).sum()
    }

    /// Whether the recordings answered everything asked of them: no miss,
    /// and no stale recording when those fail the run.
    pub fn clean(&self) -> bool {
        self.usage.misses() == 0 && !self.stale_failure()
    }

    /// Whether stale recordings answered and fail the run (`--expired error`).
    pub fn stale_failure(&self) -> bool {
        self.stale_fails && !self.usage.stale.is_empty()
    }

    /// The summary's first line: how many requests, and how each kind was answered.
    pub fn tally(&self) -> String {
        let count = |field: fn(&Case) -> u64| self.usage.cases.values().map(field).sum::<u64>();
        let mut text = format!(
            "{} requests: {} answered from recordings, {} by the mock, {} missed, {} forwarded to record",
            self.requests(),
            count(|c| c.hits + c.by_rules() + c.templates),
            count(|c| c.mocks),
            count(|c| c.misses),
            count(|c| c.forwarded),
        );
        let injected = count(Case::injected);
        if injected > 0 {
            let _ =
                write!(text, ", {injected} faults injected ({} instead of an answer)", count(|c| c.faulted));
        }
        let (ruled, templates) = (count(Case::by_rules), count(|c| c.templates));
        if ruled + templates > 0 {
            let _ = write!(
                text,
                " (of those from recordings: {} exactly, {ruled} by match rules, {templates} by answer templates)",
                count(|c| c.hits)
            );
        }
        text
    }

    /// The summary printed when a run ends: its [`Report::tally`], then
    /// each rule, fault and miss by case, the stale and the unused recordings.
    pub fn summary(&self) -> String {
        let mut text = self.tally();
        for (key, case) in &self.usage.cases {
            for (rule, ruled) in &case.ruled {
                let _ = write!(text, "\n  rule {} ×{}: {key}", self.rule_label(*rule), ruled.answered);
                for differences in &ruled.differences {
                    let _ = write!(text, "\n    nearest differed at {}", normalize::describe(differences));
                }
            }
        }
        for (key, case) in &self.usage.cases {
            for (rule, injected) in &case.faults {
                let _ = write!(text, "\n  fault {} ×{injected}: {key}", self.fault_label(*rule));
            }
        }
        for (key, case) in self.usage.cases.iter().filter(|(_, c)| c.misses > 0) {
            let _ = write!(text, "\n  miss ×{}: {key}", case.misses);
            for line in nearest_diff(case).lines() {
                let _ = write!(text, "\n    {line}");
            }
        }
        if let Some(rest) = self.usage.cases.get(&CaseKey::others()) {
            let _ = write!(
                text,
                "\n  {} requests of cases past the first {MAX_OTHER_CASES} the cassettes do not hold were counted together",
                rest.requests()
            );
        }
        if !self.usage.stale.is_empty() {
            let verdict = if self.stale_fails { "fail the run" } else { "a warning" };
            let _ = write!(
                text,
                "\n  {} recordings older than --max-age were used ({verdict})",
                self.usage.stale.len()
            );
        }
        if !self.unused.is_empty() {
            let _ = write!(text, "\n  {} recordings never used:", self.unused.len());
            for (source, key) in self.unused.iter().take(UNUSED_LISTED) {
                let _ = write!(text, "\n    {key} ({})", printable(&source.to_string()));
            }
            if self.unused.len() > UNUSED_LISTED {
                let more = self.unused.len() - UNUSED_LISTED;
                let _ = write!(text, "\n    and {more} more (--junit and --report list them all)");
            }
        }
        text
    }

    /// The JUnit XML form: one `<testsuite>` per server, one `<testcase>`
    /// per case (a miss, or with `--expired error` a stale recording, is a
    /// `<failure>`), and each recording never used as a skipped case.
    pub fn junit(&self) -> String {
        let mut suites: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        let mut failures: BTreeMap<&str, usize> = BTreeMap::new();
        let mut skipped: BTreeMap<&str, usize> = BTreeMap::new();
        for (key, case) in &self.usage.cases {
            let server = key.server.as_str();
            let mut testcase =
                format!(r#"    <testcase classname="{}" name="{}" time="0">"#, xml(server), xml(&key.name()));
            if let Some(miss) = case.first_miss.as_ref().filter(|_| case.misses > 0) {
                *failures.entry(server).or_default() += 1;
                let _ = write!(
                    testcase,
                    "\n      <failure type=\"miss\" message=\"{}\">{}</failure>",
                    xml(&miss.message),
                    xml(&nearest_diff(case))
                );
            } else if case.stale > 0 && self.stale_fails {
                *failures.entry(server).or_default() += 1;
                let _ = write!(
                    testcase,
                    "\n      <failure type=\"expired\" message=\"{}\"/>",
                    xml(&format!("{key}: answered by a recording older than --max-age"))
                );
            }
            let _ = write!(
                testcase,
                "\n      <system-out>{}</system-out>\n    </testcase>",
                xml(&self.counts(case))
            );
            suites.entry(server).or_default().push(testcase);
        }
        for (source, key) in &self.unused {
            let server = key.server.as_str();
            *skipped.entry(server).or_default() += 1;
            suites.entry(server).or_default().push(format!(
                "    <testcase classname=\"{}\" name=\"{}\" time=\"0\">\n      <skipped message=\"recorded in {}, never used in this run\"/>\n    </testcase>",
                xml(server),
                xml(&format!("unused recording: {}", key.name())),
                xml(&source.to_string())
            ));
        }
        let total = |counts: &BTreeMap<&str, usize>| counts.values().sum::<usize>();
        let mut out = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"mcp-tape\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\">\n",
            suites.values().map(Vec::len).sum::<usize>(),
            total(&failures),
            total(&skipped)
        );
        for (server, cases) in &suites {
            let _ = writeln!(
                out,
                "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\" time=\"0\">",
                xml(server),
                cases.len(),
                failures.get(server).unwrap_or(&0),
                skipped.get(server).unwrap_or(&0)
            );
            for case in cases {
                let _ = writeln!(out, "{case}");
            }
            out.push_str("  </testsuite>\n");
        }
        out.push_str("</testsuites>\n");
        out
    }

    /// The JSON usage report; `passed`: the run as a whole passed;
    /// `title`: what the run was, if said.
    pub fn json(&self, passed: bool, title: Option<&str>) -> Value {
        let cases: Vec<Value> = self
            .usage
            .cases
            .iter()
            .map(|(key, case)| {
                let rules: Vec<Value> = case
                    .ruled
                    .iter()
                    .map(|(rule, ruled)| {
                        let differences: Vec<Value> =
                            ruled.differences.iter().map(|list| differences_json(list)).collect();
                        json!({"rule": self.rule_label(*rule), "answered": ruled.answered, "nearestDifferences": differences})
                    })
                    .collect();
                let faults: Vec<Value> = case
                    .faults
                    .iter()
                    .map(|(rule, injected)| json!({"fault": self.fault_label(*rule), "injected": injected}))
                    .collect();
                let mut entry = json!({
                    "server": key.server, "method": key.method, "subject": key.subject,
                    "hits": case.hits, "rules": rules, "templates": case.templates,
                    "mocks": case.mocks, "misses": case.misses,
                    "forwarded": case.forwarded, "faulted": case.faulted, "faults": faults,
                    "stale": case.stale,
                });
                if let Some(miss) = case.first_miss.as_ref().filter(|_| case.misses > 0) {
                    entry["firstMiss"] = json!({"message": miss.message, "data": miss.data()});
                }
                entry
            })
            .collect();
        let place =
            |source: &Source| json!({"cassette": source.cassette.to_string_lossy(), "row": source.row});
        let unused: Vec<Value> = self
            .unused
            .iter()
            .map(|(source, key)| {
                let mut entry = place(source);
                // What the row held, for prune to check it still does.
                entry["matchKey"] = source.key.to_hex().into();
                entry["occurrence"] = source.occurrence.into();
                entry["server"] = key.server.clone().into();
                entry["method"] = key.method.clone().into();
                entry["subject"] = key.subject.clone().into();
                entry
            })
            .collect();
        json!({
            "mcpTape": env!("CARGO_PKG_VERSION"),
            "title": title,
            "passed": passed,
            "cases": cases,
            "used": self.used.iter().map(place).collect::<Vec<_>>(),
            "stale": self.usage.stale.iter().map(place).collect::<Vec<_>>(),
            "unused": unused,
            "unusedModels": self.unused_llms.iter().map(|unused| json!({
                "cassette": unused.source.cassette.to_string_lossy(),
                "row": unused.source.row,
                "model": unused.model,
                "method": unused.method,
                "target": unused.target,
                "requestDigest": unused.request_digest,
            })).collect::<Vec<_>>(),
        })
    }
}

/// Writes `text` to `path` (a report: whole for its readers, not synced),
/// naming the file on failure.
///
/// # Errors
///
/// [`Error::Write`] with the path.
pub fn write(path: &Path, text: &str) -> Result<(), Error> {
    crate::util::write_unsynced(path, |file| std::io::Write::write_all(file, text.as_bytes()))
        .map_err(|source| Error::Write { path: path.to_owned(), source })
}

/// One recording a report lists as never used: its row, and what the row
/// held then (match key and occurrence).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unused {
    pub row: i64,
    pub key: MatchKey,
    pub occurrence: i64,
}

/// The recordings of `cassette` a usage report (from [`Report::json`])
/// lists as never used.
///
/// # Errors
///
/// A report that is not one, or one of a run that did not pass (what it
/// did not use may be what it failed to reach), or one written before
/// reports said what each row held.
pub fn unused_rows(report: &Value, cassette: &Path) -> Result<Vec<Unused>, Error> {
    let bad = |why: &str| Error::Config(format!("the usage report {why}"));
    if report.get("mcpTape").is_none() {
        return Err(bad("is not an mcp-tape usage report (written by --report)"));
    }
    if report.get("passed") != Some(&Value::Bool(true)) {
        return Err(bad("is of a run that did not pass: what it never used may be what it failed to reach"));
    }
    let wanted = same_file(cassette);
    let mut rows = Vec::new();
    for entry in
        report.get("unused").and_then(Value::as_array).ok_or_else(|| bad("has no \"unused\" list"))?
    {
        let file = entry.get("cassette").and_then(Value::as_str).map(PathBuf::from);
        let row = entry.get("row").and_then(Value::as_i64);
        let (Some(file), Some(row)) = (file, row) else {
            return Err(bad("has an \"unused\" entry without \"cassette\" and \"row\""));
        };
        if same_file(&file) != wanted {
            continue;
        }
        let key = entry.get("matchKey").and_then(Value::as_str).and_then(MatchKey::from_hex);
        let occurrence = entry.get("occurrence").and_then(Value::as_i64);
        let (Some(key), Some(occurrence)) = (key, occurrence) else {
            return Err(bad(
                "does not say what each unused row held (\"matchKey\", \"occurrence\"): it is from an older \
                 mcp-tape; run the tests again for a new one",
            ));
        };
        rows.push(Unused { row, key, occurrence });
    }
    Ok(rows)
}

/// The exchanges with the agent's model of `cassette` a usage report lists
/// as never used (none in a report written before it listed them).
///
/// # Errors
///
/// An `"unusedModels"` entry that does not say its row and what it held.
pub fn unused_llm_rows(report: &Value, cassette: &Path) -> Result<Vec<UnusedLlm>, Error> {
    let wanted = same_file(cassette);
    let mut rows = Vec::new();
    for entry in report.get("unusedModels").and_then(Value::as_array).into_iter().flatten() {
        let text = |key: &str| entry.get(key).and_then(Value::as_str);
        let parts =
            (text("cassette"), entry.get("row").and_then(Value::as_i64), text("model"), text("method"));
        let (Some(file), Some(row), Some(model), Some(method)) = parts else {
            return Err(Error::Config(
                "the usage report has an \"unusedModels\" entry without its row".into(),
            ));
        };
        let (Some(target), Some(request_digest)) = (text("target"), text("requestDigest")) else {
            return Err(Error::Config(
                "the usage report has an \"unusedModels\" entry without its request".into(),
            ));
        };
        if same_file(Path::new(file)) != wanted {
            continue;
        }
        rows.push(UnusedLlm {
            source: LlmSource { cassette: Arc::from(Path::new(file)), row },
            model: model.to_owned(),
            method: method.to_owned(),
            target: target.to_owned(),
            request_digest: request_digest.to_owned(),
        });
    }
    Ok(rows)
}

/// A path as the file system resolves it, for comparing two spellings.
fn same_file(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned())
}

impl Report {
    /// How rule `index` is told: `FILE:LINE (by)`.
    fn rule_label(&self, index: usize) -> &str {
        self.usage.rules.get(index).map_or("(unknown rule)", String::as_str)
    }

    /// How fault rule `index` is told: `PLACE (what)`.
    fn fault_label(&self, index: usize) -> &str {
        self.usage.faults.get(index).map_or("(unknown fault)", String::as_str)
    }

    /// How many faults rule `index` injected, over every case.
    fn injected_by(&self, index: usize) -> u64 {
        self.usage.cases.values().filter_map(|case| case.faults.get(&index)).sum()
    }

    /// How a case's requests were answered, a line each way.
    fn counts(&self, case: &Case) -> String {
        let parts = [
            (case.hits, "answered exactly from recordings"),
            (case.templates, "answered by answer templates"),
            (case.mocks, "answered by the mock"),
            (case.misses, "missed"),
            (case.forwarded, "forwarded to record"),
            (case.faulted, "answered by a fault instead"),
            (case.stale, "answered by recordings older than --max-age"),
        ];
        let mut said: Vec<String> =
            parts.iter().filter(|(n, _)| *n > 0).map(|(n, what)| format!("{n} {what}")).collect();
        for (rule, ruled) in &case.ruled {
            said.push(format!("{} answered by rule {}", ruled.answered, self.rule_label(*rule)));
        }
        for (rule, injected) in &case.faults {
            said.push(format!("fault {} injected into {injected}", self.fault_label(*rule)));
        }
        let mut text = format!("{} requests: {}", case.requests(), said.join(", "));
        for differences in case.ruled.values().flat_map(|ruled| &ruled.differences) {
            let _ = write!(text, "\nnearest differed at {}", normalize::describe(differences));
        }
        text
    }
}

fn differences_json(differences: &[Difference]) -> Value {
    differences.iter().map(Difference::to_json).collect()
}

/// The nearest recordings of a case's first miss and where each differs.
fn nearest_diff(case: &Case) -> String {
    let Some(miss) = &case.first_miss else {
        return String::new();
    };
    let mut text = String::new();
    for (i, near) in miss.nearest.iter().enumerate() {
        let _ = write!(text, "{}nearest recording {}:", if i > 0 { "\n" } else { "" }, i + 1);
        for difference in &near.differences {
            let _ = write!(
                text,
                "\n  {}: recorded {}, requested {}",
                printable(&difference.pointer),
                difference.recorded.as_ref().unwrap_or(&Value::Null),
                difference.requested.as_ref().unwrap_or(&Value::Null),
            );
        }
    }
    if text.is_empty() { "no recording of this kind to compare with".to_owned() } else { text }
}

/// `text` for XML content or an attribute value: the five special
/// characters escaped, characters XML 1.0 does not allow replaced by U+FFFD.
fn xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            // A bidirectional control would make a name display as another: shown, not obeyed.
            c if crate::util::is_unsafe(c) => out.push_str(&c.escape_default().to_string()),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xml_text_is_escaped_and_kept_legal() {
        assert_eq!(xml("a<b>&\"c'\u{1b}[31m\n"), "a&lt;b&gt;&amp;&quot;c&apos;\u{FFFD}[31m\n");
        assert_eq!(xml("Send\u{202E}lmth.exe"), "Send\\u{202e}lmth.exe");
    }
}
