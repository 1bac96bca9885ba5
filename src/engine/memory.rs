//! What replay worked out for params read before (a match key, a match
//! rule's decision), remembered by the params' text as the client wrote
//! it, for the same server and method in the same era. So a repeated
//! request skips redaction, canonical JSON, hashing and rule work. Kept in
//! the crate's one bounded memo ([`Memo`]); each text holds the values of
//! at most [`PER_TEXT`] server, method and era combinations.

use super::step::Call;
use crate::model::Era;
use crate::util::Memo;

/// Combinations of server, method and era remembered per params text (a
/// client that sends the same params to ever new paths gets the oldest
/// forgotten).
pub const PER_TEXT: usize = 8;

/// Values worked out per params read before.
#[derive(Debug)]
pub struct Memory<T> {
    memo: Memo<Vec<Entry<T>>>,
}

#[derive(Debug)]
struct Entry<T> {
    server: Box<str>,
    method: Box<str>,
    era: Era,
    value: T,
}

impl<T> Entry<T> {
    fn is_for(&self, call: &Call) -> bool {
        self.era == call.era && *self.server == *call.server && *self.method == *call.method
    }
}

impl<T> Default for Memory<T> {
    fn default() -> Memory<T> {
        Memory { memo: Memo::default() }
    }
}

impl<T: Clone> Memory<T> {
    /// What was worked out for `call`'s params before, else `work_out()`
    /// (the plain path), remembered.
    pub fn get_or(&self, call: &Call, work_out: impl FnOnce() -> T) -> T {
        let Some(params) = call.params else { return work_out() };
        let text = params.text();
        let known =
            self.memo.find(text, |entries| entries.iter().find(|e| e.is_for(call)).map(|e| e.value.clone()));
        if let Some(value) = known {
            return value;
        }
        let value = work_out();
        let entry = Entry {
            server: call.server.into(),
            method: call.method.into(),
            era: call.era,
            value: value.clone(),
        };
        self.memo.keep(text, |entries| {
            if entries.len() >= PER_TEXT {
                entries.remove(0);
            }
            entries.push(entry);
        });
        value
    }
}
