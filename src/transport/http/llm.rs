//! The agent's model on the tape: the tape's `/model/NAME/<rest>?<query>`
//! stands for `URL/<rest>?<query>` of `--model NAME=URL`. The door reads
//! the request into a [`LlmCall`] (the query's credentials left out of
//! its target, the header ones named, neither ever stored) and frames the
//! engine's answer: a whole body, or a stream's events, all at once or
//! spaced as recorded (`--pace`). Recording, the link forwards the request
//! as the client wrote it (body byte for byte; headers, credentials
//! included, to the model's server only, an answer asked for uncompressed)
//! and relays the answer: a whole one once it is stored (gzip or deflate a
//! server used all the same undone), a stream as it arrives, its end once
//! it is stored.

use std::borrow::Cow;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::http::request::Parts;
use hyper::{Request, Response, StatusCode};
use serde_json::json;
use tokio::sync::mpsc;

use super::app::App;
use super::frame::{self, Body};
use super::headers::credentials;
use super::proxy::{held, read_whole, relay_head, send_to};
use super::request::{Logged, RequestBody, read_body};
use super::status;
use super::upstream::UpstreamClient;
use crate::config::Pace;
use crate::engine::{Headers, LlmCall, LlmFlight, Outcome, PlainReply, PlainStep};
use crate::error::RequestError;
use crate::jsonrpc;
use crate::limits::{MAX_JSON_ANSWER_BYTES, MAX_RECORDED_STREAM_BYTES, MAX_SSE_EVENT_BYTES};
use crate::model::{LlmAnswer, LlmEvent, Status};
use crate::redact;
use crate::sse;
use crate::util::printable;

/// Where the tape's model routes begin.
const PREFIX: &str = "/model/";

/// Events a relayed or paced stream holds for a slow client at most.
const EVENTS_WAITING: usize = 64;

/// The `NAME` and the rest (`/` for none) of a path to the tape's
/// `/model/NAME[/rest]`.
pub(super) fn route(path: &str) -> Option<(&str, &str)> {
    let after = path.strip_prefix(PREFIX)?;
    let (name, rest) = after.find('/').map_or((after, "/"), |at| after.split_at(at));
    (!name.is_empty()).then_some((name, rest))
}

/// A request to the agent's model `name`: replay's answer, or recording's
/// forward.
pub(super) async fn serve(
    request: Request<impl RequestBody>,
    name: &str,
    rest: &str,
    app: &App,
    logged: &mut Logged,
) -> Result<Response<Body>, RequestError> {
    let (parts, body) = request.into_parts();
    logged.mcp_method = jsonrpc::Method::Owned(format!("{} {rest}", parts.method));
    let body = read_body(body, app.front_door.idle_timeout).await?;
    let (kept, mut secrets) = redact::query_without_credentials(parts.uri.query().unwrap_or_default());
    let target = if kept.is_empty() { rest.to_owned() } else { format!("{rest}?{kept}") };
    // Collected to be scrubbed from what is stored: only where the headers are passed on.
    if app.policy.headers == Headers::Passed {
        secrets.extend(credentials(&parts.headers, &app.redact_headers));
    }
    // Checked as a whole first: the usual body is UTF-8, and that check is the faster.
    let text = std::str::from_utf8(&body).map_or_else(|_| String::from_utf8_lossy(&body), Cow::Borrowed);
    let call = LlmCall {
        model: name,
        method: parts.method.as_str(),
        target: &target,
        body: &text,
        credentials: &secrets,
    };
    match app.engine.llm(&call) {
        PlainStep::Answer(reply) => {
            logged.outcome = reply.outcome;
            Ok(answer(reply))
        }
        PlainStep::Forward { link, flight } => {
            let Some(upstream) = link.llm(name) else {
                logged.outcome = Outcome::Rejected;
                let message = format!(
                    "mcp-tape: no model is named {}: give record --model {}=URL for the API this client \
                     had as its base URL",
                    printable(name),
                    printable(name)
                );
                return Ok(api_error(status::NO_SUCH_MODEL, &message));
            };
            let rest_and_query = match parts.uri.query() {
                Some(query) => format!("{rest}?{query}"),
                None => rest.to_owned(),
            };
            forward(upstream, link.budget(), &parts, &rest_and_query, body, flight, &mut logged.outcome).await
        }
    }
}

/// Replay's answer that is not JSON-RPC (the model's, a service
/// endpoint's) framed: its status and content type, a whole body or the
/// stream's events.
pub(super) fn answer(reply: PlainReply) -> Response<Body> {
    let body = match reply.answer {
        LlmAnswer::Whole(text) => frame::full(Bytes::from(text)),
        LlmAnswer::Events(events) => match reply.pace {
            Pace::Instant => frame::full(Bytes::from(events.iter().map(event_bytes).collect::<String>())),
            Pace::Recorded => paced(events),
        },
    };
    let mut response = Response::new(body);
    *response.status_mut() = status::recorded(reply.status);
    if let Ok(content_type) = HeaderValue::from_str(&reply.content_type)
        && !reply.content_type.is_empty()
    {
        response.headers_mut().insert(header::CONTENT_TYPE, content_type);
    }
    response
}

/// An event as it goes out again: its lines, then the blank line.
fn event_bytes(event: &LlmEvent) -> String {
    format!("{}\n\n", event.text)
}

/// The events, each sent at its recorded offset from now.
fn paced(events: Vec<LlmEvent>) -> Body {
    let (sender, receiver) = mpsc::channel(EVENTS_WAITING);
    let start = tokio::time::Instant::now();
    tokio::spawn(async move {
        for event in events {
            tokio::time::sleep_until(start + Duration::from_millis(event.offset_ms)).await;
            if sender.send(Bytes::from(event_bytes(&event))).await.is_err() {
                return;
            }
        }
    });
    frame::streamed(Fed(receiver))
}

/// An error in the shape OpenAI-compatible APIs give theirs.
fn api_error(status: StatusCode, message: &str) -> Response<Body> {
    frame::json(
        status,
        &json!({"error": {"message": message, "type": "invalid_request_error", "code": null}}),
    )
}

/// Forwards the request to the model's server and relays its answer,
/// storing a successful one: a stream as it arrives (its end once
/// stored), a whole body once stored. What fails is relayed unstored.
async fn forward(
    upstream: &UpstreamClient,
    budget: &std::sync::Arc<tokio::sync::Semaphore>,
    parts: &Parts,
    rest_and_query: &str,
    body: Bytes,
    flight: Box<LlmFlight>,
    outcome: &mut Outcome,
) -> Result<Response<Body>, RequestError> {
    let uri = upstream.uri_under(rest_and_query).map_err(crate::error::Unanswered::Upstream)?;
    let response = send_to(upstream, rest_and_query, uri, parts, body).await?;
    let (mut head, body) = response.into_parts();
    *outcome = Outcome::Forwarded;
    let content_type =
        head.headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    // Asked for none, a server may compress all the same: gzip and deflate are undone (a whole
    // answer), anything else is relayed as it came.
    let encoding = head
        .headers
        .get(header::CONTENT_ENCODING)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).trim().to_ascii_lowercase())
        .filter(|encoding| encoding != "identity");
    let streamed = content_type.starts_with("text/event-stream");
    let decodable = match encoding.as_deref() {
        None => true,
        Some("gzip" | "x-gzip" | "deflate") => !streamed,
        Some(_) => false,
    };
    let idle = upstream.timeouts().idle;
    if !head.status.is_success() || !decodable {
        let (bytes, share) = read_whole(body, idle, budget).await.map_err(|unread| unread.fault(upstream))?;
        if !head.status.is_success() {
            tracing::warn!(
                "model {}: {} answer; relayed, not stored",
                printable(flight.model()),
                head.status
            );
        } else {
            flight.lose(&format!(
                "its answer came in Content-Encoding {}, which mcp-tape does not decode{}, though it asked for none",
                printable(encoding.as_deref().unwrap_or_default()),
                if streamed { " in a stream" } else { "" }
            ));
        }
        return Ok(Response::from_parts(relay_head(head), held(bytes, share)));
    }
    let status = status::to_record(head.status);
    if streamed {
        *outcome = Outcome::Streaming;
        return Ok(Response::from_parts(
            relay_head(head),
            relay_stream(body, idle, flight, status, content_type),
        ));
    }
    let (bytes, share) = read_whole(body, idle, budget).await.map_err(|unread| unread.fault(upstream))?;
    if let Some(encoding) = &encoding {
        match decompressed(encoding, &bytes) {
            Ok(plain) => {
                // Relayed as stored: the client gets what a replay will give it.
                head.headers.remove(header::CONTENT_ENCODING);
                head.headers.remove(header::CONTENT_LENGTH);
                return store_whole(head, Bytes::from(plain), share, flight, status, &content_type, outcome)
                    .await;
            }
            Err(why) => {
                flight.lose(&why);
                return Ok(Response::from_parts(relay_head(head), held(bytes, share)));
            }
        }
    }
    store_whole(head, bytes, share, flight, status, &content_type, outcome).await
}

/// A whole answer stored, then relayed once committed (not stored when it
/// is not UTF-8 text).
async fn store_whole(
    head: hyper::http::response::Parts,
    bytes: Bytes,
    share: Option<tokio::sync::OwnedSemaphorePermit>,
    flight: Box<LlmFlight>,
    status: Status,
    content_type: &str,
    outcome: &mut Outcome,
) -> Result<Response<Body>, RequestError> {
    let Ok(text) = std::str::from_utf8(&bytes) else {
        flight.lose("the answer is not UTF-8 text");
        return Ok(Response::from_parts(relay_head(head), held(bytes, share)));
    };
    if let Err(error) = flight.complete(status, content_type, LlmAnswer::Whole(text.to_owned())).await {
        *outcome = Outcome::of(&error.fault);
        return Ok(api_error(status::of_fault(&error.fault), &error.fault.error().message));
    }
    *outcome = Outcome::Recorded;
    Ok(Response::from_parts(relay_head(head), held(bytes, share)))
}

/// `bytes` decompressed from Content-Encoding `encoding` (gzip, or HTTP's
/// deflate: zlib), at most [`MAX_JSON_ANSWER_BYTES`] of them (the share of
/// the answers' budget held is the compressed answer's).
fn decompressed(encoding: &str, bytes: &[u8]) -> Result<Vec<u8>, String> {
    use std::io::Read as _;
    let mut plain = Vec::new();
    let limit = MAX_JSON_ANSWER_BYTES as u64 + 1;
    let read = match encoding {
        "deflate" => flate2::read::ZlibDecoder::new(bytes).take(limit).read_to_end(&mut plain),
        _ => flate2::read::GzDecoder::new(bytes).take(limit).read_to_end(&mut plain),
    };
    read.map_err(|e| format!("its {encoding} answer does not decompress ({e})"))?;
    if plain.len() > MAX_JSON_ANSWER_BYTES {
        return Err(format!("its {encoding} answer decompresses past {MAX_JSON_ANSWER_BYTES} bytes"));
    }
    Ok(plain)
}

/// A streamed answer relayed as it arrives while its events are captured
/// with their offsets; the stream ends for the client once the exchange
/// is stored. One that breaks, falls silent past `idle`, passes the bounds
/// or loses its client is relayed as far as it got and not stored.
fn relay_stream(
    upstream: Incoming,
    idle: Duration,
    flight: Box<LlmFlight>,
    status: Status,
    content_type: String,
) -> Body {
    let (sender, receiver) = mpsc::channel(EVENTS_WAITING);
    tokio::spawn(async move {
        let model = printable(flight.model()).into_owned();
        let started = flight.started();
        let mut capture = Ok(EventScan::default());
        let mut upstream = upstream;
        loop {
            let data = match tokio::time::timeout(idle, upstream.frame()).await {
                Ok(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => data,
                    Err(_) => continue,
                },
                Ok(None) => break,
                Ok(Some(Err(e))) => {
                    flight.lose(&format!("the stream broke off ({e}), its client given what came before"));
                    return;
                }
                Err(_) => {
                    flight.lose(&format!(
                        "the stream was silent for {idle:?}, its client given what came before"
                    ));
                    return;
                }
            };
            if let Ok(kept) = &mut capture
                && let Err(why) = kept.take(&data, started)
            {
                capture = Err(why);
            }
            if sender.send(data).await.is_err() {
                tracing::warn!("model {model}: the client went away before the stream ended; not stored");
                return;
            }
        }
        let capture = match capture {
            Ok(capture) => capture,
            Err(why) => return flight.lose(&why),
        };
        // The writer logs an exchange it could not store.
        let _ = flight.complete(status, &content_type, LlmAnswer::Events(capture.finish(started))).await;
        drop(sender);
    });
    frame::streamed(Fed(receiver))
}

/// A stream's events as they are found in its bytes.
#[derive(Default)]
struct EventScan {
    parser: sse::Parser,
    events: Vec<LlmEvent>,
    bytes: usize,
}

impl EventScan {
    fn take(&mut self, data: &[u8], started: Instant) -> Result<(), String> {
        self.bytes += data.len();
        if self.bytes > MAX_RECORDED_STREAM_BYTES {
            return Err(format!("the stream passed the {MAX_RECORDED_STREAM_BYTES} bytes stored"));
        }
        self.parser.push(data);
        loop {
            match self.parser.next_event() {
                Ok(Some((raw, _))) => self.events.push(event(&raw, started)),
                Ok(None) => return Ok(()),
                Err(sse::Overflow) => return Err(format!("an event passed {MAX_SSE_EVENT_BYTES} bytes")),
            }
        }
    }

    /// The events, with what the stream ended on without a blank line.
    fn finish(mut self, started: Instant) -> Vec<LlmEvent> {
        let rest = self.parser.take_rest();
        if !rest.iter().all(u8::is_ascii_whitespace) {
            self.events.push(event(&rest, started));
        }
        self.events
    }
}

/// One event as stored: its lines without the blank line that ends it.
fn event(raw: &[u8], started: Instant) -> LlmEvent {
    let text = String::from_utf8_lossy(raw);
    LlmEvent {
        offset_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        text: text.trim_end_matches(['\r', '\n']).to_owned(),
    }
}

/// A body fed by a task, chunk by chunk; it ends when the task drops its
/// sender.
struct Fed(mpsc::Receiver<Bytes>);

impl frame::Pieces for Fed {
    async fn next(&mut self) -> Option<Bytes> {
        self.0.recv().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_route_names_the_model_and_the_rest() {
        assert_eq!(route("/model/openai/chat/completions"), Some(("openai", "/chat/completions")));
        assert_eq!(route("/model/openai"), Some(("openai", "/")));
        assert_eq!(route("/model/openai/"), Some(("openai", "/")));
        assert_eq!(route("/model/"), None);
        assert_eq!(route("/models/openai"), None);
        assert_eq!(route("/mcp"), None);
    }
}
