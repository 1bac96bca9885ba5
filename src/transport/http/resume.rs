//! Replayed SSE streams a client can resume (SEP-1699). Every event of a
//! handshake session's replayed answer stream, and of its standalone GET
//! stream, carries an id `{stream}-{n}`: `n` is 0 for a priming event and
//! `i + 1` for the stream's `i`-th message, and stream numbers are never
//! reused in a run, so ids are unique across a session's streams and say
//! which stream they belong to. The messages of each such stream are kept
//! (an answer's as it is sent, a standalone stream's as they are sent; an
//! answer of one message without a priming event has nothing after any
//! event a client can get, and is not kept;
//! bounded by [`MAX_RESUMABLE_STREAMS`] and [`MAX_RESUMABLE_BYTES`], and
//! [`MAX_RESUMABLE_STREAMS_PER_SESSION`] for each session, oldest forgotten
//! first, so that no session can push out every other's), so a `GET` with a `Last-Event-ID` of one gets what
//! followed that event, whether replay closed the stream there as the
//! recording shows or the client lost its connection.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

use crate::engine::Outgoing;
use crate::limits::{MAX_RESUMABLE_BYTES, MAX_RESUMABLE_STREAMS, MAX_RESUMABLE_STREAMS_PER_SESSION};
use crate::util::{FastMap, lock};

/// The id of event `n` of stream `stream`.
pub(super) fn event_id(stream: u64, n: usize) -> String {
    EventId::new(stream, n).text().to_owned()
}

/// The id of an event, `{stream}-{n}`, written without the formatting
/// machinery (an answer's events each get one).
pub(super) struct EventId {
    text: [u8; 41],
    len: usize,
}

impl EventId {
    pub(super) fn new(stream: u64, n: usize) -> EventId {
        let mut id = EventId { text: [0; 41], len: 0 };
        id.push(crate::util::digits(stream, &mut [0; 20]));
        id.push(b"-");
        id.push(crate::util::digits(n as u64, &mut [0; 20]));
        id
    }

    fn push(&mut self, piece: &[u8]) {
        self.text[self.len..self.len + piece.len()].copy_from_slice(piece);
        self.len += piece.len();
    }

    pub(super) fn text(&self) -> &str {
        // Only ASCII digits and '-' were written.
        std::str::from_utf8(&self.text[..self.len]).unwrap_or_default()
    }
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

/// Every operation takes time in the log of the streams kept, or in the
/// streams of one session (at most [`MAX_RESUMABLE_STREAMS_PER_SESSION`]):
/// a request never walks the streams of other sessions.
#[derive(Default)]
struct Streams {
    /// The next stream number.
    next: u64,
    /// The next age: a stream gets a new one when it is kept and each time
    /// it grows, and the oldest is forgotten first.
    next_age: u64,
    kept: FastMap<u64, Kept>,
    /// Stream numbers kept, by age.
    by_age: BTreeMap<u64, u64>,
    bytes: usize,
    /// The streams each session has kept, oldest first.
    per_session: FastMap<Arc<str>, VecDeque<u64>>,
}

struct Kept {
    session: Arc<str>,
    age: u64,
    messages: Vec<Outgoing>,
    bytes: usize,
    standalone: bool,
}

impl Streams {
    /// A new stream number.
    fn number(&mut self) -> u64 {
        self.next += 1;
        self.next - 1
    }

    /// Room for `bytes` more, the oldest streams forgotten; false when
    /// `bytes` alone are over the bound.
    fn make_room(&mut self, bytes: usize) -> bool {
        if bytes > MAX_RESUMABLE_BYTES {
            return false;
        }
        while self.kept.len() >= MAX_RESUMABLE_STREAMS || self.bytes + bytes > MAX_RESUMABLE_BYTES {
            let Some((_, oldest)) = self.by_age.pop_first() else { break };
            self.remove(oldest);
        }
        true
    }

    /// Keeps `messages` as stream `stream` of `session`, the newest (its
    /// session's oldest forgotten when it has kept its share).
    fn insert(&mut self, stream: u64, session: &str, messages: Vec<Outgoing>, standalone: bool) {
        let bytes = messages.iter().map(|m| m.json.len()).sum::<usize>() + session.len();
        let full = self.per_session.get(session).and_then(|streams| {
            (streams.len() >= MAX_RESUMABLE_STREAMS_PER_SESSION).then(|| streams.front().copied()).flatten()
        });
        if let Some(oldest) = full {
            self.remove(oldest);
        }
        if !self.make_room(bytes) {
            return;
        }
        let session = match self.per_session.get_key_value(session) {
            Some((shared, _)) => Arc::clone(shared),
            None => Arc::from(session),
        };
        self.per_session.entry(Arc::clone(&session)).or_default().push_back(stream);
        let age = self.next_age;
        self.next_age += 1;
        self.by_age.insert(age, stream);
        self.bytes += bytes;
        self.kept.insert(stream, Kept { session, age, messages, bytes, standalone });
    }

    /// Forgets stream `stream`.
    fn remove(&mut self, stream: u64) -> Option<Kept> {
        let gone = self.kept.remove(&stream)?;
        self.bytes -= gone.bytes;
        self.by_age.remove(&gone.age);
        if let Some(streams) = self.per_session.get_mut(&*gone.session) {
            if let Some(at) = streams.iter().position(|s| *s == stream) {
                streams.remove(at);
            }
            if streams.is_empty() {
                self.per_session.remove(&*gone.session);
            }
        }
        Some(gone)
    }
}

impl Resumable {
    /// Numbers a new answer stream; [`Resumable::keep`] keeps what it sends.
    pub(super) fn number(&self) -> u64 {
        lock(&self.0).number()
    }

    /// Keeps the `messages` of answer stream `stream` of `session`, unless
    /// they alone are over the bound.
    pub(super) fn keep(&self, stream: u64, session: &str, messages: Vec<Outgoing>) {
        lock(&self.0).insert(stream, session, messages, false);
    }

    /// Numbers a new standalone stream of `session`, whose messages are
    /// kept as they are sent ([`Resumable::sent`]).
    pub(super) fn open_standalone(&self, session: &str) -> u64 {
        let mut streams = lock(&self.0);
        let stream = streams.number();
        streams.insert(stream, session, Vec::new(), true);
        stream
    }

    /// Standalone stream `stream` sent `json`: kept, unless that would pass
    /// the bound with this stream alone (it is then forgotten).
    pub(super) fn sent(&self, stream: u64, json: &str) {
        let mut streams = lock(&self.0);
        let Some(mut kept) = streams.remove(stream) else { return };
        kept.messages.push(Outgoing {
            json: json.to_owned(),
            is_answer: false,
            offset_ms: 0,
            awaits_reply: None,
        });
        streams.insert(stream, &kept.session, kept.messages, kept.standalone);
    }

    /// Forgets the streams of `session`, which has ended.
    pub(super) fn forget(&self, session: &str) {
        let mut streams = lock(&self.0);
        let gone = streams.per_session.get(session).cloned().unwrap_or_default();
        for stream in gone {
            streams.remove(stream);
        }
    }

    /// What follows event `last_event_id` on a stream of `session`; `None`
    /// for an id replay did not send in that session (or has forgotten).
    pub(super) fn after(&self, session: &str, last_event_id: &str) -> Option<Rest> {
        let (stream, n) = last_event_id.trim().split_once('-')?;
        let (stream, n) = (stream.parse::<u64>().ok()?, n.parse::<usize>().ok()?);
        let streams = lock(&self.0);
        let kept = streams.kept.get(&stream).filter(|kept| *kept.session == *session)?;
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

    /// A new answer stream of `session` sending `messages`, kept.
    fn opened(resumable: &Resumable, session: &str, messages: Vec<Outgoing>) -> u64 {
        let stream = resumable.number();
        resumable.keep(stream, session, messages);
        stream
    }

    fn jsons(rest: Option<Rest>) -> Option<(u64, usize, Vec<String>)> {
        rest.map(|r| (r.stream, r.first, r.messages.into_iter().map(|m| m.json).collect()))
    }

    #[test]
    fn event_ids_are_stream_dash_number() {
        assert_eq!(event_id(0, 0), "0-0");
        assert_eq!(event_id(37, 1), "37-1");
        assert_eq!(event_id(u64::MAX, usize::MAX), format!("{}-{}", u64::MAX, usize::MAX));
    }

    #[test]
    fn resumes_after_any_event_of_its_own_session_only() {
        let resumable = Resumable::default();
        let one = opened(&resumable, "s", messages(&["a", "b", "c"]));
        let two = opened(&resumable, "s", messages(&["d"]));
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
        let first = opened(&resumable, "s", messages(&["a"]));
        for n in 0..MAX_RESUMABLE_STREAMS {
            opened(&resumable, &format!("s{n}"), messages(&["b"]));
        }
        assert!(resumable.after("s", &event_id(first, 0)).is_none());
        assert!(resumable.after("s0", &event_id(first + 1, 0)).is_some());
        let huge = "x".repeat(MAX_RESUMABLE_BYTES);
        let big = opened(&resumable, "s", messages(&[&huge]));
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
        let other = opened(&resumable, "other", messages(&["a"]));
        let first = opened(&resumable, "greedy", messages(&["b"]));
        for _ in 0..2 * MAX_RESUMABLE_STREAMS {
            opened(&resumable, "greedy", messages(&["c"]));
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
