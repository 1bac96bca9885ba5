//! What a replayed server says on its own: the asides a recording holds
//! after an exchange ([`Asides`]), each replay session's standalone
//! stream they go out on ([`Standalone`]), and the stateless era's open
//! `subscriptions/listen` streams ([`Subscriptions`]), which get the change
//! notifications the recording shows after a call, each stream those of
//! the kinds it asked for and the recorded server declared ([`Kinds`]).
//!
//! An aside goes with the exchange's answer (before it when the server said
//! it while the exchange was in flight, else after it: a stdio front door
//! writes it on its one stream, an HTTP one puts it on the session's GET
//! stream) or follows a client notification after that answer (it is armed
//! in the session and goes when the client sends that notification).
//! On HTTP, what is said before the client opens its GET stream is held for
//! it, at most [`MAX_HELD_ASIDES`] messages; what a session that ends still holds
//! is dropped with a debug line.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use super::reenact::{Emit, KEEPALIVE_INTERVAL};
use super::step::Outgoing;
use crate::cassette::tape::{ServedAside, ServedMessage};
use crate::jsonrpc::scan;
use crate::limits::{MAX_HELD_ASIDES, MAX_SESSIONS};
use crate::mcp::META_SUBSCRIPTION_ID;
use crate::model::{Channel, Direction};
use crate::util::lock;

/// The asides of one replayed exchange.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Asides {
    /// Sent before the answer: said while the exchange was in flight.
    pub first: Vec<Outgoing>,
    /// Sent after the answer.
    pub now: Vec<Outgoing>,
    /// Sent when the client sends the notification named first.
    pub armed: Vec<(Box<str>, Outgoing)>,
    /// Sent on the server's open subscription streams.
    pub subscribed: Vec<Outgoing>,
}

impl Asides {
    /// The server's asides of a recording, each server→client request the
    /// recording shows answered marked as awaiting the client's reply.
    pub fn of(asides: &[ServedAside]) -> Asides {
        let mut out = Asides::default();
        if asides.is_empty() {
            return out;
        }
        let replied = ServedMessage::replied(asides.iter().map(|a| &a.message));
        for aside in asides.iter().filter(|a| a.message.direction == Direction::Server) {
            let message = &aside.message;
            let outgoing = Outgoing {
                json: message.json.to_string(),
                is_answer: false,
                offset_ms: message.offset_ms,
                awaits_reply: message.awaits_reply(&replied),
            };
            match (aside.channel, &aside.after) {
                (Channel::Subscription, _) => out.subscribed.push(outgoing),
                (Channel::Standalone, None) if aside.in_flight => out.first.push(outgoing),
                (Channel::Standalone, None) => out.now.push(outgoing),
                (Channel::Standalone, Some(method)) => out.armed.push((method.clone(), outgoing)),
            }
        }
        out
    }
}

/// One replay session's standalone stream and what waits for it.
#[derive(Default)]
pub struct Standalone {
    /// Waiting for a client notification.
    armed: Vec<(Box<str>, Outgoing)>,
    /// Said while no GET stream was open to take it (JSON text).
    held: VecDeque<String>,
    /// The open GET stream.
    stream: Option<mpsc::Sender<Emit>>,
    /// Fires once what was said after the last answer is on the client's
    /// connection: the session's next answer waits for it.
    unwritten: Option<oneshot::Receiver<()>>,
}

impl Standalone {
    /// Arms `armed` in place of what waited before.
    pub fn arm(&mut self, armed: Vec<(Box<str>, Outgoing)>) {
        self.armed = armed;
    }

    /// The client sent the notification `method`: what waited for it.
    pub fn notified(&mut self, method: &str) -> Vec<Outgoing> {
        if self.armed.is_empty() {
            return Vec::new();
        }
        let (due, waiting) =
            std::mem::take(&mut self.armed).into_iter().partition(|(after, _)| **after == *method);
        self.armed = waiting;
        due.into_iter().map(|(_, message)| message).collect()
    }

    /// Sends `messages` on the GET stream, or holds them until one opens.
    pub fn say(&mut self, messages: Vec<Outgoing>) {
        for message in messages {
            self.emit(Emit::Message(message.json));
        }
    }

    /// Puts `emit` on the GET stream, or holds what it says until one opens
    /// (or until what is held before it has gone).
    fn emit(&mut self, emit: Emit) {
        let Some(stream) = self.stream.as_ref().filter(|_| self.held.is_empty()) else {
            self.hold_emitted(emit);
            return;
        };
        match stream.try_send(emit) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(emit)) => self.hold_emitted(emit),
            Err(mpsc::error::TrySendError::Closed(emit)) => {
                self.stream = None; // the client went away
                self.hold_emitted(emit);
            }
        }
    }

    /// [`Standalone::say`], and when the open stream took `messages`, what
    /// fires once they have been written to the client's connection.
    pub fn say_before(&mut self, messages: Vec<Outgoing>) -> Option<oneshot::Receiver<()>> {
        self.say(messages);
        self.when_written()
    }

    /// [`Standalone::say`] once the answer they follow has been written:
    /// when `answered` fires (or is dropped), if the open stream took them.
    /// The session's next answer waits until they are out (see
    /// [`Standalone::unwritten`]): it follows them in the recording.
    pub fn say_after(&mut self, messages: Vec<Outgoing>, answered: oneshot::Receiver<()>) {
        self.emit(Emit::After { answered, messages: messages.into_iter().map(|m| m.json).collect() });
        self.unwritten = self.when_written();
    }

    /// What fires once what the open stream took so far has been written
    /// to the client's connection (`None` with no stream taking it).
    fn when_written(&self) -> Option<oneshot::Receiver<()>> {
        let stream = self.stream.as_ref().filter(|_| self.held.is_empty())?;
        let (written, told) = oneshot::channel();
        stream.try_send(Emit::Written(written)).ok()?;
        Some(told)
    }

    /// What was said after the last answer and is not yet on the client's
    /// connection: what fires once it is (`None` when it is out already).
    pub fn unwritten(&mut self) -> Option<oneshot::Receiver<()>> {
        let mut unwritten = self.unwritten.take()?;
        match unwritten.try_recv() {
            Err(oneshot::error::TryRecvError::Empty) => Some(unwritten),
            Ok(()) | Err(oneshot::error::TryRecvError::Closed) => None,
        }
    }

    fn hold_emitted(&mut self, emit: Emit) {
        match emit {
            Emit::Message(json) => self.hold(json),
            Emit::After { messages, .. } => messages.into_iter().for_each(|message| self.hold(message)),
            Emit::KeepAlive | Emit::Written(_) => {}
        }
    }

    fn hold(&mut self, message: String) {
        if self.held.len() >= MAX_HELD_ASIDES {
            self.held.pop_front();
            tracing::debug!(
                "more than {MAX_HELD_ASIDES} messages held for a GET stream no client opened: the oldest dropped"
            );
        }
        self.held.push_back(message);
    }

    /// Opens the session's GET stream (in place of one open before): what
    /// was held goes first, keep-alives follow until the client goes.
    pub fn open(&mut self) -> mpsc::Receiver<Emit> {
        let (stream, receiver) = mpsc::channel(MAX_HELD_ASIDES);
        for message in self.held.drain(..) {
            // The channel has room for everything held.
            let _ = stream.try_send(Emit::Message(message));
        }
        let alive = stream.downgrade();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(KEEPALIVE_INTERVAL).await;
                let Some(stream) = alive.upgrade() else { return }; // closed
                if stream.send(Emit::KeepAlive).await.is_err() {
                    return; // the client went away
                }
            }
        });
        self.stream = Some(stream);
        receiver
    }

    /// Ends the open GET stream, if any (what is held stays held).
    pub fn close(&mut self) {
        self.stream = None;
    }

    /// The session ends: what is still held or armed goes nowhere.
    pub fn end(self) {
        let unsent = self.held.len() + self.armed.len();
        if unsent > 0 {
            tracing::debug!(
                "the session ended with {unsent} message(s) the server said on its own still unsent: dropped"
            );
        }
    }
}

/// The change notifications a `subscriptions/listen` stream gets: those it
/// asked for that the recorded server declared it sends.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Kinds {
    tools: bool,
    prompts: bool,
    resources: bool,
}

/// Each kind: its filter field, its capability, its notification.
const KINDS: [(&str, &str, &str); 3] = [
    ("toolsListChanged", "tools", "notifications/tools/list_changed"),
    ("promptsListChanged", "prompts", "notifications/prompts/list_changed"),
    ("resourcesListChanged", "resources", "notifications/resources/list_changed"),
];

impl Kinds {
    /// What `requested` (the listen request's `notifications`) asks for of
    /// what `declared` (the server's capabilities) offers (`listChanged`).
    pub fn honoured(requested: Option<&Value>, declared: Option<&Value>) -> Kinds {
        let mut kinds = Kinds::default();
        for (n, (field, capability, _)) in KINDS.iter().enumerate() {
            let asked = requested.and_then(|r| r.get(field)) == Some(&Value::Bool(true));
            let offered = declared.and_then(|d| d.get(capability)).and_then(|c| c.get("listChanged"))
                == Some(&Value::Bool(true));
            *kinds.slot(n) = asked && offered;
        }
        kinds
    }

    fn slot(&mut self, n: usize) -> &mut bool {
        match n {
            0 => &mut self.tools,
            1 => &mut self.prompts,
            _ => &mut self.resources,
        }
    }

    fn all(self) -> [bool; 3] {
        [self.tools, self.prompts, self.resources]
    }

    pub fn is_empty(self) -> bool {
        self.all() == [false; 3]
    }

    /// As an acknowledgement's `notifications`: the honoured fields, `true`.
    pub fn to_json(self) -> Value {
        let honoured =
            KINDS.iter().zip(self.all()).filter(|(_, on)| *on).map(|((field, ..), _)| (*field, true));
        Value::Object(honoured.map(|(field, on)| (field.to_owned(), Value::Bool(on))).collect())
    }

    /// Whether a notification of `method` is one of these kinds.
    fn takes(self, method: &str) -> bool {
        KINDS.iter().zip(self.all()).any(|((.., notification), on)| on && *notification == method)
    }
}

/// One open `subscriptions/listen` stream.
struct Listening {
    /// Its subscription id: the listen request's id.
    id: Value,
    kinds: Kinds,
    feed: mpsc::Sender<String>,
}

/// The open `subscriptions/listen` streams, by server; at most
/// [`MAX_SESSIONS`], past it the closed ones go, then the oldest.
#[derive(Default)]
pub struct Subscriptions(Mutex<HashMap<String, Vec<Listening>>>);

impl Subscriptions {
    /// Opens a stream of `server` for `kinds`, subscription `id`: what the
    /// returned receiver gets.
    pub fn open(&self, server: &str, id: Value, kinds: Kinds) -> Feed {
        let (feed, fed) = mpsc::channel(MAX_HELD_ASIDES);
        let mut open = lock(&self.0);
        if open.values().map(Vec::len).sum::<usize>() >= MAX_SESSIONS {
            open.values_mut().for_each(|streams| streams.retain(|s| !s.feed.is_closed()));
            open.retain(|_, streams| !streams.is_empty());
        }
        let streams = open.entry(server.to_owned()).or_default();
        if streams.len() >= MAX_SESSIONS {
            streams.remove(0);
        }
        streams.push(Listening { id, kinds, feed });
        Feed(Arc::new(Mutex::new(Some(fed))))
    }

    /// Sends `messages` (change notifications) to each open stream of
    /// `server` that takes their kind, stamped with its subscription id.
    pub fn publish(&self, server: &str, messages: &[Outgoing]) {
        let mut open = lock(&self.0);
        let Some(streams) = open.get_mut(server) else {
            tracing::debug!(
                "{} change notification(s) with no subscription stream open: dropped",
                messages.len()
            );
            return;
        };
        streams.retain(|s| !s.feed.is_closed());
        for message in messages {
            // Stamped with a stream's id, so read; one serde_json does not read is not sent.
            let Some(mut body) = message.parsed() else { continue };
            let Some(method) = body.get("method").and_then(Value::as_str).map(str::to_owned) else {
                continue;
            };
            for stream in streams.iter().filter(|s| s.kinds.takes(&method)) {
                if !body.get("params").is_some_and(Value::is_object) {
                    body["params"] = json!({});
                }
                body["params"]["_meta"][META_SUBSCRIPTION_ID] = stream.id.clone();
                // A stream that does not keep up misses it, as from a server whose queue is full.
                let _ = stream.feed.try_send(scan::rewrite(&message.json, &body));
            }
        }
    }
}

/// The receiving end of a subscription stream, handed from the engine to
/// the front door that streams it (taken once).
#[derive(Clone)]
pub struct Feed(Arc<Mutex<Option<mpsc::Receiver<String>>>>);

impl Feed {
    pub fn take(&self) -> Option<mpsc::Receiver<String>> {
        lock(&self.0).take()
    }
}

impl std::fmt::Debug for Feed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Feed")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn said(text: &str) -> Outgoing {
        Outgoing { json: text.into(), is_answer: false, offset_ms: 0, awaits_reply: None }
    }

    /// What comes before an answer is followed on the stream by what the
    /// answer waits for; what comes after it waits for the answer; with no
    /// stream open both are held, in order, and nothing waits.
    #[tokio::test]
    async fn before_and_after_an_answer_are_ordered_on_the_stream() {
        let mut standalone = Standalone::default();
        assert!(standalone.say_before(vec![said("held")]).is_none(), "no stream: nothing to wait for");
        let (answered, told) = oneshot::channel();
        standalone.say_after(vec![said("held after")], told);
        assert!(standalone.unwritten().is_none(), "held: the next answer does not wait");
        drop(answered);
        let mut stream = standalone.open();
        assert_eq!(stream.recv().await.and_then(Emit::message).as_deref(), Some("held"));
        assert_eq!(stream.recv().await.and_then(Emit::message).as_deref(), Some("held after"));

        let written = standalone.say_before(vec![said("before")]).expect("the open stream took it");
        assert_eq!(stream.recv().await.and_then(Emit::message).as_deref(), Some("before"));
        let Some(Emit::Written(ack)) = stream.recv().await else { panic!("no mark after the message") };
        ack.send(()).unwrap();
        written.await.expect("the answer is told");

        let (answered, told) = oneshot::channel();
        standalone.say_after(vec![said("after")], told);
        let Some(Emit::After { answered: waits, messages }) = stream.recv().await else {
            panic!("not held for the answer")
        };
        assert_eq!(messages, ["after"]);
        let mut next = standalone.unwritten().expect("the next answer waits for what came after this one");
        assert!(next.try_recv().is_err(), "not written yet");
        answered.send(()).unwrap();
        waits.await.expect("told once the answer is written");
        let Some(Emit::Written(ack)) = stream.recv().await else { panic!("no mark after what followed") };
        ack.send(()).unwrap();
        next.await.expect("the next answer is told");
        assert!(standalone.unwritten().is_none(), "taken once");
    }

    #[tokio::test]
    async fn held_until_the_stream_opens_then_sent_as_said() {
        let mut standalone = Standalone::default();
        standalone.say(vec![said("one")]);
        let mut stream = standalone.open();
        standalone.say(vec![said("two")]);
        assert_eq!(stream.recv().await.and_then(Emit::message).as_deref(), Some("one"));
        assert_eq!(stream.recv().await.and_then(Emit::message).as_deref(), Some("two"));
        drop(stream);
        standalone.say(vec![said("three")]);
        let mut again = standalone.open();
        assert_eq!(
            again.recv().await.and_then(Emit::message).as_deref(),
            Some("three"),
            "held for the next stream"
        );
        standalone.close();
        assert!(again.recv().await.is_none(), "closed: the stream ends");
    }

    #[tokio::test]
    async fn held_messages_are_bounded_oldest_first() {
        let mut standalone = Standalone::default();
        standalone.say((0..MAX_HELD_ASIDES + 2).map(|n| said(&n.to_string())).collect());
        let mut stream = standalone.open();
        assert_eq!(stream.recv().await.and_then(Emit::message).as_deref(), Some("2"));
    }

    #[tokio::test]
    async fn a_subscription_gets_the_kinds_it_asked_for_that_the_server_declared() {
        let declared =
            json!({"tools": {"listChanged": true}, "prompts": {"listChanged": true}, "resources": {}});
        let asked =
            json!({"toolsListChanged": true, "resourcesListChanged": true, "promptsListChanged": false});
        let kinds = Kinds::honoured(Some(&asked), Some(&declared));
        assert_eq!(kinds.to_json(), json!({"toolsListChanged": true}), "resources were not declared");
        let subscriptions = Subscriptions::default();
        let mut tools = subscriptions.open("s", json!(7), kinds).take().unwrap();
        let prompts_only = Kinds::honoured(Some(&json!({"promptsListChanged": true})), Some(&declared));
        let mut prompts = subscriptions.open("s", json!("p"), prompts_only).take().unwrap();
        let changed = said(
            r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":1}}}"#,
        );
        subscriptions.publish("s", &[changed]);
        let got: Value = serde_json::from_str(&tools.recv().await.unwrap()).unwrap();
        assert_eq!(got["params"]["_meta"][META_SUBSCRIPTION_ID], json!(7), "its own subscription id");
        assert!(prompts.try_recv().is_err(), "a stream that did not ask for tools gets none");
    }

    #[test]
    fn armed_messages_wait_for_their_notification() {
        let mut standalone = Standalone::default();
        standalone.arm(vec![("notifications/initialized".into(), said("changed"))]);
        assert!(standalone.notified("notifications/cancelled").is_empty());
        assert_eq!(standalone.notified("notifications/initialized"), vec![said("changed")]);
        assert!(standalone.notified("notifications/initialized").is_empty(), "once");
    }
}
