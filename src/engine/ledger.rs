//! What a run exercised, for its summary and reports (`test`, `--junit`,
//! `--report`): per case — a server, a method and the tool, prompt or
//! resource it names — how many requests a recording answered, the mock
//! answered exactly, which match rule answered how many (and where the
//! nearest recordings it picked differed), how many an answer template or
//! the mock answered, missed, or were forwarded to be recorded, and which
//! fault rule was injected into how many (`engine::inject`); the first
//! miss of each case with its nearest recordings; the recordings used
//! although older than `--max-age`. (Whether a recording answered at all is a flag
//! on the recording: see `tape::UseMark`.)

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::Value;

use super::by_rule::RuleUse;
use super::miss::Miss;
use super::step::Outcome;
use crate::limits::{MAX_OTHER_CASES, MAX_SHOWN_BYTES, MOMENTS_KEPT};
use crate::mcp;
use crate::model::Source;
use crate::normalize::Difference;
use crate::util::{FastMap, clip, lock, printable};

/// One case: what a testing tool would call a test.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CaseKey {
    pub server: String,
    pub method: String,
    /// The tool or prompt name, or the resource URI, the request names.
    pub subject: Option<String>,
}

impl CaseKey {
    /// The case of a request; each name cut to [`MAX_SHOWN_BYTES`].
    pub fn of(server: &str, method: &str, params: Option<&Value>) -> CaseKey {
        CaseKey::named(server, method, mcp::subject_of(method, params))
    }

    /// The case of `method` to `server` naming `subject`; names cut as [`CaseKey::of`] cuts them.
    pub fn named(server: &str, method: &str, subject: Option<&str>) -> CaseKey {
        let cut = |name: &str| clip(name, MAX_SHOWN_BYTES).into_owned();
        CaseKey { server: cut(server), method: cut(method), subject: subject.map(cut) }
    }

    /// The case that counts the requests past [`MAX_OTHER_CASES`].
    pub fn others() -> CaseKey {
        CaseKey {
            server: "*".into(),
            method: "*".into(),
            subject: Some(format!("(past {MAX_OTHER_CASES} cases the cassettes do not hold)")),
        }
    }

    /// The case without its server: `method [subject]`, control characters escaped.
    pub fn name(&self) -> String {
        match &self.subject {
            Some(subject) => format!("{} {}", printable(&self.method), printable(subject)),
            None => printable(&self.method).into_owned(),
        }
    }
}

impl fmt::Display for CaseKey {
    /// `server method [subject]`, control characters escaped (it is logged).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", printable(&self.server), self.name())
    }
}

/// Differing-pointer lists a case keeps per rule at most (the first ones).
const DIFFERENCES_KEPT: usize = 5;

/// How a request was answered, as the counts and the timeline tell it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum AnsweredBy {
    /// A recording that matched exactly.
    Recording,
    /// A recording a match rule picked.
    Rule,
    /// An answer template.
    Template,
    /// The mock.
    Mock,
    /// Nothing: a miss.
    Miss,
    /// Forwarded upstream to be recorded.
    Forwarded,
    /// An injected fault, instead of an answer.
    Fault,
}

impl AnsweredBy {
    pub fn as_str(self) -> &'static str {
        match self {
            AnsweredBy::Recording => "recording",
            AnsweredBy::Rule => "rule",
            AnsweredBy::Template => "template",
            AnsweredBy::Mock => "mock",
            AnsweredBy::Miss => "miss",
            AnsweredBy::Forwarded => "forwarded",
            AnsweredBy::Fault => "fault",
        }
    }
}

/// One request on the run's timeline: when (milliseconds since the ledger
/// began), how it was answered, and for a request to the agent's model,
/// what it was asked last and what it answered ([`super::turn`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Moment {
    pub at_ms: u64,
    pub answer: AnsweredBy,
    pub told: Option<Arc<str>>,
}

/// The counts of one case.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Case {
    /// Answered from a recording that matched exactly.
    pub hits: u64,
    /// Answered from a recording a match rule picked, by rule index.
    pub ruled: BTreeMap<usize, Ruled>,
    /// Answered by an answer template.
    pub templates: u64,
    /// Answered by the mock (nothing recorded applies).
    pub mocks: u64,
    /// A server with recordings had none for the request.
    pub misses: u64,
    /// Forwarded upstream to be recorded.
    pub forwarded: u64,
    /// Answered by an injected fault instead (an error, a status, no
    /// answer, a lost session).
    pub faulted: u64,
    /// Faults injected, by fault rule index: those that answered instead,
    /// and those that delayed or cut an answer the counts above hold.
    pub faults: BTreeMap<usize, u64>,
    /// Answered from a recording older than `--max-age`.
    pub stale: u64,
    /// The first miss: what was asked and the nearest recordings.
    pub first_miss: Option<Miss>,
    /// When its requests came and how each was answered (the run's first
    /// [`MOMENTS_KEPT`] requests, over all cases).
    pub moments: Vec<Moment>,
}

/// What one match rule answered in one case.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Ruled {
    pub answered: u64,
    /// Where the recordings a `nearest` rule picked differed from the
    /// requests, each distinct list once, the first `DIFFERENCES_KEPT`.
    pub differences: Vec<Vec<Difference>>,
}

impl Case {
    pub fn requests(&self) -> u64 {
        self.hits
            + self.by_rules()
            + self.templates
            + self.mocks
            + self.misses
            + self.forwarded
            + self.faulted
    }

    /// How many faults were injected.
    pub fn injected(&self) -> u64 {
        self.faults.values().sum()
    }

    /// How many requests match rules answered.
    pub fn by_rules(&self) -> u64 {
        self.ruled.values().map(|r| r.answered).sum()
    }

    fn rule_answered(&mut self, used: &RuleUse) {
        let ruled = self.ruled.entry(used.rule).or_default();
        ruled.answered += 1;
        ruled.keep(&used.differences);
    }
}

impl Ruled {
    fn keep(&mut self, differences: &[Difference]) {
        if !differences.is_empty()
            && self.differences.len() < DIFFERENCES_KEPT
            && !self.differences.iter().any(|kept| kept == differences)
        {
            self.differences.push(differences.to_vec());
        }
    }
}

/// What a run exercised, as one snapshot.
#[derive(Clone, Debug, Default)]
pub struct Usage {
    pub cases: BTreeMap<CaseKey, Case>,
    /// How each match rule is told (`FILE:LINE (by)`), by index.
    pub rules: Vec<String>,
    /// How each fault rule is told (`PLACE (what)`), by index.
    pub faults: Vec<String>,
    /// Recordings that answered although older than `--max-age`.
    pub stale: BTreeSet<Source>,
}

impl Usage {
    /// Adds `other`'s counts to these (record `--mode missing` keeps two ledgers).
    pub fn merge(&mut self, other: Usage) {
        for (key, case) in other.cases {
            let mine = self.cases.entry(key).or_default();
            mine.hits += case.hits;
            for (rule, ruled) in case.ruled {
                let kept = mine.ruled.entry(rule).or_default();
                kept.answered += ruled.answered;
                ruled.differences.iter().for_each(|differences| kept.keep(differences));
            }
            mine.templates += case.templates;
            mine.mocks += case.mocks;
            mine.misses += case.misses;
            mine.forwarded += case.forwarded;
            mine.faulted += case.faulted;
            for (rule, count) in case.faults {
                *mine.faults.entry(rule).or_default() += count;
            }
            mine.stale += case.stale;
            if mine.first_miss.is_none() {
                mine.first_miss = case.first_miss;
            }
            mine.moments.extend(case.moments);
            mine.moments.sort_by_key(|moment| moment.at_ms);
        }
        self.stale.extend(other.stale);
        if self.rules.is_empty() {
            self.rules = other.rules;
        }
        if self.faults.is_empty() {
            self.faults = other.faults;
        }
    }

    pub fn misses(&self) -> u64 {
        self.cases.values().map(|c| c.misses).sum()
    }
}

/// The ledger an engine keeps while it serves.
#[derive(Debug)]
pub struct Ledger {
    state: Mutex<State>,
    began: Instant,
}

impl Default for Ledger {
    fn default() -> Ledger {
        Ledger::knowing([])
    }
}

/// The cases of one server and method, by subject: where each is in
/// [`State::counted`].
type Subjects = Vec<(Option<String>, usize)>;

/// Cases by server, then method, then subject (few per method): a request
/// that repeats a case is counted without building its key, and one that
/// repeats the case counted last without a lookup.
#[derive(Debug, Default)]
struct State {
    /// Every case counted, with its names, in the order first met.
    counted: Vec<(CaseKey, Case)>,
    /// Where the cases of names counted as they are sit in `counted`.
    cases: FastMap<String, FastMap<String, Subjects>>,
    /// The case counted last (in `counted`): the next request is most
    /// often the same case again.
    last: usize,
    stale: BTreeSet<Source>,
    /// The cases of the cassettes' recordings: always counted one by one.
    known: HashSet<CaseKey>,
    /// How many cases the cassettes do not hold are counted one by one.
    others: usize,
    /// How many moments the cases keep, over all of them.
    moments: usize,
}

impl State {
    /// Runs `count` on the case of these names: the case counted last when
    /// they are its names, else found with one lookup a level when they are
    /// counted already as they are (every request counts), else
    /// [`State::admitted_case`].
    fn count(&mut self, server: &str, method: &str, subject: Option<&str>, count: impl FnOnce(&mut Case)) {
        let is_last = self.counted.get(self.last).is_some_and(|(key, _)| {
            key.server == server && key.method == method && key.subject.as_deref() == subject
        });
        if !is_last {
            let known = self.cases.get(server).and_then(|methods| methods.get(method));
            let found =
                known.and_then(|subjects| subjects.iter().find(|(known, _)| known.as_deref() == subject));
            self.last = match found {
                Some(&(_, at)) => at,
                None => self.admitted_case(server, method, subject),
            };
        }
        count(&mut self.counted[self.last].1);
    }

    /// Where in `counted` the case of names not counted as they are is:
    /// their own (names cut) while the bound allows, else
    /// [`CaseKey::others`]; added if new.
    fn admitted_case(&mut self, server: &str, method: &str, subject: Option<&str>) -> usize {
        let admitted = self.admit(CaseKey::named(server, method, subject));
        if !self.cases.contains_key(&admitted.server) {
            self.cases.insert(admitted.server.clone(), FastMap::default());
        }
        let methods = self.cases.get_mut(&admitted.server).expect("inserted above");
        if !methods.contains_key(&admitted.method) {
            methods.insert(admitted.method.clone(), Vec::new());
        }
        let subjects = methods.get_mut(&admitted.method).expect("inserted above");
        match subjects.iter().find(|(known, _)| *known == admitted.subject) {
            Some(&(_, at)) => at,
            None => {
                let at = self.counted.len();
                subjects.push((admitted.subject.clone(), at));
                self.counted.push((admitted, Case::default()));
                at
            }
        }
    }

    /// Whether these names are counted already, as they are.
    fn holds(&self, server: &str, method: &str, subject: Option<&str>) -> bool {
        let subjects = self.cases.get(server).and_then(|methods| methods.get(method));
        subjects.is_some_and(|subjects| subjects.iter().any(|(known, _)| known.as_deref() == subject))
    }

    /// The case a request of `key` (names cut) counts in: its own while the
    /// bound allows, else [`CaseKey::others`].
    fn admit(&mut self, key: CaseKey) -> CaseKey {
        if self.known.contains(&key) || self.holds(&key.server, &key.method, key.subject.as_deref()) {
            return key;
        }
        if self.others >= MAX_OTHER_CASES {
            return CaseKey::others();
        }
        self.others += 1;
        key
    }
}

impl Ledger {
    /// A ledger that counts each of `known` (the cases the cassettes hold)
    /// one by one, however many other cases it meets.
    pub fn knowing(known: impl IntoIterator<Item = CaseKey>) -> Ledger {
        let state = State { known: known.into_iter().collect(), ..State::default() };
        Ledger { state: Mutex::new(state), began: Instant::now() }
    }

    /// Counts one request of `method` with `params` to `server` that ended
    /// as `outcome`; `rule`: the match rule that picked its recording.
    pub fn note(
        &self,
        server: &str,
        method: &str,
        params: Option<&Value>,
        outcome: Outcome,
        rule: Option<&RuleUse>,
    ) {
        self.note_told(server, method, params, outcome, rule, None);
    }

    /// [`Ledger::note`], its moment on the timeline told with what `told`
    /// says (a model's turn: what it was asked last and what it answered),
    /// asked only for a moment the timeline keeps.
    pub fn note_told(
        &self,
        server: &str,
        method: &str,
        params: Option<&Value>,
        outcome: Outcome,
        rule: Option<&RuleUse>,
        told: Option<&dyn Fn() -> Arc<str>>,
    ) {
        let answer = match (rule, outcome) {
            (Some(_), _) => AnsweredBy::Rule,
            (None, Outcome::Hit | Outcome::Cassette | Outcome::Ruled) => AnsweredBy::Recording,
            (None, Outcome::Template) => AnsweredBy::Template,
            (None, Outcome::Mock) => AnsweredBy::Mock,
            (None, Outcome::Miss) => AnsweredBy::Miss,
            (None, Outcome::Recorded | Outcome::Streaming | Outcome::Forwarded) => AnsweredBy::Forwarded,
            (None, _) => return,
        };
        let mut state = lock(&self.state);
        let timed = state.moments < MOMENTS_KEPT;
        state.moments += usize::from(timed);
        // The clock is read only for a moment the timeline keeps.
        let at_ms = timed.then(|| u64::try_from(self.began.elapsed().as_millis()).unwrap_or(u64::MAX));
        state.count(server, method, mcp::subject_of(method, params), |case| {
            if let Some(at_ms) = at_ms {
                case.moments.push(Moment { at_ms, answer, told: told.map(|told| told()) });
            }
            match answer {
                AnsweredBy::Rule => rule.into_iter().for_each(|used| case.rule_answered(used)),
                AnsweredBy::Recording => case.hits += 1,
                AnsweredBy::Template => case.templates += 1,
                AnsweredBy::Mock => case.mocks += 1,
                AnsweredBy::Miss => case.misses += 1,
                AnsweredBy::Forwarded => case.forwarded += 1,
                AnsweredBy::Fault => case.faulted += 1,
            }
        });
    }

    /// Counts fault rule `rule`'s injection into a request of `method` with
    /// `params` to `server`; `replaced`: the fault took the answer's place.
    pub fn injected(&self, server: &str, method: &str, params: Option<&Value>, rule: usize, replaced: bool) {
        let at_ms = u64::try_from(self.began.elapsed().as_millis()).unwrap_or(u64::MAX);
        let mut state = lock(&self.state);
        let timed = replaced && state.moments < MOMENTS_KEPT;
        state.moments += usize::from(timed);
        state.count(server, method, mcp::subject_of(method, params), |case| {
            if timed {
                case.moments.push(Moment { at_ms, answer: AnsweredBy::Fault, told: None });
            }
            *case.faults.entry(rule).or_default() += 1;
            case.faulted += u64::from(replaced);
        });
    }

    /// Keeps the first miss of `key`.
    pub fn missed(&self, key: &CaseKey, miss: &Miss) {
        let mut state = lock(&self.state);
        state.count(&key.server, &key.method, key.subject.as_deref(), |case| {
            if case.first_miss.is_none() {
                case.first_miss = Some(miss.clone());
            }
        });
    }

    /// Notes that a recording older than `--max-age` answered a request of
    /// `key`; true the first time that recording does (to warn once).
    pub fn stale(&self, key: &CaseKey, source: Option<&Source>) -> bool {
        let mut state = lock(&self.state);
        state.count(&key.server, &key.method, key.subject.as_deref(), |case| case.stale += 1);
        source.is_some_and(|source| state.stale.insert(source.clone()))
    }

    pub fn usage(&self) -> Usage {
        let state = lock(&self.state);
        let cases = state.counted.iter().map(|(key, case)| (key.clone(), case.clone())).collect();
        Usage { cases, rules: Vec::new(), faults: Vec::new(), stale: state.stale.clone() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_case_is_named_by_what_the_request_addresses() {
        let call = CaseKey::of("mail", "tools/call", Some(&json!({"name": "Send", "arguments": {}})));
        assert_eq!(call.to_string(), "mail tools/call Send");
        let read = CaseKey::of("docs", "resources/read", Some(&json!({"uri": "file:///a"})));
        assert_eq!(read.name(), "resources/read file:///a");
        assert_eq!(CaseKey::of("s", "tools/list", Some(&json!({"cursor": "x"}))).subject, None);
        assert_eq!(CaseKey::of("s\n", "ping", None).to_string(), "s\\n ping");
    }

    #[test]
    fn counts_merge_and_the_first_miss_stays() {
        let key = CaseKey::of("s", "tools/call", Some(&json!({"name": "t"})));
        let (one, two) = (Ledger::default(), Ledger::default());
        let params = json!({"name": "t"});
        one.note("s", "tools/call", Some(&params), Outcome::Hit, None);
        one.note("s", "tools/call", Some(&params), Outcome::Miss, None);
        one.missed(&key, &Miss::new("first".into(), "s", "tools/call", &serde_json::json!({})));
        two.note("s", "tools/call", Some(&params), Outcome::Recorded, None);
        two.missed(&key, &Miss::new("second".into(), "s", "tools/call", &serde_json::json!({})));
        let mut usage = one.usage();
        usage.merge(two.usage());
        let case = &usage.cases[&key];
        assert_eq!((case.hits, case.misses, case.forwarded, case.requests()), (1, 1, 1, 3));
        assert_eq!(case.first_miss.as_ref().map(|e| e.message.as_str()), Some("first"));
        assert_eq!(usage.misses(), 1);
    }

    #[test]
    fn the_timeline_keeps_each_answer_in_order_up_to_its_bound() {
        let ledger = Ledger::default();
        let params = json!({"name": "t"});
        ledger.note("s", "tools/call", Some(&params), Outcome::Miss, None);
        ledger.note("s", "tools/call", Some(&params), Outcome::Hit, None);
        ledger.note("s", "ping", None, Outcome::Accepted, None);
        let usage = ledger.usage();
        let key = CaseKey::of("s", "tools/call", Some(&params));
        let answers: Vec<AnsweredBy> = usage.cases[&key].moments.iter().map(|m| m.answer).collect();
        assert_eq!(answers, [AnsweredBy::Miss, AnsweredBy::Recording]);
        assert!(usage.cases[&key].moments.windows(2).all(|w| w[0].at_ms <= w[1].at_ms));
        assert!(!usage.cases.contains_key(&CaseKey::of("s", "ping", None)), "an acknowledgement is no case");

        let busy = Ledger::default();
        for _ in 0..MOMENTS_KEPT + 5 {
            busy.note("s", "tools/call", Some(&params), Outcome::Hit, None);
        }
        let case = &busy.usage().cases[&key];
        assert_eq!((case.hits, case.moments.len()), (MOMENTS_KEPT as u64 + 5, MOMENTS_KEPT));
    }

    proptest::proptest! {
        /// However requests follow one another (the case counted last, one counted before, a
        /// new one, names that are cut alike), each counts in the case its names make.
        #[test]
        fn each_request_counts_in_the_case_its_names_make(
            requests in proptest::collection::vec((0..3usize, 0..3usize, 0..4usize, proptest::bool::ANY), 1..40),
        ) {
            let long = |end: &str| format!("{}{end}", "x".repeat(MAX_SHOWN_BYTES));
            let servers = ["s".to_owned(), long("1"), long("2")];
            let methods = ["tools/call", "prompts/get", "ping"];
            let params = [None, Some(json!({"name": "a"})), Some(json!({"name": "b"})), Some(json!({"name": long("3")}))];
            let ledger = Ledger::default();
            let mut expected: BTreeMap<CaseKey, (u64, u64)> = BTreeMap::new();
            for &(server, method, params_at, hit) in &requests {
                let (server, method, params) = (&servers[server], methods[method], params[params_at].as_ref());
                let outcome = if hit { Outcome::Hit } else { Outcome::Miss };
                ledger.note(server, method, params, outcome, None);
                let counts = expected.entry(CaseKey::of(server, method, params)).or_default();
                if hit { counts.0 += 1 } else { counts.1 += 1 }
            }
            let counted: BTreeMap<CaseKey, (u64, u64)> =
                ledger.usage().cases.into_iter().map(|(key, case)| (key, (case.hits, case.misses))).collect();
            proptest::prop_assert_eq!(counted, expected);
        }
    }

    #[test]
    fn a_stale_recording_is_reported_once() {
        let key = CaseKey::of("s", "ping", None);
        let stored = crate::model::MatchKey::from_digest([3; 32]);
        let cassette = std::path::Path::new("c.sqlite").into();
        let source = Source { cassette, row: 3, key: stored, occurrence: 0 };
        let ledger = Ledger::default();
        assert!(ledger.stale(&key, Some(&source)));
        assert!(!ledger.stale(&key, Some(&source)));
        let usage = ledger.usage();
        assert_eq!((usage.stale.len(), usage.cases[&key].stale), (1, 2));
    }
}
