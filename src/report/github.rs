//! What a run tells GitHub Actions: a short Markdown section for the job's
//! summary (the file `GITHUB_STEP_SUMMARY` names) with the run's misses,
//! drift (requests a match rule answered though they differed from the
//! recording, recordings older than `--max-age`) and injected faults; and,
//! under `GITHUB_ACTIONS=true`, each miss as an `::error` workflow command
//! naming the test, which GitHub shows as an annotation.

use std::fmt::Write as _;
use std::io::Write as _;

use super::Report;
use crate::engine::ledger::Case;
use crate::normalize;

/// The file GitHub reads a step's Markdown summary from.
const SUMMARY_VARIABLE: &str = "GITHUB_STEP_SUMMARY";

/// Set to `true` in every GitHub Actions step.
const ACTIONS_VARIABLE: &str = "GITHUB_ACTIONS";

/// Appends the summary of the run of `test` to the step summary when
/// GitHub asks for one, and prints its misses as annotations on stdout
/// under GitHub Actions. A summary that cannot be written is a warning:
/// the run's verdict stands.
pub fn tell(report: &Report, test: &str, passed: bool) {
    if let Some(path) = std::env::var_os(SUMMARY_VARIABLE).filter(|path| !path.is_empty()) {
        let written = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(&path)
            .and_then(|mut file| file.write_all(summary(report, test, passed).as_bytes()));
        if let Err(error) = written {
            tracing::warn!("the GitHub step summary {} was not written: {error}", path.to_string_lossy());
        }
    }
    if std::env::var_os(ACTIONS_VARIABLE).is_some_and(|value| value == "true") {
        let mut stdout = std::io::stdout().lock();
        for line in annotations(report, test) {
            let _ = writeln!(stdout, "{line}");
        }
        let _ = stdout.flush();
    }
}

/// The run's section of the step summary: a heading with the verdict, the
/// counts, and a row for each case that missed, drifted or had a fault.
fn summary(report: &Report, test: &str, passed: bool) -> String {
    let verdict = if passed { "passed" } else { "failed" };
    let mut text = format!("### mcp-tape: {}: {verdict}\n\n{}\n", cell(test), cell(&report.tally()));
    let rows = rows(report);
    if !rows.is_empty() {
        text.push_str("\n| | case | requests | what |\n|---|---|---:|---|\n");
        for (kind, case, requests, what) in rows {
            let _ = writeln!(text, "| {kind} | {} | {requests} | {} |", cell(&case), cell(&what));
        }
    }
    text.push('\n');
    text
}

/// One `::error` workflow command per case that missed, titled with the
/// test, saying the case, how often it missed and where the nearest
/// recording differed.
fn annotations(report: &Report, test: &str) -> Vec<String> {
    report
        .usage
        .cases
        .iter()
        .filter(|(_, case)| case.misses > 0)
        .map(|(key, case)| {
            let message = format!("{key} missed ×{}: {}", case.misses, first_miss(case));
            format!("::error title={}::{}", property(&format!("mcp-tape miss in {test}")), data(&message))
        })
        .collect()
}

/// The summary's rows: (kind, case, requests, what), misses first.
fn rows(report: &Report) -> Vec<(&'static str, String, u64, String)> {
    let cases = &report.usage.cases;
    let mut rows = Vec::new();
    for (key, case) in cases.iter().filter(|(_, case)| case.misses > 0) {
        rows.push(("miss", key.to_string(), case.misses, first_miss(case)));
    }
    for (key, case) in cases {
        for (rule, ruled) in case.ruled.iter().filter(|(_, ruled)| !ruled.differences.is_empty()) {
            let differed: Vec<String> =
                ruled.differences.iter().map(|list| normalize::describe(list)).collect();
            let what = format!(
                "rule {} answered; the request differed at {}",
                report.rule_label(*rule),
                differed.join("; ")
            );
            rows.push(("drift", key.to_string(), ruled.answered, what));
        }
        if case.stale > 0 {
            rows.push((
                "drift",
                key.to_string(),
                case.stale,
                "answered by recordings older than --max-age".into(),
            ));
        }
    }
    for (key, case) in cases {
        for (rule, injected) in &case.faults {
            rows.push(("fault", key.to_string(), *injected, format!("fault {}", report.fault_label(*rule))));
        }
    }
    rows
}

/// A case's first miss as its message says it (where the nearest recording differed included).
fn first_miss(case: &Case) -> String {
    case.first_miss.as_ref().map(|miss| miss.message.clone()).unwrap_or_default()
}

/// `text` for a Markdown table cell: one line, its pipes escaped, and no
/// markup of its own (angle brackets, backticks, asterisks, underscores).
fn cell(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '|' | '`' | '*' | '_' | '[' | ']' | '\\' | '#' => {
                out.push('\\');
                out.push(c);
            }
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '\n' | '\r' | '\t' => out.push(' '),
            c if c.is_control() || crate::util::is_unsafe(c) => out.push_str(&c.escape_default().to_string()),
            c => out.push(c),
        }
    }
    out
}

/// A workflow command's message, escaped as the runner unescapes it.
fn data(text: &str) -> String {
    text.replace('%', "%25").replace('\r', "%0D").replace('\n', "%0A")
}

/// A workflow command's property value, escaped as the runner unescapes it.
fn property(text: &str) -> String {
    data(text).replace(':', "%3A").replace(',', "%2C")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::engine::ledger::{CaseKey, Ruled, Usage};
    use crate::normalize::Difference;

    #[test]
    fn a_nearest_rule_that_answered_a_differing_request_and_a_stale_recording_are_drift() {
        let differed = Difference {
            pointer: "/arguments/q".into(),
            recorded: Some(json!("a")),
            requested: Some(json!("b")),
        };
        let ruled = Ruled { answered: 2, differences: vec![vec![differed]] };
        let case = Case { ruled: [(0, ruled)].into(), stale: 1, hits: 1, ..Case::default() };
        let usage = Usage {
            cases: [(CaseKey::named("mail", "tools/call", Some("Search")), case)].into(),
            rules: vec!["mcp-tape.toml:3 (nearest)".into()],
            ..Usage::default()
        };
        let report = Report { usage, ..Report::default() };
        let text = summary(&report, "t", true);
        let rows: Vec<&str> = text.lines().filter(|line| line.starts_with("| ")).skip(1).collect();
        assert_eq!(
            rows,
            [
                "| drift | mail tools/call Search | 2 | rule mcp-tape.toml:3 (nearest) answered; the request differed at \
                 /arguments/q (recorded \"a\", requested \"b\") |",
                "| drift | mail tools/call Search | 1 | answered by recordings older than --max-age |",
            ],
            "{text}"
        );
        assert!(text.starts_with("### mcp-tape: t: passed\n\n"), "{text}");
        assert!(annotations(&report, "t").is_empty(), "drift fails nothing: no error annotation");
    }

    #[test]
    fn command_text_is_escaped_as_the_runner_reads_it() {
        assert_eq!(data("50% off\r\nnext::line"), "50%25 off%0D%0Anext::line");
        assert_eq!(property("a: b, c%\n"), "a%3A b%2C c%25%0A");
    }

    #[test]
    fn table_cells_stay_one_cell_of_plain_text() {
        assert_eq!(cell("a|b\n<c> `d` *e* _f_ [g](h)"), "a\\|b &lt;c&gt; \\`d\\` \\*e\\* \\_f\\_ \\[g\\](h)");
        assert_eq!(cell("x\u{1b}[31m\u{202E}"), "x\\u{1b}\\[31m\\u{202e}");
    }
}
