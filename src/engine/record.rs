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
//! committed (a full disk) resolves to the client [`Unanswered::NotStored`]
//! error, sent instead.
//!
//! On a stream that carries many exchanges (stdio), [`Flights`] decides
//! which flight each message the server sends belongs to. Server→client
//! requests seen in a flight are remembered, and the client's reply
//! ([`Recorder::tie_reply`]) joins that exchange. What the server says
//! while none of its session's requests is waiting (or, in the stateless
//! era, a change notification on a `subscriptions/listen` stream) is an
//! aside of the exchange it had seen last when the message arrived
//! (`Recorder::aside`): a stream read late does not move it after a
//! request sent on since. An answer that ends
//! early, is not JSON serde_json reads or passes
//! [`MAX_RECORDED_STREAM_BYTES`] stores nothing, and as its client was
//! given it, the run fails naming it ([`Recorder::lost`]; one whose
//! client went away is only logged). Before anything is stored, it is normalized and scrubbed: body
//! redaction, and every credential the request carried (headers, values
//! under credential keys) in any of its encoded forms.
//!
//! The types a door holds are in [`flight`](super::flight).
//!
//! [`Unanswered::NotStored`]: crate::error::Unanswered::NotStored
//! [`Held`]: super::flight::Held
//! [`Flights`]: super::flight::Flights
//! [`Flight`]: super::flight::Flight
//! [`Flight::answered`]: super::flight::Flight::answered
//! [`Flight::complete`]: super::flight::Flight::complete
//! [`Flight::observe`]: super::flight::Flight::observe

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use tokio::sync::{oneshot, watch};

use super::ledger::Ledger;
use super::message::{Arrived, AsWritten};
use super::step::{Call, Outcome};
use crate::cassette::store::{Tag, WriterHandle};
use crate::error::UpstreamFailure;
use crate::jsonrpc::RequestId;
use crate::limits::{
    MAX_RECORDED_STREAM_BYTES, MAX_SECRETS_PER_EXCHANGE, MAX_SPOTS_PER_SESSION, MAX_TRACKED_SESSIONS,
};
use crate::mcp;
use crate::model::{
    Aside, Channel, Direction, Exchange, Provenance, RawExchange, RecordedMessage, Status, StreamShape,
    canonical_json,
};
use crate::normalize::Rules;
use crate::redact;
use crate::util::{lock, printable};

/// Above this many open server→client requests, forgotten ones are swept.
const PENDING_SWEEP_AT: usize = 1024;

/// Resolves to whether an exchange (or service answer) was committed.
pub(super) type Commit = oneshot::Receiver<bool>;

/// A [`Commit`] resolved already: nothing was stored.
pub(super) fn not_stored() -> Commit {
    let (told, committed) = oneshot::channel();
    let _ = told.send(false);
    committed
}

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
pub(super) struct Spot {
    /// The exchange, while it is being recorded: asides join it.
    capture: Weak<Mutex<Option<Capture>>>,
    /// The exchange once it is queued for the writer: asides name it so.
    tag: Tag,
    after: Option<String>,
    /// When what it follows happened: offsets count from here.
    since: Instant,
    /// What the exchange's request carried that must not be stored.
    secrets: Arc<[String]>,
    /// How far the exchange's answer has come.
    answer: AnswerProgress,
}

/// How far an exchange's answer has come, watched by what the server says
/// on its own beside it: whether it came before the answer or after (by
/// when each arrived, not when each was read) and, after, when the client
/// has the answer.
pub(super) type AnswerProgress = Arc<watch::Sender<Progress>>;

/// Where an exchange's answer is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Progress {
    /// Not come from the upstream yet.
    Awaited,
    /// Come, when it arrived.
    Arrived(Arrived),
    /// Written to the client (or the client is gone); when it arrived.
    Written(Arrived),
}

impl Progress {
    /// When the answer arrived, once it has.
    pub(super) fn arrived(self) -> Option<Arrived> {
        match self {
            Progress::Awaited => None,
            Progress::Arrived(at) | Progress::Written(at) => Some(at),
        }
    }
}

/// The answer arrived at `at` (the first time it is told).
pub(super) fn answer_arrived(answer: &AnswerProgress, at: Arrived) {
    answer.send_if_modified(|progress| {
        let first = *progress == Progress::Awaited;
        if first {
            *progress = Progress::Arrived(at);
        }
        first
    });
}

/// The client has the answer, or will never get it.
pub(super) fn answer_written(answer: &AnswerProgress) {
    answer.send_modify(|progress| {
        *progress = Progress::Written(progress.arrived().unwrap_or_else(Arrived::now));
    });
}

/// A capture shared between its stream and the replies that join it;
/// `None` once taken to be stored.
pub(super) type SharedCapture = Arc<Mutex<Option<Capture>>>;

/// The recorder, shared by every connection and cloned into each stream.
#[derive(Clone)]
pub struct Recorder {
    pub(super) writer: WriterHandle,
    pub(super) rules: Arc<Rules>,
    /// Server→client requests on recorded streams, by (session, id).
    pending: Arc<Mutex<HashMap<String, PendingReply>>>,
    /// The protocol version each upstream session negotiated.
    versions: Arc<Mutex<HashMap<String, String>>>,
    /// Per session, where what the server says on its own goes.
    said: Arc<Mutex<HashMap<String, Seen>>>,
    /// The next exchange's tag.
    tags: Arc<AtomicU64>,
    /// What each stored exchange says it was recorded from.
    upstream: Arc<str>,
    /// What was forwarded to be recorded.
    ledger: Arc<Ledger>,
    /// Requests the upstream failed (each is missing from the recording),
    /// and how it failed the first.
    upstream_failures: Arc<Mutex<(u64, Option<String>)>>,
    /// Answers the client was given that are not stored.
    lost: LostAnswers,
    /// Set as the recording ends: the standalone streams relayed end then.
    ending: Arc<tokio::sync::watch::Sender<bool>>,
}

/// The answers a recording's clients were given that are not stored,
/// shared with whoever tells the run's end.
#[derive(Clone, Default)]
pub struct LostAnswers(Arc<Mutex<Lost>>);

impl LostAnswers {
    /// Those so far.
    pub fn so_far(&self) -> Lost {
        lock(&self.0).clone()
    }
}

/// Answers a client was given (whole or in part) that the cassette does
/// not hold: the run that recorded them fails, naming them.
#[derive(Clone, Default)]
pub struct Lost {
    /// How many, in all.
    pub count: u64,
    /// What each of the first [`LOST_NAMED`] was and why.
    pub named: Vec<String>,
}

/// How many lost answers a run names; the rest are counted.
const LOST_NAMED: usize = 10;

/// An exchange being recorded.
pub(super) struct Capture {
    pub(super) raw: RawExchange,
    tag: Tag,
    started: Instant,
    /// Credentials the request carried (outside its body and under
    /// credential keys in it), scrubbed before storing.
    secrets: Arc<[String]>,
    /// Bytes of asides joined so far.
    aside_bytes: usize,
    /// When each of `raw.asides` arrived: one said in flight whose answer
    /// arrived first is stored as said after it.
    aside_arrivals: Vec<Arrived>,
    /// How far the answer has come.
    pub(super) answer: AnswerProgress,
    /// The upstream session this exchange belongs to (or opens).
    pub(super) session: Option<String>,
    /// The request carried more credential values than are scrubbed
    /// ([`MAX_SECRETS_PER_EXCHANGE`]): how many; the exchange is not stored.
    too_many_secrets: Option<usize>,
}

/// What the server in one session has seen, oldest first: each exchange
/// (and client notification after one) from when it was sent on.
#[derive(Default)]
struct Seen(VecDeque<(Arrived, Spot)>);

impl Seen {
    fn push(&mut self, from: Arrived, spot: Spot) {
        if self.0.len() == MAX_SPOTS_PER_SESSION {
            self.0.pop_front();
        }
        self.0.push_back((from, spot));
    }

    fn latest(&self) -> Option<&Spot> {
        self.0.back().map(|(_, spot)| spot)
    }

    /// Where a message that arrived at `arrived` goes: after what was sent
    /// on last before it arrived. The server cannot have said it after
    /// something sent on later, though it may be heard after that was
    /// (its stream read late). Older than all kept: after the oldest.
    /// `arrived` may be the kernel's stamp and the times sent on are
    /// `SystemTime::now()`: both the system clock, read at another moment.
    fn before(&self, arrived: Arrived) -> Option<&Spot> {
        let sent_before = self.0.iter().rev().find(|(from, _)| *from <= arrived);
        sent_before.or(self.0.front()).map(|(_, spot)| spot)
    }
}

impl Capture {
    /// Adds a message, stamped with its offset from the request.
    pub(super) fn push(&mut self, direction: Direction, said: AsWritten) {
        let offset_ms = self.started.elapsed().as_millis() as u64;
        let AsWritten { body, written, shallow } = said;
        self.raw.messages.push(RecordedMessage { offset_ms, direction, body, written, shallow });
    }

    /// What the server says on its own next follows this exchange, which
    /// `shared` holds.
    pub(super) fn spot(&self, shared: &SharedCapture) -> Spot {
        Spot {
            capture: Arc::downgrade(shared),
            tag: self.tag,
            after: None,
            since: self.started,
            secrets: Arc::clone(&self.secrets),
            answer: Arc::clone(&self.answer),
        }
    }

    /// The captured request's method.
    pub(super) fn method(&self) -> &str {
        self.raw.request.get("method").and_then(Value::as_str).unwrap_or_default()
    }

    /// What it was, for a line: `METHOD on SERVER`.
    pub(super) fn shown(&self) -> String {
        format!("{} on {}", printable(self.method()), printable(&self.raw.server))
    }

    /// Logs why this capture, whose answer its client will not have, is
    /// dropped unstored.
    pub(super) fn forget(&self, why: &str) {
        tracing::warn!("{}: {why}; not stored", self.shown());
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
            upstream_failures: Arc::default(),
            lost: LostAnswers::default(),
            upstream: Arc::from(upstream),
            ledger: Arc::default(),
            ending: Arc::new(tokio::sync::watch::Sender::new(false)),
        }
    }

    /// The recording ends (its tape, or the daemon, stops): each standalone
    /// stream relayed ends now, rather than hold the end up until it is cut.
    pub fn end_streams(&self) {
        self.ending.send_replace(true);
    }

    /// Resolves once [`Recorder::end_streams`] is called.
    pub(super) fn ended(&self) -> impl Future<Output = ()> + Send + Sync + 'static {
        let mut ending = self.ending.subscribe();
        async move {
            let _ = ending.wait_for(|ending| *ending).await;
        }
    }

    /// Notes a request the upstream failed as `failure` says (refused,
    /// unreachable, silent, broken): it is missing from the recording.
    pub fn upstream_failed(&self, failure: &UpstreamFailure) {
        let mut failures = lock(&self.upstream_failures);
        failures.0 += 1;
        failures.1.get_or_insert_with(|| failure.to_string());
    }

    /// How many requests the upstream failed so far, and how it failed the first.
    pub fn upstream_failures(&self) -> (u64, Option<String>) {
        lock(&self.upstream_failures).clone()
    }

    /// Notes an answer the client was given, whole or in part, that is not
    /// stored: `what` it answered (`METHOD on SERVER`) and why.
    pub(super) fn lose(&self, what: &str, why: &str) {
        tracing::error!("{what}: {why}; the client was given it, the cassette does not hold it");
        let mut lost = lock(&self.lost.0);
        lost.count += 1;
        if lost.named.len() < LOST_NAMED {
            lost.named.push(format!("{what}: {why}"));
        }
    }

    /// The answers the client was given that are not stored.
    pub fn lost(&self) -> &LostAnswers {
        &self.lost
    }

    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// `spot` is what the server in `session` has seen last, from now.
    pub(super) fn saw(&self, session: Option<&str>, spot: Spot) {
        let session = session.unwrap_or_default();
        let from = Arrived::now();
        let mut said = lock(&self.said);
        if let Some(seen) = said.get_mut(session) {
            seen.push(from, spot);
            return;
        }
        if said.len() >= MAX_TRACKED_SESSIONS {
            said.clear();
        }
        said.entry(session.to_owned()).or_default().push(from, spot);
    }

    /// The client sent the notification `method` in `session`: what the
    /// server says on its own from now on follows it.
    pub fn notified(&self, session: Option<&str>, method: &str) {
        let mut said = lock(&self.said);
        let Some(seen) = said.get_mut(session.unwrap_or_default()) else { return };
        if let Some(mut spot) = seen.latest().cloned() {
            spot.after = Some(method.to_owned());
            spot.since = Instant::now();
            seen.push(Arrived::now(), spot);
        }
    }

    /// The server in `session` said `body` on its own (on `channel`), and it
    /// arrived at `arrived`: it is stored after what the server had seen
    /// last there when it arrived, and a request among them waits for the
    /// client's reply to join it. Before any exchange it follows none and
    /// is not stored. Returns the answer of the exchange it follows.
    pub(super) fn aside(
        &self,
        session: Option<&str>,
        channel: Channel,
        said: AsWritten,
        arrived: Arrived,
    ) -> Option<AnswerProgress> {
        let spot =
            lock(&self.said).get(session.unwrap_or_default()).and_then(|seen| seen.before(arrived)).cloned();
        let Some(spot) = spot else {
            let what = said.body.get("method").and_then(Value::as_str).unwrap_or("a message");
            tracing::debug!(
                "the server said {} on its own before any exchange in its session; relayed, not stored",
                printable(what)
            );
            return None;
        };
        if let (Some(_), Some(id)) = (said.body.get("method"), said.body.get("id")) {
            self.expect(session, id, PendingReply::Aside(spot.clone()));
        }
        self.put_aside(&spot, channel, Direction::Server, said, arrived);
        Some(spot.answer)
    }

    /// Stores one aside at `spot`, which arrived at `arrived`: said in
    /// flight (to be replayed before the answer) when its exchange's answer
    /// arrived after it, unless it follows a client notification; with its
    /// exchange while that is being recorded, else on its own, redacted and
    /// scrubbed.
    fn put_aside(
        &self,
        spot: &Spot,
        channel: Channel,
        direction: Direction,
        said: AsWritten,
        arrived: Arrived,
    ) {
        let offset_ms = spot.since.elapsed().as_millis() as u64;
        let AsWritten { body, written, shallow } = said;
        let mut message = RecordedMessage { offset_ms, direction, body, written, shallow };
        if let Some(capture) = spot.capture.upgrade()
            && let Some(capture) = lock(&capture).as_mut()
        {
            capture.aside_bytes += match (&message.written, shallow) {
                (Some(text), true) => text.len(),
                _ => canonical_json(&message.body).len(),
            };
            if capture.aside_bytes > MAX_RECORDED_STREAM_BYTES {
                tracing::warn!(
                    "what the server said on its own during {} passed {MAX_RECORDED_STREAM_BYTES} bytes; \
                     the rest is not stored",
                    printable(capture.method())
                );
                return;
            }
            // Judged again once the answer is in (commit): it may have arrived before this.
            let in_flight = spot.after.is_none();
            capture.raw.asides.push(Aside { after: spot.after.clone(), in_flight, channel, message });
            capture.aside_arrivals.push(arrived);
            return;
        }
        self.rules.redact_message(&mut message);
        redact::Scrubber::new(&spot.secrets).scrub_message(&mut message);
        let answered = spot.answer.borrow().arrived();
        let in_flight = spot.after.is_none() && answered.is_some_and(|answered| answered > arrived);
        let aside = Aside { after: spot.after.clone(), in_flight, channel, message };
        self.writer.write_asides(spot.tag, vec![aside]);
    }

    pub(super) fn capture(&self, call: &Call) -> Capture {
        self.ledger.note(call.server, call.method, call.params(), Outcome::Forwarded, None);
        let header_version = call.facts.routing.as_ref().and_then(|r| r.protocol_version.map(str::to_owned));
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
            aside_arrivals: Vec::new(),
            answer: Arc::new(watch::Sender::new(Progress::Awaited)),
            session: call.session.map(str::to_owned),
            too_many_secrets,
        }
    }

    /// Queues a finished capture for the writer, which normalizes and
    /// scrubs it on its own thread (that work grows with the exchange and
    /// its secrets; the runtime's workers go on serving meanwhile); the
    /// commit says whether it was stored.
    pub(super) fn commit(&self, capture: Capture) -> Commit {
        let Capture { mut raw, tag, secrets, session, too_many_secrets, aside_arrivals, answer, .. } =
            capture;
        // What arrived after the answer was said after it, whichever was read first.
        if let Some(answered) = answer.borrow().arrived() {
            for (aside, arrived) in raw.asides.iter_mut().zip(aside_arrivals) {
                aside.in_flight &= arrived < answered;
            }
        }
        if let Some(count) = too_many_secrets {
            tracing::warn!(
                "{} on {}: the request carried {count} credential values, more than the \
                 {MAX_SECRETS_PER_EXCHANGE} scrubbed; not stored",
                printable(raw.request.get("method").and_then(serde_json::Value::as_str).unwrap_or_default()),
                printable(&raw.server)
            );
            return not_stored();
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
                let shared = capture.upgrade();
                let mut held = shared.as_deref().map(lock);
                match held.as_deref_mut().and_then(Option::as_mut) {
                    Some(capture) => capture.push(Direction::Client, reply.into()),
                    // The server answered without waiting for it: the exchange is stored as it
                    // happened, and the reply went upstream as every reply does.
                    None => tracing::info!(
                        "the client's reply to the server's request {} came after that exchange ended: \
                         forwarded, not stored",
                        printable(id.json_text())
                    ),
                }
            }
            Some(PendingReply::Aside(spot)) => {
                self.put_aside(&spot, Channel::Standalone, Direction::Client, reply.into(), Arrived::now());
            }
            None => {}
        }
    }

    /// Remembers a server→client request seen on a recorded stream.
    pub(super) fn expect_reply(&self, capture: &SharedCapture, session: Option<&str>, id: &Value) {
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
}

fn pending_key(session: Option<&str>, id: &Value) -> String {
    format!("{}|{}", session.unwrap_or_default(), canonical_json(id))
}
