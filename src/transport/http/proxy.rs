//! Record's link to an HTTP upstream: a transparent proxy. Every request is
//! forwarded (hop-by-hop headers dropped, `Host` set for the upstream) and
//! the upstream's status, headers and body come back unchanged, 4xx and 5xx
//! included. An answer to a request the engine records is also shown to
//! that request's [`Flight`]:
//! - a JSON answer is read whole (it is one message) and sent once the
//!   engine's [`Held`] commit resolves;
//! - an SSE answer is relayed event by event as each event completes, and
//!   the event carrying the final answer ([`Heard::Final`]) is held back
//!   the same way; if the exchange cannot be stored, the client gets the
//!   error the held commit resolves to instead (507, or as the stream's
//!   last event).
//!
//! An SSE answer the upstream ends cleanly before its final answer, after
//! an event id (SEP-1699 polling), is parked by (session, last event id):
//! the client's `GET` with that `Last-Event-ID` goes upstream and its
//! events continue the same flight, so the exchange is stored whole with
//! where the stream closed ([`Flight::closed_early`]).
//!
//! An upstream that fails before anything reached the client gets the
//! client [`Unanswered::Upstream`] (502) with its id; a stream that breaks
//! mid-way ends cleanly for the client and stores nothing.

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, Full};
use hyper::body::{Body as HttpBody, Frame, Incoming};
use hyper::header::{self, HeaderValue};
use hyper::http::request::Parts;
use hyper::{Request, Response};
use serde_json::{Value, json};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Sleep;

use super::arrival::Arrival;
use super::frame::{self, Body, Pieces};
use super::holding::Holding;
use super::status;
use super::upstream::{self, UpstreamClient};
use crate::agent365;
use crate::engine::{AsWritten, Flight, Heard, Held, Listener, Outcome, ServiceFlight, Wait};
use crate::error::{RequestError, Unanswered, UpstreamFailure};
use crate::jsonrpc::scan;
use crate::limits::{
    MAX_ANSWERS_IN_FLIGHT_BYTES, MAX_JSON_ANSWER_BYTES, MAX_PARKED_STREAMS, MAX_SSE_EVENT_BYTES,
};
use crate::mcp;
use crate::model::ServiceRoute;
use crate::sse;
use crate::util::{lock, printable};

/// The budget counts in kibibytes (a semaphore's permits).
const BUDGET_UNIT: usize = 1024;

/// The upstream link, shared by every connection.
pub struct Proxy {
    upstream: UpstreamClient,
    /// The agent's models (`--model NAME=URL`), by name.
    llms: Vec<(String, UpstreamClient)>,
    budget: Arc<Semaphore>,
    parked: Arc<Parking>,
}

impl Proxy {
    pub fn new(upstream: UpstreamClient) -> Proxy {
        let budget = Arc::new(Semaphore::new(MAX_ANSWERS_IN_FLIGHT_BYTES / BUDGET_UNIT));
        Proxy { upstream, llms: Vec::new(), budget, parked: Arc::default() }
    }

    /// The same link, reaching the agent's models too: `(NAME, client)`.
    pub fn with_llms(self, llms: Vec<(String, UpstreamClient)>) -> Proxy {
        Proxy { llms, ..self }
    }

    /// The recorded stream the upstream closed early in `session` after
    /// event `last_event_id`, if one waits to be resumed.
    pub(super) fn parked(&self, session: &str, last_event_id: &str) -> Option<Parked> {
        lock(&self.parked.0).take(session, last_event_id).map(Parked)
    }

    /// Forwards the client's `GET` that resumes a parked stream and relays
    /// the upstream's answer, its events continuing the parked flight.
    ///
    /// # Errors
    ///
    /// [`Unanswered::Upstream`] when the upstream fails before answering.
    pub(super) async fn resume(
        &self,
        parts: &Parts,
        body: Bytes,
        parked: Parked,
    ) -> Result<Response<Body>, RequestError> {
        let Parked(tap) = parked;
        let response = match self.forward(parts, body).await {
            Ok(response) => response,
            Err(error) => {
                tap.flight.abandon("resuming its stream failed upstream");
                return Err(error);
            }
        };
        let arrival = arrival_of(&response);
        let (head, body) = response.into_parts();
        let mut relay = Relay::new(body, Some(self.upstream.timeouts().idle), None, arrival);
        relay.tap = Some(tap);
        relay.parking = Some(Arc::clone(&self.parked));
        Ok(Response::from_parts(relay_head(head), frame::streamed(relay)))
    }

    /// Forwards a POSTed message; with a flight, shows it the answer.
    ///
    /// # Errors
    ///
    /// [`Unanswered::Upstream`] when the upstream fails before answering,
    /// [`Unanswered::NotStored`] when its answer cannot be committed.
    pub(super) async fn exchange(
        &self,
        parts: &Parts,
        body: Bytes,
        flight: Option<Flight>,
        outcome: &mut Outcome,
    ) -> Result<Response<Body>, RequestError> {
        let Some(mut flight) = flight else {
            *outcome = Outcome::Forwarded;
            return self.relay(parts, body).await;
        };
        let id = Some(flight.request_id().clone());
        let response = self.forward(parts, body).await.map_err(|e| e.with_id(id.clone()))?;
        let content_type =
            response.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
        let opened = response.headers().get(mcp::HEADER_SESSION_ID).and_then(|v| v.to_str().ok());
        flight.answered(status::to_record(response.status()), content_type, opened.map(str::to_owned));
        let idle = self.upstream.timeouts().idle;
        let arrival = arrival_of(&response);
        if content_type.starts_with("text/event-stream") {
            *outcome = Outcome::Streaming;
            let (head, body) = response.into_parts();
            let mut relay = Relay::new(body, Some(idle), Some(flight), arrival);
            relay.parking = Some(Arc::clone(&self.parked));
            return Ok(Response::from_parts(relay_head(head), frame::streamed(relay)));
        }
        let (head, body) = response.into_parts();
        let (bytes, share) = read_whole(body, idle, &self.budget)
            .await
            .map_err(|unread| RequestError { fault: Box::new(self.unread(unread)), id: id.clone() })?;
        match std::str::from_utf8(&bytes).ok().and_then(AsWritten::read) {
            Some(message) if message.body.get("jsonrpc").and_then(Value::as_str) == Some("2.0") => {
                flight.complete(message, arrival.and_then(|arrival| arrival.latest())).await?;
                *outcome = Outcome::Recorded;
            }
            _ if head.status.is_success() => {
                flight.abandon(&format!(
                    "its {} answer is not a JSON-RPC message that can be stored as written (not UTF-8, \
                     not JSON, or JSON serde_json does not read: a lone surrogate, nesting past 128, a \
                     number past f64)",
                    head.status
                ));
                *outcome = Outcome::Forwarded;
            }
            _ => {
                tracing::warn!(
                    "{} answer to {} is not a JSON-RPC message; forwarded, not stored",
                    head.status,
                    printable(&flight.method())
                );
                *outcome = Outcome::Forwarded;
            }
        }
        Ok(Response::from_parts(relay_head(head), held(bytes, share)))
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
    /// [`Unanswered::Upstream`] when the upstream fails.
    pub(super) async fn service(
        &self,
        parts: &Parts,
        body: Bytes,
        route: ServiceRoute,
        recorder_origin: &str,
        flight: ServiceFlight,
        outcome: &mut Outcome,
    ) -> Result<Response<Body>, RequestError> {
        let (mut head, body) = self.forward(parts, body).await?.into_parts();
        let (bytes, share) = read_whole(body, self.upstream.timeouts().idle, &self.budget)
            .await
            .map_err(|u| self.unread(u))?;
        *outcome = Outcome::Forwarded;
        if !head.status.is_success() {
            return Ok(Response::from_parts(relay_head(head), held(bytes, share)));
        }
        let content_type =
            head.headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
        let upstream = agent365::origin(self.upstream.base()).unwrap_or_default();
        if let Err(error) =
            flight.complete(upstream, status::to_record(head.status), content_type, &bytes).await
        {
            // Not a JSON-RPC endpoint: the error is said in its own JSON.
            *outcome = Outcome::of(&error.fault);
            let body = json!({"error": error.fault.error().message});
            return Ok(frame::json(status::of_fault(&error.fault), &body));
        }
        *outcome = Outcome::Recorded;
        let mut relayed = bytes;
        let listing = serde_json::from_slice::<Value>(&relayed).ok().filter(|_| route.is_gateway());
        if let Some(mut listing) = listing {
            let rewritten = agent365::rewrite_urls(&mut listing, self.upstream.base(), recorder_origin);
            tracing::debug!("pointed {rewritten} listed server url(s) at this recorder");
            relayed = Bytes::from(scan::rewrite(&String::from_utf8_lossy(&relayed), &listing));
            head.headers.remove(header::CONTENT_LENGTH);
        }
        Ok(Response::from_parts(relay_head(head), held(relayed, share)))
    }

    /// Forwards and relays the answer unchanged as it arrives, capturing nothing.
    ///
    /// # Errors
    ///
    /// [`Unanswered::Upstream`] when the upstream fails before answering.
    pub(super) async fn relay(&self, parts: &Parts, body: Bytes) -> Result<Response<Body>, RequestError> {
        let (head, body) = self.forward(parts, body).await?.into_parts();
        Ok(Response::from_parts(relay_head(head), frame::streamed(Relay::new(body, None, None, None))))
    }

    /// Forwards a GET for the standalone stream and relays it as it
    /// arrives, showing `listener` each event.
    ///
    /// # Errors
    ///
    /// [`Unanswered::Upstream`] when the upstream fails before answering.
    pub(super) async fn listen(
        &self,
        parts: &Parts,
        body: Bytes,
        listener: Listener,
    ) -> Result<Response<Body>, RequestError> {
        let response = self.forward(parts, body).await?;
        let arrival = arrival_of(&response);
        let (head, body) = response.into_parts();
        let mut relay = Relay::new(body, None, None, arrival);
        relay.ending = Some(Box::pin(listener.ended()));
        relay.listen = Some((sse::Parser::default(), listener));
        Ok(Response::from_parts(relay_head(head), frame::streamed(relay)))
    }

    /// An answer that could not be read whole, as the fault it is.
    fn unread(&self, unread: Unread) -> Unanswered {
        unread.fault(&self.upstream)
    }

    /// The client of the agent's model `name` (`--model NAME=URL`).
    pub(super) fn llm(&self, name: &str) -> Option<&UpstreamClient> {
        self.llms.iter().find(|(known, _)| known == name).map(|(_, client)| client)
    }

    /// The budget of answers held at once.
    pub(super) fn budget(&self) -> &Arc<Semaphore> {
        &self.budget
    }

    /// Sends the request upstream.
    async fn forward(&self, parts: &Parts, body: Bytes) -> Result<Response<Incoming>, RequestError> {
        let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
        let uri = self.upstream.uri_for(path).map_err(Unanswered::Upstream)?;
        send_to(&self.upstream, path, uri, parts, body).await
    }
}

/// Sends the request (`path` as the client asked for it) to `uri` through
/// `client`: hop-by-hop headers left out, an answer asked for uncompressed,
/// a redirect refused.
pub(super) async fn send_to(
    client: &UpstreamClient,
    path: &str,
    uri: hyper::Uri,
    parts: &Parts,
    body: Bytes,
) -> Result<Response<Incoming>, RequestError> {
    let mut request = Request::new(Full::new(body));
    *request.method_mut() = parts.method.clone();
    *request.uri_mut() = uri;
    *request.headers_mut() = upstream::forwardable(&parts.headers);
    // A compressed answer could be neither stored nor rewritten: ask for
    // it plain (every client takes identity; the client's own wish for
    // gzip is about transfer size on loopback, not meaning).
    request.headers_mut().insert(header::ACCEPT_ENCODING, HeaderValue::from_static("identity"));
    let response = client.send(request).await.map_err(|why| {
        tracing::warn!("{why}");
        RequestError::from(Unanswered::Upstream(why))
    })?;
    if let Some(redirect) = client.redirect(path, &response) {
        tracing::warn!("{redirect}");
        return Err(Unanswered::Upstream(redirect).into());
    }
    Ok(response)
}

/// The SSE side of a flight: the parser that finds each event in the
/// relayed bytes, and the flight that records it.
struct Tap {
    parser: sse::Parser,
    flight: Flight,
    /// Events seen so far, on this stream and the ones that resumed it.
    events: u64,
    /// The last event id seen: what the client resumes from.
    last_id: Option<String>,
}

impl Tap {
    /// Notes what an event says of the stream's framing: a priming event
    /// first, a `retry`, its id.
    fn frame(&mut self, event: &sse::Event) {
        if let Some(retry) = event.retry {
            self.flight.retry(retry);
        }
        if self.events == 0 && event.id.is_some() && event.data.is_empty() {
            self.flight.primed();
        }
        self.events += 1;
        if let Some(id) = &event.id {
            self.last_id = Some(id.clone());
        }
    }
}

/// A recorded stream the upstream closed early, taken from the parking to
/// be resumed.
pub(super) struct Parked(Tap);

/// Recorded streams the upstream closed before their answer, by session
/// and last event id, oldest first; at most [`MAX_PARKED_STREAMS`].
#[derive(Default)]
struct Parking(Mutex<Parkings>);

#[derive(Default)]
struct Parkings {
    taps: HashMap<(String, String), Tap>,
    order: VecDeque<(String, String)>,
}

impl Parkings {
    fn park(&mut self, session: String, tap: Tap) {
        let Some(last_id) = tap.last_id.clone() else { return };
        let key = (session, last_id);
        if let Some(old) = self.taps.remove(&key) {
            old.flight.forget("another stream closed at the same event id");
        }
        while self.taps.len() >= MAX_PARKED_STREAMS {
            let Some(oldest) = self.order.pop_front() else { break };
            if let Some(old) = self.taps.remove(&oldest) {
                old.flight.forget(&format!(
                    "its stream was not resumed before {MAX_PARKED_STREAMS} later ones closed early"
                ));
            }
        }
        self.order.retain(|k| *k != key);
        self.order.push_back(key.clone());
        self.taps.insert(key, tap);
    }

    fn take(&mut self, session: &str, last_id: &str) -> Option<Tap> {
        let key = (session.to_owned(), last_id.to_owned());
        let tap = self.taps.remove(&key)?;
        self.order.retain(|k| *k != key);
        Some(tap)
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
    /// The final event (and anything after it) waiting for its commit.
    held: Option<(Held, BytesMut)>,
    /// A standalone stream's parser and listener (no tap then).
    listen: Option<(sse::Parser, Listener)>,
    /// Events of a standalone stream waiting before they are relayed (see
    /// [`Listener::heard`]), each with what came after it.
    waits: VecDeque<(Wait, BytesMut)>,
    /// When the upstream connection's latest read arrived.
    arrival: Option<Arc<Arrival>>,
    /// Where a tap goes when the upstream closes its stream early.
    parking: Option<Arc<Parking>>,
    /// A standalone stream's end: the recording's ([`Listener::ended`]).
    ending: Option<Pin<Box<dyn Future<Output = ()> + Send + Sync>>>,
    ended: bool,
}

impl Relay {
    fn new(
        upstream: Incoming,
        idle: Option<Duration>,
        flight: Option<Flight>,
        arrival: Option<Arc<Arrival>>,
    ) -> Relay {
        Relay {
            upstream,
            idle: idle.map(|limit| (limit, Box::pin(tokio::time::sleep(limit)))),
            tap: flight.map(|flight| Tap {
                parser: sse::Parser::default(),
                flight,
                events: 0,
                last_id: None,
            }),
            ready: VecDeque::new(),
            held: None,
            listen: None,
            waits: VecDeque::new(),
            arrival,
            parking: None,
            ending: None,
            ended: false,
        }
    }

    fn on_data(&mut self, data: Bytes) {
        if let Some((_, held)) = &mut self.held {
            held.extend_from_slice(&data);
            return;
        }
        if let Some((parser, listener)) = &mut self.listen {
            parser.push(&data);
            loop {
                match parser.next_event() {
                    Ok(Some((raw, event))) => {
                        let arrived = self.arrival.as_ref().and_then(|arrival| arrival.latest());
                        match listener.heard(&event.data, arrived) {
                            Some(wait) => self.waits.push_back((wait, BytesMut::from(&raw[..]))),
                            None => relay_listened(&mut self.waits, &mut self.ready, raw),
                        }
                    }
                    Ok(None) => return,
                    Err(sse::Overflow) => {
                        tracing::warn!(
                            "an SSE event on a standalone stream exceeded {MAX_SSE_EVENT_BYTES} bytes; \
                             the rest of the stream is relayed, not stored"
                        );
                        relay_listened(&mut self.waits, &mut self.ready, parser.take_rest());
                        self.listen = None;
                        return;
                    }
                }
            }
        }
        if !self.waits.is_empty() {
            relay_listened(&mut self.waits, &mut self.ready, data);
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
                    tap.flight.abandon(&format!("an SSE event exceeded {MAX_SSE_EVENT_BYTES} bytes"));
                    self.ready.push_back(tap.parser.take_rest());
                    self.tap = None;
                    return;
                }
            };
            tap.frame(&event);
            let arrived = self.arrival.as_ref().and_then(|arrival| arrival.latest());
            match tap.flight.observe(&event.data, arrived) {
                Heard::Message => self.ready.push_back(raw),
                Heard::Dropped => {
                    self.ready.push_back(raw);
                    self.ready.push_back(tap.parser.take_rest());
                    self.tap = None;
                    return;
                }
                Heard::Final(commit) => {
                    let mut held = BytesMut::from(&raw[..]);
                    held.extend_from_slice(&tap.parser.take_rest());
                    self.held = Some((commit, held));
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
            self.ready.push_back(tap.parser.take_rest());
            match (&broke, &self.parking, tap.last_id.is_some()) {
                // Closed on purpose after an event id: the client resumes it (SEP-1699).
                (None, Some(parking), true) => {
                    if let Some(session) = tap.flight.closed_early() {
                        lock(&parking.0).park(session, tap);
                    }
                }
                _ => {
                    tap.flight.abandon(broke.as_deref().unwrap_or("the stream ended before its final answer"))
                }
            }
        } else if let Some(why) = broke {
            tracing::warn!("relayed stream ended early: {why}");
        }
        if let Some((mut parser, _)) = self.listen.take() {
            relay_listened(&mut self.waits, &mut self.ready, parser.take_rest());
        }
        self.ended = true;
    }
}

impl Drop for Relay {
    /// The client went away (its connection closed) before the answer
    /// finished: nothing of the exchange is stored, and the log says so.
    fn drop(&mut self) {
        if let Some(tap) = self.tap.take() {
            tap.flight.forget("the client went away before the answer finished");
        }
    }
}

/// What a relay waited for came first.
enum Came {
    /// The front of `waits` may go.
    Waited,
    /// The upstream's next frame, or its end.
    Upstream(Option<Result<Frame<Bytes>, hyper::Error>>),
    /// The upstream was silent past the idle limit, this long.
    Silent(Duration),
    /// The recording ends, and the standalone stream with it.
    Ending,
}

impl Pieces for Relay {
    /// The next bytes for the client: what is ready, the final event once
    /// its commit resolves, what waited once its wait ends, else what the
    /// upstream sends next; none once the upstream is done and nothing waits.
    async fn next(&mut self) -> Option<Bytes> {
        loop {
            if let Some(bytes) = self.ready.pop_front() {
                if bytes.is_empty() {
                    continue;
                }
                return Some(bytes);
            }
            if let Some((commit, held)) = &mut self.held {
                let next = match commit.await {
                    Ok(()) => held.split().freeze(),
                    Err(instead) => Bytes::from(sse::message_event(&instead.body())),
                };
                self.ready.push_back(next);
                self.held = None;
                continue;
            }
            // Past the upstream's end only what waits is left.
            if self.ended && self.waits.is_empty() {
                return None;
            }
            let waits = &mut self.waits;
            let front = async move {
                match waits.front_mut() {
                    Some((wait, _)) => wait.as_mut().await,
                    None => std::future::pending().await,
                }
            };
            let came = if self.ended {
                front.await;
                Came::Waited
            } else {
                let idle = &mut self.idle;
                let silent = async move {
                    match idle {
                        Some((limit, timer)) => {
                            timer.as_mut().await;
                            *limit
                        }
                        None => std::future::pending().await,
                    }
                };
                let ending = &mut self.ending;
                let ends = async move {
                    match ending {
                        Some(ending) => ending.as_mut().await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    biased;
                    () = front => Came::Waited,
                    frame = self.upstream.frame() => Came::Upstream(frame),
                    limit = silent => Came::Silent(limit),
                    () = ends => Came::Ending,
                }
            };
            match came {
                Came::Waited => {
                    if let Some((_, waited)) = self.waits.pop_front() {
                        self.ready.push_back(waited.freeze());
                    }
                }
                Came::Upstream(Some(Ok(frame))) => {
                    if let Some((limit, timer)) = &mut self.idle {
                        timer.as_mut().reset(tokio::time::Instant::now() + *limit);
                    }
                    if let Ok(data) = frame.into_data() {
                        self.on_data(data);
                    }
                }
                Came::Upstream(Some(Err(e))) => self.on_end(Some(format!("the upstream broke off: {e}"))),
                Came::Upstream(None) => self.on_end(None),
                Came::Silent(limit) => self.on_end(Some(format!("the upstream was silent for {limit:?}"))),
                Came::Ending => self.on_end(None),
            }
        }
    }
}

/// Relays `bytes` of a standalone stream after what waits before it is
/// relayed, if anything does.
fn relay_listened(waits: &mut VecDeque<(Wait, BytesMut)>, ready: &mut VecDeque<Bytes>, bytes: Bytes) {
    match waits.back_mut() {
        Some((_, behind)) => behind.extend_from_slice(&bytes),
        None => ready.push_back(bytes),
    }
}

/// When the connection that carried `response` read last.
fn arrival_of<B>(response: &Response<B>) -> Option<Arc<Arrival>> {
    response.extensions().get::<Arc<Arrival>>().cloned()
}

/// Why an answer was not read whole.
#[derive(Debug)]
pub(super) enum Unread {
    /// It broke off, stalled, or is larger than [`MAX_JSON_ANSWER_BYTES`].
    Broken(String),
    /// Holding it would pass [`MAX_ANSWERS_IN_FLIGHT_BYTES`].
    OverBudget,
}

impl Unread {
    /// The fault an answer of `upstream` that could not be read whole is:
    /// it broke off (logged), or would have passed the budget of answers in
    /// flight.
    pub(super) fn fault(self, upstream: &UpstreamClient) -> Unanswered {
        match self {
            Unread::Broken(why) => {
                tracing::warn!("{why}");
                Unanswered::Upstream(UpstreamFailure::Answer { upstream: upstream.shown().to_owned(), why })
            }
            Unread::OverBudget => {
                tracing::warn!(
                    "an answer would take the answers held at once past {MAX_ANSWERS_IN_FLIGHT_BYTES} bytes; \
                     refused with 503"
                );
                Unanswered::Busy { limit: MAX_ANSWERS_IN_FLIGHT_BYTES }
            }
        }
    }
}

/// Widens `share` to cover `bytes` from `budget`; false when the budget has
/// not that much left (nothing more is then taken).
fn cover(budget: &Arc<Semaphore>, share: &mut Option<OwnedSemaphorePermit>, bytes: usize) -> bool {
    let wanted = bytes.div_ceil(BUDGET_UNIT);
    let held = share.as_ref().map_or(0, OwnedSemaphorePermit::num_permits);
    let Some(more) = wanted.checked_sub(held).filter(|more| *more > 0) else { return true };
    let Ok(more) = u32::try_from(more) else { return false };
    match Arc::clone(budget).try_acquire_many_owned(more) {
        Ok(taken) => {
            match share {
                Some(share) => share.merge(taken),
                None => *share = Some(taken),
            }
            true
        }
        Err(_) => false,
    }
}

/// Reads a whole answer body, each wait bounded by `idle`. An answer that
/// announces more than [`MAX_JSON_ANSWER_BYTES`] is refused before any of
/// it is read, and the buffer never grows past that bound (it doubles up
/// to it, not beyond). Every byte of the buffer's capacity is first taken
/// from `budget`; the share comes back with the bytes, to be held until
/// they are sent.
pub(super) async fn read_whole(
    mut body: Incoming,
    idle: Duration,
    budget: &Arc<Semaphore>,
) -> Result<(Bytes, Option<OwnedSemaphorePermit>), Unread> {
    let too_large = |size: u64| {
        Unread::Broken(format!("the answer is {size} bytes, more than the {MAX_JSON_ANSWER_BYTES} stored"))
    };
    let announced = body.size_hint().lower();
    if announced > MAX_JSON_ANSWER_BYTES as u64 {
        return Err(too_large(announced));
    }
    let mut share = None;
    if !cover(budget, &mut share, announced as usize) {
        return Err(Unread::OverBudget);
    }
    let mut bytes: Vec<u8> = Vec::with_capacity(announced as usize);
    loop {
        match tokio::time::timeout(idle, body.frame()).await {
            Ok(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    let needed = bytes.len() + data.len();
                    if needed > MAX_JSON_ANSWER_BYTES {
                        return Err(too_large(needed as u64));
                    }
                    if needed > bytes.capacity() {
                        let grown = (bytes.capacity() * 2).clamp(needed, MAX_JSON_ANSWER_BYTES);
                        if !cover(budget, &mut share, grown) {
                            return Err(Unread::OverBudget);
                        }
                        bytes.reserve_exact(grown - bytes.len());
                    }
                    bytes.extend_from_slice(&data);
                }
            }
            Ok(Some(Err(e))) => return Err(Unread::Broken(format!("the answer broke off: {e}"))),
            Ok(None) => return Ok((Bytes::from(bytes), share)),
            Err(_) => return Err(Unread::Broken(format!("silent for {idle:?} in the middle of an answer"))),
        }
    }
}

/// A whole body that keeps its share of the budget until it is sent (or
/// the client goes away).
pub(super) fn held(bytes: Bytes, share: Option<OwnedSemaphorePermit>) -> Body {
    Holding::new(Full::new(bytes), share).boxed()
}

/// The upstream's answer head as relayed: hop-by-hop headers dropped.
pub(super) fn relay_head(mut head: hyper::http::response::Parts) -> hyper::http::response::Parts {
    head.headers = upstream::forwardable(&head.headers);
    head
}
