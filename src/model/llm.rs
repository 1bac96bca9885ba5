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

impl LlmAnswer {
    /// The texts that hold JSON: the whole body, or each event's data.
    pub fn json_texts(&self) -> Vec<&str> {
        match self {
            LlmAnswer::Whole(body) => vec![body],
            LlmAnswer::Events(events) => events
                .iter()
                .flat_map(|event| event.text.split('\n'))
                .filter_map(|line| line.trim_end_matches('\r').strip_prefix("data:"))
                .map(str::trim_start)
                .collect(),
        }
    }
}

impl LlmEvent {
    /// The event with each `data:` line's data (an event's JSON) and each
    /// other line made anew by `edit`, each line's ending kept.
    pub fn edited(&self, edit: impl Fn(&str) -> String) -> String {
        let lines: Vec<String> = self
            .text
            .split('\n')
            .map(|line| {
                let (line, ending) = line.strip_suffix('\r').map_or((line, ""), |line| (line, "\r"));
                let edited = match line.strip_prefix("data:") {
                    Some(data) => {
                        let (space, data) = data.strip_prefix(' ').map_or(("", data), |data| (" ", data));
                        format!("data:{space}{}", edit(data))
                    }
                    None => edit(line),
                };
                format!("{edited}{ending}")
            })
            .collect();
        lines.join("\n")
    }
}
