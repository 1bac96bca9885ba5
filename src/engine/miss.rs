//! A request the recordings did not answer, typed from where replay finds
//! it to the ledger and the reports: what was sent, the nearest recordings
//! and where each differs, and the match rule that decided it. JSON only
//! at the edges: the JSON-RPC error a client gets ([`Miss::error`]) and
//! what the usage report and the plugins read ([`Miss::data`]).

use serde_json::{Value, json};

use crate::jsonrpc::ErrorObject;
use crate::limits::{MAX_MISS_COMPARED, MAX_MISS_COMPARED_LEAVES, MAX_SHOWN_BYTES};
use crate::mcp;
use crate::normalize::{self, Difference};
use crate::util::clip;

/// Differences of one nearest recording a miss keeps (how many differ in
/// all is kept beside them).
const DIFFERENCES_KEPT: usize = 32;

/// How many recorded requests a miss lists.
const NEAREST_SHOWN: usize = 3;

/// Of `candidates` recorded requests of a miss's kind, how many it
/// compares with `requested`: a bounded number, fewer for a request of
/// many leaves (one at least).
pub fn compared(candidates: usize, requested: &Value) -> usize {
    let leaves = crate::engine::nearest::leaf_count(requested);
    candidates.min(MAX_MISS_COMPARED).min((MAX_MISS_COMPARED_LEAVES / leaves).max(1))
}

/// The recorded requests (params as compared) nearest `requested`, each
/// distinct one once, nearest first; and how many were distinct.
pub fn nearest(recorded: impl IntoIterator<Item = Value>, requested: &Value) -> (Vec<Nearest>, usize) {
    let mut distinct: Vec<Value> = Vec::new();
    for params in recorded {
        if !distinct.contains(&params) {
            distinct.push(params);
        }
    }
    let mut nearest: Vec<Nearest> =
        distinct.iter().map(|params| Nearest::between(params, requested)).collect();
    nearest.sort_by_key(|near| near.differing);
    nearest.truncate(NEAREST_SHOWN);
    (nearest, distinct.len())
}

/// A request the recordings did not answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Miss {
    /// The one line a person or a model reads: the JSON-RPC error's message,
    /// a failed tool call's text.
    pub message: String,
    pub server: String,
    pub method: String,
    /// The params as compared (redacted, canonical), cut to what is shown.
    pub params: Value,
    /// The nearest recordings, nearest first.
    pub nearest: Vec<Nearest>,
    /// The match rule that decided the request, and why it picked nothing.
    pub rule: Option<RuleRefusal>,
}

/// One recorded request near a miss.
#[derive(Clone, Debug, PartialEq)]
pub struct Nearest {
    /// Its params as compared, cut to what is shown.
    pub params: Value,
    /// The first `DIFFERENCES_KEPT` places where it differs from what
    /// was sent, values cut to what is shown.
    pub differences: Vec<Difference>,
    /// How many places differ in all.
    pub differing: usize,
}

/// The match rule that decided a missed request: its label and why it
/// picked no recording.
#[derive(Clone, Debug, PartialEq)]
pub struct RuleRefusal {
    pub rule: String,
    pub why: String,
}

impl Miss {
    /// A miss of `method` on `server` with `params`, saying `message`.
    pub fn new(message: String, server: &str, method: &str, params: &Value) -> Miss {
        Miss {
            message,
            server: clip(server, MAX_SHOWN_BYTES).into_owned(),
            method: clip(method, MAX_SHOWN_BYTES).into_owned(),
            params: normalize::clipped(params, MAX_SHOWN_BYTES),
            nearest: Vec::new(),
            rule: None,
        }
    }

    /// The same miss with `nearest`, nearest first.
    pub fn with_nearest(self, nearest: Vec<Nearest>) -> Miss {
        Miss { nearest, ..self }
    }

    /// The same miss, decided by match rule `rule`, which picked nothing
    /// because `why`: said in its message too.
    pub fn decided_by(mut self, rule: String, why: String) -> Miss {
        self.message.push_str(&format!("; rule {rule} decided it: {why}"));
        self.rule = Some(RuleRefusal { rule, why });
        self
    }

    /// The JSON-RPC error a client gets for it (`-32001`, [`Miss::data`]).
    pub fn error(&self) -> ErrorObject {
        ErrorObject::new(mcp::REPLAY_MISS, self.message.clone()).with_data(self.data())
    }

    /// `{"server", "method", "params", "nearest": [{"params", "differences",
    /// "differing"}], "rule"?}`: the error's `data`, and what the usage
    /// report keeps of a case's first miss.
    pub fn data(&self) -> Value {
        let nearest: Vec<Value> = self
            .nearest
            .iter()
            .map(|near| {
                let differences: Vec<Value> = near.differences.iter().map(Difference::to_json).collect();
                json!({"params": near.params, "differences": differences, "differing": near.differing})
            })
            .collect();
        let mut data = json!({
            "server": self.server,
            "method": self.method,
            "params": self.params,
            "nearest": nearest,
        });
        if let Some(RuleRefusal { rule, why }) = &self.rule {
            data["rule"] = json!({"rule": rule, "why": why});
        }
        data
    }

    /// The log line: the message, then every place the nearest recording
    /// differs when more than the one the message names.
    pub fn told(&self) -> String {
        match self.nearest.first().filter(|near| near.differing > 1) {
            Some(near) => {
                let pointers = near.differences.iter().map(|d| d.pointer.clone());
                format!("{}; it differs at {}", self.message, normalize::told(pointers, near.differing))
            }
            None => self.message.clone(),
        }
    }
}

impl Nearest {
    /// A recording whose params were `params`, beside what was sent
    /// (`requested`): where they differ, kept as far as is shown, and how
    /// many places in all.
    pub fn between(params: &Value, requested: &Value) -> Nearest {
        let (differences, differing) = normalize::first_differences(params, requested, DIFFERENCES_KEPT);
        let shown = |value: Option<Value>| value.map(|v| normalize::clipped(&v, MAX_SHOWN_BYTES));
        let differences = differences
            .into_iter()
            .map(|d| Difference {
                pointer: clip(&d.pointer, MAX_SHOWN_BYTES).into_owned(),
                recorded: shown(d.recorded),
                requested: shown(d.requested),
            })
            .collect();
        Nearest { params: normalize::clipped(params, MAX_SHOWN_BYTES), differences, differing }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_miss_keeps_a_bounded_count_of_differences_and_counts_them_all() {
        let recorded: serde_json::Map<String, Value> =
            (0..40).map(|i| (format!("k{i:02}"), json!(i))).collect();
        let requested: serde_json::Map<String, Value> =
            (0..40).map(|i| (format!("k{i:02}"), json!("x".repeat(1000)))).collect();
        let near = Nearest::between(&json!({"arguments": recorded}), &json!({"arguments": requested}));
        assert_eq!((near.differences.len(), near.differing), (DIFFERENCES_KEPT, 40));
        let requested = near.differences[0].requested.as_ref().unwrap().as_str().unwrap().to_owned();
        assert!(requested.len() < 1000, "a value is cut to what is shown: {}", requested.len());
        let miss = Miss::new("mcp-tape: no recorded answer".into(), "s", "tools/call", &json!({}))
            .with_nearest(vec![near])
            .decided_by("t.toml:3 (nearest)".into(), "no recording within reach".into());
        assert!(miss.message.ends_with("; rule t.toml:3 (nearest) decided it: no recording within reach"));
        assert!(miss.told().ends_with(", /arguments/k07, and 32 more"), "{}", miss.told());
        let data = miss.data();
        assert_eq!(data["nearest"][0]["differing"], 40);
        assert_eq!(data["nearest"][0]["differences"].as_array().unwrap().len(), DIFFERENCES_KEPT);
        assert!(
            data["nearest"][0]["differences"].as_array().unwrap().iter().all(|d| d["pointer"].is_string())
        );
        assert_eq!(data["rule"]["rule"], "t.toml:3 (nearest)");
        assert_eq!(miss.error().code, mcp::REPLAY_MISS);
    }
}
