//! The agent's model on the tape (`--model NAME=URL`): what the engine
//! does with a request to the tape's `/model/NAME/...`, as plain data like
//! an MCP call. The front door reads the request into a [`LlmCall`];
//! replay answers it from the cassettes' model exchanges ([`LlmTape`]:
//! method, target and body compared, headers never; a request made again
//! gets the next recording of it), or with a miss in the API's own error
//! shape, status 400, which no SDK retries; record forwards it and stores
//! what came back ([`LlmFlight`]). No vendor's API is parsed: a streamed
//! answer is its events as written.

use std::cell::OnceCell;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use super::by_rule::{Filed, Refusal, RuleIndex, RuleUse};
use super::flight::Held;
use super::ledger::{CaseKey, Ledger};
use super::memory::Memory;
use super::miss::{self, Miss};
use super::record::Recorder;
use super::step::{Asked, Outcome, PlainReply};
use super::turn;
use crate::cassette::tape::{Cursors, UseMark};
use crate::config::Pace;
use crate::jsonrpc::scan;
use crate::matching::MatchRules;
use crate::model::{Era, LlmAnswer, LlmExchange, MatchKey, Status, canonical_json};
use crate::normalize::{self, Rules};
use crate::pseudonym::Scope;
use crate::redact;
use crate::util::{FastMap, lock, printable};

/// The status of a request the cassettes do not answer: a client error no
/// SDK retries (unlike 408, 409, 429 and 5xx).
pub const MISS_STATUS: Status = Status::BAD_REQUEST;

/// What the ledger's server of a request to a model begins with (`model NAME`).
pub const LLM_SERVER_PREFIX: &str = "model ";

/// One request to the agent's model, as the front door read it.
#[derive(Clone, Copy, Debug)]
pub struct LlmCall<'a> {
    /// The `NAME` of `/model/NAME`.
    pub model: &'a str,
    pub method: &'a str,
    /// The path after `/model/NAME` (`/` for none), with its query, the
    /// query's credentials left out.
    pub target: &'a str,
    /// The request body as the client wrote it.
    pub body: &'a str,
    /// Credentials the request carried (headers, query): never stored.
    pub credentials: &'a [String],
}

impl LlmCall<'_> {
    /// `METHOD TARGET`, the method the matcher knows it by.
    fn asked(&self) -> String {
        format!("{} {}", self.method, self.target)
    }

    /// Where it went, for the matcher: its model and `method` (its
    /// [`LlmCall::asked`]).
    fn at<'m>(&'m self, method: &'m str) -> Asked<'m> {
        Asked { era: Era::Handshake, server: self.model, method }
    }
}

/// `recorded`'s answer, as `outcome`.
fn reply(outcome: Outcome, recorded: &LlmExchange, pace: Pace) -> PlainReply {
    PlainReply {
        outcome,
        status: recorded.status,
        content_type: recorded.content_type.clone(),
        answer: recorded.answer.clone(),
        pace,
    }
}

/// One model exchange as replay's matcher holds it.
#[derive(Debug)]
pub struct LlmRecorded {
    pub exchange: LlmExchange,
    /// `METHOD TARGET`: the method the matcher knows it by.
    asked: String,
    /// The ledger's case of a request it answers.
    case: CaseKey,
    /// The body as compared ([`body_value`]).
    compared: Value,
    used: UseMark,
    /// What the run's timeline says of it ([`turn::told`]), worked out
    /// the first time it answers.
    told: OnceLock<Arc<str>>,
}

impl LlmRecorded {
    /// [`turn::told`] of its request and answer: a request it answers
    /// exactly says the same.
    fn told(&self) -> Arc<str> {
        let told = || turn::told(&self.exchange.request, Some(&self.exchange.answer)).into();
        Arc::clone(self.told.get_or_init(told))
    }
}

/// The model exchanges of the cassettes, matched as MCP calls are: by key
/// (model, method, target and the body's canonical JSON; headers never),
/// then by the match rules about the model, both prepared at load.
#[derive(Default)]
pub struct LlmTape {
    recordings: Vec<Arc<LlmRecorded>>,
    /// Recordings of the same key, in recorded order.
    by_key: FastMap<MatchKey, Vec<Arc<LlmRecorded>>>,
    by_rule: RuleIndex<LlmRecorded>,
    /// How far the run has got through each run of recordings (a model
    /// has no sessions).
    cursors: Mutex<Cursors>,
    /// Keys worked out for bodies read before.
    keys: Memory<MatchKey>,
}

impl LlmTape {
    /// Indexes `recordings` for replay, and for `match_rules`.
    pub fn new(recordings: Vec<LlmExchange>, rules: &Rules, match_rules: MatchRules) -> LlmTape {
        let recordings: Vec<Arc<LlmRecorded>> = recordings
            .into_iter()
            .map(|exchange| {
                let asked = format!("{} {}", exchange.method, exchange.target);
                let case = case_of(&exchange.model, &exchange.method, &exchange.target);
                let compared = body_value(rules, &exchange.request);
                let used = UseMark::default();
                Arc::new(LlmRecorded { exchange, asked, case, compared, used, told: OnceLock::new() })
            })
            .collect();
        let mut by_key: FastMap<MatchKey, Vec<Arc<LlmRecorded>>> = FastMap::default();
        for recorded in &recordings {
            let key = key_of(&recorded.exchange.model, &recorded.asked, &recorded.compared);
            by_key.entry(key).or_default().push(Arc::clone(recorded));
        }
        let by_rule = rule_index(match_rules, &recordings);
        LlmTape { recordings, by_key, by_rule, cursors: Mutex::default(), keys: Memory::default() }
    }

    /// The same recordings, for `match_rules`.
    pub fn with_match_rules(self, match_rules: MatchRules) -> LlmTape {
        LlmTape { by_rule: rule_index(match_rules, &self.recordings), ..self }
    }

    /// The recordings that never answered.
    pub fn unused(&self) -> impl Iterator<Item = &LlmExchange> {
        self.recordings.iter().filter(|r| !r.used.is_marked()).map(|r| &r.exchange)
    }

    pub fn is_empty(&self) -> bool {
        self.recordings.is_empty()
    }

    /// The recording of the same request as `call` (asked as `asked`): the
    /// next in recorded order, the last again once all have answered.
    fn find(&self, call: &LlmCall, asked: Asked, requested: &Requested) -> Option<Arc<LlmRecorded>> {
        let key =
            self.keys.get_or(asked, Some(call.body), || key_of(call.model, asked.method, requested.value()));
        let run = self.by_key.get(&key)?;
        let recorded = lock(&self.cursors).next_in(key, Era::Handshake, run).map(Arc::clone)?;
        recorded.used.mark();
        Some(recorded)
    }

    /// The recording the first match rule about `call`'s model picks; `None`
    /// when no rule decides it, the refusal when the rule picks nothing.
    fn by_rule(
        &self,
        call: &LlmCall,
        asked: Asked,
        requested: &Requested,
    ) -> Option<Result<(Arc<LlmRecorded>, RuleUse), Refusal>> {
        if self.by_rule.is_empty() {
            return None;
        }
        let (rule, choice) = self.by_rule.remembered(asked, Some(call.body), || {
            let rule = self.by_rule.rules().find_llm(call.model)?;
            Some((rule, self.by_rule.decide(rule, asked, requested.value())))
        })?;
        let picked =
            choice.and_then(|choice| self.by_rule.take(rule, &choice, asked, "", &mut lock(&self.cursors)));
        if let Ok((recorded, _)) = &picked {
            recorded.used.mark();
        }
        Some(picked)
    }

    /// Why nothing answers `call` (as `asked`, the ledger's `case`): the
    /// nearest recordings of the same model, method and target and where
    /// each differs.
    fn miss(&self, call: &LlmCall, asked: Asked, requested: &Requested, case: &CaseKey) -> Miss {
        let requested = requested.value();
        let same_llm = |r: &&Arc<LlmRecorded>| r.exchange.model == call.model;
        let same_target: Vec<_> =
            self.recordings.iter().filter(same_llm).filter(|r| r.asked == asked.method).collect();
        let compared = miss::compared(same_target.len(), requested);
        let (nearest, _) =
            miss::nearest(same_target[..compared].iter().map(|r| r.compared.clone()), requested);
        let shown = format!("{} {}", printable(call.method), printable(&redact::url_for_log(call.target)));
        let model = printable(call.model);
        let message = match (nearest.first(), self.recordings.iter().find(same_llm).map(|r| &r.exchange)) {
            (Some(near), _) => format!(
                "mcp-tape: no recording of model {model} answers this {shown}; the nearest differs at {}",
                normalize::describe(&near.differences)
            ),
            (None, Some(other)) => format!(
                "mcp-tape: no recording of model {model} answers {shown}: it was recorded for {} {} only",
                printable(&other.method),
                printable(&redact::url_for_log(&other.target))
            ),
            (None, None) => {
                format!("mcp-tape: the cassettes hold no exchange with model {model} (asked: {shown})")
            }
        };
        // The miss names the whole target (its query too), for `rules suggest` to ask again.
        Miss::new(message, &case.server, asked.method, requested).with_nearest(nearest)
    }

    /// Replay's answer to `call`: the recording of the same request, else
    /// the one the first match rule about its model picks, else a miss;
    /// counted on `ledger`'s case for it.
    pub fn answer(&self, call: &LlmCall, rules: &Rules, pace: Pace, ledger: &Ledger) -> PlainReply {
        let method = call.asked();
        let (asked, requested) = (call.at(&method), Requested::new(rules, call.body));
        let refusal = match self.answered(call, asked, &requested) {
            Ok((recorded, used)) => {
                let outcome = if used.is_some() { Outcome::Ruled } else { Outcome::Hit };
                let (case, told) = (&recorded.case, || told(call, &recorded, used.as_ref()));
                ledger.note_told(&case.server, &case.method, None, outcome, used.as_ref(), Some(&told));
                return reply(outcome, &recorded.exchange, pace);
            }
            Err(refusal) => refusal,
        };
        let case = case_of(call.model, call.method, call.target);
        let mut miss = self.miss(call, asked, &requested, &case);
        if let Some(Refusal { rule, why }) = refusal {
            miss = miss.decided_by(self.by_rule.rules().label(rule), why);
        }
        tracing::warn!("{}", miss.message);
        ledger.missed(&case, &miss);
        let told = || turn::told(call.body, None).into();
        ledger.note_told(&case.server, &case.method, None, Outcome::Miss, None, Some(&told));
        PlainReply {
            outcome: Outcome::Miss,
            status: MISS_STATUS,
            content_type: "application/json".into(),
            answer: LlmAnswer::Whole(error_body(call.target, &miss.message)),
            pace,
        }
    }

    /// The recording that answers `call` (asked as `asked`), exact or by a
    /// rule (with the rule's use); else the rule's refusal, if one decided.
    fn answered(
        &self,
        call: &LlmCall,
        asked: Asked,
        requested: &Requested,
    ) -> Result<(Arc<LlmRecorded>, Option<RuleUse>), Option<Refusal>> {
        if let Some(recorded) = self.find(call, asked, requested) {
            return Ok((recorded, None));
        }
        match self.by_rule(call, asked, requested) {
            Some(Ok((recorded, used))) => Ok((recorded, Some(used))),
            Some(Err(refusal)) => Err(Some(refusal)),
            None => Err(None),
        }
    }

    /// The recording that answers `call`, exact or by a rule, if one does
    /// (record `--mode missing`), counted on `ledger`.
    pub fn recorded(&self, call: &LlmCall, rules: &Rules, pace: Pace, ledger: &Ledger) -> Option<PlainReply> {
        let method = call.asked();
        let (recorded, used) =
            self.answered(call, call.at(&method), &Requested::new(rules, call.body)).ok()?;
        let case = &recorded.case;
        let told = || told(call, &recorded, used.as_ref());
        ledger.note_told(&case.server, &case.method, None, Outcome::Cassette, used.as_ref(), Some(&told));
        Some(reply(Outcome::Cassette, &recorded.exchange, pace))
    }
}

/// The recording of one model exchange, as its answer comes back.
pub struct LlmFlight {
    recorder: Recorder,
    exchange: LlmExchange,
    credentials: Vec<String>,
    started: Instant,
}

impl LlmFlight {
    /// Starts recording `call`.
    pub(super) fn new(recorder: Recorder, call: &LlmCall) -> LlmFlight {
        let exchange = LlmExchange {
            model: call.model.to_owned(),
            method: call.method.to_owned(),
            target: call.target.to_owned(),
            request: call.body.to_owned(),
            status: Status::OK,
            content_type: String::new(),
            answer: LlmAnswer::Whole(String::new()),
            recorded_at: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .ok()
                .and_then(|d| i64::try_from(d.as_secs()).ok()),
            source: None,
        };
        LlmFlight { recorder, exchange, credentials: call.credentials.to_vec(), started: Instant::now() }
    }

    /// The `NAME` of the model it goes to.
    pub fn model(&self) -> &str {
        &self.exchange.model
    }

    /// When the request was forwarded: a streamed event's offset counts from here.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// What the client was given cannot be stored as it saw it (`why`):
    /// nothing of it is, and the run fails naming it.
    pub fn lose(self, why: &str) {
        let LlmExchange { model, method, target, .. } = &self.exchange;
        let what = format!("model {} {} {}", printable(model), printable(method), printable(path(target)));
        self.recorder.lose(&what, why);
    }

    /// Stores the exchange with its answer (counted as forwarded on the
    /// recorder's ledger), the request's credentials scrubbed from both
    /// bodies and sensitive JSON keys redacted; the front door ends the
    /// answer once the held commit resolves.
    pub fn complete(self, status: Status, content_type: &str, answer: LlmAnswer) -> Held {
        let LlmFlight { recorder, mut exchange, credentials, .. } = self;
        let case = case_of(&exchange.model, &exchange.method, &exchange.target);
        let told = || turn::told(&exchange.request, Some(&answer)).into();
        recorder.ledger().note_told(&case.server, &case.method, None, Outcome::Forwarded, None, Some(&told));
        // A value the request carries under a credential key must not come back in the answer either.
        let mut secrets = credentials;
        if let Ok(request) = serde_json::from_str::<Value>(&exchange.request) {
            secrets.extend(recorder.rules.sensitive_values(&request));
        }
        if let Some(pseudonyms) = recorder.rules.pseudonyms() {
            pseudonyms.learn_llm(&exchange.request, &answer);
        }
        let clean = |text: &str| scrubbed(&recorder.rules, text, &secrets);
        exchange.request = clean(&exchange.request);
        exchange.answer = match answer {
            LlmAnswer::Whole(body) => LlmAnswer::Whole(clean(&body)),
            LlmAnswer::Events(mut events) => {
                for event in &mut events {
                    event.text = event.edited(clean);
                }
                LlmAnswer::Events(events)
            }
        };
        exchange.status = status;
        content_type.clone_into(&mut exchange.content_type);
        Held::stored(recorder.writer.write_llm(exchange))
    }
}

/// `text` as stored: as written, with sensitive JSON keys redacted (when
/// it is JSON), the `--redact-pattern` shapes and `credentials` scrubbed,
/// and pseudonymized when the rules say so.
fn scrubbed(rules: &Rules, text: &str, credentials: &[String]) -> String {
    match serde_json::from_str::<Value>(text) {
        Ok(mut json) => {
            let before = json.clone();
            rules.redact(&mut json);
            redact::scrub(&mut json, credentials);
            if let Some(pseudonyms) = rules.pseudonyms() {
                pseudonyms.pseudonymize(&mut json, Scope::Model);
            }
            if json == before { text.to_owned() } else { scan::rewrite(text, &json) }
        }
        Err(_) => {
            let mut plain = redact::scrub_str(text, credentials);
            rules.redact_text(&mut plain);
            match rules.pseudonyms() {
                Some(pseudonyms) => pseudonyms.pseudonymize_text(&plain),
                None => plain,
            }
        }
    }
}

/// A request's body as compared ([`body_value`]), worked out once, when
/// first asked for: a body the memo knows needs none.
struct Requested<'a> {
    rules: &'a Rules,
    body: &'a str,
    value: OnceCell<Value>,
}

impl<'a> Requested<'a> {
    fn new(rules: &'a Rules, body: &'a str) -> Requested<'a> {
        Requested { rules, body, value: OnceCell::new() }
    }

    fn value(&self) -> &Value {
        self.value.get_or_init(|| body_value(self.rules, self.body))
    }
}

/// A body as compared: its JSON with sensitive keys redacted (as record
/// stored it), else its text as a string.
fn body_value(rules: &Rules, body: &str) -> Value {
    let Ok(mut json) = serde_json::from_str::<Value>(body) else { return Value::String(body.to_owned()) };
    rules.redact(&mut json);
    json
}

/// What `match_rules` decide among in `recordings`.
fn rule_index(match_rules: MatchRules, recordings: &[Arc<LlmRecorded>]) -> RuleIndex<LlmRecorded> {
    RuleIndex::over(match_rules, recordings, |recorded, rules| {
        Some(Filed {
            rule: rules.find_llm(&recorded.exchange.model)?,
            asked: Asked { era: Era::Handshake, server: &recorded.exchange.model, method: &recorded.asked },
            name: "",
            compared: recorded.compared.clone(),
        })
    })
}

/// What the timeline says of `recorded` answering `call`: the
/// recording's own [`LlmRecorded::told`] when it is the same request, else
/// worked out from the request as made (`used`: a rule picked it).
fn told(call: &LlmCall, recorded: &LlmRecorded, used: Option<&RuleUse>) -> Arc<str> {
    match used {
        None => recorded.told(),
        Some(_) => turn::told(call.body, Some(&recorded.exchange.answer)).into(),
    }
}

/// The match key of a request to `model` as `asked` (`METHOD TARGET`)
/// whose body is compared as `body`.
fn key_of(model: &str, asked: &str, body: &Value) -> MatchKey {
    normalize::key_of(model, asked, &canonical_json(body))
}

/// The ledger's case of a request to a model: server `model NAME`, method
/// `METHOD PATH`.
pub fn case_of(model: &str, method: &str, target: &str) -> CaseKey {
    CaseKey::named(&format!("{LLM_SERVER_PREFIX}{model}"), &format!("{method} {}", path(target)), None)
}

/// A target's path, without its query.
fn path(target: &str) -> &str {
    target.split_once('?').map_or(target, |(path, _)| path)
}

/// A miss as the API says an error: Anthropic's shape on its Messages
/// path, else OpenAI's (which Azure OpenAI and most compatible servers
/// share).
fn error_body(target: &str, message: &str) -> String {
    let body = if path(target).ends_with("/messages") {
        json!({"type": "error", "error": {"type": "invalid_request_error", "message": message}})
    } else {
        json!({"error": {"message": message, "type": "invalid_request_error", "param": null, "code": "mcp_tape_miss"}})
    };
    body.to_string()
}

impl Recorder {
    /// Starts recording a request to the agent's model.
    pub fn llm(&self, call: &LlmCall) -> Box<LlmFlight> {
        Box::new(LlmFlight::new(self.clone(), call))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::ledger::Ledger;
    use crate::normalize::Normalization;

    fn recording(target: &str, request: &str, body: &str) -> LlmExchange {
        LlmExchange {
            model: "openai".into(),
            method: "POST".into(),
            target: target.into(),
            request: request.into(),
            status: Status::OK,
            content_type: "application/json".into(),
            answer: LlmAnswer::Whole(body.into()),
            recorded_at: None,
            source: None,
        }
    }

    fn call<'a>(target: &'a str, body: &'a str) -> LlmCall<'a> {
        LlmCall { model: "openai", method: "POST", target, body, credentials: &[] }
    }

    fn rules() -> Rules {
        Rules::new(&Normalization::default()).unwrap()
    }

    fn whole(reply: &PlainReply) -> &str {
        match &reply.answer {
            LlmAnswer::Whole(body) => body,
            LlmAnswer::Events(_) => panic!("a stream"),
        }
    }

    /// Key order and spacing do not matter; a request made again gets the
    /// next recording, then the last again.
    #[test]
    fn a_request_is_answered_by_its_recordings_in_order() {
        let rules = rules();
        let tape = LlmTape::new(
            vec![
                recording("/chat/completions", r#"{"model":"m","n":1}"#, "first"),
                recording("/chat/completions", r#"{"model":"m","n":2}"#, "other"),
                recording("/chat/completions", r#"{"model":"m","n":1}"#, "second"),
            ],
            &rules,
            MatchRules::default(),
        );
        let ledger = Ledger::default();
        let answers: Vec<String> = (0..3)
            .map(|_| {
                let reply = tape.answer(
                    &call("/chat/completions", r#"{ "n": 1, "model": "m" }"#),
                    &rules,
                    Pace::Instant,
                    &ledger,
                );
                assert_eq!(reply.outcome, Outcome::Hit);
                whole(&reply).to_owned()
            })
            .collect();
        assert_eq!(answers, ["first", "second", "second"]);
    }

    /// A miss is a 400 in the API's error shape naming the differing
    /// pointer and both values, and the ledger keeps it.
    #[test]
    fn a_miss_names_the_pointer_in_the_apis_own_error_shape() {
        let rules = rules();
        let recorded = r#"{"messages":[{"role":"system","content":"Be brief."}]}"#;
        let tape = LlmTape::new(
            vec![recording("/chat/completions", recorded, "{}"), recording("/v1/messages", recorded, "{}")],
            &rules,
            MatchRules::default(),
        );
        let ledger = Ledger::default();
        let asked = r#"{"messages":[{"role":"system","content":"Be long."}]}"#;
        let openai = tape.answer(&call("/chat/completions", asked), &rules, Pace::Instant, &ledger);
        assert_eq!((openai.outcome, openai.status.as_u16()), (Outcome::Miss, 400));
        let error: Value = serde_json::from_str(whole(&openai)).unwrap();
        let message = error["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(r#"/messages/0/content (recorded "Be brief.", requested "Be long.")"#),
            "{message}"
        );
        assert_eq!(error["error"]["type"], "invalid_request_error");
        let anthropic = tape.answer(&call("/v1/messages", asked), &rules, Pace::Instant, &ledger);
        let error: Value = serde_json::from_str(whole(&anthropic)).unwrap();
        assert_eq!(error["type"], "error");
        assert!(error["error"]["message"].as_str().unwrap().contains("/messages/0/content"));
        let usage = ledger.usage();
        assert_eq!(usage.misses(), 2);
        let case = usage.cases.keys().next().unwrap();
        assert_eq!((case.server.as_str(), case.method.as_str()), ("model openai", "POST /chat/completions"));
    }

    /// A body that is not JSON differs as a whole: the miss names the root.
    #[test]
    fn a_miss_on_a_body_that_is_not_json_names_the_root() {
        let rules = rules();
        let tape =
            LlmTape::new(vec![recording("/completions", "say hi", "{}")], &rules, MatchRules::default());
        let reply = tape.answer(&call("/completions", "say bye"), &rules, Pace::Instant, &Ledger::default());
        let error: Value = serde_json::from_str(whole(&reply)).unwrap();
        let message = error["error"]["message"].as_str().unwrap();
        assert!(
            message.ends_with(r#"the nearest differs at the root (recorded "say hi", requested "say bye")"#),
            "{message}"
        );
    }

    /// A `[[match]] model = ...` table decides what differs only where it
    /// ignores, and a `nearest` one picks the recording that differs least.
    #[test]
    fn match_rules_about_a_model_apply_to_its_bodies() {
        let rules = rules();
        let recordings = vec![
            recording("/chat/completions", r#"{"user":"u-1","messages":["a","x"]}"#, "first"),
            recording("/chat/completions", r#"{"user":"u-1","messages":["b","c"]}"#, "second"),
        ];
        let file = std::path::Path::new("mcp-tape.toml");
        let ignoring =
            MatchRules::parse(file, "[[match]]\nmodel = \"open*\"\nignore = [\"/user\"]\n").unwrap();
        let tape = LlmTape::new(recordings.clone(), &rules, ignoring);
        let ledger = Ledger::default();
        let asked = call("/chat/completions", r#"{"user":"u-2","messages":["b","c"]}"#);
        let reply = tape.answer(&asked, &rules, Pace::Instant, &ledger);
        assert_eq!((reply.outcome, whole(&reply)), (Outcome::Ruled, "second"));
        let other = call("/chat/completions", r#"{"user":"u-2","messages":["b","d"]}"#);
        let reply = tape.answer(&other, &rules, Pace::Instant, &ledger);
        assert_eq!(reply.outcome, Outcome::Miss);
        assert!(whole(&reply).contains("rule mcp-tape.toml:1 (exact) decided it"), "{}", whole(&reply));
        let nearest = MatchRules::parse(file, "[[match]]\nmodel = \"openai\"\nby = \"nearest\"\n").unwrap();
        let tape = LlmTape::new(recordings, &rules, nearest);
        let reply = tape.answer(&other, &rules, Pace::Instant, &ledger);
        assert_eq!((reply.outcome, whole(&reply)), (Outcome::Ruled, "second"));
        let refused = MatchRules::parse(file, "[[match]]\nmodel = \"openai\"\ntool = \"x\"\n").unwrap_err();
        assert!(refused.to_string().contains("tool: a rule with model decides"), "{refused}");
    }

    /// Another target, or a model nothing was recorded for, is said so.
    #[test]
    fn a_miss_says_what_was_recorded_instead() {
        let rules = rules();
        let tape =
            LlmTape::new(vec![recording("/chat/completions", "{}", "{}")], &rules, MatchRules::default());
        let ledger = Ledger::default();
        let reply = tape.answer(&call("/responses", "{}"), &rules, Pace::Instant, &ledger);
        assert!(whole(&reply).contains("recorded for POST /chat/completions only"), "{}", whole(&reply));
        let other = LlmCall { model: "anthropic", ..call("/v1/messages", "{}") };
        let reply = tape.answer(&other, &rules, Pace::Instant, &ledger);
        assert!(whole(&reply).contains("no exchange with model anthropic"), "{}", whole(&reply));
    }
}
