//! The one writer of a cassette while recording: a thread that owns the
//! connection and inserts finished exchanges (and service answers) in the
//! order they finish. What queued up while it committed goes in the next
//! transaction together (group commit, each entry in a savepoint of its
//! own, so one that fails spoils no other). Senders get an acknowledgement
//! once their entry is committed, so a proxy can hold back the last bytes
//! of an answer until the exchange is safe on disk.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::mpsc;
use std::thread;

use tokio::sync::oneshot;

use super::{Cassette, Entry, Tag};
use crate::error::Error;
use crate::model::{Aside, Exchange, LlmExchange, ServiceAnswer};

enum Job {
    Write(Entry, oneshot::Sender<bool>),
    /// An exchange to be made (normalized, scrubbed) on the writer thread.
    Prepare(Prepare, Option<Tag>, oneshot::Sender<bool>),
    Stop,
}

/// Makes the exchange to store: the work that takes time in proportion to
/// the exchange, done on the writer thread, in order, off the runtime's
/// workers.
pub type Prepare = Box<dyn FnOnce() -> Exchange + Send>;

/// The writer thread's name (as `ps -L` and profiles show it).
const THREAD_NAME: &str = "cassette-writer";

/// Entries committed together at most.
const MAX_BATCH: usize = 256;

/// What the writer did, for the summary line at shutdown.
#[derive(Clone, Debug, Default)]
pub struct WriterReport {
    pub path: PathBuf,
    /// Exchanges committed, per server (service answers per route).
    pub per_server: BTreeMap<String, u64>,
    /// Exchanges that failed to commit (each was logged).
    pub failed: u64,
}

impl WriterReport {
    pub fn total(&self) -> u64 {
        self.per_server.values().sum()
    }
}

/// The running writer thread.
pub struct Writer {
    jobs: mpsc::Sender<Job>,
    thread: thread::JoinHandle<WriterReport>,
}

/// A cheap handle for sending exchanges to the writer.
#[derive(Clone)]
pub struct WriterHandle {
    jobs: mpsc::Sender<Job>,
}

impl Writer {
    /// Starts the thread that owns `cassette` (named `cassette-writer`).
    ///
    /// # Errors
    ///
    /// [`Error::Spawn`] when the system starts no thread.
    pub fn start(mut cassette: Cassette) -> Result<Writer, Error> {
        let (jobs, queue) = mpsc::channel();
        let thread = thread::Builder::new().name(THREAD_NAME.into()).spawn(move || {
            crate::os::batch_thread();
            let mut report = WriterReport { path: cassette.path().to_owned(), ..WriterReport::default() };
            let mut stopping = false;
            while !stopping {
                let mut batch = Vec::new();
                // Wait for one entry, then take what else is queued already.
                let mut next = queue.recv().ok();
                while let Some(job) = next.take() {
                    match job {
                        Job::Write(entry, done) => batch.push((entry, done)),
                        Job::Prepare(prepare, tag, done) => {
                            batch.push((Entry::Exchange(Box::new(prepare()), tag), done));
                        }
                        Job::Stop => stopping = true,
                    }
                    if !stopping && batch.len() < MAX_BATCH {
                        next = queue.try_recv().ok();
                    }
                }
                if batch.is_empty() {
                    break; // stopped, or every handle is gone
                }
                let (entries, acks): (Vec<Entry>, Vec<oneshot::Sender<bool>>) = batch.into_iter().unzip();
                let outcomes = cassette.insert_batch(&entries);
                for ((entry, done), stored) in entries.iter().zip(acks).zip(outcomes) {
                    let label = match (entry, &stored) {
                        (Entry::Exchange(exchange, _), Err(e)) => {
                            let (method, key, server) =
                                (&exchange.method, exchange.key.to_hex(), &exchange.server);
                            tracing::error!("not stored: {method} {key} on {server}: {e}");
                            None
                        }
                        (Entry::Service(answer), Err(e)) => {
                            tracing::error!("not stored: the {} answer: {e}", answer.route.as_str());
                            None
                        }
                        (Entry::Exchange(exchange, _), Ok(())) => Some(exchange.server.clone()),
                        (Entry::Asides(_, asides), Err(e)) => {
                            tracing::warn!(
                                "not stored: {} message(s) the server sent on its own after an exchange \
                                 that is not stored: {e}",
                                asides.len()
                            );
                            let _ = done.send(false);
                            continue;
                        }
                        (Entry::Asides(..), Ok(())) => {
                            let _ = done.send(true);
                            continue;
                        }
                        (Entry::Service(answer), Ok(())) => Some(answer.route.as_str().to_owned()),
                        (Entry::Llm(exchange), Err(e)) => {
                            let (method, target, model) =
                                (&exchange.method, &exchange.target, &exchange.model);
                            tracing::error!("not stored: {method} {target} to model {model}: {e}");
                            None
                        }
                        (Entry::Llm(exchange), Ok(())) => Some(format!("model {}", exchange.model)),
                    };
                    match label {
                        Some(label) => *report.per_server.entry(label).or_default() += 1,
                        None => report.failed += 1,
                    }
                    let _ = done.send(stored.is_ok()); // the sender may have gone; the entry is stored anyway
                }
            }
            cassette.settle();
            report
        });
        let thread = thread.map_err(|source| Error::Spawn { command: THREAD_NAME.into(), source })?;
        Ok(Writer { jobs, thread })
    }

    pub fn handle(&self) -> WriterHandle {
        WriterHandle { jobs: self.jobs.clone() }
    }

    /// Writes what was queued before this call, stops the thread and reports.
    pub fn finish(self) -> WriterReport {
        let _ = self.jobs.send(Job::Stop);
        self.thread.join().unwrap_or_else(|_| {
            tracing::error!("the cassette writer panicked");
            WriterReport::default()
        })
    }
}

impl WriterHandle {
    /// Queues `exchange`, tagged for the asides that may follow it; the
    /// receiver says whether it was committed (`false` also when the writer
    /// has stopped).
    pub fn write(&self, exchange: Exchange, tag: Option<Tag>) -> oneshot::Receiver<bool> {
        let (done, committed) = oneshot::channel();
        if let Err(mpsc::SendError(Job::Write(Entry::Exchange(exchange, _), done))) =
            self.jobs.send(Job::Write(Entry::Exchange(Box::new(exchange), tag), done))
        {
            tracing::error!("not stored: {} on {}: the writer has stopped", exchange.method, exchange.server);
            let _ = done.send(false);
        }
        committed
    }

    /// Queues the exchange `prepare` makes on the writer thread, tagged for
    /// the asides that may follow it; the receiver says whether it was
    /// committed (`false` also when the writer has stopped).
    pub fn write_prepared(&self, prepare: Prepare, tag: Option<Tag>) -> oneshot::Receiver<bool> {
        let (done, committed) = oneshot::channel();
        if let Err(mpsc::SendError(Job::Prepare(_, _, done))) =
            self.jobs.send(Job::Prepare(prepare, tag, done))
        {
            tracing::error!("not stored: an exchange: the writer has stopped");
            let _ = done.send(false);
        }
        committed
    }

    /// Queues what the server said on its own after the exchange tagged
    /// `tag`, which was queued before.
    pub fn write_asides(&self, tag: Tag, asides: Vec<Aside>) {
        let (done, _) = oneshot::channel();
        if self.jobs.send(Job::Write(Entry::Asides(tag, asides), done)).is_err() {
            tracing::warn!("not stored: a message the server sent on its own: the writer has stopped");
        }
    }

    /// Queues a model exchange; the receiver says whether it was committed.
    pub fn write_llm(&self, exchange: LlmExchange) -> oneshot::Receiver<bool> {
        let (done, committed) = oneshot::channel();
        if let Err(mpsc::SendError(Job::Write(Entry::Llm(exchange), done))) =
            self.jobs.send(Job::Write(Entry::Llm(Box::new(exchange)), done))
        {
            tracing::error!(
                "not stored: {} {} to model {}: the writer has stopped",
                exchange.method,
                exchange.target,
                exchange.model
            );
            let _ = done.send(false);
        }
        committed
    }

    /// Queues a service answer; the receiver says whether it was committed.
    pub fn write_service(&self, answer: ServiceAnswer) -> oneshot::Receiver<bool> {
        let (done, committed) = oneshot::channel();
        if let Err(mpsc::SendError(Job::Write(Entry::Service(answer), done))) =
            self.jobs.send(Job::Write(Entry::Service(Box::new(answer)), done))
        {
            tracing::error!("not stored: the {} answer: the writer has stopped", answer.route.as_str());
            let _ = done.send(false);
        }
        committed
    }
}
