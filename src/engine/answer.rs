//! The answer to one request, before framing: its messages in order and
//! what the front door needs to send them.

use serde_json::Value;
use tokio::sync::oneshot;

use super::step::{Call, Outcome, Outgoing, Standing};
use super::{by_rule, said};
use crate::jsonrpc::{self, ErrorObject};
use crate::mcp::convert;
use crate::model::{Era, StreamShape};

/// The answer to one request, before framing.
#[derive(Debug)]
pub struct Answer {
    pub outcome: Outcome,
    /// The era of the request answered.
    pub era: Era,
    /// What a front door with statuses makes the answer's status of.
    pub standing: Standing,
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
    /// What the recorded server said on its own after this answer.
    pub asides: said::Asides,
    /// A stream held open: what else it gets (`subscriptions/listen`).
    pub feed: Option<said::Feed>,
    /// How the recorded stream was framed for a client to resume it.
    pub stream: StreamShape,
    /// Fires once what the server said after the session's previous answer
    /// is on the client's connection: this answer follows it (replay).
    pub behind: Option<oneshot::Receiver<()>>,
}

impl Answer {
    /// The one-message answer `message`.
    fn single(era: Era, outcome: Outcome, standing: Standing, message: String) -> Answer {
        Answer {
            outcome,
            era,
            standing,
            messages: vec![Outgoing::answer(message)],
            recorded_as_stream: false,
            session_id: None,
            hold_open: false,
            rule: None,
            asides: said::Asides::default(),
            feed: None,
            stream: StreamShape::default(),
            behind: None,
        }
    }

    /// `result` as the answer to `call`, in its era's shape (`identity`: the
    /// server's own `serverInfo`, which stateless results carry).
    pub fn result(call: &Call, outcome: Outcome, mut result: Value, identity: &Value) -> Answer {
        if call.era == Era::Stateless {
            convert::stateless_result(call.method, &mut result, identity);
        }
        Answer::single(call.era, outcome, Standing::Final(None), jsonrpc::result(call.id, &result))
    }

    /// `error` as the answer to `call`.
    pub fn error(call: &Call, outcome: Outcome, error: &ErrorObject) -> Answer {
        Answer::single(
            call.era,
            outcome,
            Standing::Final(Some(error.code)),
            jsonrpc::error(Some(call.id), error),
        )
    }
}
