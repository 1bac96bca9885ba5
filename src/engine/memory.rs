//! What replay worked out for params read before (a match key, a match
//! rule's decision), remembered by the params' text (a model request's
//! body) as the client wrote it, for the same server and method in the same
//! era. So a repeated request skips redaction, canonical JSON, hashing and
//! rule work. Kept in the crate's one bounded memo ([`Memo`]); each text
//! holds the values of at most [`PER_TEXT`] server, method and era
//! combinations.

use super::step::Asked;
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
    fn is_for(&self, asked: Asked) -> bool {
        self.era == asked.era && *self.server == *asked.server && *self.method == *asked.method
    }
}

impl<T> Default for Memory<T> {
    fn default() -> Memory<T> {
        Memory { memo: Memo::default() }
    }
}

impl<T: Clone> Memory<T> {
    /// What was worked out before for params `text` (none: nothing is
    /// remembered) as `asked`, else `work_out()` (the plain path),
    /// remembered.
    pub fn get_or(&self, asked: Asked, text: Option<&str>, work_out: impl FnOnce() -> T) -> T {
        let Some(text) = text else { return work_out() };
        let known =
            self.memo.find(text, |entries| entries.iter().find(|e| e.is_for(asked)).map(|e| e.value.clone()));
        if let Some(value) = known {
            return value;
        }
        let value = work_out();
        let entry = Entry {
            server: asked.server.into(),
            method: asked.method.into(),
            era: asked.era,
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
