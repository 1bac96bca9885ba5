//! What replay worked out for params read before (a match key, a match
//! rule's decision), remembered by the params' identity: the same
//! [`Params`] (the params cache hands out one per text), to the same
//! server and method, in the same era. So a repeated request skips
//! redaction, canonical JSON, hashing and rule work. Bounded as the params
//! cache is: params longer than its longest text are not remembered, and
//! the memory starts over when full.

use std::sync::Mutex;

use super::Call;
use crate::cassette::model::Era;
use crate::jsonrpc::{Params, ParamsCache};
use crate::util::{FastMap, lock};

/// Values worked out per params read before.
#[derive(Debug)]
pub struct Memory<T> {
    /// By the address of the params they were worked out for.
    entries: Mutex<FastMap<usize, Entry<T>>>,
}

#[derive(Debug)]
struct Entry<T> {
    /// Kept so that its address is not another's while remembered.
    params: Params,
    server: Box<str>,
    method: Box<str>,
    era: Era,
    value: T,
}

impl<T> Default for Memory<T> {
    fn default() -> Memory<T> {
        Memory { entries: Mutex::default() }
    }
}

impl<T: Clone> Memory<T> {
    /// What was worked out for `call`'s params before, else `work_out()`
    /// (the plain path), remembered.
    pub fn get_or(&self, call: &Call, work_out: impl FnOnce() -> T) -> T {
        let Some(params) = call.params.filter(|p| p.text().len() <= ParamsCache::MAX_TEXT) else {
            return work_out();
        };
        let known = lock(&self.entries).get(&params.address()).and_then(|entry| {
            let same = entry.params.same(params)
                && entry.era == call.era
                && *entry.server == *call.server
                && *entry.method == *call.method;
            same.then(|| entry.value.clone())
        });
        if let Some(value) = known {
            return value;
        }
        let value = work_out();
        let mut entries = lock(&self.entries);
        if entries.len() >= ParamsCache::MAX_ENTRIES {
            entries.clear();
        }
        let entry = Entry {
            params: params.clone(),
            server: call.server.into(),
            method: call.method.into(),
            era: call.era,
            value: value.clone(),
        };
        entries.insert(params.address(), entry);
        value
    }
}
