//! Engine answers as HTTP responses: one JSON message, or an SSE stream of
//! every message (sent whole, or re-enacted as it happened when it must
//! keep time or wait for the client's replies); a [`RequestError`] as its
//! status with the JSON-RPC error; the body types every answer uses.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, LazyLock};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Response, StatusCode};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use super::headers::Accepts;
use super::noted::Wire;
use super::resume::{self, Rest, Resumable};
use super::status;
use crate::engine::reenact::{self, Emit, Live};
use crate::engine::said::Feed;
use crate::engine::{Answer, Failure, Outgoing, Policy};
use crate::error::{RequestError, Unanswered};
use crate::mcp;
use crate::sse;

/// The response body type of every answer: whole or streamed.
pub type Body = BoxBody<Bytes, Infallible>;

/// A replayed answer stream a client can resume ([`resume`]): the
/// session it is in, and whether the client takes priming events (protocol
/// 2025-11-25 or later; empty event data breaks older clients).
pub(super) struct Resume<'a> {
    pub streams: &'a Resumable,
    pub session: &'a str,
    pub primable: bool,
}

/// Turns an answer into JSON (its final message) or SSE (every message).
/// An SSE answer that takes time (`policy`: it must pace, wait for the
/// client's replies in `session` or stay open) is streamed as it is
/// re-enacted; otherwise it is sent whole.
/// A resumable stream numbers its events, opens with a priming event and
/// closes before its answer where the recording shows the server did (for
/// a client that takes priming events).
pub(super) fn answer(
    answer: Answer,
    accepts: Accepts,
    resume: Option<Resume<'_>>,
    policy: &Policy,
    session: Option<&str>,
) -> Response<Body> {
    let stream = (answer.recorded_as_stream && accepts.sse) || !accepts.json || answer.hold_open;
    let mut response = if stream {
        let live = policy.reenactment(&answer.messages, answer.hold_open, session, Duration::ZERO);
        let live = live.map(|live| Live { feed: answer.feed.as_ref().and_then(Feed::take), ..live });
        let (mut messages, mut prefix, mut numbering, mut kept) =
            (answer.messages, String::new(), None, None);
        if let Some(resume) = resume {
            let stream = resume.streams.number();
            let shape = answer.stream;
            let primed = shape.primed && resume.primable;
            if primed {
                prefix = sse::priming_event(&resume::event_id(stream, 0), shape.retry_ms);
            }
            let close = shape.closed_after.map(|k| k as usize);
            // What follows the close is kept for the client to resume, not sent.
            let held_back =
                match close.filter(|&k| resume.primable && k < messages.len() && (k > 0 || primed)) {
                    Some(close) => messages.split_off(close),
                    None => Vec::new(),
                };
            numbering = Some(Numbering { stream, next: 1, kept_in: None });
            // A client resumes after an event it got: the first it can get is the priming
            // event, else the first message. Nothing follows that in a stream of one message
            // without a priming event, and such a stream is not kept.
            let first_resumable = usize::from(!primed);
            if messages.len() + held_back.len() > first_resumable {
                kept = Some(Keep { streams: resume.streams, session: resume.session, stream, held_back });
            }
        }
        let mut response = Response::new(events(messages, prefix, numbering, live, answer.hold_open, kept));
        *response.status_mut() = status::of_answer(answer.era, answer.standing);
        set_stream_headers(&mut response);
        response
    } else {
        match answer.messages.into_iter().last().filter(|m| m.is_answer) {
            Some(last) => json_text(status::of_answer(answer.era, answer.standing), last.json),
            None => error(&Unanswered::NoFinalAnswer.into()),
        }
    };
    if let Some(session) = answer.session_id.and_then(|s| HeaderValue::from_str(&s).ok()) {
        response.headers_mut().insert(mcp::HEADER_SESSION_ID, session);
    }
    response
}

/// Where an answer stream's messages are kept for the client to resume:
/// what it sends, then what it holds back.
struct Keep<'a> {
    streams: &'a Resumable,
    session: &'a str,
    stream: u64,
    held_back: Vec<Outgoing>,
}

impl Keep<'_> {
    fn keep(self, mut sent: Vec<Outgoing>) {
        sent.extend(self.held_back);
        self.streams.keep(self.stream, self.session, sent);
    }
}

/// The rest of a resumed stream ([`Rest`]): its messages from where the
/// client resumes, numbered on; re-enacted when they take time.
pub(super) fn resumed(rest: Rest, policy: &Policy, session: &str) -> Response<Body> {
    let live = policy.reenactment(&rest.messages, false, Some(session), Duration::ZERO);
    let numbering = Numbering { stream: rest.stream, next: rest.first + 1, kept_in: None };
    let mut response =
        Response::new(events(rest.messages, String::new(), Some(numbering), live, false, None));
    set_stream_headers(&mut response);
    response
}

/// The SSE body of `messages` after `prefix`: re-enacted with `live`, else
/// whole; the messages are then kept where `kept` says.
fn events(
    messages: Vec<Outgoing>,
    prefix: String,
    mut numbering: Option<Numbering>,
    live: Option<Live>,
    hold_open: bool,
    kept: Option<Keep<'_>>,
) -> Body {
    match live {
        Some(live) => {
            if let Some(kept) = kept {
                kept.keep(messages.clone());
            }
            let prefix = (!prefix.is_empty()).then(|| Bytes::from(prefix));
            streamed(EventStream {
                emitted: reenact::reenact(messages, live, hold_open),
                prefix,
                numbering,
                wire: None,
                after: None,
            })
        }
        None => {
            let mut body = prefix;
            body.reserve(messages.iter().map(|m| m.json.len() + 48).sum());
            for message in &messages {
                Numbering::push_event(&mut body, &mut numbering, &message.json);
            }
            if let Some(kept) = kept {
                kept.keep(messages);
            }
            full_text(body)
        }
    }
}

/// The next event number of a resumable stream, and where a standalone
/// stream keeps what it sends.
pub(super) struct Numbering {
    stream: u64,
    next: usize,
    kept_in: Option<Arc<Resumable>>,
}

impl Numbering {
    /// `json` as a message event, with the next id when numbered.
    fn event(numbering: &mut Option<Numbering>, json: &str) -> String {
        let mut event = String::with_capacity(json.len() + 48);
        Numbering::push_event(&mut event, numbering, json);
        event
    }

    /// [`Numbering::event`], appended to `out`.
    fn push_event(out: &mut String, numbering: &mut Option<Numbering>, json: &str) {
        match numbering {
            Some(numbering) => {
                let id = resume::EventId::new(numbering.stream, numbering.next);
                numbering.next += 1;
                if let Some(streams) = &numbering.kept_in {
                    streams.sent(numbering.stream, json);
                }
                sse::push_message_event(out, Some(id.text()), json);
            }
            None => sse::push_message_event(out, None, json),
        }
    }
}

/// A session's standalone stream (GET): SSE fed by `stream` until the
/// client goes, each message numbered and kept in `streams` so the client
/// can resume it; a resumed one (`Some(rest)`) first sends what followed
/// the event it resumes from.
pub(super) fn stream(
    stream: mpsc::Receiver<Emit>,
    streams: &Arc<Resumable>,
    session: &str,
    rest: Option<Rest>,
    wire: Option<Wire>,
) -> Response<Body> {
    let (number, first, resent) = match rest {
        Some(rest) => (rest.stream, rest.first, rest.messages),
        None => (streams.open_standalone(session), 0, Vec::new()),
    };
    // What the client missed was kept when it was first sent: sent again, not kept again.
    let mut numbering = Some(Numbering { stream: number, next: first + 1, kept_in: None });
    let prefix: String = resent.iter().map(|m| Numbering::event(&mut numbering, &m.json)).collect();
    let numbering = numbering.map(|n| Numbering { kept_in: Some(Arc::clone(streams)), ..n });
    let prefix = (!prefix.is_empty()).then(|| Bytes::from(prefix));
    let mut response =
        Response::new(streamed(EventStream { emitted: stream, prefix, numbering, wire, after: None }));
    set_stream_headers(&mut response);
    response
}

/// An injected failure: its status with the body a gateway gives (the
/// reason phrase: the client may hand it to a model, so it says nothing of
/// mcp-tape; the log and reports say where it came from), a stream cut short (as SSE
/// when the client takes it; a client that takes only JSON gets the empty
/// body of a connection cut before the answer), or a lost session's 404.
/// A hang never gets here: it is no response at all.
pub(super) fn failure(failure: Failure, accepts: Accepts) -> Response<Body> {
    match failure {
        Failure::Http { status, retry_after } => {
            let status = status::injected(status);
            let text = format!("{}\n", status.canonical_reason().unwrap_or("Error"));
            let mut response = Response::new(full(Bytes::from(text)));
            *response.status_mut() = status;
            response
                .headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
            if let Some(seconds) = retry_after {
                response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds));
            }
            response
        }
        Failure::Cut { messages } if accepts.sse => {
            let body: String = messages.iter().map(|message| sse::message_event(&message.json)).collect();
            let mut response = Response::new(full(Bytes::from(body)));
            set_stream_headers(&mut response);
            response
        }
        Failure::Cut { .. } | Failure::Hang => {
            let mut response = empty(status::DONE);
            response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
            response
        }
        Failure::LostSession(refused) => error(&refused),
    }
}

/// A failed request: the fault's status and JSON-RPC error.
pub(super) fn error(error: &RequestError) -> Response<Body> {
    json_text(status::of_fault(&error.fault), error.body())
}

/// `response`, firing `written` once its body has ended and been written
/// to the connection `wire` (at once with no wire to tell; never if the
/// client goes first, when dropping it says as much).
pub(super) fn announce(
    response: Response<Body>,
    written: oneshot::Sender<()>,
    wire: Option<Wire>,
) -> Response<Body> {
    response.map(|body| Announced { body, written: Some(written), wire }.boxed())
}

/// Fires `written` once what a body yielded so far is on `wire`'s socket
/// (at once when there is no connection to tell).
fn when_written(wire: Option<&Wire>, written: oneshot::Sender<()>) {
    match wire {
        Some(wire) => wire.after_next_write(written),
        None => drop(written.send(())),
    }
}

/// A body that tells when it has been written: see [`announce`].
struct Announced {
    body: Body,
    written: Option<oneshot::Sender<()>>,
    wire: Option<Wire>,
}

impl Announced {
    fn ended(&mut self) {
        if let Some(written) = self.written.take() {
            when_written(self.wire.as_ref(), written);
        }
    }
}

impl hyper::body::Body for Announced {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let polled = ready!(Pin::new(&mut self.body).poll_frame(cx));
        // hyper stops polling a body that says it has ended: tell at its last frame.
        if polled.is_none() || self.body.is_end_stream() {
            self.ended();
        }
        Poll::Ready(polled)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// The headers of an SSE answer, on a response that has none yet: a copy
/// of a map made once (a copy is cheaper than hashing each name in).
fn set_stream_headers(response: &mut Response<Body>) {
    static STREAM_HEADERS: LazyLock<HeaderMap> = LazyLock::new(|| {
        HeaderMap::from_iter([
            (header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream")),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            (HeaderName::from_static("x-accel-buffering"), HeaderValue::from_static("no")),
        ])
    });
    debug_assert!(response.headers().is_empty(), "stream headers replace none");
    *response.headers_mut() = STREAM_HEADERS.clone();
}

/// A whole body.
pub(super) fn full(bytes: Bytes) -> Body {
    Full::new(bytes).boxed()
}

/// What a streamed body is made of: its pieces in turn, until none.
pub(super) trait Pieces: Send + Sync + 'static {
    fn next(&mut self) -> impl Future<Output = Option<Bytes>> + Send + Sync;
}

/// A body over a stream: the pieces `source` makes in turn, until it makes
/// none.
pub(super) fn streamed(source: impl Pieces) -> Body {
    let pieces = futures_util::stream::unfold(source, |mut source| async move {
        let piece = source.next().await?;
        Some((Ok(Frame::data(piece)), source))
    });
    StreamBody::new(pieces).boxed()
}

/// `text` as a body. Fitted to its length first, so that `Bytes` takes its
/// buffer as it is rather than allocating a shared count beside it. An SSE
/// body uses at least half the room reserved for it, which mimalloc shrinks
/// in place; a short JSON text (serde starts at 128 bytes) is moved, an
/// allocation for an allocation.
fn full_text(mut text: String) -> Body {
    text.shrink_to_fit();
    full(Bytes::from(text))
}

pub(super) fn json(status: StatusCode, body: &Value) -> Response<Body> {
    json_text(status, body.to_string())
}

pub(super) fn json_text(status: StatusCode, json: String) -> Response<Body> {
    let mut response = Response::new(full_text(json));
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

pub(super) fn empty(status: StatusCode) -> Response<Body> {
    let mut response = Response::new(full(Bytes::new()));
    *response.status_mut() = status;
    response
}

/// A body fed by a re-enactment: first `prefix` (a priming event), then
/// each message an SSE event (numbered on a resumable stream), each
/// keep-alive an SSE comment; ends when the re-enactment does.
struct EventStream {
    emitted: mpsc::Receiver<Emit>,
    prefix: Option<Bytes>,
    numbering: Option<Numbering>,
    /// The connection it goes out on, told of each [`Emit::Written`].
    wire: Option<Wire>,
    /// An [`Emit::After`] under way: what it waits for, what it sends then.
    after: Option<(Option<oneshot::Receiver<()>>, VecDeque<String>)>,
}

impl Pieces for EventStream {
    /// Its next piece: the prefix, then each message an event (what
    /// followed an answer once that answer has been written), each
    /// keep-alive a comment; none once the re-enactment ends.
    async fn next(&mut self) -> Option<Bytes> {
        if let Some(prefix) = self.prefix.take() {
            return Some(prefix);
        }
        loop {
            if let Some((waiting, messages)) = &mut self.after {
                if let Some(answered) = waiting.take() {
                    let _ = answered.await;
                }
                match messages.pop_front() {
                    Some(json) => return Some(Bytes::from(Numbering::event(&mut self.numbering, &json))),
                    None => self.after = None,
                }
            }
            match self.emitted.recv().await? {
                Emit::Message(json) => {
                    return Some(Bytes::from(Numbering::event(&mut self.numbering, &json)));
                }
                Emit::KeepAlive => return Some(Bytes::from_static(b": keep-alive\n\n")),
                Emit::Written(written) => when_written(self.wire.as_ref(), written),
                Emit::After { answered, messages } => self.after = Some((Some(answered), messages.into())),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An SSE answer says what it is, and that nothing on the way may hold it back.
    #[test]
    fn stream_answers_carry_the_stream_headers() {
        let response = failure(Failure::Cut { messages: Vec::new() }, Accepts { json: false, sse: true });
        let headers: Vec<(&str, &str)> =
            response.headers().iter().map(|(name, value)| (name.as_str(), value.to_str().unwrap())).collect();
        assert_eq!(
            headers,
            [
                ("content-type", "text/event-stream"),
                ("cache-control", "no-cache"),
                ("x-accel-buffering", "no")
            ]
        );
    }
}
