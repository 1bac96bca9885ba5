//! Sending a replayed answer the way it happened: each message at its
//! recorded offset if asked (`--pace recorded`), and after a re-enacted
//! server→client request, nothing more until the client's reply arrives
//! ([`Replies`]); a stream held open (`subscriptions/listen`) then gets
//! what its feed sends, and keep-alives, until the client goes. The front door frames what comes out
//! ([`Emit`]): SSE events over HTTP, lines over stdio.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use super::step::Outgoing;
use crate::config::Pace;
use crate::model::canonical_json;
use crate::util::lock;

/// How long a replayed stream waits for the client's reply to a re-enacted
/// server→client request before it gives up and ends.
pub const REPLY_WAIT: Duration = Duration::from_secs(60);

/// How often a stream held open (`subscriptions/listen`) sends a
/// keep-alive, which is also how soon it notices that the client has gone.
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(15);

/// Server→client requests on replayed streams, waiting for the client's
/// reply, by (session, request id).
#[derive(Default)]
pub struct Replies(Mutex<HashMap<String, oneshot::Sender<()>>>);

impl Replies {
    fn key(session: Option<&str>, id: &Value) -> String {
        format!("{}|{}", session.unwrap_or_default(), canonical_json(id))
    }

    /// Registers a request about to be sent; the receiver fires when the
    /// client's reply arrives.
    pub fn expect(&self, session: Option<&str>, id: &Value) -> oneshot::Receiver<()> {
        let (arrived, receiver) = oneshot::channel();
        lock(&self.0).insert(Replies::key(session, id), arrived);
        receiver
    }

    /// The client replied to `id`; false if nothing was waiting for it.
    pub fn arrived(&self, session: Option<&str>, id: &Value) -> bool {
        lock(&self.0).remove(&Replies::key(session, id)).is_some_and(|waiting| waiting.send(()).is_ok())
    }
}

/// What a re-enacted answer needs besides its messages.
pub struct Live {
    pub replies: Arc<Replies>,
    /// The session the client's replies come in on.
    pub session: Option<String>,
    pub pace: Pace,
    /// The least time between two messages (unpaced): a front door whose
    /// clients read a byte stream wants each message to arrive on its own.
    pub gap: Duration,
    /// How long before the first message (a fault's delay).
    pub delay: Duration,
    /// What a stream held open sends besides keep-alives.
    pub feed: Option<mpsc::Receiver<String>>,
}

impl Live {
    /// The same, waiting `delay` before the first message.
    pub fn after(self, delay: Duration) -> Live {
        Live { delay, ..self }
    }
}

/// One thing for the front door to send.
#[derive(Debug)]
pub enum Emit {
    /// A JSON-RPC message, as JSON text.
    Message(String),
    /// Nothing to say; proof the stream is alive (an SSE comment).
    KeepAlive,
    /// Nothing to say; to be fired once what came before it on this stream
    /// has been written to the client's connection (an HTTP front door
    /// that cannot tell fires it when the stream has taken it).
    Written(oneshot::Sender<()>),
    /// Messages (JSON text) to send once `answered` fires (or is dropped):
    /// what the server said after an answer that is still being written.
    After { answered: oneshot::Receiver<()>, messages: Vec<String> },
}

impl Emit {
    /// The JSON text of a message, `None` for anything else.
    pub fn message(self) -> Option<String> {
        match self {
            Emit::Message(json) => Some(json),
            Emit::KeepAlive | Emit::Written(_) | Emit::After { .. } => None,
        }
    }
}

/// Sends `messages` one by one into the returned channel, as described
/// above; with `hold_open`, keep-alives follow until the receiver is
/// dropped. The channel holds one item, so a slow client slows the task.
pub fn reenact(messages: Vec<Outgoing>, live: Live, hold_open: bool) -> mpsc::Receiver<Emit> {
    let (emit, emitted) = mpsc::channel(1);
    tokio::spawn(async move {
        if !live.delay.is_zero() {
            tokio::time::sleep(live.delay).await;
        }
        let started = tokio::time::Instant::now();
        for (n, message) in messages.into_iter().enumerate() {
            if live.pace == Pace::Recorded {
                tokio::time::sleep_until(started + Duration::from_millis(message.offset_ms)).await;
            } else if n > 0 && !live.gap.is_zero() {
                tokio::time::sleep(live.gap).await;
            }
            let reply = message
                .awaits_reply
                .as_ref()
                .map(|id| (id, live.replies.expect(live.session.as_deref(), id)));
            if emit.send(Emit::Message(message.json)).await.is_err() {
                return; // the client went away
            }
            if let Some((id, reply)) = reply
                && !matches!(tokio::time::timeout(REPLY_WAIT, reply).await, Ok(Ok(())))
            {
                tracing::warn!(
                    "no reply to the replayed server request {id} within {REPLY_WAIT:?}; stream ended"
                );
                return;
            }
        }
        if !hold_open {
            return;
        }
        let mut feed = live.feed;
        loop {
            let next = tokio::select! {
                Some(json) = async { feed.as_mut()?.recv().await } => Emit::Message(json),
                () = tokio::time::sleep(KEEPALIVE_INTERVAL) => Emit::KeepAlive,
            };
            if emit.send(next).await.is_err() {
                return; // the client went away
            }
        }
    });
    emitted
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn message(text: &str, awaits_reply: Option<Value>) -> Outgoing {
        Outgoing { json: text.into(), is_answer: awaits_reply.is_none(), offset_ms: 0, awaits_reply }
    }

    /// The message after a re-enacted server request waits for the client's
    /// reply to it, and comes once that reply arrives.
    #[tokio::test]
    async fn a_server_request_holds_the_stream_until_the_reply() {
        let replies = Arc::new(Replies::default());
        let live = Live {
            replies: Arc::clone(&replies),
            session: Some("s".into()),
            pace: Pace::Instant,
            gap: Duration::ZERO,
            delay: Duration::ZERO,
            feed: None,
        };
        let mut emitted = reenact(vec![message("ask", Some(json!(0))), message("answer", None)], live, false);
        assert_eq!(emitted.recv().await.and_then(Emit::message).as_deref(), Some("ask"));
        assert!(emitted.try_recv().is_err(), "nothing before the reply");
        assert!(!replies.arrived(Some("other"), &json!(0)), "a reply in another session is not it");
        assert!(replies.arrived(Some("s"), &json!(0)));
        assert_eq!(emitted.recv().await.and_then(Emit::message).as_deref(), Some("answer"));
        assert!(emitted.recv().await.is_none(), "the stream ends after its last message");
    }
}
