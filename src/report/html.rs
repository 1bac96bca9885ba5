//! The HTML run report (`--html`): one self-contained page (inline style,
//! no script, nothing fetched) a person opens after a red run. Per server,
//! how each case's requests were answered; each miss with what was sent
//! and its nearest recordings side by side, the differing JSON pointers
//! marked in both; recordings never used and those past `--max-age`; and
//! the run's timeline, one lane per case, with the agent's model's turns
//! told in order beside the tool calls when the model is on the tape.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde_json::Value;

use super::{Report, xml as escape};
use crate::engine::ledger::{AnsweredBy, Case, CaseKey, Moment};
use crate::limits::MOMENTS_KEPT;
use crate::normalize;

const STYLE: &str = "
body{font:14px/1.45 system-ui,sans-serif;margin:2em;color:#1b1f24;background:#fff}
h1{font-size:1.5em;margin:0 0 .3em}h2{font-size:1.2em;margin:1.6em 0 .4em}h3{font-size:1em;margin:1.2em 0 .3em}
.verdict{display:inline-block;padding:.1em .6em;border-radius:4px;color:#fff;font-weight:600}
.passed{background:#1a7f37}.failed{background:#cf222e}
table{border-collapse:collapse;margin:.3em 0}td,th{border:1px solid #d0d7de;padding:.2em .6em;text-align:left;vertical-align:top}
th{background:#f6f8fa}td.n{text-align:right;font-variant-numeric:tabular-nums}td.zero{color:#8c959f}
tr.missed td{background:#ffebe9}
.pair{display:grid;grid-template-columns:1fr 1fr;gap:1em;margin:.4em 0 1em}
.pair h4{margin:0 0 .2em;font-size:.9em}
pre{background:#f6f8fa;border:1px solid #d0d7de;padding:.6em;margin:0;overflow:auto;font-size:12px}
mark{background:#ffd8b5;outline:1px solid #bc4c00;border-radius:2px}
code{font-size:.95em}
.lane{font-size:12px;fill:#1b1f24}
.answer-recording{fill:#1a7f37;background:#1a7f37}.answer-rule{fill:#0969da;background:#0969da}.answer-template{fill:#8250df;background:#8250df}
.answer-mock{fill:#6e7781;background:#6e7781}.answer-miss{fill:#cf222e;background:#cf222e}.answer-forwarded{fill:#bc4c00;background:#bc4c00}.answer-fault{fill:#9a6700;background:#9a6700}
.legend span{display:inline-block;width:.8em;height:.8em;border-radius:50%;margin:0 .3em 0 1em;vertical-align:-.1em}
#turns span{display:inline-block;width:.7em;height:.7em;border-radius:50%;margin:0 .3em;vertical-align:-.05em}
";

/// Every way a request can be answered, in the order the page lists them.
const ANSWERS: [AnsweredBy; 7] = [
    AnsweredBy::Recording,
    AnsweredBy::Rule,
    AnsweredBy::Template,
    AnsweredBy::Mock,
    AnsweredBy::Miss,
    AnsweredBy::Forwarded,
    AnsweredBy::Fault,
];

impl Report {
    /// The report as one HTML page; `passed`: the run's verdict; `title`:
    /// what the run was (a test's id and cassette), if said.
    pub fn html(&self, passed: bool, title: Option<&str>) -> String {
        let mut page = String::with_capacity(16 * 1024);
        let verdict = if passed { "passed" } else { "failed" };
        let named = title.map(|title| format!(" of {}", escape(title))).unwrap_or_default();
        let _ = write!(
            page,
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
             <meta name=\"viewport\" content=\"width=device-width\">\
             <title>mcp-tape run report{named}: {verdict}</title><style>{STYLE}</style></head><body>\n\
             <h1>mcp-tape run report <span class=\"verdict {verdict}\" id=\"verdict\">{verdict}</span></h1>\n"
        );
        if let Some(title) = title {
            let _ = writeln!(page, "<p id=\"title\">{}</p>", escape(title));
        }
        let _ = writeln!(
            page,
            "<p id=\"summary\">{}</p>",
            escape(self.summary().lines().next().unwrap_or_default())
        );
        self.cases_by_server(&mut page);
        self.misses(&mut page);
        self.recordings(&mut page);
        self.timeline(&mut page);
        let _ =
            write!(page, "<p><small>mcp-tape {}</small></p>\n</body></html>\n", env!("CARGO_PKG_VERSION"));
        page
    }

    fn cases_by_server(&self, page: &mut String) {
        let mut servers: BTreeMap<&str, Vec<(&CaseKey, &Case)>> = BTreeMap::new();
        for (key, case) in self.usage.cases.iter().filter(|(_, case)| case.requests() > 0) {
            servers.entry(key.server.as_str()).or_default().push((key, case));
        }
        page.push_str("<h2>How each request was answered</h2>\n");
        if servers.is_empty() {
            page.push_str("<p>No requests.</p>\n");
        }
        for (server, cases) in servers {
            let _ = write!(
                page,
                "<h3>Server <code>{}</code></h3>\n<table class=\"cases\"><tr><th>request</th>\
                 <th>from a recording</th><th>by a match rule</th><th>by a template</th><th>by the mock</th>\
                 <th>missed</th><th>forwarded to record</th><th>a fault instead</th><th>past --max-age</th></tr>\n",
                escape(server)
            );
            for (key, case) in cases {
                let counts = [
                    case.hits,
                    case.by_rules(),
                    case.templates,
                    case.mocks,
                    case.misses,
                    case.forwarded,
                    case.faulted,
                    case.stale,
                ];
                let class = if case.misses > 0 { " class=\"missed\"" } else { "" };
                let _ = write!(page, "<tr{class}><td><code>{}</code></td>", escape(&key.name()));
                for count in counts {
                    let zero = if count == 0 { " zero" } else { "" };
                    let _ = write!(page, "<td class=\"n{zero}\">{count}</td>");
                }
                page.push_str("</tr>\n");
            }
            page.push_str("</table>\n");
        }
        for (rule, label) in self.usage.rules.iter().enumerate() {
            let answered: u64 =
                self.usage.cases.values().filter_map(|case| case.ruled.get(&rule)).map(|r| r.answered).sum();
            if answered > 0 {
                let _ =
                    writeln!(page, "<p>Match rule <code>{}</code> answered {answered}.</p>", escape(label));
            }
        }
        for (rule, label) in self.usage.faults.iter().enumerate() {
            let injected = self.injected_by(rule);
            if injected > 0 {
                let _ = writeln!(page, "<p>Fault <code>{}</code> injected {injected}.</p>", escape(label));
            }
        }
    }

    fn misses(&self, page: &mut String) {
        let missed: Vec<_> = self.usage.cases.iter().filter(|(_, case)| case.misses > 0).collect();
        if missed.is_empty() {
            return;
        }
        page.push_str("<h2>Misses</h2>\n");
        for (key, case) in missed {
            let name = escape(&key.to_string());
            let _ = writeln!(
                page,
                "<section class=\"miss\" data-case=\"{name}\"><h3><code>{name}</code> missed ×{}</h3>",
                case.misses
            );
            let Some(miss) = &case.first_miss else {
                page.push_str("</section>\n");
                continue;
            };
            let _ = writeln!(page, "<p>The first: {}</p>", escape(&miss.message));
            if miss.nearest.is_empty() {
                let _ = writeln!(page, "<h4>Sent</h4><pre class=\"sent\">{}</pre>", json(&miss.params, &[]));
            }
            for (i, near) in miss.nearest.iter().enumerate() {
                let differences = &near.differences;
                let pointers: Vec<&str> = differences.iter().map(|d| d.pointer.as_str()).collect();
                page.push_str(
                    "<table class=\"differences\"><tr><th>pointer</th><th>recorded</th><th>sent</th></tr>\n",
                );
                for difference in differences {
                    let shown = |value: &Option<Value>| {
                        value.as_ref().map_or("(absent)".to_owned(), Value::to_string)
                    };
                    let _ = writeln!(
                        page,
                        "<tr><td><code class=\"pointer\">{}</code></td><td><code class=\"recorded\">{}</code></td>\
                         <td><code class=\"requested\">{}</code></td></tr>",
                        escape(&difference.pointer),
                        escape(&shown(&difference.recorded)),
                        escape(&shown(&difference.requested))
                    );
                }
                let _ = write!(
                    page,
                    "</table>\n<div class=\"pair\"><div><h4>Sent</h4><pre class=\"sent\">{}</pre></div>\
                     <div><h4>Nearest recording {}</h4><pre class=\"nearest\">{}</pre></div></div>\n",
                    json(&miss.params, &pointers),
                    i + 1,
                    json(&near.params, &pointers)
                );
            }
            page.push_str("</section>\n");
        }
    }

    fn recordings(&self, page: &mut String) {
        if !self.unused.is_empty() {
            let _ = write!(
                page,
                "<h2>Recordings never used ({})</h2>\n<table id=\"unused\"><tr><th>cassette</th><th>row</th>\
                 <th>request</th></tr>\n",
                self.unused.len()
            );
            for (source, key) in &self.unused {
                let _ = writeln!(
                    page,
                    "<tr><td>{}</td><td class=\"n\">{}</td><td><code>{}</code></td></tr>",
                    escape(&source.cassette.display().to_string()),
                    source.row,
                    escape(&key.to_string())
                );
            }
            page.push_str("</table>\n");
        }
        if !self.usage.stale.is_empty() {
            let verdict = if self.stale_fails { "they fail the run" } else { "a warning" };
            let _ = write!(
                page,
                "<h2>Recordings past --max-age that answered ({}; {verdict})</h2>\n<table id=\"stale\">\
                 <tr><th>cassette</th><th>row</th></tr>\n",
                self.usage.stale.len()
            );
            for source in &self.usage.stale {
                let _ = writeln!(
                    page,
                    "<tr><td>{}</td><td class=\"n\">{}</td></tr>",
                    escape(&source.cassette.display().to_string()),
                    source.row
                );
            }
            page.push_str("</table>\n");
        }
    }

    /// One lane per case, a dot per request at its time, coloured by how
    /// it was answered.
    fn timeline(&self, page: &mut String) {
        let lanes: Vec<(&CaseKey, &Case)> =
            self.usage.cases.iter().filter(|(_, case)| !case.moments.is_empty()).collect();
        if lanes.is_empty() {
            return;
        }
        let end = lanes.iter().flat_map(|(_, case)| &case.moments).map(|m| m.at_ms).max().unwrap_or(0).max(1);
        let kept: usize = lanes.iter().map(|(_, case)| case.moments.len()).sum();
        let (label, plot, lane) = (320.0, 640.0, 18.0);
        let height = lane * lanes.len() as f64 + 24.0;
        let _ = write!(
            page,
            "<h2>Timeline</h2>\n<p class=\"legend\">{end} ms, {kept} requests{}:",
            if kept >= MOMENTS_KEPT { format!(" (the first {MOMENTS_KEPT})") } else { String::new() }
        );
        for answer in ANSWERS {
            let _ = write!(page, "<span class=\"answer-{0}\"></span>{0}", answer.as_str());
        }
        let _ = write!(
            page,
            "</p>\n<svg id=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{height}\" \
             role=\"img\" aria-label=\"requests over time\">\n",
            label + plot + 20.0
        );
        for (row, (key, case)) in lanes.iter().enumerate() {
            let y = lane * row as f64 + lane;
            let _ = writeln!(
                page,
                "<text class=\"lane\" x=\"0\" y=\"{y}\">{}</text>",
                escape(&normalize::cut(&key.to_string()))
            );
            for moment in &case.moments {
                let x = label + plot * moment.at_ms as f64 / end as f64;
                let _ = writeln!(
                    page,
                    "<circle class=\"answer-{0}\" cx=\"{x:.1}\" cy=\"{1}\" r=\"4\"><title>{2} ms: {0}{3}</title></circle>",
                    moment.answer.as_str(),
                    y - 4.0,
                    moment.at_ms,
                    moment.told.as_deref().map(|told| format!(": {}", escape(told))).unwrap_or_default()
                );
            }
        }
        page.push_str("</svg>\n");
        turns(&lanes, page);
    }
}

/// When the agent's model is on the tape: every request of the timeline
/// in the order they came, each model turn told (what it was asked last,
/// what it answered), so the model's turns and the tool calls read as one
/// sequence.
fn turns(lanes: &[(&CaseKey, &Case)], page: &mut String) {
    let mut sequence: Vec<(&CaseKey, &Moment)> =
        lanes.iter().flat_map(|(key, case)| case.moments.iter().map(move |moment| (*key, moment))).collect();
    if !sequence.iter().any(|(_, moment)| moment.told.is_some()) {
        return;
    }
    sequence.sort_by_key(|(_, moment)| moment.at_ms);
    page.push_str("<h3>The model's turns and the tool calls, in order</h3>\n<ol id=\"turns\">\n");
    for (key, moment) in sequence {
        let answer = moment.answer.as_str();
        let told = moment.told.as_deref().map(|told| format!(": {}", escape(told))).unwrap_or_default();
        let _ = writeln!(
            page,
            "<li><code>{} ms</code> {} <span class=\"answer-{answer}\">&#8203;</span>{answer}{told}</li>",
            moment.at_ms,
            escape(&normalize::cut(&key.to_string())),
        );
    }
    page.push_str("</ol>\n");
}

/// `value` as indented JSON in HTML, each value at one of `marked`'s
/// pointers wrapped in `<mark data-pointer>`.
fn json(value: &Value, marked: &[&str]) -> String {
    let marked: BTreeSet<&str> = marked.iter().copied().collect();
    let mut out = String::new();
    write_json(value, "", &marked, 0, &mut out);
    out
}

fn write_json(value: &Value, pointer: &str, marked: &BTreeSet<&str>, depth: usize, out: &mut String) {
    let mark = marked.contains(pointer);
    if mark {
        let _ = write!(out, "<mark data-pointer=\"{}\">", escape(pointer));
    }
    let indent = |depth: usize| "  ".repeat(depth);
    match value {
        Value::Object(fields) if !fields.is_empty() => {
            out.push_str("{\n");
            for (i, (key, field)) in fields.iter().enumerate() {
                let _ =
                    write!(out, "{}{}: ", indent(depth + 1), escape(&Value::from(key.as_str()).to_string()));
                write_json(field, &normalize::pointer_child(pointer, key), marked, depth + 1, out);
                out.push_str(if i + 1 < fields.len() { ",\n" } else { "\n" });
            }
            let _ = write!(out, "{}}}", indent(depth));
        }
        Value::Array(items) if !items.is_empty() => {
            out.push_str("[\n");
            for (i, item) in items.iter().enumerate() {
                out.push_str(&indent(depth + 1));
                write_json(item, &format!("{pointer}/{i}"), marked, depth + 1, out);
                out.push_str(if i + 1 < items.len() { ",\n" } else { "\n" });
            }
            let _ = write!(out, "{}]", indent(depth));
        }
        scalar => out.push_str(&escape(&scalar.to_string())),
    }
    if mark {
        out.push_str("</mark>");
    }
}
