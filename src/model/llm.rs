//! The agent's LLM on the tape (`--model NAME=URL`): one exchange with it,
//! as stored.

use super::Status;

/// One request to the agent's model (`--model NAME=URL`) and its answer,
/// as the client and the server wrote them. Credentials are never part of
/// it: record leaves them out of `target` and scrubs them from the bodies.
#[derive(Clone, Debug, PartialEq)]
pub struct LlmExchange {
    /// The `NAME` of `--model NAME=URL`.
    pub model: String,
    pub method: String,
    /// The path after `/model/NAME` (`/` for none), with its query.
    pub target: String,
    /// The request body as the client wrote it.
    pub request: String,
    pub status: Status,
    pub content_type: String,
    pub answer: LlmAnswer,
    /// Seconds since the Unix epoch.
    pub recorded_at: Option<i64>,
    /// Where it was read from (`None` for one not read from a cassette).
    pub source: Option<LlmSource>,
}

/// Where a model exchange was read from: the cassette and its row.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct LlmSource {
    pub cassette: std::sync::Arc<std::path::Path>,
    pub row: i64,
}

/// A model's answer body: whole, or a stream's events.
#[derive(Clone, Debug, PartialEq)]
pub enum LlmAnswer {
    Whole(String),
    /// Server-Sent Events in the order they came.
    Events(Vec<LlmEvent>),
}

/// One Server-Sent Event of a model's streamed answer.
#[derive(Clone, Debug, PartialEq)]
pub struct LlmEvent {
    /// Milliseconds from the request to the event.
    pub offset_ms: u64,
    /// The event's lines as the server wrote them, without the blank line
    /// that ends it.
    pub text: String,
}
