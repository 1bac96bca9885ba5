//! Record mode: what gets stored, and when a client may see an answer.
//!
//! For each request it forwards, the engine hands the front door a
//! [`Flight`] (made by [`Recorder::flight`]); the front door's link to the
//! upstream shows it what comes back: the answer's head
//! ([`Flight::answered`]), then a whole answer ([`Flight::complete`]) or a
//! stream message by message ([`Flight::observe`]). The final answer
//! completes the exchange and is queued for commit; the front door gets a
//! [`Held`] and sends that answer only once the held commit resolves, so a
//! client that saw an exchange finish can rely on it being in the
//! cassette, whatever happens to the daemon next. One that cannot be
//! committed (a full disk) resolves to the client [`Fault::NotStored`]
//! error, sent instead.
//!
//! On a stream that carries many exchanges (stdio), [`Flights`] decides
//! which flight each message the server sends belongs to. Server→client
//! requests seen in a flight are remembered, and the client's reply
//! ([`Recorder::tie_reply`]) joins that exchange. What the server says
//! while none of its session's requests is waiting (or, in the stateless
//! era, a change notification on a `subscriptions/listen` stream) is an
//! aside of the exchange it had seen last ([`Recorder::aside`]). An answer that ends
//! early, is not JSON or passes [`MAX_RECORDED_STREAM_BYTES`] stores
//! nothing. Before anything is stored, it is normalized and scrubbed: body
//! redaction, and every credential the request carried (headers, values
//! under credential keys) in any of its encoded forms.
//!
//! [`Fault::NotStored`]: crate::error::Fault::NotStored

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll, ready};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::ledger::Ledger;
use super::{Call, Outcome};
use crate::cassette::model::spelling::Spellings;
use crate::cassette::model::{
    Aside, Channel, Direction, Exchange, Provenance, RawExchange, RecordedMessage, ServiceAnswer,
    ServiceRoute, Status, StreamShape, canonical_json, spelling,
};
use crate::cassette::store::{Tag, WriterHandle};
use crate::error::{Fault, RequestError};
use crate::jsonrpc::RequestId;
use crate::limits::{MAX_RECORDED_STREAM_BYTES, MAX_SECRETS_PER_EXCHANGE, MAX_TRACKED_SESSIONS};
use crate::mcp;
use crate::normalize::Rules;
use crate::redact;
use crate::util::{lock, printable};

/// Above this many open server→client requests, forgotten ones are swept.
const PENDING_SWEEP_AT: usize = 1024;

/// Resolves to whether an exchange (or service answer) was committed.
type Commit = oneshot::Receiver<bool>;

/// Where a client's reply to a server→client request belongs: the answer
/// whose stream carried the request, or the asides it was one of.
enum PendingReply {
    Answer(Weak<Mutex<Option<Capture>>>),
    Aside(Spot),
}

impl PendingReply {
    /// Whether what it would join is still there to be stored.
    fn is_live(&self) -> bool {
        match self {
            PendingReply::Answer(capture) => capture.strong_count() > 0,
            PendingReply::Aside(_) => true,
        }
    }
}

/// Where what a server says on its own goes: after the exchange the
/// server saw last in its session (arrival order here), or after the client
/// notification that came after that exchange.
#[derive(Clone)]
struct Spot {
    /// The exchange, while it is being recorded: asides join it.
    capture: Weak<Mutex<Option<Capture>>>,
    /// The exchange once it is queued for the writer: asides name it so.
    tag: Tag,
    after: Option<String>,
    /// When what it follows happened: offsets count from here.
    since: Instant,
    /// What the exchange's request carried that must not be stored.
    secrets: Arc<[String]>,
}

/// A capture shared between its stream and the replies that join it;
/// `None` once taken to be stored.
type SharedCapture = Arc<Mutex<Option<Capture>>>;

/// The recorder, shared by every connection and cloned into each stream.
#[derive(Clone)]
pub struct Recorder {
    writer: WriterHandle,
    rules: Arc<Rules>,
    /// Server→client requests on recorded streams, by (session, id).
    pending: Arc<Mutex<HashMap<String, PendingReply>>>,
    /// The protocol version each upstream session negotiated.
    versions: Arc<Mutex<HashMap<String, String>>>,
    /// Per session, where what the server says on its own goes.
    said: Arc<Mutex<HashMap<String, Spot>>>,
    /// The next exchange's tag.
    tags: Arc<AtomicU64>,
    /// What each stored exchange says it was recorded from.
    upstream: Arc<str>,
    /// What was forwarded to be recorded.
    ledger: Arc<Ledger>,
}

/// An exchange being recorded.
struct Capture {
    raw: RawExchange,
    tag: Tag,
    started: Instant,
    /// Credentials the request carried (outside its body and under
    /// credential keys in it), scrubbed before storing.
    secrets: Arc<[String]>,
    /// Bytes of asides joined so far.
    aside_bytes: usize,
    /// The upstream session this exchange belongs to (or opens).
    session: Option<String>,
    /// The request carried more credential values than are scrubbed
    /// ([`MAX_SECRETS_PER_EXCHANGE`]): how many; the exchange is not stored.
    too_many_secrets: Option<usize>,
}

/// One message as its sender wrote it: parsed, with the numbers it spelled
/// otherwise than serde_json writes them, so that the cassette keeps them
/// as spelled.
pub struct Said {
    pub body: Value,
    pub spellings: Spellings,
}

impl Said {
    /// The JSON message `text`; `None` when it is not JSON.
    pub fn read(text: &str) -> Option<Said> {
        let body = serde_json::from_str(text).ok()?;
        Some(Said { body, spellings: Spellings::of(text) })
    }
}

impl From<Value> for Said {
    /// A message built here (a client's reply, as read): nothing to keep.
    fn from(body: Value) -> Said {
        Said { body, spellings: Spellings::default() }
    }
}

impl Capture {
    /// Adds a message, stamped with its offset from the request.
    fn push(&mut self, direction: Direction, said: Said) {
        let offset_ms = self.started.elapsed().as_millis() as u64;
        let Said { body, spellings } = said;
        self.raw.messages.push(RecordedMessage { offset_ms, direction, body, spellings });
    }

    /// What the server says on its own next follows this exchange, which
    /// `shared` holds.
    fn spot(&self, shared: &SharedCapture) -> Spot {
        Spot {
            capture: Arc::downgrade(shared),
            tag: self.tag,
            after: None,
            since: self.started,
            secrets: Arc::clone(&self.secrets),
        }
    }

    /// The captured request's method.
    fn method(&self) -> &str {
        self.raw.request.get("method").and_then(Value::as_str).unwrap_or_default()
    }

    /// Logs why this capture is dropped unstored.
    fn abandon(&self, why: &str) {
        tracing::warn!("{} on {}: {why}; not stored", printable(self.method()), printable(&self.raw.server));
    }
}

impl Recorder {
    /// A recorder storing through `writer`, each exchange marked as
    /// recorded from `upstream` (`host[:port]`, or `stdio:PROGRAM`; never
    /// credentials).
    pub fn new(writer: WriterHandle, rules: Rules, upstream: &str) -> Recorder {
        Recorder {
            writer,
            rules: Arc::new(rules),
            pending: Arc::default(),
            versions: Arc::default(),
            said: Arc::default(),
            tags: Arc::default(),
            upstream: Arc::from(upstream),
            ledger: Arc::default(),
        }
    }

    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// Starts recording `call`; the front door's link shows the flight the
    /// upstream's answer.
    pub fn flight(&self, call: &Call) -> Flight {
        let shared = Arc::new(Mutex::new(None));
        let capture = self.capture(call);
        let spot = capture.spot(&shared);
        *lock(&shared) = Some(capture);
        self.saw(call.session, spot);
        Flight { capture: shared, recorder: self.clone(), captured_bytes: 0, request_id: call.id.clone() }
    }

    /// `spot` is what the server in `session` has seen last.
    fn saw(&self, session: Option<&str>, spot: Spot) {
        let session = session.unwrap_or_default();
        let mut said = lock(&self.said);
        if let Some(last) = said.get_mut(session) {
            *last = spot;
            return;
        }
        if said.len() >= MAX_TRACKED_SESSIONS {
            said.clear();
        }
        said.insert(session.to_owned(), spot);
    }

    /// The client sent the notification `method` in `session`: what the
    /// server says on its own from now on follows it.
    pub fn notified(&self, session: Option<&str>, method: &str) {
        if let Some(spot) = lock(&self.said).get_mut(session.unwrap_or_default()) {
            spot.after = Some(method.to_owned());
            spot.since = Instant::now();
        }
    }

    /// The server in `session` said `body` on its own (on `channel`): it is
    /// stored after what the server had seen last there, and a request among
    /// them waits for the client's reply to join it. Before any exchange it
    /// follows none and is not stored.
    pub fn aside(&self, session: Option<&str>, channel: Channel, said: Said) {
        let spot = lock(&self.said).get(session.unwrap_or_default()).cloned();
        let Some(spot) = spot else {
            let what = said.body.get("method").and_then(Value::as_str).unwrap_or("a message");
            tracing::debug!(
                "the server said {} on its own before any exchange in its session; relayed, not stored",
                printable(what)
            );
            return;
        };
        if let (Some(_), Some(id)) = (said.body.get("method"), said.body.get("id")) {
            self.expect(session, id, PendingReply::Aside(spot.clone()));
        }
        self.put_aside(&spot, channel, Direction::Server, said);
    }

    /// Stores one aside at `spot`: with its exchange while that is being
    /// recorded (said in flight, before the answer, unless it follows a
    /// client notification), else after it, redacted and scrubbed.
    fn put_aside(&self, spot: &Spot, channel: Channel, direction: Direction, said: Said) {
        let offset_ms = spot.since.elapsed().as_millis() as u64;
        let Said { mut body, spellings } = said;
        if let Some(capture) = spot.capture.upgrade()
            && let Some(capture) = lock(&capture).as_mut()
        {
            capture.aside_bytes += canonical_json(&body).len();
            if capture.aside_bytes > MAX_RECORDED_STREAM_BYTES {
                tracing::warn!(
                    "what the server said on its own during {} passed {MAX_RECORDED_STREAM_BYTES} bytes; \
                     the rest is not stored",
                    printable(capture.method())
                );
                return;
            }
            let message = RecordedMessage { offset_ms, direction, body, spellings };
            let in_flight = spot.after.is_none();
            capture.raw.asides.push(Aside { after: spot.after.clone(), in_flight, channel, message });
            return;
        }
        self.rules.redact(&mut body);
        redact::Scrubber::new(&spot.secrets).scrub(&mut body);
        let message = RecordedMessage { offset_ms, direction, body, spellings };
        let aside = Aside { after: spot.after.clone(), in_flight: false, channel, message };
        self.writer.write_asides(spot.tag, vec![aside]);
    }

    fn capture(&self, call: &Call) -> Capture {
        self.ledger.note(call.server, call.method, call.params(), Outcome::Forwarded, None);
        let header_version = call.facts.routing.as_ref().and_then(|r| r.protocol_version.clone());
        let meta = call.params().and_then(|p| p.get("_meta"));
        let meta_version = meta.and_then(|m| m.get(mcp::META_PROTOCOL_VERSION)).and_then(Value::as_str);
        let protocol_version = header_version
            .or_else(|| meta_version.map(str::to_owned))
            .or_else(|| call.session.and_then(|s| lock(&self.versions).get(s).cloned()))
            .unwrap_or_else(|| mcp::DEFAULT_HANDSHAKE_VERSION.to_owned());
        let mut request = json!({"jsonrpc": "2.0", "id": call.id.as_value(), "method": call.method});
        if let Some(params) = call.params() {
            request["params"] = params.clone();
        }
        // What the request sent under credential-like keys is redacted in the
        // stored request; a tool echoing it back must not leak it either.
        let mut secrets = call.facts.credentials.clone();
        secrets.extend(self.rules.sensitive_values(&request));
        secrets.sort_unstable();
        secrets.dedup();
        let too_many_secrets = (secrets.len() > MAX_SECRETS_PER_EXCHANGE).then_some(secrets.len());
        if too_many_secrets.is_some() {
            secrets.clear(); // never scrubbed with: the exchange is not stored
        }
        Capture {
            raw: RawExchange {
                server: call.server.to_owned(),
                era: call.era,
                protocol_version,
                request,
                status: Status::OK,
                content_type: String::new(),
                messages: Vec::new(),
                asides: Vec::new(),
                stream: StreamShape::default(),
            },
            tag: self.tags.fetch_add(1, Ordering::Relaxed),
            started: Instant::now(),
            secrets: secrets.into(),
            aside_bytes: 0,
            session: call.session.map(str::to_owned),
            too_many_secrets,
        }
    }

    /// Queues a finished capture for the writer, which normalizes and
    /// scrubs it on its own thread (that work grows with the exchange and
    /// its secrets; the runtime's workers go on serving meanwhile); the
    /// commit says whether it was stored.
    fn commit(&self, capture: Capture) -> Commit {
        let Capture { mut raw, tag, secrets, session, too_many_secrets, .. } = capture;
        if let Some(count) = too_many_secrets {
            tracing::warn!(
                "{} on {}: the request carried {count} credential values, more than the \
                 {MAX_SECRETS_PER_EXCHANGE} scrubbed; not stored",
                printable(raw.request.get("method").and_then(serde_json::Value::as_str).unwrap_or_default()),
                printable(&raw.server)
            );
            let (told, committed) = oneshot::channel();
            let _ = told.send(false);
            return committed;
        }
        if raw.content_type.is_empty() {
            // No transport said (stdio): a stream if the answer had more than one message,
            // so that HTTP replay frames it as the server would have.
            let streamed = raw.messages.len() > 1;
            raw.content_type = if streamed { "text/event-stream" } else { "application/json" }.into();
        }
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
        let (rules, upstream) = (Arc::clone(&self.rules), Arc::clone(&self.upstream));
        let recorded_at = SystemTime::now().duration_since(UNIX_EPOCH).ok().map(|d| d.as_secs() as i64);
        let prepare = move || {
            redact::scrub_exchange(&mut raw, &secrets);
            let mut exchange: Exchange = rules.exchange(raw);
            exchange.provenance = Provenance {
                recorded_at,
                upstream: Some(upstream.to_string()),
                recorder: Some(env!("CARGO_PKG_VERSION").to_owned()),
                keys_sorted: false,
            };
            exchange
        };
        self.writer.write_prepared(Box::new(prepare), Some(tag))
    }

    /// Adds the client's reply to the exchange whose stream carried the request.
    pub fn tie_reply(&self, session: Option<&str>, id: &RequestId, reply: Value) {
        let key = pending_key(session, id.as_value());
        let pending = lock(&self.pending).remove(&key);
        match pending {
            Some(PendingReply::Answer(capture)) => {
                if let Some(capture) = capture.upgrade()
                    && let Some(capture) = lock(&capture).as_mut()
                {
                    capture.push(Direction::Client, reply.into());
                }
            }
            Some(PendingReply::Aside(spot)) => {
                self.put_aside(&spot, Channel::Standalone, Direction::Client, reply.into());
            }
            None => {}
        }
    }

    /// Remembers a server→client request seen on a recorded stream.
    fn expect_reply(&self, capture: &SharedCapture, session: Option<&str>, id: &Value) {
        self.expect(session, id, PendingReply::Answer(Arc::downgrade(capture)));
    }

    fn expect(&self, session: Option<&str>, id: &Value, reply: PendingReply) {
        let mut pending = lock(&self.pending);
        if pending.len() >= PENDING_SWEEP_AT {
            pending.retain(|_, waiting| waiting.is_live());
            if pending.len() >= PENDING_SWEEP_AT {
                pending.clear(); // replies to asides nobody answered
            }
        }
        pending.insert(pending_key(session, id), reply);
    }

    /// What records the messages of `session`'s standalone stream.
    pub fn listener(&self, session: Option<&str>) -> Listener {
        Listener { recorder: self.clone(), session: session.map(str::to_owned) }
    }

    /// Starts recording an Agent 365 service endpoint's answer, for a
    /// request that carried `credentials`.
    pub fn service(&self, route: ServiceRoute, credentials: Vec<String>) -> ServiceFlight {
        ServiceFlight { recorder: self.clone(), route, credentials }
    }
}

/// The recording of what a session's standalone stream (GET) carries:
/// each request or notification on it is an aside ([`Recorder::aside`]).
pub struct Listener {
    recorder: Recorder,
    session: Option<String>,
}

impl Listener {
    /// One event's data from the stream.
    pub fn heard(&self, data: &str) {
        let Some(said) = Said::read(data) else { return };
        if said.body.get("method").is_some() {
            self.recorder.aside(self.session.as_deref(), Channel::Standalone, said);
        }
    }
}

/// The recording of one Agent 365 service endpoint's answer.
pub struct ServiceFlight {
    recorder: Recorder,
    route: ServiceRoute,
    credentials: Vec<String>,
}

impl ServiceFlight {
    /// Stores a successful answer (`body` as received), redacted and
    /// scrubbed of the request's credentials; `upstream` is the origin it
    /// came from. The front door sends the answer once the held commit
    /// resolves.
    pub fn complete(self, upstream: String, status: Status, content_type: &str, body: &[u8]) -> Held {
        let rules = &self.recorder.rules;
        let body = match serde_json::from_slice::<Value>(body) {
            Ok(mut json) => {
                rules.redact(&mut json);
                redact::scrub(&mut json, &self.credentials);
                spelling::as_sent(&json, &Spellings::of(&String::from_utf8_lossy(body)))
            }
            Err(_) => redact::scrub_str(&String::from_utf8_lossy(body), &self.credentials),
        };
        let route = self.route;
        let answer = ServiceAnswer { route, upstream, status, content_type: content_type.to_owned(), body };
        Held { committed: self.recorder.writer.write_service(answer), id: None }
    }
}

/// A notification on a `subscriptions/listen` stream other than its
/// acknowledgement: a change the server announces.
fn is_change_notification(body: &Value) -> bool {
    body.get("id").is_none()
        && body
            .get("method")
            .and_then(Value::as_str)
            .is_some_and(|method| method != "notifications/subscriptions/acknowledged")
}

fn pending_key(session: Option<&str>, id: &Value) -> String {
    format!("{}|{}", session.unwrap_or_default(), canonical_json(id))
}

/// One exchange being recorded, as its answer comes back: the front door
/// shows it each message it relays, and it says what the message was.
pub struct Flight {
    capture: SharedCapture,
    recorder: Recorder,
    /// Message data captured so far.
    captured_bytes: usize,
    /// The caller's id: the final answer carries it, and the error sent
    /// instead of an answer not stored does.
    request_id: RequestId,
}

/// What one relayed message was to its flight.
#[derive(Debug)]
pub enum Heard {
    /// Recorded (or empty, like priming events), or no flight's; relay it
    /// and keep going.
    Message,
    /// The final answer: the exchange is complete and queued for commit;
    /// hold the answer back until the commit resolves.
    Final(Held),
    /// Not JSON, or past [`MAX_RECORDED_STREAM_BYTES`]: the exchange is not
    /// stored (logged); relay the rest without showing it here.
    Dropped,
}

/// A final answer's commit: resolves to `Ok` once the exchange is stored
/// (send the answer), or to the error the client gets instead.
#[derive(Debug)]
pub struct Held {
    committed: Commit,
    /// The caller's id (`None` for a service endpoint, which is not JSON-RPC).
    id: Option<RequestId>,
}

impl Future for Held {
    type Output = Result<(), RequestError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // Not committed (the writer logged why): the client learns it
        // instead of an answer the cassette does not hold.
        let stored = ready!(Pin::new(&mut self.committed).poll(cx)).unwrap_or(false);
        Poll::Ready(match stored {
            true => Ok(()),
            false => Err(RequestError { fault: Box::new(Fault::NotStored), id: self.id.take() }),
        })
    }
}

impl Flight {
    /// The upstream's answer began: its status, its content type, and the
    /// session it opened, if any.
    pub fn answered(&mut self, status: Status, content_type: &str, session: Option<String>) {
        if let Some(capture) = lock(&self.capture).as_mut() {
            capture.raw.status = status;
            content_type.clone_into(&mut capture.raw.content_type);
            if let Some(opened) = session {
                self.recorder.saw(Some(&opened), capture.spot(&self.capture));
                capture.session = Some(opened);
            }
        }
    }

    /// The answer's stream opened with a priming event (an event id and
    /// empty data).
    pub fn primed(&mut self) {
        if let Some(capture) = lock(&self.capture).as_mut() {
            capture.raw.stream.primed = true;
        }
    }

    /// The server set the stream's `retry` (milliseconds).
    pub fn retry(&mut self, ms: u64) {
        if let Some(capture) = lock(&self.capture).as_mut() {
            capture.raw.stream.retry_ms = Some(ms);
        }
    }

    /// The server closed the answer's stream before the answer, after the
    /// messages so far (the first close is the one stored). Returns the
    /// session the client resumes it in; `None` when there is none (or
    /// nothing left to record), and then the flight is over.
    pub fn closed_early(&mut self) -> Option<String> {
        let mut guard = lock(&self.capture);
        let capture = guard.as_mut()?;
        let session = capture.session.clone();
        if session.is_none() {
            drop(guard);
            self.abandon(
                "the server closed the stream before the answer, and there is no session to resume it in",
            );
            return None;
        }
        let sent = capture.raw.messages.iter().filter(|m| m.direction == Direction::Server).count();
        capture.raw.stream.closed_after.get_or_insert(u32::try_from(sent).unwrap_or(u32::MAX));
        session
    }

    /// The caller's id.
    pub fn request_id(&self) -> &RequestId {
        &self.request_id
    }

    /// The request's method, for what the log says of it.
    pub fn method(&self) -> String {
        lock(&self.capture).as_ref().map(|c| c.method().to_owned()).unwrap_or_default()
    }

    /// The whole answer came as one message: the exchange is complete,
    /// whatever id the message carries.
    pub fn complete(self, message: Said) -> Held {
        let capture = lock(&self.capture).take();
        let committed = match capture {
            Some(mut capture) => {
                capture.push(Direction::Server, message);
                self.recorder.commit(capture)
            }
            None => {
                let (told, committed) = oneshot::channel();
                let _ = told.send(false);
                committed
            }
        };
        Held { committed, id: Some(self.request_id.clone()) }
    }

    /// Shows the flight one relayed message's data (an SSE event's).
    pub fn observe(&mut self, data: &str) -> Heard {
        if data.is_empty() {
            return Heard::Message;
        }
        if !self.within_bound(data.len()) {
            return Heard::Dropped;
        }
        let Some(said) = Said::read(data) else {
            self.abandon("a message of the answer is not JSON");
            return Heard::Dropped;
        };
        self.take(said)
    }

    /// Shows the flight one relayed message the front door has parsed
    /// already (`bytes` long as relayed).
    pub fn observe_message(&mut self, said: Said, bytes: usize) -> Heard {
        if !self.within_bound(bytes) {
            return Heard::Dropped;
        }
        self.take(said)
    }

    /// Counts `bytes` more of the answer; past [`MAX_RECORDED_STREAM_BYTES`]
    /// the capture is dropped.
    fn within_bound(&mut self, bytes: usize) -> bool {
        self.captured_bytes += bytes;
        if self.captured_bytes > MAX_RECORDED_STREAM_BYTES {
            self.abandon(&format!("the answer passed {MAX_RECORDED_STREAM_BYTES} bytes"));
            return false;
        }
        true
    }

    /// Records one message of the answer; the final one completes it.
    fn take(&mut self, said: Said) -> Heard {
        let mut guard = lock(&self.capture);
        let Some(capture) = guard.as_mut() else { return Heard::Message };
        let body = &said.body;
        if capture.method() == "subscriptions/listen" && is_change_notification(body) {
            // What the subscription carries follows the call that changed something.
            let session = capture.session.clone();
            drop(guard);
            self.recorder.aside(session.as_deref(), Channel::Subscription, said);
            return Heard::Message;
        }
        if let (Some(_), Some(id)) = (body.get("method"), body.get("id")) {
            self.recorder.expect_reply(&self.capture, capture.session.as_deref(), id);
        }
        let is_final = body.get("method").is_none() && body.get("id") == Some(self.request_id.as_value());
        capture.push(Direction::Server, said);
        if !is_final {
            return Heard::Message;
        }
        let Some(capture) = guard.take() else { return Heard::Message };
        drop(guard);
        Heard::Final(Held { committed: self.recorder.commit(capture), id: Some(self.request_id.clone()) })
    }

    /// The answer ends here unfinished (`why`): nothing of it is stored.
    pub fn abandon(&self, why: &str) {
        if let Some(capture) = lock(&self.capture).take() {
            capture.abandon(why);
        }
    }
}

/// The flights of one stream that carries many exchanges and what the
/// server says between them (stdio): which flight each message belongs to.
#[derive(Default)]
pub struct Flights {
    /// By the request's id (canonical JSON).
    open: HashMap<String, Flight>,
    /// Progress token (canonical JSON) → request id.
    tokens: HashMap<String, String>,
    /// Request ids, oldest first.
    order: Vec<String>,
    /// The recorder and session of the flights, for what the server says
    /// while none is open.
    said: Option<(Recorder, Option<String>)>,
}

impl Flights {
    /// A request is about to be sent: its answer goes to `flight`.
    pub fn expect(&mut self, flight: Flight) {
        let id = canonical_json(flight.request_id.as_value());
        let (token, session) = lock(&flight.capture).as_ref().map_or((None, None), |capture| {
            let token = mcp::progress_token(capture.raw.request.get("params")).map(canonical_json);
            (token, capture.session.clone())
        });
        self.said = Some((flight.recorder.clone(), session));
        if let Some(token) = token {
            self.tokens.insert(token, id.clone());
        }
        if let Some(earlier) = self.open.insert(id.clone(), flight) {
            earlier.abandon("a new request reused its id before the answer");
        }
        self.order.retain(|open| *open != id);
        self.order.push(id);
    }

    /// One JSON-RPC message from the server (`bytes` long as relayed): an
    /// answer goes to the flight of its request (by id), a progress
    /// notification to the request with its token, anything else the
    /// server says (log notifications, server→client requests) to the
    /// request sent last while one is open, else it is an aside
    /// ([`Recorder::aside`]).
    pub fn heard(&mut self, message: Said, bytes: usize) -> Heard {
        let is_answer = message.body.get("method").is_none();
        let answering = message.body.get("id").filter(|_| is_answer).map(canonical_json);
        let Some(id) = answering else {
            if let Some(flight) = self.owner(&message.body) {
                return flight.observe_message(message, bytes);
            }
            if let Some((recorder, session)) = &self.said {
                recorder.aside(session.as_deref(), Channel::Standalone, message);
            }
            return Heard::Message;
        };
        match self.remove(&id) {
            Some(mut flight) => flight.observe_message(message, bytes),
            None => Heard::Message,
        }
    }

    /// The stream ended (`why`): flights still open store nothing.
    pub fn close(&mut self, why: &str) {
        self.order.clear();
        self.tokens.clear();
        for (_, flight) in self.open.drain() {
            flight.abandon(why);
        }
    }

    fn remove(&mut self, id: &str) -> Option<Flight> {
        self.order.retain(|open| open != id);
        self.tokens.retain(|_, open| open != id);
        self.open.remove(id)
    }

    /// The flight a server message other than an answer belongs to.
    fn owner(&mut self, message: &Value) -> Option<&mut Flight> {
        let token = message
            .get("params")
            .filter(|_| message.get("method").and_then(Value::as_str) == Some("notifications/progress"))
            .and_then(|p| p.get("progressToken"));
        let id = match token.and_then(|t| self.tokens.get(&canonical_json(t))) {
            Some(id) => id.clone(),
            None => self.order.last()?.clone(),
        };
        self.open.get_mut(&id)
    }
}
