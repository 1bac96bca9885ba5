//! Faults on demand, in front of either mode: for each request, which
//! fault rule fires (every rule counts the calls it is about, in the order
//! they arrive; the first rule in order that fires on its count wins), the
//! sessions a `lose_session` fault made the engine forget, and the ledger
//! of what was injected. What a fired fault does is the engine's to decide
//! (`Engine::request`) and the front door's to enact.

use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;

use super::ledger::{Ledger, Usage};
use super::step::Call;
use crate::error::{RequestError, Unanswered};
use crate::faults::{Action, Effect, FaultRules};
use crate::limits::MAX_SESSIONS;
use crate::mcp;
use crate::util::lock;

/// The fault rules of a run and what they have counted.
#[derive(Default)]
pub struct Injector {
    rules: FaultRules,
    /// Calls each rule was about so far, by rule index.
    counts: Mutex<Vec<u64>>,
    /// Whether any rule loses sessions (else no request looks at `lost`).
    loses: bool,
    lost: Mutex<Lost>,
    ledger: Ledger,
}

/// Sessions a fault ended, oldest first, at most [`MAX_SESSIONS`].
#[derive(Default)]
struct Lost {
    order: VecDeque<String>,
    ids: HashSet<String>,
}

impl Injector {
    pub fn new(rules: FaultRules) -> Injector {
        let loses = rules.rules().iter().any(|rule| rule.action.effect == Some(Effect::LoseSession));
        let counts = Mutex::new(vec![0; rules.rules().len()]);
        Injector { rules, counts, loses, lost: Mutex::default(), ledger: Ledger::default() }
    }

    /// The rule that fires for `call` and what it does, if one does. Every
    /// rule about `call` counts it, whether or not an earlier one fires; a
    /// `lose_session` rule is only about calls in a session.
    pub fn fire(&self, call: &Call) -> Option<(usize, &Action)> {
        if self.rules.is_empty() {
            return None;
        }
        let name = mcp::subject_of(call.method, call.params()).unwrap_or_default();
        let mut counts = lock(&self.counts);
        let mut fired = None;
        for (index, rule) in self.rules.rules().iter().enumerate() {
            let about = rule.selects(call.server, call.method, name)
                && (rule.action.effect != Some(Effect::LoseSession) || call.session.is_some());
            if !about {
                continue;
            }
            counts[index] += 1;
            if fired.is_none() && rule.when.fires(counts[index]) {
                fired = Some((index, &rule.action));
            }
        }
        drop(counts);
        if let Some((index, _)) = fired {
            let rule = &self.rules.rules()[index];
            tracing::info!(
                "fault {} on {}",
                crate::util::printable(&rule.label()),
                super::ledger::CaseKey::of(call.server, call.method, call.params())
            );
        }
        fired
    }

    /// Refuses a session a fault ended.
    ///
    /// # Errors
    ///
    /// [`Unanswered::UnknownSession`], as for any session that has ended.
    pub fn check_session(&self, session: Option<&str>) -> Result<(), RequestError> {
        match session {
            Some(id) if self.loses && lock(&self.lost).ids.contains(id) => {
                Err(Unanswered::UnknownSession.into())
            }
            _ => Ok(()),
        }
    }

    /// Ends session `id`: every later use of it is refused.
    pub fn lose(&self, id: &str) {
        let mut lost = lock(&self.lost);
        if lost.ids.insert(id.to_owned()) {
            lost.order.push_back(id.to_owned());
        }
        while lost.order.len() > MAX_SESSIONS {
            if let Some(oldest) = lost.order.pop_front() {
                lost.ids.remove(&oldest);
            }
        }
    }

    /// Counts rule `rule`'s fault on `call`; `replaced`: it took the place
    /// of the answer (a delay or a cut stream did not).
    pub fn note(&self, call: &Call, rule: usize, replaced: bool) {
        self.ledger.injected(call.server, call.method, call.params(), rule, replaced);
    }

    /// What was injected, with each rule's label.
    pub fn usage(&self) -> Usage {
        let mut usage = self.ledger.usage();
        usage.faults = self.rules.rules().iter().map(|rule| rule.label()).collect();
        usage
    }
}
