//! Replay's misses: why nothing recorded answers a request, the nearest
//! recordings and where each differs, and the answer `--on-miss` makes of
//! it. The [`Miss`] is typed from here to the ledger and the reports.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{Replay, mock_answer};
use crate::cassette::tape::{Named, Recorded};
use crate::config::OnMiss;
use crate::engine::answer::Answer;
use crate::engine::by_rule::Refusal;
use crate::engine::ledger::CaseKey;
use crate::engine::miss::{self, Miss};
use crate::engine::step::{Call, Outcome};
use crate::jsonrpc::ErrorCode;
use crate::limits::MAX_SHOWN_BYTES;
use crate::mcp::{self, fallback};
use crate::model::Era;
use crate::normalize;
use crate::util::{clip, off_the_workers, printable};

impl Replay {
    /// The answer to a request that missed, as `--on-miss` says; logged.
    pub(super) fn miss_answer(&self, call: &Call, miss: Miss, identity: &Value) -> Answer {
        tracing::warn!("{}", printable(&miss.told()));
        match self.on_miss {
            OnMiss::ToolResult if call.method == "tools/call" => {
                miss_as_result(call, &miss.message, identity)
            }
            OnMiss::Error | OnMiss::ToolResult => None,
            OnMiss::Mock => Some(
                miss_as_result(call, &miss.message, identity)
                    .unwrap_or_else(|| mock_answer(call, Outcome::Miss, identity)),
            ),
        }
        .unwrap_or_else(|| Answer::error(call, Outcome::Miss, &miss.error()))
    }

    /// Why nothing recorded answers `call` on a server the cassettes hold:
    /// the name no recording holds, with those that are recorded.
    pub(super) fn unrecorded_subject(&self, call: &Call, params: Option<&Value>) -> String {
        let kind = match call.method {
            "tools/call" => (Named::Tool, "tool"),
            "prompts/get" => (Named::Prompt, "prompt"),
            "resources/read" => (Named::Resource, "resource"),
            _ => return format!("nothing of method {} is recorded", clip(call.method, MAX_SHOWN_BYTES)),
        };
        let (named, word) = kind;
        let name = mcp::subject_of(call.method, params).unwrap_or_default();
        let held = self.tape.names(call.server, named);
        let recorded = match held.len() {
            0 => "none".to_owned(),
            count => {
                normalize::told(held.iter().map(|name| format!("{:?}", clip(name, MAX_SHOWN_BYTES))), count)
            }
        };
        format!("no {word} {:?} is recorded (recorded {word}s: {recorded})", clip(name, MAX_SHOWN_BYTES))
    }

    /// The miss of a request nothing recorded comes near: `why`, and no
    /// nearest recording. Counted in the ledger.
    pub(super) fn unrecorded_miss(&self, call: &Call, why: &str) -> Miss {
        let params = self.redacted(call.params());
        let case = CaseKey::of(call.server, call.method, params.as_deref());
        let params = self.rules.canonical_params(params.as_deref());
        let message =
            format!("mcp-tape: no recorded answer for {case}: {why}{}", self.pseudonym_hint(&params));
        let miss = Miss::new(message, call.server, call.method, &params);
        self.ledger.missed(&case, &miss);
        miss
    }

    /// The miss of a request that a server with recordings should have
    /// recorded (a listed tool, prompt or resource, or a method the mock
    /// does not know), or `None` when the mock's answer is the right one;
    /// `refusal`: why the match rule that decided it picked nothing.
    pub(super) fn miss(
        &self,
        call: &Call,
        params: Option<&Value>,
        refusal: Option<&Refusal>,
    ) -> Option<Miss> {
        let recorded = self.tape.recorded(call.server, call.method);
        let named = match call.method {
            "tools/call" => Some(Named::Tool),
            "prompts/get" => Some(Named::Prompt),
            "resources/read" => Some(Named::Resource),
            _ => None,
        };
        // The recordings of its kind; their params are read only for those compared.
        let candidates: Vec<&Arc<Recorded>> = match named {
            Some(kind) => {
                let name = mcp::subject_of(call.method, params);
                if !self.tape.knows(call.server, kind, name.unwrap_or_default()) {
                    return None;
                }
                recorded.iter().filter(|r| r.subject.as_deref() == name).collect()
            }
            None if !recorded.is_empty() && is_unknown_to_mock(call.era, call.method) => {
                recorded.iter().collect()
            }
            None => return None,
        };
        let case = CaseKey::of(call.server, call.method, params);
        let work_out = || self.nearest_miss(call, &case.to_string(), params, &candidates);
        // Comparing with many recordings takes time: no async worker waits on it.
        let mut miss = if candidates.len() > 1 { off_the_workers(work_out) } else { work_out() };
        if let Some(refusal) = refusal {
            miss = miss.decided_by(self.by_rule.rules().label(refusal.rule), refusal.why.clone());
        }
        self.ledger.missed(&case, &miss);
        Some(miss)
    }

    /// The miss of `call` (`what`: its case) beside `candidates`, the
    /// recordings of its kind: the nearest ones and where each differs, the
    /// first difference named in the message.
    pub(super) fn nearest_miss(
        &self,
        call: &Call,
        what: &str,
        params: Option<&Value>,
        candidates: &[&Arc<Recorded>],
    ) -> Miss {
        let requested = self.rules.canonical_params(params);
        // A recording held in both eras (or twice) is one candidate.
        let compared = miss::compared(candidates.len(), &requested);
        let recorded =
            candidates[..compared].iter().map(|c| self.rules.canonical_params(c.params().as_ref()));
        let (nearest, kinds) = miss::nearest(recorded, &requested);
        let differ = match candidates.len() - compared {
            0 => format!("{kinds} recorded request(s) of this kind differ"),
            left => format!(
                "{kinds} of the first {compared} recorded requests of this kind differ ({left} more not compared)"
            ),
        };
        // What a framework that shows only the message still shows: the
        // first difference from the nearest recording, with both values.
        let first = nearest.first().and_then(|near| Some((near.differences.first()?, near.differing)));
        let differs = match first {
            None if kinds == 0 => "nothing of this kind is recorded".to_owned(),
            None => differ,
            Some((difference, differing)) => {
                let more = if differing > 1 { format!(" and {} more", differing - 1) } else { String::new() };
                format!("the nearest recording differs at {difference}{more}; {differ}")
            }
        };
        let message =
            format!("mcp-tape: no recorded answer for {what}: {differs}{}", self.pseudonym_hint(&requested));
        Miss::new(message, call.server, call.method, &requested).with_nearest(nearest)
    }
}

/// Whether the mock answers `method` with "method not found" in `era`.
fn is_unknown_to_mock(era: Era, method: &str) -> bool {
    matches!(fallback::answer(era, method, None), Err(e) if e.code == ErrorCode::METHOD_NOT_FOUND)
}

/// A miss of a listed tool, prompt or resource told as its method's result,
/// so that a model reads a failed call, not a protocol error: a tool result
/// with `isError`, a prompt or a resource whose text is the miss's message.
/// `None` for other methods.
fn miss_as_result(call: &Call, text: &str, identity: &Value) -> Option<Answer> {
    let result = match call.method {
        "tools/call" => json!({"content": [{"type": "text", "text": text}], "isError": true}),
        "prompts/get" => json!({
            "description": text,
            "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
        }),
        "resources/read" => {
            let uri = mcp::subject_of(call.method, call.params()).unwrap_or_default();
            json!({"contents": [{"uri": uri, "mimeType": "text/plain", "text": text}]})
        }
        _ => return None,
    };
    Some(Answer::result(call, Outcome::Miss, result, identity))
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::ServiceAnswers;
    use super::*;
    use crate::cassette::tape::Tape;
    use crate::config::Pace;
    use crate::engine::Facts;
    use crate::jsonrpc::{Params, RequestId};
    use crate::limits::{MAX_MISS_COMPARED, MAX_MISS_COMPARED_LEAVES};
    use crate::normalize::Rules;

    /// A miss once compared the request with every recording of its tool:
    /// 20k recordings made one miss take seconds. It compares a bounded
    /// number and says so.
    #[test]
    fn a_miss_compares_a_bounded_number_of_recordings_and_says_so() {
        let rules = Rules::default();
        let recorded: Vec<_> = (0..MAX_MISS_COMPARED + 5)
            .map(|n| {
                let mut exchange = crate::normalize::tests::sample("mcp_A", "t", "x");
                exchange.request["params"]["arguments"] = json!({"n": n});
                exchange.key = rules.match_key("mcp_A", "tools/call", exchange.request.get("params"));
                exchange.to_text()
            })
            .collect();
        let tape = Tape::new(recorded, &rules);
        let replay = Replay::new(tape, ServiceAnswers::default(), rules, OnMiss::Error, Pace::Instant);
        let id = RequestId::from_value(&json!(1)).unwrap();
        // 40 arguments no recording has: more than a miss's data echoes (32).
        let mut arguments: serde_json::Map<String, Value> =
            (0..40).map(|k| (format!("k{k}"), json!(k))).collect();
        arguments.insert("n".into(), json!("new"));
        let params = Params::new(json!({"name": "t", "arguments": arguments}));
        let facts = Facts::default();
        let call = Call {
            server: "mcp_A",
            era: Era::Handshake,
            session: None,
            id: &id,
            method: "tools/call",
            params: Some(&params),
            facts: &facts,
        };
        let answer = replay.answer(&call).unwrap();
        assert_eq!(answer.outcome, Outcome::Miss);
        let text = &answer.messages[0].json;
        let told = format!(
            "{MAX_MISS_COMPARED} of the first {MAX_MISS_COMPARED} recorded requests of this kind differ (5 more not compared)"
        );
        assert!(text.contains(&told), "{text}");
        assert!(text.contains(r#"(recorded absent, requested 0) and 40 more;"#), "{text}");
        // The log line lists the first differing pointers and counts all 41.
        let logged = replay.miss(&call, Some(params.value()), None).unwrap().told();
        assert!(
            logged.ends_with(
                "it differs at /arguments/k0, /arguments/k1, /arguments/k10, /arguments/k11, \
             /arguments/k12, /arguments/k13, /arguments/k14, /arguments/k15, and 33 more"
            ),
            "{logged}"
        );
        // A request of many leaves is compared with fewer recordings: the leaves compared are bounded.
        let many: serde_json::Map<String, Value> = (0..4096).map(|k| (format!("k{k}"), json!(k))).collect();
        let params = Params::new(json!({"name": "t", "arguments": many}));
        let answer = replay.answer(&Call { params: Some(&params), ..call }).unwrap();
        let compared = MAX_MISS_COMPARED_LEAVES / 4097; // the arguments and the name
        let told = format!(
            "{compared} of the first {compared} recorded requests of this kind differ ({} more not compared)",
            MAX_MISS_COMPARED + 5 - compared
        );
        assert!(answer.messages[0].json.contains(&told), "{}", answer.messages[0].json);
    }
}
