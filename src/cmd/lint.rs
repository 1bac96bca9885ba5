//! `mcp-tape lint`: cassettes searched for secrets, before a commit.

use serde_json::{Value, json};

use super::load_rules;
use crate::config::{Format, LintConfig, RuleSources};
use crate::error::Error;
use crate::lint::{self, Finding, Place};
use crate::util;

/// Prints each finding (standard output) and a summary (standard error);
/// 1 when anything was found.
///
/// # Errors
///
/// A path that is no cassette, or a cassette that cannot be read.
pub(super) fn run(config: &LintConfig) -> Result<u8, Error> {
    // The `[pseudonymize]` table of the project's rules file says what else is personal.
    let personal = load_rules(&RuleSources::default())?.pseudonymize.unwrap_or_default();
    let linted = lint::lint(&config.paths, &personal)?;
    match config.format {
        Format::Json => {
            let findings: Vec<Value> = linted.findings.iter().map(as_json).collect();
            let report = json!({
                "cassettes": linted.cassettes,
                "exchanges": linted.exchanges,
                "findings": findings,
            });
            println!("{report:#}");
        }
        _ => {
            for finding in &linted.findings {
                println!("{}", as_text(finding));
            }
        }
    }
    let (cassettes, exchanges) = (linted.cassettes, linted.exchanges);
    match linted.findings.len() {
        0 => util::say(format_args!(
            "mcp-tape: lint: nothing found in {cassettes} cassette(s), {exchanges} exchange(s)"
        )),
        n => util::say(format_args!(
            "mcp-tape: lint: {n} finding(s) in {cassettes} cassette(s): remove them before committing \
             (secrets: re-record with --redact-pattern builtin, or edit an export and import it; \
             personal data: `mcp-tape pseudonymize` the cassettes, or re-record with --pseudonymize)"
        )),
    }
    Ok(u8::from(!linted.findings.is_empty()))
}

fn place(finding: &Finding) -> String {
    let cassette = finding.cassette.display();
    match &finding.place {
        Place::Exchange(row) => format!("{cassette}#{row}"),
        Place::Service(route) => format!("{cassette} service {route}"),
        Place::Template(tool) => format!("{cassette} template {tool}"),
        Place::Llm(model, n) => format!("{cassette} model {model} #{n}"),
    }
}

fn as_text(finding: &Finding) -> String {
    format!("{} {} {} {}", place(finding), finding.pointer, finding.kind, finding.preview)
}

fn as_json(finding: &Finding) -> Value {
    let mut found = json!({
        "cassette": finding.cassette.display().to_string(),
        "pointer": finding.pointer,
        "kind": finding.kind,
        "preview": finding.preview,
    });
    match &finding.place {
        Place::Exchange(row) => found["exchange"] = (*row).into(),
        Place::Service(route) => found["service"] = route.as_str().into(),
        Place::Template(tool) => found["template"] = tool.as_str().into(),
        Place::Llm(model, n) => found["model"] = json!({"name": model, "exchange": n}),
    }
    found
}
