//! What every request handler of one tape shares ([`App`]): its engine,
//! the door's rules, and the params read before.

use std::sync::Arc;

use super::proxy::Proxy;
use super::resume::Resumable;
use crate::config::FrontDoor;
use crate::engine::{Engine, Policy};
use crate::jsonrpc::ParamsCache;
use crate::limits::MAX_HANGING_REQUESTS;

/// What every request handler shares: the engine, whose link to the
/// upstream (when recording) is the [`Proxy`], the front door's rules, and
/// the params read before.
pub struct App {
    pub(super) engine: Engine<Proxy>,
    /// What this door does for its engine.
    pub(super) policy: Policy,
    pub(super) front_door: FrontDoor,
    pub(super) params: ParamsCache,
    /// Replayed streams a client can resume.
    pub(super) resumable: Arc<Resumable>,
    /// Request headers whose values are credentials besides the built-in
    /// ones (`--redact-header`, lowercase).
    pub(super) redact_headers: Vec<String>,
    /// Set when the shutdown grace has run out: requests still waiting for
    /// their answer get 503 then.
    pub(super) stopping: tokio::sync::watch::Sender<bool>,
    /// Room for requests a `hang` fault holds ([`MAX_HANGING_REQUESTS`]).
    pub(super) hanging: Arc<tokio::sync::Semaphore>,
}

impl App {
    pub fn new(engine: Engine<Proxy>, front_door: FrontDoor) -> App {
        App {
            policy: engine.policy(),
            engine,
            front_door,
            params: ParamsCache::default(),
            resumable: Arc::default(),
            redact_headers: Vec::new(),
            stopping: tokio::sync::watch::Sender::new(false),
            hanging: Arc::new(tokio::sync::Semaphore::new(MAX_HANGING_REQUESTS)),
        }
    }

    /// The shutdown grace has run out: every request still waiting for its
    /// answer is answered 503 with its id.
    pub fn grace_over(&self) {
        self.stopping.send_replace(true);
    }

    /// Resolves once [`App::grace_over`] was called.
    pub(super) async fn stopped(&self) {
        let mut stopping = self.stopping.subscribe();
        // The sender lives as long as the app, so this ends only when it says so.
        let _ = stopping.wait_for(|over| *over).await;
    }

    /// The same, scrubbing the values of `headers` (lowercase names) from
    /// what is recorded, as credentials.
    pub fn redacting_headers(self, headers: Vec<String>) -> App {
        App { redact_headers: headers, ..self }
    }

    pub fn engine(&self) -> &Engine<Proxy> {
        &self.engine
    }

    pub fn front_door(&self) -> &FrontDoor {
        &self.front_door
    }
}
