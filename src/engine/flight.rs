//! The contract between record and the front doors: for each request it
//! forwards, a door holds a [`Flight`] (from [`Recorder::flight`]) and shows
//! it what the upstream answers ([`Flight::answered`], then
//! [`Flight::complete`] for a whole answer or [`Flight::observe`] message by
//! message); what a message was comes back as [`Heard`], and a final answer
//! as a [`Held`] commit the door waits on before it sends that answer. A
//! stream carrying many exchanges (stdio) goes through [`Flights`]; a
//! session's standalone stream through a [`Listener`]; an Agent 365 service
//! endpoint's answer through a [`ServiceFlight`]. Messages travel as
//! [`AsWritten`]: parsed, with the text they came as.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, ready};

use std::time::Duration;

use serde_json::Value;
use tokio::sync::oneshot;
use tokio::time::{Instant, timeout_at};

use super::message::{Arrived, AsWritten};
use super::record::{
    AnswerProgress, Capture, Commit, Progress, Recorder, SharedCapture, answer_arrived, answer_written,
    not_stored,
};
use super::step::Call;

use crate::error::{RequestError, Unanswered};
use crate::jsonrpc::scan;
use crate::jsonrpc::{self, RequestId};
use crate::limits::{MAX_ANSWER_WRITE_WAIT, MAX_RECORDED_STREAM_BYTES};
use crate::mcp;
use crate::model::{Channel, Direction, ServiceAnswer, ServiceRoute, Status, canonical_json};
use crate::pseudonym::Scope;
use crate::redact;
use crate::util::{lock, printable};

/// How long what the server says on its own while an exchange's answer
/// has not been seen waits for that answer: the two may have arrived
/// together on two connections and the answer be read second: on a busy
/// machine, well after the other.
const ANSWER_LOOKED_FOR: Duration = Duration::from_millis(100);

/// A wait before a message of the standalone stream is relayed (see
/// [`Listener::heard`]).
pub type Wait = Pin<Box<dyn Future<Output = ()> + Send + Sync>>;

/// The flights a recorder starts.
impl Recorder {
    /// Starts recording `call`; the front door's link shows the flight the
    /// upstream's answer.
    pub fn flight(&self, call: &Call) -> Flight {
        let shared = Arc::new(Mutex::new(None));
        let capture = self.capture(call);
        let spot = capture.spot(&shared);
        *lock(&shared) = Some(capture);
        self.saw(call.session, spot);
        Flight::new(shared, self.clone(), call.id.clone())
    }

    /// What records the messages of `session`'s standalone stream.
    pub fn listener(&self, session: Option<&str>) -> Listener {
        Listener::new(self.clone(), session.map(str::to_owned))
    }

    /// Starts recording an Agent 365 service endpoint's answer, for a
    /// request that carried `credentials`.
    pub fn service(&self, route: ServiceRoute, credentials: Vec<String>) -> ServiceFlight {
        ServiceFlight::new(self.clone(), route, credentials)
    }
}

/// The recording of what a session's standalone stream (GET) carries:
/// each request or notification on it is an aside (`Recorder::aside`).
pub struct Listener {
    recorder: Recorder,
    session: Option<String>,
}

impl Listener {
    pub(super) fn new(recorder: Recorder, session: Option<String>) -> Listener {
        Listener { recorder, session }
    }

    /// One event's data from the stream, which arrived at `arrived`. When
    /// the answer of the exchange it follows arrived before it and the
    /// client does not have that answer yet (it waits for its commit), the
    /// door waits before relaying it (and what comes after it), so that
    /// the client hears the two in the order the server said them: for
    /// `ANSWER_LOOKED_FOR` while that answer has not been seen, then
    /// until the answer has been written, [`MAX_ANSWER_WRITE_WAIT`] at most.
    pub fn heard(&self, data: &str, arrived: Option<Arrived>) -> Option<Wait> {
        let said = AsWritten::read(data)?;
        said.body.get("method")?;
        let arrived = arrived.unwrap_or_else(Arrived::now);
        let answer = self.recorder.aside(self.session.as_deref(), Channel::Standalone, said, arrived)?;
        after_its_answer(answer, arrived)
    }

    /// Resolves once the recording ends: the stream ends with it.
    pub fn ended(&self) -> impl Future<Output = ()> + Send + Sync + 'static {
        self.recorder.ended()
    }
}

/// What a message that arrived at `arrived` waits for, beside the exchange
/// whose answer is `answer` (see [`Listener::heard`]); `None` when the
/// answer came after it or has been written.
fn after_its_answer(answer: AnswerProgress, arrived: Arrived) -> Option<Wait> {
    match *answer.borrow() {
        Progress::Written(_) => return None,
        Progress::Arrived(at) if at > arrived => return None,
        _ => {}
    }
    let now = Instant::now();
    let (looked_for, held) = (now + ANSWER_LOOKED_FOR, now + MAX_ANSWER_WRITE_WAIT);
    let mut progress = answer.subscribe();
    Some(Box::pin(async move {
        let _ = timeout_at(looked_for, progress.wait_for(|p| *p != Progress::Awaited)).await;
        let came_first = progress.borrow().arrived().is_some_and(|at| at <= arrived);
        if came_first {
            let _ = timeout_at(held, progress.wait_for(|p| matches!(p, Progress::Written(_)))).await;
        }
    }))
}

/// The recording of one Agent 365 service endpoint's answer.
pub struct ServiceFlight {
    recorder: Recorder,
    route: ServiceRoute,
    credentials: Vec<String>,
}

impl ServiceFlight {
    pub(super) fn new(recorder: Recorder, route: ServiceRoute, credentials: Vec<String>) -> ServiceFlight {
        ServiceFlight { recorder, route, credentials }
    }

    /// Stores a successful answer (`body` as received), redacted, scrubbed
    /// of the request's credentials and pseudonymized when the rules say
    /// so (what was found so far; nothing is learned from it); `upstream` is the origin it
    /// came from. The front door sends the answer once the held commit
    /// resolves.
    pub fn complete(self, upstream: String, status: Status, content_type: &str, body: &[u8]) -> Held {
        let rules = &self.recorder.rules;
        let body = match serde_json::from_slice::<Value>(body) {
            Ok(mut json) => {
                rules.redact(&mut json);
                redact::scrub(&mut json, &self.credentials);
                if let Some(pseudonyms) = rules.pseudonyms() {
                    pseudonyms.pseudonymize(&mut json, Scope::Data);
                }
                scan::rewrite(&String::from_utf8_lossy(body), &json)
            }
            Err(_) => {
                let text = redact::scrub_str(&String::from_utf8_lossy(body), &self.credentials);
                match rules.pseudonyms() {
                    Some(pseudonyms) => pseudonyms.pseudonymize_text(&text),
                    None => text,
                }
            }
        };
        let route = self.route;
        let answer = ServiceAnswer { route, upstream, status, content_type: content_type.to_owned(), body };
        Held::stored(self.recorder.writer.write_service(answer))
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
    /// stored (the run fails naming it); relay the rest without showing it here.
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

impl Held {
    /// The commit of an entry that is not JSON-RPC (a service answer, a
    /// model exchange): no id to answer with.
    pub(super) fn stored(committed: Commit) -> Held {
        Held { committed, id: None }
    }
}

impl Future for Held {
    type Output = Result<(), RequestError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // Not committed (the writer logged why): the client learns it
        // instead of an answer the cassette does not hold.
        let stored = ready!(Pin::new(&mut self.committed).poll(cx)).unwrap_or(false);
        Poll::Ready(match stored {
            true => Ok(()),
            false => Err(RequestError { fault: Box::new(Unanswered::NotStored), id: self.id.take() }),
        })
    }
}

impl Flight {
    pub(super) fn new(capture: SharedCapture, recorder: Recorder, request_id: RequestId) -> Flight {
        Flight { capture, recorder, captured_bytes: 0, request_id }
    }

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

    /// A sender the door fires once the answer has been written to the
    /// client (dropped when it never will be): what the server said after
    /// the answer waits for it ([`Listener::heard`]).
    pub fn when_written(&self) -> oneshot::Sender<()> {
        let (written, told) = oneshot::channel();
        if let Some(answer) =
            lock(&self.capture).as_ref().map(|capture| AnswerProgress::clone(&capture.answer))
        {
            tokio::spawn(async move {
                let _ = told.await;
                answer_written(&answer);
            });
        }
        written
    }

    /// The whole answer came as one message, which arrived at `arrived`:
    /// the exchange is complete, whatever id the message carries.
    pub fn complete(self, message: AsWritten, arrived: Option<Arrived>) -> Held {
        let mut slot = lock(&self.capture);
        if let Some(capture) = slot.as_mut() {
            answer_arrived(&capture.answer, arrived.unwrap_or_else(Arrived::now));
            capture.push(Direction::Server, message);
        }
        let committed = self.commit_taken(slot).unwrap_or_else(not_stored);
        Held { committed, id: Some(self.request_id.clone()) }
    }

    /// Takes the capture out of `slot` and queues it for the writer before
    /// `slot` is unlocked: what the server says on its own meanwhile waits,
    /// then finds the capture gone and follows its exchange to the writer
    /// (before it, the writer would know no row for it and drop it). `None`
    /// when the capture was taken already.
    fn commit_taken(&self, mut slot: MutexGuard<'_, Option<Capture>>) -> Option<Commit> {
        let capture = slot.take()?;
        let committed = self.recorder.commit(capture);
        drop(slot);
        Some(committed)
    }

    /// Shows the flight one relayed message's data (an SSE event's), which
    /// arrived at `arrived`.
    pub fn observe(&mut self, data: &str, arrived: Option<Arrived>) -> Heard {
        if data.is_empty() {
            return Heard::Message;
        }
        if !self.within_bound(data.len()) {
            return Heard::Dropped;
        }
        let Some(said) = AsWritten::read(data) else {
            self.abandon("a message of the answer is not JSON");
            return Heard::Dropped;
        };
        self.take(said, arrived.unwrap_or_else(Arrived::now))
    }

    /// Shows the flight one relayed message the front door has parsed
    /// already (`bytes` long as relayed).
    pub fn observe_message(&mut self, said: AsWritten, bytes: usize) -> Heard {
        if !self.within_bound(bytes) {
            return Heard::Dropped;
        }
        self.take(said, Arrived::now())
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

    /// Records one message of the answer, which arrived at `arrived`; the
    /// final one completes it.
    fn take(&mut self, said: AsWritten, arrived: Arrived) -> Heard {
        let mut guard = lock(&self.capture);
        let Some(capture) = guard.as_mut() else { return Heard::Message };
        let body = &said.body;
        if capture.method() == "subscriptions/listen" && is_change_notification(body) {
            // What the subscription carries follows the call that changed something.
            let session = capture.session.clone();
            drop(guard);
            self.recorder.aside(session.as_deref(), Channel::Subscription, said, arrived);
            return Heard::Message;
        }
        if let (Some(_), Some(id)) = (body.get("method"), body.get("id")) {
            self.recorder.expect_reply(&self.capture, capture.session.as_deref(), id);
        }
        let is_final = body.get("method").is_none()
            && body.get("id").is_some_and(|id| jsonrpc::answers(id, self.request_id.as_value()));
        capture.push(Direction::Server, said);
        if !is_final {
            return Heard::Message;
        }
        answer_arrived(&capture.answer, arrived);
        let Some(committed) = self.commit_taken(guard) else { return Heard::Message };
        Heard::Final(Held { committed, id: Some(self.request_id.clone()) })
    }

    /// What the client was given of the answer, whole or in part, cannot
    /// be stored (`why`): nothing of it is, and the run fails naming it
    /// ([`Recorder::lost`]).
    pub fn abandon(&self, why: &str) {
        if let Some(capture) = lock(&self.capture).take() {
            self.recorder.lose(&capture.shown(), why);
        }
    }

    /// The client will not have the answer (`why`: it went away, or
    /// gave up on it): nothing of it is stored, and the log says so.
    pub fn forget(&self, why: &str) {
        if let Some(capture) = lock(&self.capture).take() {
            capture.forget(why);
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
            earlier.forget("a new request reused its id before the answer");
        }
        self.order.retain(|open| *open != id);
        self.order.push(id);
    }

    /// One JSON-RPC message from the server (`bytes` long as relayed): an
    /// answer goes to the flight of its request (by id), a progress
    /// notification to the request with its token, anything else the
    /// server says (log notifications, server→client requests) to the
    /// request sent last while one is open, else it is an aside
    /// (`Recorder::aside`).
    pub fn heard(&mut self, message: AsWritten, bytes: usize) -> Heard {
        let is_answer = message.body.get("method").is_none();
        let Some(id) = message.body.get("id").filter(|_| is_answer) else {
            if let Some(flight) = self.owner(&message.body) {
                return flight.observe_message(message, bytes);
            }
            if let Some((recorder, session)) = &self.said {
                recorder.aside(session.as_deref(), Channel::Standalone, message, Arrived::now());
            }
            return Heard::Message;
        };
        let flight = match self.remove(&canonical_json(id)) {
            None => jsonrpc::id_retyped(id).and_then(|other| self.remove(&canonical_json(&other))),
            found => found,
        };
        match flight {
            Some(mut flight) => flight.observe_message(message, bytes),
            None => Heard::Message,
        }
    }

    /// The stream ended (`why`): flights still open store nothing (their
    /// answers never came, so the client was given none of them).
    pub fn close(&mut self, why: &str) {
        self.order.clear();
        self.tokens.clear();
        for (_, flight) in self.open.drain() {
            flight.forget(why);
        }
    }

    /// The server wrote `shown`, a line that looks like JSON but that
    /// serde_json does not read: relayed, so the run fails naming it.
    pub fn unreadable(&self, shown: &str) {
        if let Some((recorder, _)) = &self.said {
            let what = format!("a line of the stdio server ({})", printable(shown));
            recorder.lose(&what, "it is not JSON that can be stored as written");
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use serde_json::json;
    use tokio::sync::watch;

    use super::*;
    use crate::cassette::store::{Cassette, Writer};
    use crate::engine::record::{Progress, Recorder};
    use crate::engine::{Call, Facts};
    use crate::jsonrpc::RequestId;
    use crate::model::{Channel, Era};
    use crate::normalize::Rules;

    fn answer(progress: Progress) -> AnswerProgress {
        Arc::new(watch::Sender::new(progress))
    }

    #[tokio::test]
    async fn a_message_waits_only_for_an_answer_that_came_before_it_and_is_not_written() {
        let (before, it, after) = (Arrived::at(10), Arrived::at(20), Arrived::at(30));
        assert!(after_its_answer(answer(Progress::Arrived(after)), it).is_none(), "said in flight");
        assert!(after_its_answer(answer(Progress::Written(before)), it).is_none(), "the client has it");

        let came_first = answer(Progress::Arrived(before));
        let mut wait =
            after_its_answer(AnswerProgress::clone(&came_first), it).expect("waits for the answer");
        assert!(futures_poll(&mut wait).is_pending());
        answer_written(&came_first);
        wait.await;

        // Not seen yet: looked for a while, then it came after all, second.
        let awaited = answer(Progress::Awaited);
        let wait = after_its_answer(AnswerProgress::clone(&awaited), it).expect("looks for the answer");
        answer_arrived(&awaited, after);
        wait.await;
    }

    /// What the server says on its own just as an exchange's answer comes
    /// (whole, or as a stream's last event) is stored after that exchange,
    /// whichever of the two is handled first: an aside handled while the
    /// answer's capture was taken but not yet queued once reached the
    /// cassette's writer before its exchange, which dropped it (a log
    /// message lost from a recording: before the fix, 7 to 12 of these
    /// 6,000 in each run).
    #[test]
    fn an_aside_heard_as_its_exchange_completes_is_stored() {
        const CALLS: i64 = 6000;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("asides.sqlite");
        let writer = Writer::start(Cassette::open(&path).unwrap()).unwrap();
        let recorder = Recorder::new(writer.handle(), Rules::default(), "test");
        let facts = Facts::default();
        for n in 0..CALLS {
            let id = RequestId::from_value(&json!(n)).unwrap();
            let (server, era, session, method) = ("mcp_A", Era::Handshake, Some("s"), "tools/call");
            let call = Call { server, era, session, id: &id, method, params: None, facts: &facts };
            let flight = recorder.flight(&call);
            let go = Arc::new(AtomicBool::new(false));
            let aside = {
                let (recorder, go) = (recorder.clone(), Arc::clone(&go));
                std::thread::spawn(move || {
                    let said =
                        json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": n}});
                    while !go.load(Ordering::Acquire) {
                        std::hint::spin_loop();
                    }
                    // Later each call by a pause or so, from before the answer is taken to after it is queued.
                    for _ in 0..n / 2 % 300 {
                        std::hint::spin_loop();
                    }
                    recorder.aside(session, Channel::Standalone, AsWritten::from(said), Arrived::now());
                })
            };
            go.store(true, Ordering::Release);
            let answer = json!({"jsonrpc": "2.0", "id": n, "result": {}});
            // A whole answer, or the last event of a stream.
            if n % 2 == 0 {
                drop(flight.complete(AsWritten::from(answer), None));
            } else {
                let mut flight = flight;
                assert!(matches!(flight.observe(&answer.to_string(), None), Heard::Final(_)));
            }
            aside.join().unwrap();
        }
        drop(recorder);
        writer.finish();
        let stored = rusqlite::Connection::open(&path).unwrap();
        let count = |table: &str| -> i64 {
            stored.query_row(&format!("SELECT count(*) FROM {table}"), [], |row| row.get(0)).unwrap()
        };
        assert_eq!((count("exchange"), count("aside")), (CALLS, CALLS));
    }

    /// A log message the server wrote just after `resources/unsubscribe`'s
    /// answer, on the GET stream, is heard only once the client's next
    /// request (`ping`) has been sent on: it still follows `unsubscribe`,
    /// which the client has, and is relayed at once. Heard as `ping`'s, it
    /// was held for `ping`'s answer and reached the client after it (issue
    /// 74's "stream order: through record" failure on a busy machine).
    #[tokio::test]
    async fn a_message_heard_after_the_next_request_went_follows_the_exchange_it_arrived_after() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("late.sqlite");
        let writer = Writer::start(Cassette::open(&path).unwrap()).unwrap();
        let recorder = Recorder::new(writer.handle(), Rules::default(), "test");
        let facts = Facts::default();
        let send = |n: i64, method| {
            let id = RequestId::from_value(&json!(n)).unwrap();
            let (server, era, session) = ("mcp_A", Era::Handshake, Some("s"));
            recorder.flight(&Call { server, era, session, id: &id, method, params: None, facts: &facts })
        };

        let unsubscribe = send(1, "resources/unsubscribe");
        let progress = lock(&unsubscribe.capture).as_ref().map(|c| AnswerProgress::clone(&c.answer)).unwrap();
        let held =
            unsubscribe.complete(AsWritten::from(json!({"jsonrpc": "2.0", "id": 1, "result": {}})), None);
        held.await.unwrap();
        answer_written(&progress);
        let log_arrived = Arrived::now();
        let ping = send(2, "ping");

        let log =
            json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": "unsubscribed"}});
        let listener = recorder.listener(Some("s"));
        assert!(listener.heard(&log.to_string(), Some(log_arrived)).is_none(), "held for ping's answer");
        ping.complete(AsWritten::from(json!({"jsonrpc": "2.0", "id": 2, "result": {}})), None).await.unwrap();
        drop((listener, recorder));
        writer.finish();

        let stored = rusqlite::Connection::open(&path).unwrap();
        let follows: Vec<(String, bool)> = stored
            .prepare("SELECT e.method, a.in_flight FROM aside a JOIN exchange e ON e.id = a.exchange_id")
            .unwrap()
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(follows, [("resources/unsubscribe".to_owned(), false)]);
    }

    fn futures_poll(wait: &mut Wait) -> Poll<()> {
        let waker = std::task::Waker::noop();
        wait.as_mut().poll(&mut Context::from_waker(waker))
    }
}
