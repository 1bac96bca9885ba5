//! The MCP engine: what mcp-tape does with one JSON-RPC message, whatever
//! carried it. A front door (`transport`) parses a message, reads the facts
//! its framing carries (server, era, session, routing headers, credentials)
//! into a [`Call`], and asks the [`Engine`]; the engine answers with a
//! [`Step`]: an [`Answer`] to send back (messages in order, each with its
//! recorded offset and whether the client's reply must come before the next;
//! see [`reenact`]), or a forward: the front door's upstream link and the
//! [`Flight`] to show the upstream's answer, which says when the final
//! answer may go ([`Held`]). Every answer carries a typed [`Outcome`] for
//! the front door's log line.
//!
//! Before either mode is asked, the fault rules ([`inject`]) may take the
//! request: an answer of their own (a JSON-RPC error, an `isError` result),
//! a [`Failure`] the front door enacts in its terms (a status, a hang, a
//! cut stream, a lost session), or the usual step after a delay
//! ([`Step::Delayed`]). A faulted request never reaches the upstream.
//!
//! The modes: [`replay`](mod@replay) answers from the tape, else the mock;
//! [`record`](mod@record) decides what is stored and when a client may see
//! it; `--mode missing` is composed here from both ([`Mode::Missing`]),
//! and the two never import each other. A recording engine holds its link
//! (`L`: an HTTP client, a child process), so a recording without one
//! cannot be built. No HTTP and no I/O here: how bytes become messages and
//! how the link reaches the upstream belong to the front door.

pub mod answer;
pub mod by_rule;
pub mod flight;
pub mod inject;
pub mod ledger;
pub mod llm;
pub mod memory;
pub mod message;
pub mod miss;
pub mod nearest;
pub mod policy;
pub mod record;
pub mod reenact;
pub mod replay;
pub mod said;
mod sessions;
pub mod step;
pub mod turn;

use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::error::{RequestError, Unanswered};
use crate::faults::{Action, Effect, FaultRules};
use crate::mcp;
use crate::model::{Era, ServiceRoute};
use inject::Injector;
use ledger::Usage;
use replay::Replay;

pub use answer::Answer;
pub use flight::{Flight, Flights, Heard, Held, Listener, ServiceFlight, Wait};
pub use llm::{LlmCall, LlmFlight};
pub use message::{Arrived, AsWritten};
pub use policy::{Headers, Policy};
pub use record::{Lost, LostAnswers, Recorder};
pub use step::{
    Asked, Call, Facts, Failure, FromClient, Outcome, Outgoing, PlainReply, SessionAsk, Standing,
};

/// What the engine makes of a client message.
pub enum Step<'e, L> {
    /// Send this back.
    Answer(Answer),
    /// Nothing to send back but an acknowledgement (a notification, or a
    /// reply to a re-enacted server request).
    Accepted,
    /// An acknowledged notification the recorded server answered with
    /// messages of its own (on the session's standalone stream).
    Said(Vec<Outgoing>),
    /// Forward the message through `link`; with a flight, show it the
    /// upstream's answer.
    Forward { link: &'e L, flight: Option<Flight> },
    /// A fault's delay: wait `by`, then take `then`.
    Delayed { by: Duration, then: Box<Step<'e, L>> },
    /// A fault the front door enacts in its own terms.
    Fail(Failure),
}

/// What the engine makes of a request answered in plain HTTP (to the
/// agent's model, to an Agent 365 service endpoint).
pub enum PlainStep<'e, L, F> {
    /// Replay's answer.
    Answer(PlainReply),
    /// Forward it through `link`; what comes back goes to `flight`.
    Forward { link: &'e L, flight: F },
}

/// What the engine makes of a [`SessionAsk`].
pub enum SessionStep<'e, L> {
    /// Replay's health: its mode, exchanges and servers.
    Health(Value),
    /// Replay offers no standalone stream outside a session.
    NoStream,
    /// Replay's standalone stream of the session.
    Stream(tokio::sync::mpsc::Receiver<reenact::Emit>),
    /// The session ended.
    Ended,
    /// Not what the request's era takes.
    NotAllowed,
    /// Forward it through `link`; a stream's messages go to the listener.
    Forward(&'e L, Option<Listener>),
}

/// What becomes of a session's `GET` that resumes a stream
/// (`Last-Event-ID`).
pub enum Resumption<'e, L> {
    /// Recording: it goes through `link` (the upstream's answer stream it
    /// closed early resumes there).
    Forward(&'e L),
    /// Replay: the session is live; the door resumes what it kept of the
    /// stream, if it kept it.
    Kept,
    /// Nothing resumes in the request's era: the `GET` opens a stream.
    Fresh,
}

/// The engine, shared by every connection: its mode, and the fault rules
/// it injects in front of it.
pub struct Engine<L> {
    mode: Mode<L>,
    faults: Injector,
}

/// What the engine does with requests no fault takes; `L` is the front
/// door's link to the upstream, which only a recording holds.
pub enum Mode<L> {
    Replay(Replay),
    Record {
        recorder: Recorder,
        link: L,
    },
    /// Record `--mode missing`: what the cassette held at start answers,
    /// the rest is forwarded and recorded.
    Missing {
        cassette: Replay,
        recorder: Recorder,
        link: L,
    },
}

impl<L> From<Mode<L>> for Engine<L> {
    fn from(mode: Mode<L>) -> Engine<L> {
        Engine { mode, faults: Injector::default() }
    }
}

impl<L> Engine<L> {
    /// The same engine, injecting the faults `rules` name.
    pub fn with_faults(self, rules: FaultRules) -> Engine<L> {
        Engine { faults: Injector::new(rules), ..self }
    }

    /// What to do with a request: what a fault rule that fires says, else
    /// what the mode says.
    ///
    /// # Errors
    ///
    /// A session a fault made the engine lose; replay's refusals: an
    /// unknown session, a stateless request whose envelope or headers do
    /// not hold together.
    pub fn request(&self, call: &Call) -> Result<Step<'_, L>, RequestError> {
        self.faults.check_session(call.session).map_err(|e| e.with_id(Some(call.id.clone())))?;
        match self.faults.fire(call) {
            None => self.usual(call),
            Some((rule, action)) => self.inject(call, rule, action),
        }
    }

    /// A fault's answer to `call`: what `action` says, the usual answer
    /// (later) when it says only to wait.
    fn inject(&self, call: &Call, rule: usize, action: &Action) -> Result<Step<'_, L>, RequestError> {
        let step = match &action.effect {
            None => self.usual(call)?,
            Some(effect) => self.enact(call, effect)?,
        };
        let replaced =
            action.effect.as_ref().is_some_and(|effect| !matches!(effect, Effect::CutStreamAfter(_)));
        self.faults.note(call, rule, replaced);
        Ok(match action.delay {
            Some(by) => Step::Delayed { by, then: Box::new(step) },
            None => step,
        })
    }

    /// What `effect` makes of `call`; nothing of it reaches the upstream.
    fn enact(&self, call: &Call, effect: &Effect) -> Result<Step<'_, L>, RequestError> {
        Ok(match effect {
            Effect::Error(error) => Step::Answer(Answer::error(call, Outcome::Injected, error)),
            Effect::ToolError(text) => {
                let result = json!({"content": [{"type": "text", "text": text}], "isError": true});
                let own = mcp::server_info();
                let identity = self.replay().map_or(&own, |replay| replay.identity(call.server));
                Step::Answer(Answer::result(call, Outcome::Injected, result, identity))
            }
            Effect::Http { status, retry_after } => {
                Step::Fail(Failure::Http { status: *status, retry_after: *retry_after })
            }
            Effect::Hang => Step::Fail(Failure::Hang),
            Effect::CutStreamAfter(events) => {
                let messages = match &self.mode {
                    Mode::Replay(replay) => replay.answer(call)?.messages,
                    Mode::Missing { cassette, .. } => {
                        cassette.recorded(call).map(|a| a.messages).unwrap_or_default()
                    }
                    Mode::Record { .. } => Vec::new(),
                };
                let messages = messages.into_iter().filter(|m| !m.is_answer).take(*events).collect();
                Step::Fail(Failure::Cut { messages })
            }
            Effect::LoseSession => {
                if let Some(session) = call.session {
                    self.faults.lose(session);
                    if let Some(replay) = self.replay() {
                        // Its state goes with it; an unknown session here is already gone.
                        let _ = replay.end_session(session, call.server);
                    }
                }
                let lost =
                    RequestError { fault: Box::new(Unanswered::UnknownSession), id: Some(call.id.clone()) };
                Step::Fail(Failure::LostSession(lost))
            }
        })
    }

    /// What the mode makes of a request no fault took.
    fn usual(&self, call: &Call) -> Result<Step<'_, L>, RequestError> {
        match &self.mode {
            Mode::Replay(replay) => replay.answer(call).map(Step::Answer),
            Mode::Record { recorder, link } => {
                Ok(Step::Forward { link, flight: Some(recorder.flight(call)) })
            }
            Mode::Missing { cassette, recorder, link } => {
                // These open upstream sessions the rest of the traffic may need:
                // always forwarded, and the cassette's cursors left alone.
                let recorded = match call.method {
                    "initialize" | "server/discover" => None,
                    _ => cassette.recorded(call),
                };
                match recorded {
                    Some(answer) => {
                        let rule = answer.rule.as_ref();
                        cassette.ledger().note(
                            call.server,
                            call.method,
                            call.params(),
                            Outcome::Cassette,
                            rule,
                        );
                        Ok(Step::Answer(Answer { outcome: Outcome::Cassette, ..answer }))
                    }
                    None => Ok(Step::Forward { link, flight: Some(recorder.flight(call)) }),
                }
            }
        }
    }

    /// What to do with a notification or a reply to a server→client request.
    ///
    /// # Errors
    ///
    /// Replay: a handshake-era session we do not know.
    pub fn client_message(
        &self,
        era: Era,
        session: Option<&str>,
        message: FromClient,
    ) -> Result<Step<'_, L>, RequestError> {
        self.faults.check_session(session)?;
        match &self.mode {
            Mode::Replay(replay) => {
                if era == Era::Handshake {
                    replay.check_session(session)?;
                }
                match message {
                    FromClient::Notification(method) => {
                        let said = replay.notified(session, method);
                        Ok(if said.is_empty() { Step::Accepted } else { Step::Said(said) })
                    }
                    FromClient::Reply(id, _) => {
                        if let Some(id) = id {
                            replay.replies().arrived(session, id.as_value());
                        }
                        Ok(Step::Accepted)
                    }
                }
            }
            Mode::Record { recorder, link } | Mode::Missing { recorder, link, .. } => {
                match message {
                    FromClient::Notification(method) => recorder.notified(session, method),
                    FromClient::Reply(Some(id), body) => recorder.tie_reply(session, id, body),
                    FromClient::Reply(None, _) => {}
                }
                Ok(Step::Forward { link, flight: None })
            }
        }
    }

    /// Replay: puts what the server says on its own in `session` on its
    /// standalone stream (held until the client opens one).
    pub fn say(&self, session: Option<&str>, messages: Vec<Outgoing>) {
        if messages.is_empty() {
            return;
        }
        match (self.replay(), session) {
            (Some(replay), Some(session)) => replay.say(session, messages),
            _ => tracing::debug!(
                "{} message(s) the server said on its own have no session to go to: dropped",
                messages.len()
            ),
        }
    }

    /// Replay: [`Engine::say`] for what the server said in `session` while
    /// an exchange was in flight, which must reach the client before that
    /// exchange's answer: what fires once it has been written to the
    /// client's GET stream (`None` when it went nowhere or is held for a
    /// stream not open yet).
    pub fn say_before(
        &self,
        session: Option<&str>,
        messages: Vec<Outgoing>,
    ) -> Option<oneshot::Receiver<()>> {
        match (self.replay(), session) {
            (Some(replay), Some(session)) if !messages.is_empty() => replay.say_before(session, messages),
            _ => {
                self.say(session, messages);
                None
            }
        }
    }

    /// Replay: [`Engine::say`] for what the server said in `session` after
    /// an answer: what the door fires once that answer has been written
    /// (`None` when there is nothing to wait for).
    pub fn say_after(&self, session: Option<&str>, messages: Vec<Outgoing>) -> Option<oneshot::Sender<()>> {
        match (self.replay(), session) {
            (Some(replay), Some(session)) if !messages.is_empty() => {
                let (answered, told) = oneshot::channel();
                replay.say_after(session, messages, told);
                Some(answered)
            }
            _ => {
                self.say(session, messages);
                None
            }
        }
    }

    /// What to do with a request to the agent's model: replay's answer (a
    /// recording or a miss); record's forward; `--mode missing` answers
    /// what the cassette holds and forwards the rest. Fault rules do not
    /// apply: they name MCP servers and tools.
    pub fn llm(&self, call: &LlmCall) -> PlainStep<'_, L, Box<LlmFlight>> {
        match &self.mode {
            Mode::Replay(replay) => PlainStep::Answer(replay.llm(call)),
            Mode::Record { recorder, link } => PlainStep::Forward { link, flight: recorder.llm(call) },
            Mode::Missing { cassette, recorder, link } => match cassette.llm_recorded(call) {
                Some(reply) => PlainStep::Answer(reply),
                None => PlainStep::Forward { link, flight: recorder.llm(call) },
            },
        }
    }

    /// What to do with a call to an Agent 365 service endpoint: replay's
    /// answer (`origin`, as the client reached us, is where listed servers
    /// point), or recording, the forward of a call that carried
    /// `credentials`.
    pub fn service(
        &self,
        route: ServiceRoute,
        origin: &str,
        credentials: Vec<String>,
    ) -> PlainStep<'_, L, ServiceFlight> {
        match &self.mode {
            Mode::Replay(replay) => PlainStep::Answer(replay.service(route, origin)),
            Mode::Record { recorder, link } | Mode::Missing { recorder, link, .. } => {
                PlainStep::Forward { link, flight: recorder.service(route, credentials) }
            }
        }
    }

    /// What to do with a handshake-era session's stream, resumption or
    /// end, asked in `era` on `server`'s path (only the path that opened a
    /// session ends it). Recording, all of it goes to the upstream, the
    /// standalone stream shown to a listener.
    ///
    /// # Errors
    ///
    /// A fault rule's lost session; replay: [`Unanswered::UnknownSession`] for
    /// a session we do not know, [`Unanswered::MissingSessionHeader`] to end
    /// none.
    pub fn session(
        &self,
        ask: SessionAsk,
        era: Era,
        session: Option<&str>,
        server: &str,
    ) -> Result<SessionStep<'_, L>, RequestError> {
        let replay = match &self.mode {
            Mode::Replay(replay) => replay,
            Mode::Record { link, recorder } | Mode::Missing { link, recorder, .. } => {
                // The health endpoint is the upstream's, a GET as any other.
                if !matches!(ask, SessionAsk::OpenStream | SessionAsk::Health) {
                    return Ok(SessionStep::Forward(link, None));
                }
                self.faults.check_session(session)?;
                return Ok(SessionStep::Forward(link, Some(recorder.listener(session))));
            }
        };
        if ask == SessionAsk::Health {
            let tape = replay.tape();
            return Ok(SessionStep::Health(serde_json::json!({
                "status": "ok",
                "mode": "replay",
                "exchanges": tape.len(),
                "servers": tape.servers().collect::<Vec<_>>(),
            })));
        }
        if ask == SessionAsk::Other || era == Era::Stateless {
            return Ok(SessionStep::NotAllowed);
        }
        self.faults.check_session(session)?;
        match ask {
            SessionAsk::OpenStream => match session {
                Some(session) => Ok(SessionStep::Stream(replay.open_stream(session)?)),
                None => Ok(SessionStep::NoStream),
            },
            SessionAsk::End => {
                replay.end_session(session.ok_or(Unanswered::MissingSessionHeader)?, server)?;
                Ok(SessionStep::Ended)
            }
            SessionAsk::Health | SessionAsk::Other => Ok(SessionStep::NotAllowed),
        }
    }

    /// What becomes of a `GET` in `era` that resumes a stream of `session`.
    ///
    /// # Errors
    ///
    /// Replay: a session that is not live (ended by DELETE, lost to a fault,
    /// never issued).
    pub fn resume(&self, era: Era, session: &str) -> Result<Resumption<'_, L>, RequestError> {
        match &self.mode {
            Mode::Record { link, .. } | Mode::Missing { link, .. } => Ok(Resumption::Forward(link)),
            Mode::Replay(_) if era == Era::Stateless => Ok(Resumption::Fresh),
            Mode::Replay(replay) => {
                self.faults.check_session(Some(session))?;
                replay.check_session(Some(session))?;
                Ok(Resumption::Kept)
            }
        }
    }

    /// Ends every session's standalone stream, replayed or relayed (the
    /// daemon or the tape stops).
    pub fn end_streams(&self) {
        match &self.mode {
            Mode::Replay(replay) => replay.end_streams(),
            Mode::Record { recorder, .. } | Mode::Missing { recorder, .. } => recorder.end_streams(),
        }
    }

    /// The policy of a front door serving this engine.
    pub fn policy(&self) -> Policy {
        match &self.mode {
            Mode::Replay(replay) => Policy::replaying(std::sync::Arc::clone(replay.replies()), replay.pace()),
            Mode::Record { .. } | Mode::Missing { .. } => Policy::recording(),
        }
    }

    /// What becomes of a message the front door cannot read: recording, it
    /// goes through the returned link as it is, for the upstream to judge.
    ///
    /// # Errors
    ///
    /// Replaying, `error`: the refusal.
    pub fn unread(&self, error: RequestError) -> Result<&L, RequestError> {
        match &self.mode {
            Mode::Record { link, .. } | Mode::Missing { link, .. } => Ok(link),
            Mode::Replay(_) => Err(error),
        }
    }

    /// The recordings a replay answers from (for its report); `None` when
    /// recording.
    pub fn recordings(&self) -> Option<&crate::cassette::tape::Tape> {
        self.replay().map(Replay::tape)
    }

    /// The agent's model exchanges replay answers from, when replaying.
    pub fn llm_recordings(&self) -> Option<&llm::LlmTape> {
        self.replay().map(Replay::llms)
    }

    /// Tells the engine a request ended in `fault`: recording, an upstream
    /// that failed it leaves the recording without it.
    pub fn failed(&self, fault: &Unanswered) {
        if let (
            Unanswered::Upstream(failure),
            Mode::Record { recorder, .. } | Mode::Missing { recorder, .. },
        ) = (fault, &self.mode)
        {
            recorder.upstream_failed(failure);
        }
    }

    /// How many requests the upstream failed (recording), none of them in
    /// the recording, and how it failed the first.
    pub fn upstream_failures(&self) -> (u64, Option<String>) {
        match &self.mode {
            Mode::Record { recorder, .. } | Mode::Missing { recorder, .. } => recorder.upstream_failures(),
            Mode::Replay(_) => (0, None),
        }
    }

    /// The answers clients were given that are not stored (recording).
    pub fn lost(&self) -> Lost {
        match &self.mode {
            Mode::Record { recorder, .. } | Mode::Missing { recorder, .. } => recorder.lost().so_far(),
            Mode::Replay(_) => Lost::default(),
        }
    }

    /// The replay engine, when replaying.
    fn replay(&self) -> Option<&Replay> {
        match &self.mode {
            Mode::Replay(replay) => Some(replay),
            Mode::Record { .. } | Mode::Missing { .. } => None,
        }
    }

    /// What this engine was asked and how it answered, so far.
    pub fn usage(&self) -> Usage {
        let mut usage = match &self.mode {
            Mode::Replay(replay) => replay.usage(),
            Mode::Record { recorder, .. } => recorder.ledger().usage(),
            Mode::Missing { cassette, recorder, .. } => {
                let mut usage = cassette.usage();
                usage.merge(recorder.ledger().usage());
                usage
            }
        };
        usage.merge(self.faults.usage());
        usage
    }
}
