//! The one writer of a cassette while recording: a thread that owns the
//! connection and inserts each finished exchange (or service answer) in its
//! own transaction, in the order they finish. Senders get an acknowledgement once the exchange is
//! committed, so a proxy can hold back the last bytes of an answer until the
//! exchange is safe on disk.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::mpsc;
use std::thread;

use tokio::sync::oneshot;

use super::Cassette;
use crate::model::{Exchange, ServiceAnswer};

enum Job {
    Write(Box<Exchange>, oneshot::Sender<bool>),
    Service(Box<ServiceAnswer>, oneshot::Sender<bool>),
    Stop,
}

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
    /// Starts the thread that owns `cassette`.
    pub fn start(mut cassette: Cassette) -> Writer {
        let (jobs, queue) = mpsc::channel();
        let thread = thread::spawn(move || {
            let mut report = WriterReport { path: cassette.path().to_owned(), ..WriterReport::default() };
            for job in queue {
                let (stored, label, done) = match job {
                    Job::Write(exchange, done) => {
                        let stored = cassette.insert(&exchange).map(drop);
                        if let Err(e) = &stored {
                            tracing::error!(
                                "not stored: {} {} on {}: {e}",
                                exchange.method,
                                exchange.key.to_hex(),
                                exchange.server
                            );
                        }
                        (stored, exchange.server, done)
                    }
                    Job::Service(answer, done) => {
                        let stored = cassette.insert_service(&answer);
                        if let Err(e) = &stored {
                            tracing::error!("not stored: the {} answer: {e}", answer.route.as_str());
                        }
                        (stored, answer.route.as_str().to_owned(), done)
                    }
                    Job::Stop => break,
                };
                match stored {
                    Ok(()) => *report.per_server.entry(label).or_default() += 1,
                    Err(_) => report.failed += 1,
                }
                let _ = done.send(stored.is_ok()); // the sender may have gone; the entry is stored anyway
            }
            report
        });
        Writer { jobs, thread }
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
    /// Queues `exchange`; the receiver says whether it was committed (`false`
    /// also when the writer has stopped).
    pub fn write(&self, exchange: Exchange) -> oneshot::Receiver<bool> {
        let (done, committed) = oneshot::channel();
        if let Err(mpsc::SendError(Job::Write(exchange, done))) =
            self.jobs.send(Job::Write(Box::new(exchange), done))
        {
            tracing::error!("not stored: {} on {}: the writer has stopped", exchange.method, exchange.server);
            let _ = done.send(false);
        }
        committed
    }

    /// Queues a service answer; the receiver says whether it was committed.
    pub fn write_service(&self, answer: ServiceAnswer) -> oneshot::Receiver<bool> {
        let (done, committed) = oneshot::channel();
        if let Err(mpsc::SendError(Job::Service(answer, done))) =
            self.jobs.send(Job::Service(Box::new(answer), done))
        {
            tracing::error!("not stored: the {} answer: the writer has stopped", answer.route.as_str());
            let _ = done.send(false);
        }
        committed
    }
}
