//! What a front door does differently for the engine it serves, fixed once
//! when the door is built ([`super::Engine::policy`]). A door enacts its
//! policy and the engine's steps; it never asks which mode it serves.

use std::sync::Arc;
use std::time::Duration;

use super::reenact::{Live, Replies};
use super::step::Outgoing;
use crate::config::Pace;

/// The session key a recording gives a connection that is one session.
const CONNECTION_SESSION: &str = "connection";

/// A front door's policy.
#[derive(Clone)]
pub struct Policy {
    /// What re-enacted answers need; `None`: every answer goes as it comes.
    timing: Option<Timing>,
    /// What the door does with a request's headers.
    pub headers: Headers,
    /// A replayed answer's stream can be resumed (`Last-Event-ID`): the
    /// door keeps what it sent on one.
    pub resumable_answers: bool,
    /// The session a connection that is one session (stdio) is in before an
    /// answer names one: recording, the key the recorder ties the client's
    /// replies and negotiated versions to.
    pub connection_session: Option<&'static str>,
}

/// What a front door does with a request's headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Headers {
    /// A header that is not visible ASCII is refused.
    Checked,
    /// A header that is not visible ASCII is left for the upstream to judge
    /// (read as absent), and the request's credentials are collected, to be
    /// scrubbed from what is stored.
    Passed,
}

/// How answers are re-enacted: the client's replies they wait for, and the
/// pace of their messages.
#[derive(Clone)]
struct Timing {
    replies: Arc<Replies>,
    pace: Pace,
}

impl Policy {
    /// Replay's policy: answers re-enacted with `replies` at `pace`.
    pub(super) fn replaying(replies: Arc<Replies>, pace: Pace) -> Policy {
        Policy {
            timing: Some(Timing { replies, pace }),
            headers: Headers::Checked,
            resumable_answers: true,
            connection_session: None,
        }
    }

    /// A recording's policy: answers go as they come.
    pub(super) fn recording() -> Policy {
        Policy {
            timing: None,
            headers: Headers::Passed,
            resumable_answers: false,
            connection_session: Some(CONNECTION_SESSION),
        }
    }

    /// How to send `messages` (then, with `hold_open`, keep the stream
    /// open) in `session`: `None` when they go at once, in order; else the
    /// [`Live`] to re-enact them with. Sending takes time when a stream is
    /// held open, the pace keeps the recorded gaps, a message waits for the
    /// client's reply, or several messages must go at least `gap` apart (a
    /// door whose clients read one byte stream wants each message on its
    /// own). Every door asks this one rule.
    pub fn reenactment(
        &self,
        messages: &[Outgoing],
        hold_open: bool,
        session: Option<&str>,
        gap: Duration,
    ) -> Option<Live> {
        let timing = self.timing.as_ref()?;
        let takes_time = hold_open
            || timing.pace == Pace::Recorded
            || (!gap.is_zero() && messages.len() > 1)
            || messages.iter().any(|m| m.awaits_reply.is_some());
        takes_time.then(|| Live {
            replies: Arc::clone(&timing.replies),
            session: session.map(str::to_owned),
            pace: timing.pace,
            gap,
            delay: Duration::ZERO,
            feed: None,
        })
    }
}
