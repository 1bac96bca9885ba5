//! Replay mode: answers each MCP request from the tape, stamping in the
//! caller's id and progress token, and falls back to the mock
//! ([`crate::mcp::fallback`]) where no recording answers. It owns the replay
//! sessions (handshake era, kept in `engine::sessions`) and the stateless
//! era's checks on a live request. It gets a [`Call`] and returns an
//! [`Answer`]; framing is the front door's. Beside it: the misses (why
//! nothing recorded answers, the nearest recordings, the answer
//! `--on-miss` makes: `misses`), which log notifications a caller gets
//! ([`LogFilter`]), the Agent 365 service endpoints that are not MCP
//! ([`ServiceAnswers`], [`Replay::service`]), and what it does with
//! pseudonymized cassettes (`pseudonyms`: [`Replay::with_pseudonyms`]).

mod logs;
mod misses;
mod pseudonyms;
mod service;

pub use logs::LogFilter;
pub use service::ServiceAnswers;

use std::borrow::Cow;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use super::answer::Answer;
use super::by_rule::{Choice, Refusal, RuleIndex};
use super::ledger::{CaseKey, Ledger, Usage};
use super::llm::{LlmCall, LlmTape};
use super::memory::Memory;
use super::reenact::{Emit, Replies};
use super::said::{Asides, Feed, Kinds, Subscriptions};
use super::sessions::Sessions;
use super::step::{Call, Outcome, Outgoing, PlainReply, Standing};
use crate::cassette::tape::{Cursors, Recorded, ServedMessage, Tape};
use crate::cassette::template;
use crate::config::{OnMiss, Pace};
use crate::error::{RequestError, Unanswered};
use crate::jsonrpc::{self, Params, scan};
use crate::limits::{MAX_SESSIONS, MAX_SHOWN_BYTES};
use crate::matching::MatchRules;
use crate::mcp::{self, convert, fallback};
use crate::model::{Direction, Era, LlmExchange, MatchKey, StreamShape};
use crate::normalize::{self, Rules};
use crate::util::{FastMap, clip, lock, printable};

/// Seconds in a day, for `--max-age`.
pub const SECONDS_PER_DAY: i64 = 86_400;

/// mcp-tape's own `serverInfo`, for servers no recording introduces.
static OWN_SERVER_INFO: LazyLock<Value> = LazyLock::new(mcp::server_info);

/// What a request gets when no recording, match rule or answer template
/// answers it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Unrecorded {
    /// The spec-compliant mock (`replay`): a miss only where the
    /// recordings show the server knew the tool, prompt or resource, or for
    /// a method the mock does not know.
    #[default]
    Mock,
    /// A miss (`test`, where a green run must have tested something):
    /// every request to a server no cassette holds, and every request to
    /// one it holds but housekeeping ([`mcp::is_housekeeping`]), which the
    /// mock answers without counting. `absent`: the cassette that was not
    /// there, which every miss then names.
    Miss { absent: Option<String> },
}

/// The replay engine, shared by all connections.
pub struct Replay {
    tape: Tape,
    service: ServiceAnswers,
    /// The agent's model exchanges.
    llms: LlmTape,
    rules: Rules,
    /// The match rules (`mcp-tape.toml`) with what they need of the tape.
    by_rule: RuleIndex,
    on_miss: OnMiss,
    pace: Pace,
    sessions: Mutex<Sessions>,
    /// The stateless era's open `subscriptions/listen` streams.
    subscriptions: Subscriptions,
    /// Server→client requests being re-enacted, waiting for the client's reply.
    replies: Arc<Replies>,
    /// Cursors of requests outside any replay session, per server (stateless
    /// era, or a handshake client that never initialized) or per foreign
    /// session (the upstream's, when record answers from a cassette).
    sessionless: Mutex<FastMap<String, Cursors>>,
    /// Match keys worked out before (see [`Replay::key_of`]).
    keys: Memory<MatchKey>,
    /// What was asked and how it was answered.
    ledger: Ledger,
    /// Recordings older than this are reported when used (`--max-age`).
    max_age: Option<Duration>,
    unrecorded: Unrecorded,
    /// The fingerprints of the keys the cassettes were pseudonymized with,
    /// when replay has none of them: a miss on a request that holds
    /// personal data says to set one.
    keyless: Vec<String>,
}

impl Replay {
    pub fn new(tape: Tape, service: ServiceAnswers, rules: Rules, on_miss: OnMiss, pace: Pace) -> Replay {
        let known = tape.recordings().map(|r| CaseKey::named(&r.server, &r.method, r.subject.as_deref()));
        let ledger = Ledger::knowing(known.collect::<Vec<_>>());
        Replay {
            tape,
            service,
            llms: LlmTape::default(),
            rules,
            by_rule: RuleIndex::default(),
            on_miss,
            pace,
            sessions: Mutex::new(Sessions::default()),
            subscriptions: Subscriptions::default(),
            replies: Arc::default(),
            sessionless: Mutex::default(),
            keys: Memory::default(),
            ledger,
            max_age: None,
            unrecorded: Unrecorded::Mock,
            keyless: Vec::new(),
        }
    }

    /// The same engine, reporting recordings older than `max_age` when
    /// they answer.
    pub fn with_max_age(self, max_age: Option<Duration>) -> Replay {
        Replay { max_age, ..self }
    }

    /// The same engine answering what nothing recorded answers as
    /// `unrecorded` says.
    pub fn with_unrecorded(self, unrecorded: Unrecorded) -> Replay {
        Replay { unrecorded, ..self }
    }

    /// The same engine deciding by `rules` the requests no recording
    /// matches exactly.
    pub fn with_match_rules(self, rules: MatchRules) -> Replay {
        let llms = self.llms.with_match_rules(rules.clone());
        let by_rule = RuleIndex::new(rules, self.tape.recordings(), &self.rules);
        Replay { by_rule, llms, ..self }
    }

    /// The same engine answering requests to the agent's model from `models`.
    pub fn with_llms(self, llms: Vec<LlmExchange>) -> Replay {
        let llms = LlmTape::new(llms, &self.rules, self.by_rule.rules().clone());
        Replay { llms, ..self }
    }

    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// The agent's model exchanges the cassettes hold.
    pub fn llms(&self) -> &LlmTape {
        &self.llms
    }

    /// The answer to a request to the agent's model: a recording, or a miss.
    pub fn llm(&self, call: &LlmCall) -> PlainReply {
        match self.pseudonymized_body(call) {
            Some(body) => {
                self.llms.answer(&LlmCall { body: &body, ..*call }, &self.rules, self.pace, &self.ledger)
            }
            None => self.llms.answer(call, &self.rules, self.pace, &self.ledger),
        }
    }

    /// The recording that answers a request to the agent's model, if one
    /// does (record `--mode missing`).
    pub fn llm_recorded(&self, call: &LlmCall) -> Option<PlainReply> {
        match self.pseudonymized_body(call) {
            Some(body) => {
                self.llms.recorded(&LlmCall { body: &body, ..*call }, &self.rules, self.pace, &self.ledger)
            }
            None => self.llms.recorded(call, &self.rules, self.pace, &self.ledger),
        }
    }

    /// What this engine was asked and how it answered, so far.
    pub fn usage(&self) -> Usage {
        let rules = self.by_rule.rules();
        let mut usage = self.ledger.usage();
        usage.rules = (0..rules.rules().len()).map(|i| rules.label(i)).collect();
        usage
    }

    pub fn tape(&self) -> &Tape {
        &self.tape
    }

    pub fn pace(&self) -> Pace {
        self.pace
    }

    /// Where re-enacted server→client requests wait for the client's reply.
    pub fn replies(&self) -> &Arc<Replies> {
        &self.replies
    }

    /// Refuses a session id we never issued or that has ended.
    ///
    /// # Errors
    ///
    /// [`Unanswered::UnknownSession`] (404, as the spec requires, so the client
    /// starts a new session).
    pub fn check_session(&self, session: Option<&str>) -> Result<(), RequestError> {
        match session {
            Some(id) if lock(&self.sessions).touch(id).is_none() => Err(Unanswered::UnknownSession.into()),
            _ => Ok(()),
        }
    }

    /// [`Replay::check_session`] for a request to answer: what fires once
    /// what the session's server said after its last answer is on the
    /// client's connection (`None` when it is out already). Only an answer
    /// takes it: a notification or a GET between two calls leaves it for
    /// the next answer.
    fn enter_session(&self, session: Option<&str>) -> Result<Option<oneshot::Receiver<()>>, RequestError> {
        let Some(id) = session else { return Ok(None) };
        match lock(&self.sessions).touch(id) {
            Some(state) => Ok(state.said.unwritten()),
            None => Err(Unanswered::UnknownSession.into()),
        }
    }

    /// Ends a session (DELETE) sent to the path of `server`, the one it
    /// was opened on.
    ///
    /// # Errors
    ///
    /// [`Unanswered::UnknownSession`] for a session we do not know, or one
    /// another server's path opened (that session goes on).
    pub fn end_session(&self, session: &str, server: &str) -> Result<(), RequestError> {
        let mut sessions = lock(&self.sessions);
        match sessions.live.get(session) {
            Some(state) if *state.server == *server => {
                if let Some(state) = sessions.live.remove(session) {
                    state.said.end();
                }
                Ok(())
            }
            _ => Err(Unanswered::UnknownSession.into()),
        }
    }

    /// The stateless era's checks on a live request: served version and
    /// envelope, routing headers against the body, and a `tools/call`'s
    /// argument headers against the `x-mcp-header`s of the tool's recorded
    /// schema (where the front door has headers).
    ///
    /// # Errors
    ///
    /// [`Unanswered::Stateless`] with the error the spec names.
    fn check_stateless(&self, call: &Call) -> Result<(), RequestError> {
        let routing = call.facts.routing.as_ref();
        let checked = mcp::check_stateless(call.method, call.params(), routing).and_then(|()| {
            let tool = call.params().and_then(|p| p.get("name")).and_then(Value::as_str);
            let schema = tool
                .filter(|_| call.method == "tools/call" && routing.is_some())
                .and_then(|t| self.tape.tool_schema(call.server, t));
            match schema {
                Some(schema) => mcp::check_param_headers(
                    schema,
                    call.params().and_then(|p| p.get("arguments")),
                    &call.facts.param_headers,
                ),
                None => Ok(()),
            }
        });
        checked.map_err(|error| RequestError {
            fault: Box::new(Unanswered::Stateless(error)),
            id: Some(call.id.clone()),
        })
    }

    /// Answers one request, and notes how in the [`Ledger`].
    ///
    /// # Errors
    ///
    /// [`Unanswered::UnknownSession`] for a session id we do not know, or
    /// [`Unanswered::Stateless`] for a stateless request that does not hold
    /// together; either carries the request's id.
    pub fn answer(&self, call: &Call) -> Result<Answer, RequestError> {
        match self.pseudonymized_params(call) {
            Some(params) => self.answer_as_asked(&Call { params: Some(&params), ..*call }),
            None => self.answer_as_asked(call),
        }
    }

    /// [`Replay::answer`], `call`'s params as they are.
    fn answer_as_asked(&self, call: &Call) -> Result<Answer, RequestError> {
        let behind = match call.era {
            Era::Handshake if call.method != "initialize" => {
                self.enter_session(call.session).map_err(|e| e.with_id(Some(call.id.clone())))?
            }
            Era::Handshake => None,
            Era::Stateless => {
                self.check_stateless(call)?;
                None
            }
        };
        let mut answered = self.answer_unnoted(call);
        if let Ok(answer) = &mut answered {
            answer.behind = behind;
            self.ledger.note(call.server, call.method, call.params(), answer.outcome, answer.rule.as_ref());
            if !answer.asides.subscribed.is_empty() {
                self.subscriptions.publish(call.server, &std::mem::take(&mut answer.asides.subscribed));
            }
            if !answer.asides.armed.is_empty() {
                let armed = std::mem::take(&mut answer.asides.armed);
                let session = answer.session_id.as_deref().or(call.session);
                match session
                    .and_then(|s| lock(&self.sessions).live.get_mut(s).map(|state| state.said.arm(armed)))
                {
                    Some(()) => {}
                    None => tracing::debug!(
                        "what the server said on its own after {} has no session to wait in: dropped",
                        printable(call.method)
                    ),
                }
            }
        }
        answered
    }

    /// `subscriptions/listen`: the stream every stateless client may open
    /// for change notifications. It honours the kinds asked for that the
    /// recorded server declared (`listChanged` in its recorded discover or
    /// initialize result; none without one) and gets the change
    /// notifications recordings show after the calls replay answers, until
    /// the client closes it.
    fn listen(&self, call: &Call) -> Answer {
        let declared = ["server/discover", "initialize"]
            .into_iter()
            .find_map(|method| self.recorded_result(call.server, method)?.get("capabilities").cloned());
        let requested = call.params().and_then(|p| p.get("notifications"));
        let kinds = Kinds::honoured(requested, declared.as_ref());
        let feed = (!kinds.is_empty())
            .then(|| self.subscriptions.open(call.server, call.id.as_value().clone(), kinds));
        listen_answer(call, kinds, feed)
    }

    /// The client sent the notification `method` in `session`: what the
    /// recording's server said on its own after it.
    pub fn notified(&self, session: Option<&str>, method: &str) -> Vec<Outgoing> {
        let Some(session) = session else { return Vec::new() };
        lock(&self.sessions)
            .live
            .get_mut(session)
            .map(|state| state.said.notified(method))
            .unwrap_or_default()
    }

    /// Puts `messages` on the standalone stream of `session` (held until the
    /// client opens one).
    pub fn say(&self, session: &str, messages: Vec<Outgoing>) {
        if let Some(state) = lock(&self.sessions).live.get_mut(session) {
            state.said.say(messages);
        }
    }

    /// [`Replay::say`] for what the server said while an exchange was in
    /// flight: what fires once it has been written to the client.
    pub fn say_before(&self, session: &str, messages: Vec<Outgoing>) -> Option<oneshot::Receiver<()>> {
        lock(&self.sessions).live.get_mut(session)?.said.say_before(messages)
    }

    /// [`Replay::say`] for what the server said after an answer still being
    /// written: sent once `answered` fires.
    pub fn say_after(&self, session: &str, messages: Vec<Outgoing>, answered: oneshot::Receiver<()>) {
        if let Some(state) = lock(&self.sessions).live.get_mut(session) {
            state.said.say_after(messages, answered);
        }
    }

    /// Ends every session's standalone stream.
    pub fn end_streams(&self) {
        for state in lock(&self.sessions).live.values_mut() {
            state.said.close();
        }
    }

    /// Opens the standalone stream of `session` (GET).
    ///
    /// # Errors
    ///
    /// [`Unanswered::UnknownSession`] for a session we do not know.
    pub fn open_stream(&self, session: &str) -> Result<mpsc::Receiver<Emit>, RequestError> {
        match lock(&self.sessions).touch(session) {
            Some(state) => Ok(state.said.open()),
            None => Err(Unanswered::UnknownSession.into()),
        }
    }

    /// The answer to a request that passed the session's or the stateless
    /// era's checks.
    fn answer_unnoted(&self, call: &Call) -> Result<Answer, RequestError> {
        // The server's identity is looked up only where an answer carries it: not for a recorded one.
        let identity = || self.identity(call.server);
        if let Unrecorded::Miss { absent } = &self.unrecorded
            && !self.tape.holds(call.server)
        {
            let why = match absent {
                Some(path) => {
                    format!("no cassette at {path}: record it first (--mode once with --upstream URL)")
                }
                None => {
                    format!("the cassettes hold nothing for server {}", clip(call.server, MAX_SHOWN_BYTES))
                }
            };
            return Ok(self.miss_answer(call, self.unrecorded_miss(call, &why), identity()));
        }
        match (call.era, call.method) {
            (Era::Handshake, "initialize") => return Ok(self.initialize(call)),
            (Era::Stateless, "server/discover") => return Ok(self.discover(call)),
            (Era::Stateless, "subscriptions/listen") => return Ok(self.listen(call)),
            (era, method) if mcp::is_removed(era, method) => {
                return Ok(mock_answer(call, Outcome::Mock, identity()));
            }
            _ => {}
        }
        if call.method == "logging/setLevel" {
            self.remember_log_level(call);
        }
        if let Some(answer) = self.answer_from_tape(call, &self.key_of(call)) {
            return Ok(answer);
        }
        let refusal = match self.answer_by_rule(call) {
            Some(Ok(answer)) => return Ok(answer),
            Some(Err(refusal)) => Some(refusal),
            None => None,
        };
        let params = self.redacted(call.params());
        let params = params.as_deref();
        if let Some(answer) = self.answer_from_templates(call, params) {
            return Ok(answer);
        }
        if let Some(miss) = self.miss(call, params, refusal.as_ref()) {
            return Ok(self.miss_answer(call, miss, identity()));
        }
        if self.unrecorded != Unrecorded::Mock && !mcp::is_housekeeping(call.method) {
            let why = self.unrecorded_subject(call, params);
            return Ok(self.miss_answer(call, self.unrecorded_miss(call, &why), identity()));
        }
        Ok(mock_answer(call, Outcome::Mock, identity()))
    }

    /// The recorded answer to `call`, exact or by a match rule, if the tape
    /// holds one; no mock, no miss, no session or header checks (record
    /// `--mode missing` asks this).
    pub fn recorded(&self, call: &Call) -> Option<Answer> {
        self.answer_from_tape(call, &self.key_of(call)).or_else(|| self.answer_by_rule(call)?.ok())
    }

    /// The answer the first match rule that decides `call` picks; `None`
    /// when no rule decides it, the refusal when the rule picks nothing.
    fn answer_by_rule(&self, call: &Call) -> Option<Result<Answer, Refusal>> {
        if self.by_rule.is_empty() {
            return None;
        }
        let (rule, choice) = self.by_rule.remembered(call.asked(), call.params.map(Params::text), || {
            let params = self.redacted(call.params());
            let rule = self.by_rule.rule_for(call.server, call.method, params.as_deref())?;
            let canonical = self.rules.canonical_params(params.as_deref());
            let choice = self.by_rule.decide(rule, call.asked(), &canonical);
            // Once per params worked out, not for each repeat of the same request.
            if let Ok(Choice::Variant { differences, .. }) = &choice
                && !differences.is_empty()
            {
                tracing::warn!(
                    "{}: no exact recording; rule {} answers with the nearest, which differs at {}",
                    CaseKey::of(call.server, call.method, call.params()),
                    printable(&self.by_rule.rules().label(rule)),
                    normalize::describe(differences),
                );
            }
            Some((rule, choice))
        })?;
        let choice = match choice {
            Ok(choice) => choice,
            Err(refusal) => return Some(Err(refusal)),
        };
        let name = mcp::subject_of(call.method, call.params()).unwrap_or_default();
        let picked =
            self.with_cursors(call, |cursors| self.by_rule.take(rule, &choice, call.asked(), name, cursors));
        let (recorded, used) = match picked {
            Ok(picked) => picked,
            Err(refusal) => return Some(Err(refusal)),
        };
        self.note_use(call, &recorded);
        let identity = || self.identity(call.server);
        let mut answer = recorded_answer(call, &recorded, Outcome::Ruled, || self.log_filter(call), identity);
        answer.rule = Some(used);
        Some(Ok(answer))
    }

    /// The match key of `call`, remembered for params read before (see
    /// [`Memory`]).
    fn key_of(&self, call: &Call) -> MatchKey {
        self.keys.get_or(call.asked(), call.params.map(Params::text), || {
            let params = self.redacted(call.params());
            self.rules.match_key(call.server, call.method, params.as_deref())
        })
    }

    /// `params` as the match key sees them: redacted. A copy is made only
    /// when something needs it: the usual request has no credentials.
    fn redacted<'a>(&self, params: Option<&'a Value>) -> Option<Cow<'a, Value>> {
        let params = params?;
        if !self.rules.needs_redaction(params) {
            return Some(Cow::Borrowed(params));
        }
        let mut copy = params.clone();
        self.rules.redact(&mut copy);
        Some(Cow::Owned(copy))
    }

    /// The next recorded answer for `key`: a recorded capability refusal
    /// for a stateless client lacking what it names, else the next
    /// recording in order.
    fn answer_from_tape(&self, call: &Call, key: &MatchKey) -> Option<Answer> {
        let identity = || self.identity(call.server);
        if call.era == Era::Stateless {
            let declared = call
                .params
                .and_then(|p| p.pointer("/_meta"))
                .and_then(|m| m.get(mcp::META_CLIENT_CAPABILITIES));
            if let Some(refusal) = self.tape.capability_refusal(key, declared) {
                return Some(recorded_answer(call, &refusal, Outcome::Hit, || LogFilter::Nothing, identity));
            }
        }
        let exchange = self.next_recorded(call, key)?;
        self.note_use(call, &exchange);
        Some(recorded_answer(call, &exchange, Outcome::Hit, || self.log_filter(call), identity))
    }

    /// Notes that `recorded` answers `call`, warning the first time a
    /// recording older than `--max-age` does.
    fn note_use(&self, call: &Call, recorded: &Recorded) {
        recorded.used.mark();
        let (Some(limit), Some(at)) = (self.max_age.map(|age| age.as_secs() as i64), recorded.recorded_at)
        else {
            return;
        };
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
        if now.saturating_sub(at) <= limit {
            return;
        }
        let case = CaseKey::of(call.server, call.method, call.params());
        if self.ledger.stale(&case, recorded.source.as_ref()) {
            tracing::warn!(
                "{case}: the recording answering it is {} days old, older than --max-age {}{}",
                now.saturating_sub(at) / SECONDS_PER_DAY,
                limit / SECONDS_PER_DAY,
                recorded.source.as_ref().map(|s| format!(" ({s})")).unwrap_or_default(),
            );
        }
    }

    /// The `serverInfo` answers of `server` carry: its own as recorded, else
    /// mcp-tape's.
    pub fn identity(&self, server: &str) -> &Value {
        self.tape.server_info(server).unwrap_or(&OWN_SERVER_INFO)
    }

    fn next_recorded(&self, call: &Call, key: &MatchKey) -> Option<Arc<Recorded>> {
        // Cursors only for recorded keys: the servers that have any are the
        // cassettes' few, whatever paths clients make up.
        if !self.tape.has(key) {
            return None;
        }
        self.with_cursors(call, |cursors| self.tape.next(key, call.era, cursors))
    }

    /// Runs `with` on the cursors of `call`'s session: its replay session,
    /// else those of its server (stateless era, or no session) or of a
    /// foreign session (record's, when it answers from a cassette).
    fn with_cursors<T>(&self, call: &Call, with: impl FnOnce(&mut Cursors) -> T) -> T {
        let session = call.session.filter(|_| call.era == Era::Handshake);
        if let Some(session) = session
            && let Some(state) = lock(&self.sessions).live.get_mut(session)
        {
            return with(&mut state.cursors);
        }
        let scope = session.unwrap_or(call.server);
        let mut sessionless = lock(&self.sessionless);
        if let Some(cursors) = sessionless.get_mut(scope) {
            return with(cursors);
        }
        if sessionless.len() >= MAX_SESSIONS {
            sessionless.clear(); // long-gone foreign sessions; a live one restarts its recorded order
        }
        with(sessionless.entry(scope.to_owned()).or_default())
    }

    /// `initialize`: the recorded result (or one made from a recorded
    /// discover, or the mock's) with the version negotiated for this client,
    /// and a new session.
    fn initialize(&self, call: &Call) -> Answer {
        let requested = call.params().and_then(|p| p.get("protocolVersion")).and_then(Value::as_str);
        let recorded = self.tape.recorded(call.server, "initialize").first();
        let mut answer = if let Some(exchange) = recorded {
            let identity = || self.identity(call.server);
            let mut answer =
                recorded_answer(call, exchange, Outcome::Hit, || LogFilter::Everything, identity);
            if let Some(last) = answer.messages.last_mut() {
                let mut message = last.parsed().unwrap_or_default();
                // A result that is not an object, or not read, goes out as recorded.
                if let Some(result) = message.get_mut("result").and_then(Value::as_object_mut) {
                    result.insert("protocolVersion".into(), mcp::negotiate(requested).into());
                    last.json = scan::rewrite(&last.json, &message);
                }
            }
            answer
        } else if let Some(discover) = self.recorded_result(call.server, "server/discover") {
            let initialize = convert::initialize_from_discover(&discover, requested);
            Answer::result(call, Outcome::Hit, initialize, self.identity(call.server))
        } else if let Some(initialize) = self.templated_initialize(call.server, requested) {
            Answer::result(call, Outcome::Hit, initialize, self.identity(call.server))
        } else {
            mock_answer(call, Outcome::Mock, &OWN_SERVER_INFO)
        };
        if answer
            .messages
            .last()
            .is_some_and(|m| m.is_answer && m.parsed().is_some_and(|m| m.get("result").is_some()))
        {
            answer.session_id = Some(lock(&self.sessions).open(call.server));
        }
        answer
    }

    /// `server/discover`: as recorded (a recorded probe failure included, so
    /// the client falls back as it did against the upstream), else made
    /// from a recorded `initialize`, else the mock's.
    fn discover(&self, call: &Call) -> Answer {
        if let Some(exchange) = self.tape.recorded(call.server, "server/discover").first() {
            recorded_answer(
                call,
                exchange,
                Outcome::Hit,
                || LogFilter::Nothing,
                || self.identity(call.server),
            )
        } else if let Some(initialize) = self
            .recorded_result(call.server, "initialize")
            .or_else(|| self.templated_initialize(call.server, None))
        {
            let discover = convert::discover_from_initialize(&initialize);
            Answer::result(call, Outcome::Hit, discover, self.identity(call.server))
        } else {
            mock_answer(call, Outcome::Mock, &OWN_SERVER_INFO)
        }
    }

    /// The `initialize` result of a server known only by its answer
    /// templates: tools, and nothing it cannot serve.
    fn templated_initialize(&self, server: &str, requested: Option<&str>) -> Option<Value> {
        self.tape.templates(server).next()?;
        Some(json!({
            "protocolVersion": mcp::negotiate(requested),
            "capabilities": {"tools": {}},
            "serverInfo": self.identity(server),
        }))
    }

    /// The answer templates' answer to `call`: a `tools/list` of their tools
    /// for a server with no recorded list, a `tools/call` of a templated
    /// tool with any arguments.
    fn answer_from_templates(&self, call: &Call, params: Option<&Value>) -> Option<Answer> {
        match call.method {
            "tools/list" if self.tape.recorded(call.server, "tools/list").is_empty() => {
                let tools: Vec<Value> = self
                    .tape
                    .templates(call.server)
                    .map(|t| json!({"name": t.tool, "description": t.description, "inputSchema": t.input_schema}))
                    .collect();
                if tools.is_empty() {
                    return None;
                }
                Some(Answer::result(
                    call,
                    Outcome::Template,
                    json!({"tools": tools}),
                    self.identity(call.server),
                ))
            }
            "tools/call" => {
                let name = params?.get("name")?.as_str()?;
                let template = self.tape.template(call.server, name)?;
                let text = template::render(&template.text, params?.get("arguments"));
                let result = json!({"content": [{"type": "text", "text": text}]});
                let mut answer = Answer::result(call, Outcome::Template, result, self.identity(call.server));
                // As the real servers answer: a stream when the client takes one, after the mock's delay.
                answer.recorded_as_stream = true;
                for message in &mut answer.messages {
                    message.offset_ms = template.delay_ms;
                }
                Some(answer)
            }
            _ => None,
        }
    }

    /// The result of the first recorded `method` exchange of `server`, if it succeeded.
    fn recorded_result(&self, server: &str, method: &str) -> Option<Value> {
        self.tape.recorded(server, method).first()?.result()
    }
}

/// A recorded exchange re-stamped for this caller and era: the caller's id
/// and progress token in place of the placeholders (progress notifications
/// dropped for a caller that asked for none), log notifications the caller
/// did not ask for left out, the fields of the caller's era, and each
/// server→client request the recording shows answered marked as awaiting
/// the client's reply. `identity` is the `serverInfo` a result converted to
/// the stateless era carries.
fn recorded_answer<'v>(
    call: &Call,
    exchange: &Recorded,
    outcome: Outcome,
    logs: impl FnOnce() -> LogFilter,
    identity: impl FnOnce() -> &'v Value,
) -> Answer {
    // Which log notifications the caller takes is asked only of a recording that has any.
    let has_logs = exchange.messages.iter().any(|m| m.method.as_deref() == Some("notifications/message"));
    let logs = if has_logs { logs() } else { LogFilter::Everything };
    let id = call.id.json_text();
    let token = mcp::progress_token(call.params()).map(Value::to_string);
    let replied = ServedMessage::replied(&exchange.messages);
    // Era conversions need the structure; the usual case is plain text work.
    let convert = call.era == Era::Stateless || exchange.era == Era::Stateless;
    let identity = (call.era == Era::Stateless).then(identity);
    let mut messages = Vec::with_capacity(exchange.messages.len());
    for message in exchange.messages.iter().filter(|m| m.direction == Direction::Server) {
        if token.is_none() && message.has_progress_token {
            continue; // the caller asked for no progress
        }
        if !logs.lets_through(message) {
            continue;
        }
        let mut json = normalize::stamp(&message.json, message.id_at, id, token.as_deref());
        // Valid JSON serde_json will not read (a lone surrogate, `1e999`,
        // nesting past 128) goes out as recorded, unconverted.
        if convert && let Ok(mut body) = serde_json::from_str::<Value>(&json) {
            match identity {
                Some(identity) => convert::message_to_stateless(call.method, &mut body, identity),
                None => convert::message_to_handshake(&mut body),
            }
            json = scan::rewrite(&json, &body);
        }
        let awaits_reply = message.awaits_reply(&replied);
        messages.push(Outgoing {
            json,
            is_answer: message.method.is_none(),
            offset_ms: message.offset_ms,
            awaits_reply,
        });
    }
    let standing = if exchange.era == call.era {
        Standing::Recorded(exchange.status)
    } else {
        Standing::Final(messages.last().and_then(Outgoing::parsed).as_ref().and_then(jsonrpc::error_code))
    };
    Answer {
        outcome,
        era: call.era,
        standing,
        messages,
        recorded_as_stream: exchange.content_type.starts_with("text/event-stream"),
        session_id: None,
        hold_open: false,
        rule: None,
        asides: Asides::of(&exchange.asides),
        feed: None,
        stream: if exchange.era == call.era { exchange.stream } else { StreamShape::default() },
        behind: None,
    }
}

/// The acknowledgement of a `subscriptions/listen` stream honouring `kinds`,
/// held open until the client closes it; `feed` is what else it gets.
fn listen_answer(call: &Call, kinds: Kinds, feed: Option<Feed>) -> Answer {
    let acknowledged = json!({
        "jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": {"notifications": kinds.to_json(), "_meta": {mcp::META_SUBSCRIPTION_ID: call.id.as_value()}},
    });
    Answer {
        outcome: Outcome::Mock,
        era: call.era,
        standing: Standing::Final(None),
        messages: vec![Outgoing { is_answer: false, ..Outgoing::answer(acknowledged.to_string()) }],
        recorded_as_stream: true,
        session_id: None,
        hold_open: true,
        rule: None,
        asides: Asides::default(),
        feed,
        stream: StreamShape::default(),
        behind: None,
    }
}

fn mock_answer(call: &Call, outcome: Outcome, identity: &Value) -> Answer {
    match fallback::answer(call.era, call.method, call.params()) {
        Ok(result) => Answer::result(call, outcome, result, identity),
        Err(error) => Answer::error(call, outcome, &error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Facts;
    use crate::jsonrpc::{Params, RequestId};

    /// A match key is remembered by the params it was worked out from; the
    /// same params sent to another server (or as another method) are
    /// another request.
    #[test]
    fn remembered_keys_belong_to_their_server_and_method() {
        let rules = Rules::default();
        let recorded = ["mcp_A", "mcp_B"]
            .map(|server| crate::normalize::tests::sample(server, "t", &format!("from {server}")).to_text());
        let tape = Tape::new(recorded.into(), &rules);
        let replay = Replay::new(tape, ServiceAnswers::default(), rules, OnMiss::Error, Pace::Instant);
        let id = RequestId::from_value(&json!(1)).unwrap();
        let params = Params::new(json!({"name": "t"}));
        let facts = Facts::default();
        let answer = |server: &str, method: &str| {
            let call = Call {
                server,
                era: Era::Handshake,
                session: None,
                id: &id,
                method,
                params: Some(&params),
                facts: &facts,
            };
            let answer = replay.answer(&call).unwrap();
            (answer.outcome, answer.messages.last().map(|m| m.json.contains(&format!("from {server}"))))
        };
        for _ in 0..2 {
            assert_eq!(answer("mcp_A", "tools/call"), (Outcome::Hit, Some(true)));
            assert_eq!(answer("mcp_B", "tools/call"), (Outcome::Hit, Some(true)));
            assert_ne!(answer("mcp_A", "prompts/get").0, Outcome::Hit);
        }
    }

    /// Session-less cursors were once made for every server path a request
    /// named, so made-up paths grew memory without bound.
    #[test]
    fn made_up_server_paths_leave_no_state_behind() {
        let recorded = crate::normalize::tests::sample("mcp_Known", "t", "x").to_text();
        let rules = Rules::default();
        let tape = Tape::new(vec![recorded], &rules);
        let replay = Replay::new(tape, ServiceAnswers::default(), rules, OnMiss::Error, Pace::Instant);
        let id = RequestId::from_value(&json!(1)).unwrap();
        let params = Params::new(json!({"name": "t"}));
        let facts = Facts::default();
        fn call<'a>(server: &'a str, id: &'a RequestId, params: &'a Params, facts: &'a Facts) -> Call<'a> {
            let era = Era::Handshake;
            Call { server, era, session: None, id, method: "tools/call", params: Some(params), facts }
        }
        for n in 0..1000 {
            let server = format!("/made/up/{n}");
            replay.answer(&call(&server, &id, &params, &facts)).unwrap();
        }
        assert_eq!(lock(&replay.sessionless).len(), 0);
        let known = replay.answer(&call("mcp_Known", &id, &params, &facts)).unwrap();
        assert_eq!(known.outcome, Outcome::Hit);
        assert_eq!(lock(&replay.sessionless).len(), 1);
    }
}
