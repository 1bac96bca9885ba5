//! Replayed SSE streams a client can resume (SEP-1699). Every event of a
//! handshake session's replayed answer stream, and of its standalone GET
//! stream, carries an id `{stream}-{n}`: `n` is 0 for a priming event and
//! `i + 1` for the stream's `i`-th message, and stream numbers are never
//! reused in a run, so ids are unique across a session's streams and say
//! which stream they belong to. The messages of each such stream are kept
//! (an answer's when it starts, a standalone stream's as they are sent;
//! bounded by [`MAX_RESUMABLE_STREAMS`] and [`MAX_RESUMABLE_BYTES`], and
//! [`MAX_RESUMABLE_STREAMS_PER_SESSION`] for each session, oldest forgotten
//! first, so that no session can push out every other's), so a `GET` with a `Last-Event-ID` of one gets what
//! followed that event, whether replay closed the stream there as the
//! recording shows or the client lost its connection.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use crate::engine::Outgoing;
use crate::limits::{MAX_RESUMABLE_BYTES, MAX_RESUMABLE_STREAMS, MAX_RESUMABLE_STREAMS_PER_SESSION};
use crate::util::lock;

/// The id of event `n` of stream `stream`.
pub(super) fn event_id(stream: u64, n: usize) -> String {
    format!("{stream}-{n}")
}

/// What follows an event a client resumes from.
pub(super) struct Rest {
    pub stream: u64,
    /// The number of the first message in `messages` (its event is `first + 1`).
    pub first: usize,
    pub messages: Vec<Outgoing>,
    /// It is a standalone stream's: the stream goes on after them.
    pub standalone: bool,
}

/// The resumable streams of a run.
#[derive(Default)]
pub(super) struct Resumable(Mutex<Streams>);

#[derive(Default)]
struct Streams {
    next: u64,
    kept: HashMap<u64, Kept>,
    /// Stream numbers kept, oldest first.
    order: VecDeque<u64>,
    bytes: usize,
    /// How many streams each session has kept.
    per_session: HashMap<String, usize>,
}

struct Kept {
    session: String,
    messages: Vec<Outgoing>,
    bytes: usize,
    standalone: bool,
}

impl Streams {
    /// A new stream number, and room for `bytes` more (the oldest streams
    /// forgotten); false when `bytes` alone are over the bound.
    fn make_room(&mut self, bytes: usize) -> bool {
        if bytes > MAX_RESUMABLE_BYTES {
            return false;
        }
        while self.kept.len() >= MAX_RESUMABLE_STREAMS || self.bytes + bytes > MAX_RESUMABLE_BYTES {
            let Some(oldest) = self.order.pop_front() else { break };
            self.remove(oldest);
        }
        true
    }

    /// Keeps `kept` as stream `stream`, the newest.
    fn insert(&mut self, stream: u64, kept: Kept) {
        self.bytes += kept.bytes;
        *self.per_session.entry(kept.session.clone()).or_default() += 1;
        self.order.push_back(stream);
        self.kept.insert(stream, kept);
    }

    /// Forgets stream `stream` (its place in `order` is the caller's).
    fn remove(&mut self, stream: u64) -> Option<Kept> {
        let gone = self.kept.remove(&stream)?;
        self.bytes -= gone.bytes;
        if let Some(count) = self.per_session.get_mut(&gone.session) {
            *count -= 1;
            if *count == 0 {
                self.per_session.remove(&gone.session);
            }
        }
        Some(gone)
    }

    fn keep(&mut self, session: &str, messages: Vec<Outgoing>, standalone: bool) -> u64 {
        let stream = self.next;
        self.next += 1;
        let bytes: usize = messages.iter().map(|m| m.json.len()).sum::<usize>() + session.len();
        if self.per_session.get(session).is_some_and(|count| *count >= MAX_RESUMABLE_STREAMS_PER_SESSION) {
            let kept = &self.kept;
            let oldest = self.order.iter().position(|s| kept.get(s).is_some_and(|k| k.session == session));
            if let Some(stream) = oldest.and_then(|at| self.order.remove(at)) {
                self.remove(stream);
            }
        }
        if self.make_room(bytes) {
            self.insert(stream, Kept { session: session.to_owned(), messages, bytes, standalone });
        }
        stream
    }
}

impl Resumable {
    /// Numbers a new answer stream of `session` that sends `messages`, and
    /// keeps them unless they alone are over the bound.
    pub(super) fn open(&self, session: &str, messages: &[Outgoing]) -> u64 {
        lock(&self.0).keep(session, messages.to_vec(), false)
    }

    /// Numbers a new standalone stream of `session`, whose messages are
    /// kept as they are sent ([`Resumable::sent`]).
    pub(super) fn open_standalone(&self, session: &str) -> u64 {
        lock(&self.0).keep(session, Vec::new(), true)
    }

    /// Standalone stream `stream` sent `json`: kept, unless that would pass
    /// the bound with this stream alone (it is then forgotten).
    pub(super) fn sent(&self, stream: u64, json: &str) {
        let mut streams = lock(&self.0);
        let Some(mut kept) = streams.remove(stream) else { return };
        streams.order.retain(|s| *s != stream);
        kept.bytes += json.len();
        if streams.make_room(kept.bytes) {
            kept.messages.push(Outgoing {
                json: json.to_owned(),
                is_answer: false,
                offset_ms: 0,
                awaits_reply: None,
            });
            streams.insert(stream, kept);
        }
    }

    /// Forgets the streams of `session`, which has ended.
    pub(super) fn forget(&self, session: &str) {
        let mut streams = lock(&self.0);
        let gone: Vec<u64> = streams
            .kept
            .iter()
            .filter(|(_, kept)| kept.session == session)
            .map(|(stream, _)| *stream)
            .collect();
        for stream in gone {
            streams.remove(stream);
        }
        let Streams { order, kept, .. } = &mut *streams;
        order.retain(|stream| kept.contains_key(stream));
    }

    /// What follows event `last_event_id` on a stream of `session`; `None`
    /// for an id replay did not send in that session (or has forgotten).
    pub(super) fn after(&self, session: &str, last_event_id: &str) -> Option<Rest> {
        let (stream, n) = last_event_id.trim().split_once('-')?;
        let (stream, n) = (stream.parse::<u64>().ok()?, n.parse::<usize>().ok()?);
        let streams = lock(&self.0);
        let kept = streams.kept.get(&stream).filter(|kept| kept.session == session)?;
        let messages = kept.messages.get(n..)?.to_vec();
        Some(Rest { stream, first: n, messages, standalone: kept.standalone })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(texts: &[&str]) -> Vec<Outgoing> {
        texts
            .iter()
            .map(|t| Outgoing { json: (*t).into(), is_answer: false, offset_ms: 0, awaits_reply: None })
            .collect()
    }

    fn jsons(rest: Option<Rest>) -> Option<(u64, usize, Vec<String>)> {
        rest.map(|r| (r.stream, r.first, r.messages.into_iter().map(|m| m.json).collect()))
    }

    #[test]
    fn resumes_after_any_event_of_its_own_session_only() {
        let resumable = Resumable::default();
        let one = resumable.open("s", &messages(&["a", "b", "c"]));
        let two = resumable.open("s", &messages(&["d"]));
        assert_ne!(one, two);
        assert_eq!(
            jsons(resumable.after("s", &event_id(one, 0))),
            Some((one, 0, vec!["a".into(), "b".into(), "c".into()]))
        );
        assert_eq!(jsons(resumable.after("s", &event_id(one, 2))), Some((one, 2, vec!["c".into()])));
        assert_eq!(jsons(resumable.after("s", &event_id(one, 3))), Some((one, 3, vec![])));
        assert_eq!(jsons(resumable.after("s", &event_id(two, 0))), Some((two, 0, vec!["d".into()])));
        assert!(resumable.after("s", &event_id(one, 4)).is_none(), "past the stream's end");
        assert!(resumable.after("other", &event_id(one, 0)).is_none(), "another session's stream");
        assert!(resumable.after("s", "7-0").is_none() && resumable.after("s", "x").is_none());
        let standalone = resumable.open_standalone("s");
        resumable.sent(standalone, "e");
        resumable.sent(standalone, "f");
        let rest = resumable.after("s", &event_id(standalone, 1)).unwrap();
        assert!(rest.standalone);
        assert_eq!(jsons(Some(rest)), Some((standalone, 1, vec!["f".into()])));
    }

    #[test]
    fn the_oldest_are_forgotten_at_the_bound() {
        let resumable = Resumable::default();
        let first = resumable.open("s", &messages(&["a"]));
        for n in 0..MAX_RESUMABLE_STREAMS {
            resumable.open(&format!("s{n}"), &messages(&["b"]));
        }
        assert!(resumable.after("s", &event_id(first, 0)).is_none());
        assert!(resumable.after("s0", &event_id(first + 1, 0)).is_some());
        let huge = "x".repeat(MAX_RESUMABLE_BYTES);
        let big = resumable.open("s", &messages(&[&huge]));
        assert!(resumable.after("s", &event_id(big, 0)).is_none(), "one over the byte bound is not kept");
        assert!(resumable.after("s0", &event_id(first + 1, 0)).is_some(), "and evicts nothing");
        let standalone = resumable.open_standalone("s");
        resumable.sent(standalone, "small");
        assert!(resumable.after("s", &event_id(standalone, 1)).is_some());
        resumable.sent(standalone, &huge);
        assert!(
            resumable.after("s", &event_id(standalone, 1)).is_none(),
            "a standalone stream past the bound is forgotten"
        );
    }

    #[test]
    fn no_session_pushes_out_anothers_streams() {
        let resumable = Resumable::default();
        let other = resumable.open("other", &messages(&["a"]));
        let first = resumable.open("greedy", &messages(&["b"]));
        for _ in 0..2 * MAX_RESUMABLE_STREAMS {
            resumable.open("greedy", &messages(&["c"]));
        }
        assert!(resumable.after("other", &event_id(other, 0)).is_some(), "another session's stream stays");
        assert!(resumable.after("greedy", &event_id(first, 0)).is_none(), "the greedy session's oldest go");
        let kept = (first..first + 1 + 2 * MAX_RESUMABLE_STREAMS as u64)
            .filter(|s| resumable.after("greedy", &event_id(*s, 0)).is_some())
            .count();
        assert_eq!(kept, MAX_RESUMABLE_STREAMS_PER_SESSION);
        resumable.forget("greedy");
        assert!(resumable.after("other", &event_id(other, 0)).is_some());
        assert!(!lock(&resumable.0).per_session.contains_key("greedy"), "its count goes with it");
    }
}
