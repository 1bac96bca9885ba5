//! Record mode: what gets stored, and when a client may see an answer.
//!
//! The front door forwards a request upstream and feeds what comes back
//! into a [`Capture`] (made by [`Recorder::capture`]): a single answer with
//! [`Capture::push`] then [`Recorder::commit`]; a stream message by message
//! through a [`Tee`], which commits when the final answer arrives. The
//! final answer goes to the client only once the commit is acknowledged, so
//! a client that saw an exchange finish can rely on it being in the
//! cassette, whatever happens to the daemon next; one that cannot be
//! committed (a full disk) gets the client [`Fault::NotStored`] instead.
//!
//! Server→client requests seen on a stream are remembered, and the client's
//! reply ([`Recorder::tie_reply`]) joins that exchange. An answer that ends
//! early, is not JSON or passes [`MAX_RECORDED_STREAM_BYTES`] stores
//! nothing. Before anything is stored, it is normalized and scrubbed: body
//! redaction, and every credential the request carried (headers, values
//! under credential keys) in any of its encoded forms.
//!
//! [`Fault::NotStored`]: crate::error::Fault::NotStored

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::ledger::Ledger;
use super::{Call, Outcome};
use crate::cassette::model::{
    Direction, Exchange, Provenance, RawExchange, RecordedMessage, ServiceAnswer, ServiceRoute, StatusCode,
    canonical_json,
};
use crate::cassette::store::WriterHandle;
use crate::jsonrpc::RequestId;
use crate::limits::{MAX_RECORDED_STREAM_BYTES, MAX_TRACKED_SESSIONS};
use crate::mcp;
use crate::normalize::Rules;
use crate::redact;
use crate::util::{lock, printable};

/// Above this many open server→client requests, forgotten ones are swept.
const PENDING_SWEEP_AT: usize = 1024;
/// The version a handshake request without the header speaks (spec default).
const DEFAULT_HANDSHAKE_VERSION: &str = "2025-03-26";

/// Resolves to whether an exchange (or service answer) was committed.
pub type Commit = oneshot::Receiver<bool>;

/// Where a client's reply to a server→client request belongs.
type PendingReply = Weak<Mutex<Option<Capture>>>;

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
    /// What each stored exchange says it was recorded from.
    upstream: Arc<str>,
    /// What was forwarded to be recorded.
    ledger: Arc<Ledger>,
}

/// An exchange being recorded.
pub struct Capture {
    raw: RawExchange,
    /// The caller's id, to spot the final answer among the messages (and
    /// to answer with if the exchange cannot be stored).
    request_id: RequestId,
    started: Instant,
    /// Credentials the request carried, scrubbed before storing.
    secrets: Vec<String>,
    /// The upstream session this exchange belongs to (or opens).
    session: Option<String>,
}

impl Capture {
    /// The upstream's answer began: its status, its content type, and the
    /// session it opened, if any.
    pub fn answered(&mut self, status: StatusCode, content_type: &str, session: Option<String>) {
        self.raw.status = status;
        content_type.clone_into(&mut self.raw.content_type);
        if session.is_some() {
            self.session = session;
        }
    }

    /// Adds a message, stamped with its offset from the request.
    pub fn push(&mut self, direction: Direction, body: Value) {
        let offset_ms = self.started.elapsed().as_millis() as u64;
        self.raw.messages.push(RecordedMessage { offset_ms, direction, body });
    }

    pub fn request_id(&self) -> &RequestId {
        &self.request_id
    }

    /// The progress token the captured request asked for, if any.
    pub fn progress_token(&self) -> Option<&Value> {
        mcp::progress_token(self.raw.request.get("params"))
    }

    /// The captured request's method.
    pub fn method(&self) -> &str {
        self.raw.request.get("method").and_then(Value::as_str).unwrap_or_default()
    }

    fn is_final(&self, body: &Value) -> bool {
        body.get("method").is_none() && body.get("id") == Some(self.request_id.as_value())
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
            upstream: Arc::from(upstream),
            ledger: Arc::default(),
        }
    }

    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// Starts recording `call`; the front door fills in the upstream's answer.
    pub fn capture(&self, call: &Call) -> Capture {
        self.ledger.note(call.server, call.method, call.params(), Outcome::Forwarded, None);
        let header_version = call.facts.routing.as_ref().and_then(|r| r.protocol_version.clone());
        let meta = call.params().and_then(|p| p.get("_meta"));
        let meta_version = meta.and_then(|m| m.get(mcp::META_PROTOCOL_VERSION)).and_then(Value::as_str);
        let protocol_version = header_version
            .or_else(|| meta_version.map(str::to_owned))
            .or_else(|| call.session.and_then(|s| lock(&self.versions).get(s).cloned()))
            .unwrap_or_else(|| DEFAULT_HANDSHAKE_VERSION.to_owned());
        let mut request = json!({"jsonrpc": "2.0", "id": call.id.as_value(), "method": call.method});
        if let Some(params) = call.params() {
            request["params"] = params.clone();
        }
        Capture {
            raw: RawExchange {
                server: call.server.to_owned(),
                era: call.era,
                protocol_version,
                request,
                status: StatusCode::OK,
                content_type: String::new(),
                messages: Vec::new(),
            },
            request_id: call.id.clone(),
            started: Instant::now(),
            secrets: call.facts.credentials.clone(),
            session: call.session.map(str::to_owned),
        }
    }

    /// Normalizes and scrubs a finished capture and queues it for the
    /// writer; the commit says whether it was stored.
    pub fn commit(&self, capture: Capture) -> Commit {
        let Capture { mut raw, mut secrets, session, .. } = capture;
        // What the request sent under credential-like keys is redacted in the
        // stored request; a tool echoing it back must not leak it either.
        secrets.extend(self.rules.sensitive_values(&raw.request));
        let scrubber = redact::Scrubber::new(&secrets);
        scrubber.scrub(&mut raw.request);
        for message in &mut raw.messages {
            scrubber.scrub(&mut message.body);
        }
        // Paths outside the Agent 365 forms are the server's name: no credential in it either.
        raw.server = scrubber.scrub_str(&raw.server);
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
        let mut exchange: Exchange = self.rules.exchange(raw);
        exchange.provenance = Provenance {
            recorded_at: SystemTime::now().duration_since(UNIX_EPOCH).ok().map(|d| d.as_secs() as i64),
            upstream: Some(self.upstream.to_string()),
            recorder: Some(env!("CARGO_PKG_VERSION").to_owned()),
        };
        self.writer.write(exchange)
    }

    /// Tees a streamed answer into `capture`, message by message.
    pub fn tee(&self, capture: Capture) -> Tee {
        Tee { capture: Arc::new(Mutex::new(Some(capture))), recorder: self.clone(), captured_bytes: 0 }
    }

    /// Adds the client's reply to the exchange whose stream carried the request.
    pub fn tie_reply(&self, session: Option<&str>, id: &RequestId, reply: Value) {
        let key = pending_key(session, id.as_value());
        let capture = lock(&self.pending).remove(&key).and_then(|weak| weak.upgrade());
        if let Some(capture) = capture
            && let Some(capture) = lock(&capture).as_mut()
        {
            capture.push(Direction::Client, reply);
        }
    }

    /// Remembers a server→client request seen on a recorded stream.
    fn expect_reply(&self, capture: &SharedCapture, session: Option<&str>, id: &Value) {
        let mut pending = lock(&self.pending);
        if pending.len() >= PENDING_SWEEP_AT {
            pending.retain(|_, capture| capture.strong_count() > 0);
        }
        pending.insert(pending_key(session, id), Arc::downgrade(capture));
    }

    /// Stores an Agent 365 service endpoint's successful answer (`body` as
    /// received), redacted and scrubbed of `credentials`; `upstream` is the
    /// origin it came from.
    pub fn commit_service(
        &self,
        route: ServiceRoute,
        upstream: String,
        status: StatusCode,
        content_type: &str,
        body: &[u8],
        credentials: &[String],
    ) -> Commit {
        let body = match serde_json::from_slice::<Value>(body) {
            Ok(mut json) => {
                self.rules.redact(&mut json);
                redact::scrub(&mut json, credentials);
                canonical_json(&json)
            }
            Err(_) => redact::scrub_str(&String::from_utf8_lossy(body), credentials),
        };
        let answer = ServiceAnswer { route, upstream, status, content_type: content_type.to_owned(), body };
        self.writer.write_service(answer)
    }
}

fn pending_key(session: Option<&str>, id: &Value) -> String {
    format!("{}|{}", session.unwrap_or_default(), canonical_json(id))
}

/// The capture of one streamed answer: each message the front door relays
/// is shown to it ([`Tee::observe`]) and it says what the message was.
pub struct Tee {
    capture: SharedCapture,
    recorder: Recorder,
    /// Message data captured so far.
    captured_bytes: usize,
}

/// What one relayed message was to its capture.
#[derive(Debug)]
pub enum Seen {
    /// Recorded (or empty, like priming events); keep going.
    Message,
    /// The final answer: the exchange is complete and queued for commit;
    /// hold the answer back until `committed` says it is stored. `id` is
    /// the caller's, for the error sent instead if it is not.
    Final { committed: Commit, id: RequestId },
    /// Not JSON, or past [`MAX_RECORDED_STREAM_BYTES`]: the exchange is not
    /// stored (logged); relay the rest without showing it here.
    Dropped,
}

impl Tee {
    /// Shows the tee one relayed message's data.
    pub fn observe(&mut self, data: &str) -> Seen {
        if data.is_empty() {
            return Seen::Message;
        }
        if !self.within_bound(data.len()) {
            return Seen::Dropped;
        }
        let Ok(body) = serde_json::from_str::<Value>(data) else {
            self.abandon("a message of the answer is not JSON");
            return Seen::Dropped;
        };
        self.take(body)
    }

    /// Shows the tee one relayed message the front door has parsed already
    /// (`bytes` long as relayed).
    pub fn observe_message(&mut self, body: Value, bytes: usize) -> Seen {
        if !self.within_bound(bytes) {
            return Seen::Dropped;
        }
        self.take(body)
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
    fn take(&mut self, body: Value) -> Seen {
        let mut guard = lock(&self.capture);
        let Some(capture) = guard.as_mut() else { return Seen::Message };
        if let (Some(_), Some(id)) = (body.get("method"), body.get("id")) {
            self.recorder.expect_reply(&self.capture, capture.session.as_deref(), id);
        }
        let is_final = capture.is_final(&body);
        capture.push(Direction::Server, body);
        if !is_final {
            return Seen::Message;
        }
        let Some(capture) = guard.take() else { return Seen::Message };
        drop(guard);
        let id = capture.request_id.clone();
        Seen::Final { committed: self.recorder.commit(capture), id }
    }

    /// The answer ends here unfinished (`why`): nothing of it is stored.
    pub fn abandon(&self, why: &str) {
        if let Some(capture) = lock(&self.capture).take() {
            capture.abandon(why);
        }
    }
}
