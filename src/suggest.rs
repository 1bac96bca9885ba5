//! `mcp-tape rules suggest`: from the misses a run's usage report
//! (`--report`) lists, the `[[match]]` tables that would have answered
//! them, for the user to review and paste into `mcp-tape.toml`. Each
//! table names the missed server and tool (prompt, URI or method) and
//! turns the pointers where the nearest recording differed into
//! `normalize` folds (when case, white space or number spelling is all
//! that differs) or `ignore` pointers (anything else). Every table is
//! checked against the cassette: it says which recording it would answer
//! the miss with, or why it still would not.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;

use crate::cassette::store;
use crate::cassette::tape::{Cursors, Recorded, Tape};
use crate::config::Pace;
use crate::engine::Asked;
use crate::engine::Outcome;
use crate::engine::by_rule::RuleIndex;
use crate::engine::ledger::{CaseKey, Ledger};
use crate::engine::llm::{LLM_SERVER_PREFIX, LlmCall, LlmTape};
use crate::error::Error;
use crate::matching::{self, Fold, Glob, MatchRules, Pointer};
use crate::mcp;
use crate::model::{Era, LlmAnswer, LlmExchange};
use crate::normalize::{self, Difference, Rules};

/// One miss the report lists: what was asked, and where the nearest
/// recording differed.
#[derive(Clone, Debug, PartialEq)]
pub struct ReportedMiss {
    pub server: String,
    pub method: String,
    /// The requested params as compared (redacted, `_meta` out).
    pub params: Value,
    pub misses: u64,
    pub differences: Vec<Difference>,
}

impl ReportedMiss {
    /// The agent's model a miss of a request to one is of (its server is
    /// `model NAME`).
    fn model(&self) -> Option<&str> {
        self.server.strip_prefix(LLM_SERVER_PREFIX)
    }

    /// The case this miss is of.
    pub fn case(&self) -> CaseKey {
        CaseKey::of(&self.server, &self.method, Some(&self.params))
    }
}

/// The misses of a usage report.
///
/// # Errors
///
/// [`Error::Config`] for a report that is not an mcp-tape usage report.
pub fn misses(report: &Value) -> Result<Vec<ReportedMiss>, Error> {
    if report.get("mcpTape").is_none() {
        return Err(Error::Config("not an mcp-tape usage report (written by --report)".into()));
    }
    let cases = report.get("cases").and_then(Value::as_array).into_iter().flatten();
    let found = cases.filter_map(|case| {
        let data = case.pointer("/firstMiss/data")?;
        let differences = data.pointer("/nearest/0/differences").and_then(Value::as_array);
        Some(ReportedMiss {
            server: data.get("server")?.as_str()?.to_owned(),
            method: data.get("method")?.as_str()?.to_owned(),
            params: data.get("params").cloned().unwrap_or(Value::Null),
            misses: case.get("misses").and_then(Value::as_u64).unwrap_or(1),
            differences: differences.into_iter().flatten().filter_map(Difference::from_json).collect(),
        })
    });
    Ok(found.collect())
}

/// The rules file text that would answer `misses` from the cassettes at
/// `cassettes`, each table with a comment saying what it was checked to do.
///
/// # Errors
///
/// Cassettes that cannot be read.
pub fn suggest(
    misses: &[ReportedMiss],
    cassettes: &[PathBuf],
    normalization: &Rules,
) -> Result<String, Error> {
    let loaded = store::load_as_text(&store::cassette_files(cassettes)?)?;
    let tape = Tape::new(loaded.exchanges, normalization);
    let llms = loaded.llm_exchanges;
    // Each suggested table names one server, method and name: its check looks at their recordings.
    let mut cases: HashMap<(&str, &str, &str), Vec<&Arc<Recorded>>> = HashMap::new();
    for recorded in tape.recordings() {
        let name = recorded.subject.as_deref().unwrap_or_default();
        cases.entry((&recorded.server, &recorded.method, name)).or_default().push(recorded);
    }
    let shown: Vec<String> = cassettes.iter().map(|p| p.display().to_string()).collect();
    let mut out = String::new();
    if misses.is_empty() {
        out.push_str("# The report lists no misses: nothing to suggest.\n");
        return Ok(out);
    }
    let _ = writeln!(
        out,
        "# {} match rules suggested for the misses of a run, each checked against {}.\n\
         # Review them before pasting into mcp-tape.toml: an ignored pointer no longer tells recordings apart.",
        misses.len(),
        shown.join(", ")
    );
    for miss in misses {
        let table = table(miss);
        let _ = write!(out, "\n# {}: missed {} times", miss.case(), miss.misses);
        if !miss.differences.is_empty() {
            let _ =
                write!(out, "; the nearest recording differed at {}", normalize::describe(&miss.differences));
        }
        let checked = match miss.model() {
            Some(model) => check_llm(&table, model, miss, &llms, normalization),
            None => {
                let name = mcp::subject_of(&miss.method, Some(&miss.params)).unwrap_or_default();
                let recordings = cases
                    .get(&(miss.server.as_str(), miss.method.as_str(), name))
                    .map_or(&[][..], Vec::as_slice);
                check(&table, miss, recordings, normalization)
            }
        };
        let _ = writeln!(out, "\n# {checked}\n{table}");
    }
    Ok(out)
}

/// `text` as a TOML basic string: JSON's escapes, which TOML shares, and
/// DEL, which JSON leaves raw and TOML refuses raw, as `\u007f`.
fn toml_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_default().replace('\u{7f}', "\\u007f")
}

/// The `[[match]]` table for one miss.
fn table(miss: &ReportedMiss) -> String {
    let quote = toml_string;
    let mut lines = vec!["[[match]]".to_owned()];
    match miss.model() {
        Some(model) => lines.push(format!("model = {}", quote(&Glob::escape(model)))),
        None => {
            lines.push(format!("server = {}", quote(&Glob::escape(&miss.server))));
            let key = match miss.method.as_str() {
                "tools/call" => "tool",
                "prompts/get" => "prompt",
                "resources/read" => "uri",
                _ => "method",
            };
            let subject = mcp::subject_of(&miss.method, Some(&miss.params))
                .filter(|_| key != "method")
                .unwrap_or(&miss.method);
            lines.push(format!("{key} = {}", quote(&Glob::escape(subject))));
        }
    }
    let (mut ignore, mut normalize) = (Vec::new(), Vec::new());
    for difference in &miss.differences {
        let folds = match (&difference.recorded, &difference.requested) {
            (Some(recorded), Some(requested)) => matching::folds_that_join(recorded, requested),
            _ => None,
        };
        match folds {
            Some(folds) => {
                let names: Vec<String> = folds.iter().map(|f| quote(Fold::as_str(*f))).collect();
                let pointer = Pointer::literal(&difference.pointer);
                normalize.push(format!("{} = [{}]", quote(&pointer), names.join(", ")));
            }
            None if difference.pointer.is_empty() => {}
            None => ignore.push(quote(&Pointer::literal(&difference.pointer))),
        }
    }
    if !ignore.is_empty() {
        lines.push(format!("ignore = [{}]", ignore.join(", ")));
    }
    if !normalize.is_empty() {
        lines.push(format!("normalize = {{ {} }}", normalize.join(", ")));
    }
    lines.join("\n") + "\n"
}

/// What `table` would do with `miss` over `recordings` (those of its
/// server, method and name): which recording it would answer with, or why
/// none.
fn check(table: &str, miss: &ReportedMiss, recordings: &[&Arc<Recorded>], normalization: &Rules) -> String {
    let rules = match MatchRules::parse(std::path::Path::new("(suggested)"), table) {
        Ok(rules) => rules,
        Err(error) => return format!("not checked: {error}"),
    };
    let index = RuleIndex::new(rules, recordings.iter().copied(), normalization);
    let Some(rule) = index.rule_for(&miss.server, &miss.method, Some(&miss.params)) else {
        return "checked: this rule does not decide the missed request".into();
    };
    let picked = index.pick(
        rule,
        Asked { era: Era::Handshake, server: &miss.server, method: &miss.method },
        &miss.params,
        &mut Cursors::default(),
    );
    match picked {
        Ok((recorded, _)) => match &recorded.source {
            Some(source) => format!("checked: answers the miss with the recording at {source}"),
            None => "checked: answers the miss with a recording".into(),
        },
        Err(refusal) => format!("checked: would still miss: {}", refusal.why),
    }
}

/// What `table` would do with a miss of a request to the agent's model
/// `model` over the cassettes' `recordings` of it.
fn check_llm(
    table: &str,
    model: &str,
    miss: &ReportedMiss,
    recordings: &[LlmExchange],
    normalization: &Rules,
) -> String {
    let rules = match MatchRules::parse(std::path::Path::new("(suggested)"), table) {
        Ok(rules) => rules,
        Err(error) => return format!("not checked: {error}"),
    };
    let Some((method, target)) = miss.method.split_once(' ') else {
        return "not checked: the report does not say the request's method and target".into();
    };
    let tape = LlmTape::new(recordings.to_vec(), normalization, rules);
    let body = miss.params.to_string();
    let call = LlmCall { model, method, target, body: &body, credentials: &[] };
    let reply = tape.answer(&call, normalization, Pace::Instant, &Ledger::default());
    match reply.outcome {
        Outcome::Hit | Outcome::Ruled => "checked: answers the miss with a recording".into(),
        _ => match reply.answer {
            LlmAnswer::Whole(error) => format!("checked: would still miss: {error}"),
            LlmAnswer::Events(_) => "checked: would still miss".into(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn differences_become_folds_where_folds_join_them_else_ignores() {
        let miss = ReportedMiss {
            server: "mcp_Me*".into(),
            method: "tools/call".into(),
            params: json!({"name": "Find", "arguments": {}}),
            misses: 2,
            differences: vec![
                Difference {
                    pointer: "/arguments/subject".into(),
                    recorded: Some(json!("Team Sync")),
                    requested: Some(json!("team sync")),
                },
                Difference {
                    pointer: "/arguments/top".into(),
                    recorded: Some(json!(5)),
                    requested: Some(json!("5")),
                },
                Difference {
                    pointer: "/arguments/at".into(),
                    recorded: Some(json!(1)),
                    requested: Some(json!(2)),
                },
                Difference { pointer: "/arguments/new".into(), recorded: None, requested: Some(json!(true)) },
            ],
        };
        let text = table(&miss);
        assert_eq!(
            text,
            "[[match]]\nserver = \"mcp_Me\\\\*\"\ntool = \"Find\"\nignore = [\"/arguments/at\", \"/arguments/new\"]\n\
             normalize = { \"/arguments/subject\" = [\"case\"], \"/arguments/top\" = [\"number\"] }\n"
        );
        let rules = MatchRules::parse(std::path::Path::new("t.toml"), &text).unwrap();
        assert_eq!(rules.find("mcp_Me*", "tools/call", "Find"), Some(0));
        assert_eq!(rules.find("mcp_MeServer", "tools/call", "Find"), None, "the server name is escaped");
    }

    #[test]
    fn any_name_makes_valid_toml_and_a_literal_star_stays_literal() {
        let miss = ReportedMiss {
            server: "mcp_\u{7f}Odd".into(),
            method: "tools/call".into(),
            params: json!({"name": "Del\u{7f}ete", "arguments": {}}),
            misses: 1,
            differences: vec![
                Difference {
                    pointer: "/arguments/*".into(),
                    recorded: Some(json!(1)),
                    requested: Some(json!(2)),
                },
                Difference {
                    pointer: "/arguments/a\u{7f}".into(),
                    recorded: Some(json!(1)),
                    requested: None,
                },
            ],
        };
        let text = table(&miss);
        let rules = MatchRules::parse(std::path::Path::new("t.toml"), &text)
            .unwrap_or_else(|e| panic!("{e}: {text}"));
        assert_eq!(rules.find("mcp_\u{7f}Odd", "tools/call", "Del\u{7f}ete"), Some(0), "{text}");
        assert!(text.contains(r#"ignore = ["/arguments/~2", "/arguments/a\u007f"]"#), "{text}");
        // The rule ignores the argument named `*`, not every argument.
        let prepared = rules.rules()[0].prepare(&json!({"arguments": {"*": 1, "other": 2}}));
        assert_eq!(prepared, json!({"arguments": {"other": 2}}));
    }

    /// A miss of a request to the agent's model gets a table about that
    /// model, checked against the cassette's model exchanges.
    #[test]
    fn a_model_miss_gets_a_model_table_checked_against_its_recordings() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.sqlite");
        let line = json!({"model": "openai", "method": "POST", "target": "/chat/completions?v=1",
            "request": r#"{"user":"u-1","messages":["hi"]}"#, "status": 200,
            "contentType": "application/json", "body": "{}"});
        let mut cassette = store::Cassette::open(&path).unwrap();
        crate::interchange::jsonl::import(format!("{line}\n").as_bytes(), &mut cassette).unwrap();
        drop(cassette);
        let miss = ReportedMiss {
            server: "model openai".into(),
            method: "POST /chat/completions?v=1".into(),
            params: json!({"user": "u-2", "messages": ["hi"]}),
            misses: 1,
            differences: vec![Difference {
                pointer: "/user".into(),
                recorded: Some(json!("u-1")),
                requested: Some(json!("u-2")),
            }],
        };
        let text = suggest(&[miss], &[path], &Rules::default()).unwrap();
        assert!(
            text.contains("# checked: answers the miss with a recording\n[[match]]\nmodel = \"openai\"\nignore = [\"/user\"]\n"),
            "{text}"
        );
    }
}
