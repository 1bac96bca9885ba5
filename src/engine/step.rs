//! What a step of the engine is made of, below every room that takes a
//! request or makes an answer: the request with its facts ([`Call`]) and
//! where it went ([`Asked`]), what became of it ([`Outcome`]), one message
//! of an answer ([`Outgoing`]) and its status's source ([`Standing`]), the
//! failures a front door enacts ([`Failure`]), what else a client sends
//! ([`FromClient`], [`SessionAsk`]) and a service endpoint's answer
//! ([`PlainReply`]).

use serde_json::Value;

use crate::config::Pace;
use crate::error::{RequestError, Unanswered};
use crate::jsonrpc::{ErrorCode, Params, RequestId};
use crate::mcp::RoutingHeaders;
use crate::model::{Era, LlmAnswer, Status};

/// What the front door read about a request besides its message.
#[derive(Clone, Debug, Default)]
pub struct Facts<'h> {
    /// The stateless era's routing headers (version, `Mcp-Method`,
    /// `Mcp-Name`); `None` on a transport that has no headers (stdio).
    pub routing: Option<RoutingHeaders<'h>>,
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
    pub facts: &'a Facts<'a>,
}

impl<'a> Call<'a> {
    /// The params' value.
    pub fn params(&self) -> Option<&'a Value> {
        self.params.map(Params::value)
    }

    /// Where it went.
    pub fn asked(&self) -> Asked<'a> {
        Asked { era: self.era, server: self.server, method: self.method }
    }
}

/// Where a request went: its era, server and method (for a request to the
/// agent's model: era [`Era::Handshake`], the model's `NAME` and `METHOD
/// TARGET`).
#[derive(Clone, Copy, Debug)]
pub struct Asked<'a> {
    pub era: Era,
    pub server: &'a str,
    pub method: &'a str,
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
    /// Record: an SSE answer is being relayed and captured; replay: a
    /// session's standalone stream is open.
    Streaming,
    /// A stream closed before its answer, resumed (`GET` with
    /// `Last-Event-ID`): recording, the upstream's rest joins its exchange;
    /// replaying, the rest of the replayed answer follows.
    Resumed,
    /// Record: forwarded and relayed, nothing captured.
    Forwarded,
    /// Record: the upstream answered but the exchange could not be stored.
    NotStored,
    /// Record: the upstream could not be reached or failed.
    UpstreamError,
    /// A fault rule answered instead (or cut, or withheld the answer).
    Injected,
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
            Outcome::Resumed => "resumed",
            Outcome::Forwarded => "forwarded",
            Outcome::NotStored => "not-stored",
            Outcome::UpstreamError => "upstream-error",
            Outcome::Injected => "fault",
            Outcome::Accepted => "accepted",
            Outcome::Ended => "ended",
            Outcome::Health => "health",
            Outcome::Rejected => "rejected",
            Outcome::Stalled => "stalled",
            Outcome::Unreadable => "unreadable",
        }
    }

    /// The outcome a request that failed with `fault` is logged with.
    pub fn of(fault: &Unanswered) -> Outcome {
        match fault {
            Unanswered::BodyStalled { .. } | Unanswered::BodyTooSlow { .. } => Outcome::Stalled,
            Unanswered::BodyUnreadable(_) => Outcome::Unreadable,
            Unanswered::Upstream(_) => Outcome::UpstreamError,
            Unanswered::NotStored => Outcome::NotStored,
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
    pub(super) fn answer(json: String) -> Outgoing {
        Outgoing { json, is_answer: true, offset_ms: 0, awaits_reply: None }
    }

    /// The message parsed (for the rare answers replay rewrites); `None`
    /// for one serde_json does not read (sent as written).
    pub fn parsed(&self) -> Option<Value> {
        serde_json::from_str(&self.json).ok()
    }
}

/// Where an answer's status comes from, for a front door that has
/// statuses (the HTTP door maps it; the engine names no status itself).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Standing {
    /// The recording's own, made in the request's era.
    Recorded(Status),
    /// What the request's era makes of the final message: an error with
    /// this code, or (`None`) a result.
    Final(Option<ErrorCode>),
}

/// An injected failure that is not an MCP answer.
#[derive(Clone, Debug)]
pub enum Failure {
    /// This HTTP status (`Retry-After` seconds when given), as a gateway in
    /// front of the server answers it: no JSON-RPC in the body, so that a
    /// client reports the status. Only a front door with statuses has
    /// these: fault rules that need them are left out on stdio.
    Http { status: u16, retry_after: Option<u64> },
    /// No answer, until the client gives up.
    Hang,
    /// The answer's stream ends after `messages` (none of them the final
    /// answer): over HTTP the SSE stream closes, on stdio the output.
    Cut { messages: Vec<Outgoing> },
    /// The session is gone: the refusal every later use of it gets too.
    LostSession(RequestError),
}

/// A client message that is not a request.
pub enum FromClient<'a> {
    /// A notification, by its method.
    Notification(&'a str),
    /// The client's reply (its id, if it has one, and whole message) to a
    /// server→client request.
    Reply(Option<&'a RequestId>, Value),
}

/// An answer that is not JSON-RPC (the agent's model's, an Agent 365
/// service endpoint's), before HTTP framing.
#[derive(Clone, Debug, PartialEq)]
pub struct PlainReply {
    pub outcome: Outcome,
    pub status: Status,
    pub content_type: String,
    pub answer: LlmAnswer,
    /// How a stream's events are spaced.
    pub pace: Pace,
}

/// What a client asks of a handshake-era session besides requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionAsk {
    /// The health endpoint (`GET /health`).
    Health,
    /// The standalone stream of server messages.
    OpenStream,
    /// The end of the session.
    End,
    /// Something an MCP endpoint does not take.
    Other,
}
