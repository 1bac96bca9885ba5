//! The MCP engine: what mcp-tape does with one JSON-RPC message, whatever
//! carried it. A front door (`transport`) parses a message, reads the facts
//! its framing carries (server, era, session, routing headers, credentials)
//! into a [`Call`], and asks the [`Engine`]; the engine answers with a
//! [`Step`]: an [`Answer`] to send back (messages in order, each with its
//! recorded offset and whether the client's reply must come before the next;
//! see [`reenact`]), or the message to forward upstream with the
//! [`record::Capture`] that tees the upstream's answer into the cassette.
//! Every answer carries a typed [`Outcome`] for the front door's log line.
//!
//! The modes: [`replay`](mod@replay) answers from the tape, else the mock;
//! [`record`](mod@record) captures and commits what the upstream answers;
//! `--mode missing` is composed here from both ([`Engine::Missing`]), and the
//! two never import each other. No HTTP and no I/O here: how bytes become
//! messages and how the upstream is reached belong to the front door.

pub mod by_rule;
pub mod ledger;
pub mod memory;
pub mod nearest;
pub mod record;
pub mod reenact;
pub mod replay;

use serde_json::Value;

use crate::cassette::model::{Era, StatusCode};
use crate::error::{Fault, RequestError};
use crate::jsonrpc::{Params, RequestId};
use crate::mcp::RoutingHeaders;
use ledger::Usage;
use record::{Capture, Recorder};
use replay::Replay;

/// What the front door read about a request besides its message.
#[derive(Clone, Debug, Default)]
pub struct Facts {
    /// The stateless era's routing headers (version, `Mcp-Method`,
    /// `Mcp-Name`); `None` on a transport that has no headers (stdio).
    pub routing: Option<RoutingHeaders>,
    /// `Mcp-Param-{Name}` headers: (name lowercased, value trimmed).
    pub param_headers: Vec<(String, String)>,
    /// Credentials the request carried outside its body (bearer tokens,
    /// cookies, API keys): never stored, scrubbed from what is.
    pub credentials: Vec<String>,
}

/// One parsed JSON-RPC request with its context.
#[derive(Clone, Copy, Debug)]
pub struct Call<'a> {
    /// The server identity (from the HTTP path, or the stdio `--server`).
    pub server: &'a str,
    pub era: Era,
    /// The handshake era's session, if the request named one.
    pub session: Option<&'a str>,
    pub id: &'a RequestId,
    pub method: &'a str,
    pub params: Option<&'a Params>,
    pub facts: &'a Facts,
}

impl<'a> Call<'a> {
    /// The params' value.
    pub fn params(&self) -> Option<&'a Value> {
        self.params.map(Params::value)
    }
}

/// What became of a request, for the log line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Replay: a recorded exchange matched.
    Hit,
    /// Replay: a match rule picked a recording for a request no recording
    /// matches exactly.
    Ruled,
    /// Replay: an answer template answered.
    Template,
    /// Replay: a server with recordings had none for this request.
    Miss,
    /// Replay: the mock answered (no recording applies).
    Mock,
    /// Record `--mode missing`: answered from the cassette, not forwarded.
    Cassette,
    /// Record: the exchange was committed, then its answer sent.
    Recorded,
    /// Record: an SSE answer is being relayed and captured.
    Streaming,
    /// Record: forwarded and relayed, nothing captured.
    Forwarded,
    /// Record: the upstream answered but the exchange could not be stored.
    NotStored,
    /// Record: the upstream could not be reached or failed.
    UpstreamError,
    /// A notification or reply, acknowledged.
    Accepted,
    /// A session ended (DELETE).
    Ended,
    /// The health endpoint.
    Health,
    /// Refused by the front door.
    Rejected,
    /// Refused: the request body stalled.
    Stalled,
    /// Refused: the request body could not be read.
    Unreadable,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Hit => "hit",
            Outcome::Ruled => "rule",
            Outcome::Template => "template",
            Outcome::Miss => "miss",
            Outcome::Mock => "mock",
            Outcome::Cassette => "cassette",
            Outcome::Recorded => "recorded",
            Outcome::Streaming => "streaming",
            Outcome::Forwarded => "forwarded",
            Outcome::NotStored => "not-stored",
            Outcome::UpstreamError => "upstream-error",
            Outcome::Accepted => "accepted",
            Outcome::Ended => "ended",
            Outcome::Health => "health",
            Outcome::Rejected => "rejected",
            Outcome::Stalled => "stalled",
            Outcome::Unreadable => "unreadable",
        }
    }

    /// The outcome a request that failed with `fault` is logged with.
    pub fn of(fault: &Fault) -> Outcome {
        match fault {
            Fault::BodyStalled { .. } => Outcome::Stalled,
            Fault::BodyUnreadable(_) => Outcome::Unreadable,
            Fault::Upstream(_) => Outcome::UpstreamError,
            Fault::NotStored => Outcome::NotStored,
            _ => Outcome::Rejected,
        }
    }
}

/// One message of an answer, ready to send, with what the front door needs
/// to re-enact it.
#[derive(Clone, Debug, PartialEq)]
pub struct Outgoing {
    /// The message as JSON text.
    pub json: String,
    /// An answer (to the caller's request), not a request or notification.
    pub is_answer: bool,
    /// When the recording saw it, in milliseconds after the request.
    pub offset_ms: u64,
    /// The id of a server→client request the recording shows answered: the
    /// client's reply to it must arrive before the next message goes.
    pub awaits_reply: Option<Value>,
}

impl Outgoing {
    fn answer(json: String) -> Outgoing {
        Outgoing { json, is_answer: true, offset_ms: 0, awaits_reply: None }
    }

    /// The message parsed (for the rare answers replay rewrites).
    pub fn parsed(&self) -> Value {
        serde_json::from_str(&self.json).unwrap_or(Value::Null)
    }
}

/// The answer to one request, before framing.
#[derive(Clone, Debug)]
pub struct Answer {
    pub outcome: Outcome,
    /// The HTTP status the answer goes with, for a front door that has one:
    /// as recorded in the request's own era, else what that era maps the
    /// final message to.
    pub status: StatusCode,
    /// Messages to send in order; the last is the response to the caller's
    /// request when the recording has one.
    pub messages: Vec<Outgoing>,
    /// The recording was an SSE stream (stream the messages if the client
    /// takes a stream).
    pub recorded_as_stream: bool,
    /// A session this answer opens (`initialize`).
    pub session_id: Option<String>,
    /// The stream stays open after the messages, until the client closes
    /// it (`subscriptions/listen`).
    pub hold_open: bool,
    /// The match rule that picked the recording, when one did.
    pub rule: Option<by_rule::RuleUse>,
}

impl Answer {
    /// Whether sending this answer takes time: recorded gaps to keep, client
    /// replies to wait for, or a stream held open.
    pub fn needs_time(&self, pace: crate::config::Pace) -> bool {
        pace == crate::config::Pace::Recorded
            || self.hold_open
            || self.messages.iter().any(|m| m.awaits_reply.is_some())
    }
}

/// What the engine makes of a client message.
pub enum Step {
    /// Send this back.
    Answer(Answer),
    /// Nothing to send back but an acknowledgement (a notification, or a
    /// reply to a re-enacted server request).
    Accepted,
    /// Forward the message upstream; with a capture, tee the upstream's
    /// answer into it.
    Forward(Option<Capture>),
}

/// The engine in one of its modes, shared by every connection.
pub enum Engine {
    Replay(Replay),
    Record(Recorder),
    /// Record `--mode missing`: what the cassette held at start answers,
    /// the rest is forwarded and recorded.
    Missing {
        cassette: Replay,
        recorder: Recorder,
    },
}

impl Engine {
    /// What to do with a request.
    ///
    /// # Errors
    ///
    /// Replay's refusals: an unknown session, a stateless request whose
    /// envelope or headers do not hold together.
    pub fn request(&self, call: &Call) -> Result<Step, RequestError> {
        match self {
            Engine::Replay(replay) => replay.answer(call).map(Step::Answer),
            Engine::Record(recorder) => Ok(Step::Forward(Some(recorder.capture(call)))),
            Engine::Missing { cassette, recorder } => {
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
                    None => Ok(Step::Forward(Some(recorder.capture(call)))),
                }
            }
        }
    }

    /// What to do with a notification, or with the client's `response` (its
    /// id and whole message) to a server→client request.
    ///
    /// # Errors
    ///
    /// Replay: a handshake-era session we do not know.
    pub fn client_message(
        &self,
        era: Era,
        session: Option<&str>,
        response: Option<(&RequestId, Value)>,
    ) -> Result<Step, RequestError> {
        match self {
            Engine::Replay(replay) => {
                if era == Era::Handshake {
                    replay.check_session(session)?;
                }
                if let Some((id, _)) = response {
                    replay.replies().arrived(session, id.as_value());
                }
                Ok(Step::Accepted)
            }
            Engine::Record(recorder) | Engine::Missing { recorder, .. } => {
                if let Some((id, body)) = response {
                    recorder.tie_reply(session, id, body);
                }
                Ok(Step::Forward(None))
            }
        }
    }

    /// The replay engine, when replaying (sessions, service answers, health).
    pub fn replay(&self) -> Option<&Replay> {
        match self {
            Engine::Replay(replay) => Some(replay),
            Engine::Record(_) | Engine::Missing { .. } => None,
        }
    }

    /// What this engine was asked and how it answered, so far.
    pub fn usage(&self) -> Usage {
        match self {
            Engine::Replay(replay) => replay.usage(),
            Engine::Record(recorder) => recorder.ledger().usage(),
            Engine::Missing { cassette, recorder } => {
                let mut usage = cassette.usage();
                usage.merge(recorder.ledger().usage());
                usage
            }
        }
    }

    /// The recorder, when recording.
    pub fn recorder(&self) -> Option<&Recorder> {
        match self {
            Engine::Record(recorder) | Engine::Missing { recorder, .. } => Some(recorder),
            Engine::Replay(_) => None,
        }
    }
}
