//! What a replayed server says on its own: the asides a recording holds
//! after an exchange ([`Asides`]), and each replay session's standalone
//! stream they go out on ([`Standalone`]).
//!
//! An aside follows either the exchange's answer (it goes with the answer:
//! a stdio front door writes it after the answer, an HTTP one puts it on the
//! session's GET stream) or a client notification after that answer (it is
//! armed in the session and goes when the client sends that notification).
//! On HTTP, what is said before the client opens its GET stream is held for
//! it, at most [`MAX_HELD_ASIDES`] messages; what a session that ends still holds
//! is dropped with a debug line.

use std::collections::VecDeque;

use tokio::sync::mpsc;

use super::Outgoing;
use super::reenact::{Emit, KEEPALIVE_INTERVAL};
use crate::cassette::model::Direction;
use crate::cassette::tape::ServedAside;
use crate::limits::MAX_HELD_ASIDES;

/// The asides of one replayed exchange.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Asides {
    /// Sent after the answer.
    pub now: Vec<Outgoing>,
    /// Sent when the client sends the notification named first.
    pub armed: Vec<(Box<str>, Outgoing)>,
}

impl Asides {
    /// The server's asides of a recording, each server→client request the
    /// recording shows answered marked as awaiting the client's reply.
    pub fn of(asides: &[ServedAside]) -> Asides {
        let mut out = Asides::default();
        if asides.is_empty() {
            return out;
        }
        let replied: Vec<_> = asides
            .iter()
            .filter(|a| a.message.direction == Direction::Client)
            .filter_map(|a| a.message.id.as_ref())
            .collect();
        for aside in asides.iter().filter(|a| a.message.direction == Direction::Server) {
            let message = &aside.message;
            let awaits_reply = match (&message.method, &message.id) {
                (Some(_), Some(id)) if replied.contains(&id) => Some(id.clone()),
                _ => None,
            };
            let outgoing = Outgoing {
                json: message.json.to_string(),
                is_answer: false,
                offset_ms: message.offset_ms,
                awaits_reply,
            };
            match &aside.after {
                None => out.now.push(outgoing),
                Some(method) => out.armed.push((method.clone(), outgoing)),
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
            let Some(stream) = self.stream.as_ref().filter(|_| self.held.is_empty()) else {
                self.hold(message.json);
                continue;
            };
            match stream.try_send(Emit::Message(message.json)) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Full(emit)) => self.hold_emitted(emit),
                Err(mpsc::error::TrySendError::Closed(emit)) => {
                    self.stream = None; // the client went away
                    self.hold_emitted(emit);
                }
            }
        }
    }

    fn hold_emitted(&mut self, emit: Emit) {
        if let Emit::Message(json) = emit {
            self.hold(json);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn said(text: &str) -> Outgoing {
        Outgoing { json: text.into(), is_answer: false, offset_ms: 0, awaits_reply: None }
    }

    #[tokio::test]
    async fn held_until_the_stream_opens_then_sent_as_said() {
        let mut standalone = Standalone::default();
        standalone.say(vec![said("one")]);
        let mut stream = standalone.open();
        standalone.say(vec![said("two")]);
        assert_eq!(stream.recv().await, Some(Emit::Message("one".into())));
        assert_eq!(stream.recv().await, Some(Emit::Message("two".into())));
        drop(stream);
        standalone.say(vec![said("three")]);
        let mut again = standalone.open();
        assert_eq!(again.recv().await, Some(Emit::Message("three".into())), "held for the next stream");
        standalone.close();
        assert_eq!(again.recv().await, None, "closed: the stream ends");
    }

    #[tokio::test]
    async fn held_messages_are_bounded_oldest_first() {
        let mut standalone = Standalone::default();
        standalone.say((0..MAX_HELD_ASIDES + 2).map(|n| said(&n.to_string())).collect());
        let mut stream = standalone.open();
        assert_eq!(stream.recv().await, Some(Emit::Message("2".into())));
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
