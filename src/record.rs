//! Record mode: a transparent proxy to the upstream that tees each finished
//! exchange into the cassette.
//!
//! Every request that passed the front door is forwarded (hop-by-hop headers
//! dropped, `Host` set for the upstream) and the upstream's status, headers
//! and body come back unchanged, 4xx and 5xx included. JSON-RPC requests are
//! also captured:
//! - a JSON answer is read whole (it is one message), committed, then sent;
//! - an SSE answer is relayed event by event as each event completes, and the
//!   event carrying the final answer is held back until the exchange is
//!   committed, so a client that saw an exchange finish can rely on it being
//!   in the cassette, whatever happens to the daemon next. An exchange that
//!   cannot be committed (a full disk) gets the client an error instead of
//!   its answer: 507 with a JSON-RPC error, or that error as the stream's
//!   last event.
//!
//! Server→client requests seen on a stream are remembered, and the client's
//! POSTed reply joins that exchange. An upstream that fails before anything
//! reached the client gets the client a 502 with a JSON-RPC error carrying
//! its id; a stream that breaks mid-way ends cleanly for the client. Either
//! way nothing of that exchange is stored.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, Full};
use hyper::body::{Body as HttpBody, Frame, Incoming};
use hyper::header::{self, HeaderValue};
use hyper::http::request::Parts;
use hyper::{Request, Response, StatusCode};
use serde_json::Value;
use tokio::sync::oneshot;
use tokio::time::Sleep;

use crate::agent365::{self, ServiceRoute};
use crate::error::Rejection;
use crate::jsonrpc::{self, ErrorObject, Message, RequestId};
use crate::lock;
use crate::mcp::{self, Era};
use crate::normalize::{RawExchange, Rules, canonical_json};
use crate::redact;
use crate::replay::{self, Call, LogFilter, Outcome};
use crate::route::{self, Body, Logged};
use crate::sse;
use crate::store::{Direction, Exchange, RecordedMessage, ServiceAnswer, WriterHandle};
use crate::tape::{Cursors, Tape};
use crate::upstream::{self, Upstream};

/// The JSON-RPC code of a 502 answer: the upstream failed.
pub const UPSTREAM_ERROR: i32 = -32000;
/// Largest JSON answer read whole; a larger one gets the client a 502.
pub const MAX_JSON_ANSWER_BYTES: usize = 64 * 1024 * 1024;
/// Largest SSE answer (all its event data) captured for the cassette; past
/// it the stream is still relayed whole, but not stored, and the log says so.
pub const MAX_RECORDED_STREAM_BYTES: usize = 32 * 1024 * 1024;
/// Upstream sessions whose negotiated version is remembered at most.
const MAX_TRACKED_SESSIONS: usize = 10_000;
/// Above this many open server→client requests, forgotten ones are swept.
const PENDING_SWEEP_AT: usize = 1024;
/// The version a handshake request without the header speaks (spec default).
const DEFAULT_HANDSHAKE_VERSION: &str = "2025-03-26";

/// The recorder, shared by all connections.
pub struct Record {
    upstream: Upstream,
    /// The longest a client's request body may stall (the front door's idle timeout).
    body_idle: Duration,
    sink: Sink,
    /// `--mode missing`: what the cassette held at start, answered without
    /// asking the upstream.
    missing: Option<Missing>,
}

struct Missing {
    tape: Tape,
    /// Per upstream session, or per server outside sessions.
    cursors: Mutex<HashMap<String, Cursors>>,
}

/// Where a client's reply to a server→client request belongs.
type PendingReply = Weak<Mutex<Option<Capture>>>;

/// A capture shared between its stream and the replies that join it;
/// `None` once taken to be stored.
type SharedCapture = Arc<Mutex<Option<Capture>>>;

/// Where finished captures go; cloned into each streaming body.
#[derive(Clone)]
struct Sink {
    writer: WriterHandle,
    rules: Arc<Rules>,
    /// Server→client requests on recorded streams, by (session, id).
    pending: Arc<Mutex<HashMap<String, PendingReply>>>,
    /// The protocol version each upstream session negotiated.
    versions: Arc<Mutex<HashMap<String, String>>>,
}

/// An exchange being recorded.
struct Capture {
    raw: RawExchange,
    /// The caller's id, to spot the final answer among the messages (and
    /// to answer with if the exchange cannot be stored).
    request_id: RequestId,
    started: Instant,
    /// Credentials from the request headers, scrubbed before storing.
    secrets: Vec<String>,
    /// The upstream session this exchange belongs to (or opens).
    session: Option<String>,
}

impl Capture {
    fn push(&mut self, direction: Direction, body: Value) {
        let offset_ms = self.started.elapsed().as_millis() as u64;
        self.raw.messages.push(RecordedMessage { offset_ms, direction, body });
    }

    fn is_final(&self, body: &Value) -> bool {
        body.get("method").is_none() && body.get("id") == Some(self.request_id.as_value())
    }
}

impl Record {
    /// `existing` is what the cassette holds, for `--mode missing`; `None`
    /// records everything.
    pub fn new(
        upstream: Upstream,
        rules: Rules,
        writer: WriterHandle,
        existing: Option<Tape>,
        body_idle: Duration,
    ) -> Record {
        Record {
            upstream,
            body_idle,
            sink: Sink { writer, rules: Arc::new(rules), pending: Arc::default(), versions: Arc::default() },
            missing: existing.map(|tape| Missing { tape, cursors: Mutex::default() }),
        }
    }

    /// A POST: a JSON-RPC message is forwarded and recorded; anything else
    /// is forwarded as it is, its answer relayed unchanged and not stored.
    ///
    /// # Errors
    ///
    /// 413 for a body over the limit; upstream failures are 502 answers.
    pub async fn post(
        &self,
        request: Request<Incoming>,
        logged: &mut Logged,
    ) -> Result<Response<Body>, Rejection> {
        let (parts, body) = request.into_parts();
        let body = route::read_body(body, self.body_idle, logged).await?;
        let parsed = route::check_post_headers(&parts.headers)
            .and_then(|accepts| Ok((route::parse_message(&body, logged)?, accepts)));
        let Ok((message, accepts)) = parsed else {
            logged.outcome = "forwarded";
            return Ok(self.relay(&parts, body, None).await);
        };
        match message {
            Message::Request { id, method, params } => {
                if let Some(answer) =
                    self.cassette_answer(&parts, &logged.server, &id, &method, params.as_ref())
                {
                    logged.outcome = "cassette";
                    return Ok(route::frame(answer, accepts, None));
                }
                Ok(self.exchange(parts, body, id, logged).await)
            }
            Message::Response { id, body: reply } => {
                if let Some(id) = id {
                    self.sink.tie_reply(session_of(&parts), &id, reply);
                }
                logged.outcome = "forwarded";
                Ok(self.relay(&parts, body, None).await)
            }
            Message::Notification { .. } => {
                logged.outcome = "forwarded";
                Ok(self.relay(&parts, body, None).await)
            }
        }
    }

    /// Any request other than a POST (GET streams, DELETE, ...): forwarded
    /// as it is, the answer relayed as it arrives.
    ///
    /// # Errors
    ///
    /// 413 for a body over the limit.
    pub async fn pass_through(
        &self,
        request: Request<Incoming>,
        logged: &mut Logged,
    ) -> Result<Response<Body>, Rejection> {
        let (parts, body) = request.into_parts();
        let body = route::read_body(body, self.body_idle, logged).await?;
        logged.outcome = "forwarded";
        Ok(self.relay(&parts, body, None).await)
    }

    /// An Agent 365 service endpoint ([`ServiceRoute`]): forwarded, and a
    /// 2xx answer stored (committed before the client gets it) for replay
    /// to give; a gateway listing's server urls that point at the upstream
    /// are pointed at this recorder, so the agent's MCP traffic comes
    /// through here too. What a failure looks like depends on the request's
    /// credentials, so it is relayed, not stored.
    ///
    /// # Errors
    ///
    /// 413 for a body over the limit; upstream failures are 502 answers.
    pub async fn service(
        &self,
        request: Request<Incoming>,
        route: ServiceRoute,
        logged: &mut Logged,
    ) -> Result<Response<Body>, Rejection> {
        let (mut parts, body) = request.into_parts();
        let body = route::read_body(body, self.body_idle, logged).await?;
        let recorder = route::origin(&parts.headers, &parts.uri);
        let secrets = redact::header_secrets(
            parts.headers.iter().filter_map(|(name, value)| Some((name.as_str(), value.to_str().ok()?))),
        );
        if route.is_gateway() {
            // A compressed listing could not be rewritten: ask for it plain.
            parts.headers.insert(header::ACCEPT_ENCODING, HeaderValue::from_static("identity"));
        }
        let response = match self.forward(&parts, body, None).await {
            Ok(response) => response,
            Err(failed) => {
                logged.outcome = "upstream-error";
                return Ok(failed);
            }
        };
        let (mut head, body) = response.into_parts();
        let bytes = match read_whole(body, self.upstream.timeouts().idle).await {
            Ok(bytes) => bytes,
            Err(why) => {
                tracing::warn!("{why}");
                logged.outcome = "upstream-error";
                return Ok(bad_gateway(None, &format!("upstream {}: {why}", self.upstream.base())));
            }
        };
        logged.outcome = "forwarded";
        if !head.status.is_success() {
            return Ok(Response::from_parts(relay_head(head), route::full(bytes)));
        }
        let content_type =
            head.headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
        let parsed = serde_json::from_slice::<Value>(&bytes).ok();
        let body = match &parsed {
            Some(json) => {
                let mut stored = json.clone();
                self.sink.rules.redact(&mut stored);
                redact::scrub(&mut stored, &secrets);
                canonical_json(&stored)
            }
            None => redact::scrub_str(&String::from_utf8_lossy(&bytes), &secrets),
        };
        let answer = ServiceAnswer {
            route,
            upstream: agent365::origin(self.upstream.base()).unwrap_or_default(),
            status: head.status.as_u16(),
            content_type: content_type.to_owned(),
            body,
        };
        if !self.sink.writer.write_service(answer).await.unwrap_or(false) {
            logged.outcome = "not-stored";
            let body = serde_json::json!({"error": not_stored_error().message});
            return Ok(route::json_response(StatusCode::INSUFFICIENT_STORAGE, &body));
        }
        logged.outcome = "recorded";
        let mut relayed = bytes;
        if let Some(mut listing) = parsed.filter(|_| route.is_gateway()) {
            let rewritten = agent365::rewrite_urls(&mut listing, self.upstream.base(), &recorder);
            tracing::debug!("pointed {rewritten} listed server url(s) at this recorder");
            relayed = Bytes::from(listing.to_string());
            head.headers.remove(header::CONTENT_LENGTH);
        }
        Ok(Response::from_parts(relay_head(head), route::full(relayed)))
    }

    /// `--mode missing`: the recorded answer, if the cassette holds one.
    fn cassette_answer(
        &self,
        parts: &Parts,
        server: &str,
        id: &RequestId,
        method: &str,
        params: Option<&Value>,
    ) -> Option<replay::Answer> {
        let missing = self.missing.as_ref()?;
        // These open upstream sessions the rest of the traffic may need.
        if matches!(method, "initialize" | "server/discover") {
            return None;
        }
        let era = Era::of_header(header(parts, mcp::HEADER_PROTOCOL_VERSION));
        let session = session_of(parts);
        let mut redacted = params.cloned();
        if let Some(redacted) = &mut redacted {
            self.sink.rules.redact(redacted);
        }
        let key = self.sink.rules.match_key(server, method, redacted.as_ref());
        if !missing.tape.has(&key) {
            return None;
        }
        let exchange = {
            let mut cursors = lock(&missing.cursors);
            if cursors.len() >= MAX_TRACKED_SESSIONS {
                cursors.clear(); // long-gone sessions; a live one restarts its recorded order
            }
            let scope = session.unwrap_or(server).to_owned();
            missing.tape.next(&key, era, cursors.entry(scope).or_default())?
        };
        let call = Call { server, era, session, id, method, params };
        let identity = missing.tape.server_info(server).cloned().unwrap_or_else(mcp::server_info);
        Some(replay::recorded_answer(&call, &exchange, Outcome::Hit, LogFilter::Everything, &identity))
    }

    /// Forwards a JSON-RPC request and records its answer.
    async fn exchange(
        &self,
        parts: Parts,
        body: Bytes,
        id: RequestId,
        logged: &mut Logged,
    ) -> Response<Body> {
        let version_header = header(&parts, mcp::HEADER_PROTOCOL_VERSION).map(str::to_owned);
        let session = session_of(&parts).map(str::to_owned);
        let protocol_version = version_header
            .clone()
            .or_else(|| session.as_ref().and_then(|s| self.sink.version_of(s)))
            .unwrap_or_else(|| DEFAULT_HANDSHAKE_VERSION.to_owned());
        let secrets = redact::header_secrets(
            parts.headers.iter().filter_map(|(name, value)| Some((name.as_str(), value.to_str().ok()?))),
        );
        let started = Instant::now();
        let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let response = match self.forward(&parts, body, Some(&id)).await {
            Ok(response) => response,
            Err(failed) => {
                logged.outcome = "upstream-error";
                return failed;
            }
        };
        let content_type =
            response.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
        let mut capture = Capture {
            raw: RawExchange {
                server: logged.server.clone(),
                era: Era::of_header(version_header.as_deref()),
                protocol_version,
                request,
                status: response.status().as_u16(),
                content_type: content_type.to_owned(),
                messages: Vec::new(),
            },
            request_id: id.clone(),
            started,
            secrets,
            session: session_of_response(&response).or(session),
        };
        let idle = self.upstream.timeouts().idle;
        if content_type.starts_with("text/event-stream") {
            logged.outcome = "streaming";
            let (head, body) = response.into_parts();
            let relay = Relay::new(body, Some(idle), Some(Tap::new(capture, self.sink.clone())));
            return Response::from_parts(relay_head(head), relay.boxed());
        }
        let (head, body) = response.into_parts();
        let bytes = match read_whole(body, idle).await {
            Ok(bytes) => bytes,
            Err(why) => {
                tracing::warn!("{why}");
                logged.outcome = "upstream-error";
                return bad_gateway(Some(&id), &format!("upstream {}: {why}", self.upstream.base()));
            }
        };
        match serde_json::from_slice::<Value>(&bytes) {
            Ok(message) if message.get("jsonrpc").and_then(Value::as_str) == Some("2.0") => {
                capture.push(Direction::Server, message);
                if !self.sink.store(capture).await.unwrap_or(false) {
                    logged.outcome = "not-stored";
                    return not_stored(&id);
                }
                logged.outcome = "recorded";
            }
            _ => {
                tracing::warn!(
                    "{} answer to {} is not a JSON-RPC message; forwarded, not stored",
                    head.status,
                    crate::printable(&logged.mcp_method)
                );
                logged.outcome = "forwarded";
            }
        }
        Response::from_parts(relay_head(head), route::full(bytes))
    }

    /// Forwards and relays the answer unchanged, capturing nothing.
    async fn relay(&self, parts: &Parts, body: Bytes, id: Option<&RequestId>) -> Response<Body> {
        match self.forward(parts, body, id).await {
            Ok(response) => {
                let (head, body) = response.into_parts();
                Response::from_parts(relay_head(head), Relay::new(body, None, None).boxed())
            }
            Err(failed) => failed,
        }
    }

    /// Sends the request upstream; a failure is the 502 to answer with.
    async fn forward(
        &self,
        parts: &Parts,
        body: Bytes,
        id: Option<&RequestId>,
    ) -> Result<Response<Incoming>, Response<Body>> {
        let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
        let uri = self.upstream.uri_for(path).map_err(|why| bad_gateway(id, &why))?;
        let mut request = Request::new(Full::new(body));
        *request.method_mut() = parts.method.clone();
        *request.uri_mut() = uri;
        *request.headers_mut() = upstream::forwardable(&parts.headers);
        self.upstream.send(request).await.map_err(|why| {
            tracing::warn!("{why}");
            bad_gateway(id, &why)
        })
    }
}

impl Sink {
    fn version_of(&self, session: &str) -> Option<String> {
        lock(&self.versions).get(session).cloned()
    }

    /// Normalizes and scrubs a finished capture and queues it; the receiver
    /// says whether it was committed.
    fn store(&self, capture: Capture) -> oneshot::Receiver<bool> {
        let Capture { mut raw, mut secrets, session, .. } = capture;
        // What the request sent under credential-like keys is redacted in the
        // stored request; a tool echoing it back must not leak it either.
        secrets.extend(self.rules.sensitive_values(&raw.request));
        redact::scrub(&mut raw.request, &secrets);
        for message in &mut raw.messages {
            redact::scrub(&mut message.body, &secrets);
        }
        // Paths outside the Agent 365 forms are the server's name: no credential in it either.
        raw.server = redact::scrub_str(&raw.server, &secrets);
        if raw.request.get("method").and_then(Value::as_str) == Some("initialize") {
            let negotiated =
                raw.messages.iter().rev().find_map(|m| m.body.pointer("/result/protocolVersion"));
            if let Some(version) = negotiated.and_then(Value::as_str) {
                raw.protocol_version = version.to_owned();
                if let Some(session) = session {
                    let mut versions = lock(&self.versions);
                    if versions.len() >= MAX_TRACKED_SESSIONS {
                        versions.clear();
                    }
                    versions.insert(session, version.to_owned());
                }
            }
        }
        let exchange: Exchange = self.rules.exchange(raw);
        self.writer.write(exchange)
    }

    fn pending_key(session: Option<&str>, id: &Value) -> String {
        format!("{}|{}", session.unwrap_or_default(), canonical_json(id))
    }

    /// Remembers a server→client request seen on a recorded stream.
    fn expect_reply(&self, capture: &SharedCapture, session: Option<&str>, id: &Value) {
        let mut pending = lock(&self.pending);
        if pending.len() >= PENDING_SWEEP_AT {
            pending.retain(|_, capture| capture.strong_count() > 0);
        }
        pending.insert(Sink::pending_key(session, id), Arc::downgrade(capture));
    }

    /// Adds the client's reply to the exchange whose stream carried the request.
    fn tie_reply(&self, session: Option<&str>, id: &RequestId, reply: Value) {
        let key = Sink::pending_key(session, id.as_value());
        let capture = lock(&self.pending).remove(&key).and_then(|weak| weak.upgrade());
        if let Some(capture) = capture
            && let Some(capture) = lock(&capture).as_mut()
        {
            capture.push(Direction::Client, reply);
        }
    }
}

/// The SSE side of a capture: parses the relayed bytes into messages.
struct Tap {
    parser: sse::Parser,
    /// Event data captured so far.
    captured_bytes: usize,
    capture: SharedCapture,
    sink: Sink,
}

/// What one relayed event was to the capture.
enum Seen {
    /// Recorded (or empty, like priming events); keep going.
    Message,
    /// The final answer: the exchange is complete.
    Final,
    /// Not JSON: the exchange cannot be stored.
    NotJson,
    /// Past [`MAX_RECORDED_STREAM_BYTES`]: the exchange is not stored.
    TooLarge,
}

impl Tap {
    fn new(capture: Capture, sink: Sink) -> Tap {
        Tap {
            parser: sse::Parser::default(),
            captured_bytes: 0,
            capture: Arc::new(Mutex::new(Some(capture))),
            sink,
        }
    }

    fn record(&mut self, event: &sse::Event) -> Seen {
        if event.data.is_empty() {
            return Seen::Message;
        }
        self.captured_bytes += event.data.len();
        if self.captured_bytes > MAX_RECORDED_STREAM_BYTES {
            return Seen::TooLarge;
        }
        let Ok(body) = serde_json::from_str::<Value>(&event.data) else {
            return Seen::NotJson;
        };
        let mut guard = lock(&self.capture);
        let Some(capture) = guard.as_mut() else { return Seen::Message };
        if let (Some(_), Some(id)) = (body.get("method"), body.get("id")) {
            self.sink.expect_reply(&self.capture, capture.session.as_deref(), id);
        }
        let is_final = capture.is_final(&body);
        capture.push(Direction::Server, body);
        if is_final { Seen::Final } else { Seen::Message }
    }
}

/// A response body relayed from the upstream as it arrives: ends cleanly
/// when the upstream breaks or falls silent for longer than `idle`; with a
/// [`Tap`], forwards whole events only and holds the final one until its
/// exchange is committed.
struct Relay {
    upstream: Incoming,
    idle: Option<(Duration, Pin<Box<Sleep>>)>,
    tap: Option<Tap>,
    /// Bytes ready for the client.
    ready: VecDeque<Bytes>,
    /// The final event (and anything after it) waiting for the commit, and
    /// the caller's id for the error event sent instead if it fails.
    held: Option<(oneshot::Receiver<bool>, BytesMut, RequestId)>,
    ended: bool,
}

impl Relay {
    fn new(upstream: Incoming, idle: Option<Duration>, tap: Option<Tap>) -> Relay {
        Relay {
            upstream,
            idle: idle.map(|limit| (limit, Box::pin(tokio::time::sleep(limit)))),
            tap,
            ready: VecDeque::new(),
            held: None,
            ended: false,
        }
    }

    fn on_data(&mut self, data: Bytes) {
        if let Some((_, held, _)) = &mut self.held {
            held.extend_from_slice(&data);
            return;
        }
        let Some(tap) = &mut self.tap else {
            self.ready.push_back(data);
            return;
        };
        tap.parser.push(&data);
        loop {
            let (raw, event) = match tap.parser.next_event() {
                Ok(Some(event)) => event,
                Ok(None) => return,
                Err(sse::Overflow) => {
                    tracing::warn!(
                        "an SSE event exceeded {} bytes; relayed, not stored",
                        sse::MAX_SSE_EVENT_BYTES
                    );
                    self.ready.push_back(tap.parser.take_rest());
                    self.tap = None;
                    return;
                }
            };
            match tap.record(&event) {
                Seen::Message => self.ready.push_back(raw),
                seen @ (Seen::NotJson | Seen::TooLarge) => {
                    if matches!(seen, Seen::NotJson) {
                        tracing::warn!("an SSE event is not JSON; relayed, the exchange is not stored");
                    } else {
                        tracing::warn!(
                            "an SSE answer passed {MAX_RECORDED_STREAM_BYTES} bytes; relayed, the exchange is not stored"
                        );
                    }
                    self.ready.push_back(raw);
                    self.ready.push_back(tap.parser.take_rest());
                    self.tap = None;
                    return;
                }
                Seen::Final => {
                    let mut held = BytesMut::from(&raw[..]);
                    held.extend_from_slice(&tap.parser.take_rest());
                    let capture = lock(&tap.capture).take();
                    if let Some(capture) = capture {
                        let id = capture.request_id.clone();
                        self.held = Some((tap.sink.store(capture), held, id));
                    } else {
                        self.ready.push_back(held.freeze());
                    }
                    self.tap = None;
                    return;
                }
            }
        }
    }

    /// The upstream is done, cleanly or not: relay what is left and drop an
    /// unfinished capture.
    fn on_end(&mut self, broke: Option<String>) {
        if let Some(mut tap) = self.tap.take() {
            let why = broke.unwrap_or_else(|| "the stream ended before its final answer".into());
            if let Some(capture) = lock(&tap.capture).take() {
                tracing::warn!(
                    "{} on {}: {why}; not stored",
                    capture.raw.request["method"],
                    capture.raw.server
                );
            }
            self.ready.push_back(tap.parser.take_rest());
        } else if let Some(why) = broke {
            tracing::warn!("relayed stream ended early: {why}");
        }
        self.ended = true;
    }
}

impl Drop for Relay {
    /// The client went away (its connection closed) before the answer
    /// finished: nothing of the exchange is stored, and the log says so.
    fn drop(&mut self) {
        if let Some(tap) = self.tap.take()
            && let Some(capture) = lock(&tap.capture).take()
        {
            tracing::warn!(
                "{} on {}: the client went away before the answer finished; not stored",
                capture.raw.request["method"],
                crate::printable(&capture.raw.server)
            );
        }
    }
}

impl HttpBody for Relay {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = &mut *self;
        loop {
            if let Some(bytes) = this.ready.pop_front() {
                if bytes.is_empty() {
                    continue;
                }
                return Poll::Ready(Some(Ok(Frame::data(bytes))));
            }
            if let Some((committed, held, id)) = &mut this.held {
                // Not committed (the writer logged why): the client learns it
                // instead of an answer the cassette does not hold.
                let stored = ready!(Pin::new(committed).poll(cx)).unwrap_or(false);
                let next = if stored {
                    held.split().freeze()
                } else {
                    Bytes::from(sse::message_event(&jsonrpc::error(Some(id), &not_stored_error())))
                };
                this.ready.push_back(next);
                this.held = None;
                continue;
            }
            if this.ended {
                return Poll::Ready(None);
            }
            match Pin::new(&mut this.upstream).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    if let Some((limit, timer)) = &mut this.idle {
                        timer.as_mut().reset(tokio::time::Instant::now() + *limit);
                    }
                    if let Ok(data) = frame.into_data() {
                        this.on_data(data);
                    }
                }
                Poll::Ready(Some(Err(e))) => this.on_end(Some(format!("the upstream broke off: {e}"))),
                Poll::Ready(None) => this.on_end(None),
                Poll::Pending => {
                    let Some((limit, timer)) = &mut this.idle else { return Poll::Pending };
                    ready!(timer.as_mut().poll(cx));
                    let why = format!("the upstream was silent for {limit:?}");
                    this.on_end(Some(why));
                }
            }
        }
    }
}

/// Reads a whole answer body, each wait bounded by `idle`.
async fn read_whole(mut body: Incoming, idle: Duration) -> Result<Bytes, String> {
    let mut bytes = BytesMut::new();
    loop {
        match tokio::time::timeout(idle, body.frame()).await {
            Ok(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    if bytes.len() + data.len() > MAX_JSON_ANSWER_BYTES {
                        return Err(format!("answer larger than {MAX_JSON_ANSWER_BYTES} bytes"));
                    }
                    bytes.extend_from_slice(&data);
                }
            }
            Ok(Some(Err(e))) => return Err(format!("the answer broke off: {e}")),
            Ok(None) => return Ok(bytes.freeze()),
            Err(_) => return Err(format!("silent for {idle:?} in the middle of an answer")),
        }
    }
}

/// The upstream's answer head as relayed: hop-by-hop headers dropped.
fn relay_head(mut head: hyper::http::response::Parts) -> hyper::http::response::Parts {
    head.headers = upstream::forwardable(&head.headers);
    head
}

/// The error a client gets instead of an answer that could not be stored.
fn not_stored_error() -> ErrorObject {
    ErrorObject::new(
        jsonrpc::INTERNAL_ERROR,
        "mcp-tape record: the upstream answered, but the exchange could not be stored (see the recorder's log, \
         e.g. a full disk); the answer is withheld so that every exchange a client saw finish is in the cassette",
    )
}

/// 507 with [`not_stored_error`].
fn not_stored(id: &RequestId) -> Response<Body> {
    route::json_text_response(StatusCode::INSUFFICIENT_STORAGE, jsonrpc::error(Some(id), &not_stored_error()))
}

/// 502 with a JSON-RPC error naming the upstream failure.
fn bad_gateway(id: Option<&RequestId>, why: &str) -> Response<Body> {
    let error = ErrorObject::new(UPSTREAM_ERROR, format!("mcp-tape record: {why}"));
    route::json_text_response(StatusCode::BAD_GATEWAY, jsonrpc::error(id, &error))
}

fn header<'a>(parts: &'a Parts, name: &str) -> Option<&'a str> {
    parts.headers.get(name).and_then(|v| v.to_str().ok())
}

fn session_of(parts: &Parts) -> Option<&str> {
    header(parts, mcp::HEADER_SESSION_ID)
}

fn session_of_response(response: &Response<Incoming>) -> Option<String> {
    response
        .headers()
        .get(mcp::HEADER_SESSION_ID)
        .and_then(|v: &HeaderValue| v.to_str().ok())
        .map(str::to_owned)
}
