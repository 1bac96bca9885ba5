//! The accept loop: a bounded number of connections, HTTP/1.1 and HTTP/2 on
//! one port, a time limit on a request head (and on a new connection's
//! first request, whatever it sends meanwhile), idle connections closed (a
//! connection with no request in flight, silent for the front door's idle
//! timeout; on HTTP/2 only requests count, not pings or settings), at the
//! connection cap an idle one reclaimed for a new client, and one graceful
//! shutdown path (stop accepting, let in-flight requests finish within a
//! grace period).
//!
//! Both limits are watched by one timer per connection (a task of its own)
//! that looks at counts of the connection's reads and requests; nothing is
//! timed per request. hyper's own limits do not do this: the `auto` builder
//! waits for the protocol preface with no timer (a silent connection stays
//! open), HTTP/2 has no idle timeout, and `header_read_timeout` also runs
//! while a kept-alive connection waits for its next request. The watcher
//! also closes an idle connection at once to make room. The graceful
//! shutdown is hyper-util's (`GracefulShutdown`): each connection finishes
//! what is under way, waited for within the grace.

use std::convert::Infallible;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::net::TcpStream;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::io::Interest;
use tokio::net::TcpListener;
use tokio::runtime::{Handle, RuntimeFlavor};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};

use super::holding::Holding;
use super::noted::{Noted, Notes, Wire};
use super::turns::{Serving, within_grace};
use super::{Body, handle};

use crate::error::Unanswered;
use crate::limits::{HEADER_READ_TIMEOUT, MAX_CONNECTIONS};
use crate::os::{Stop, Stops};
use crate::util::lock;

/// Pause after a failed accept (e.g. out of file descriptors) before retrying.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Serves on `listener` until `shutdown` resolves, then drains.
pub async fn run(listener: TcpListener, serving: Serving, shutdown: impl Future<Output = ()>) {
    let connections = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let graceful = GracefulShutdown::new();
    let builder = auto::Builder::new(TokioExecutor::new());
    let idle = serving.front_door().idle_timeout;
    let limits = Limits { idle, head: HEADER_READ_TIMEOUT.min(idle) };
    tokio::pin!(shutdown);
    let mut open: Vec<Weak<Activity>> = Vec::new();
    loop {
        let permit = tokio::select! {
            permit = room(&connections, &mut open) => match permit {
                Some(permit) => permit,
                None => break, // the semaphore is never closed
            },
            () = &mut shutdown => break,
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    // Answers are small and streamed event by event: send each at once.
                    if let Err(e) = stream.set_nodelay(true) {
                        tracing::debug!("TCP_NODELAY not set: {e}");
                    }
                    wait_for_the_reactor(&stream);
                    (stream, peer)
                }
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let serving = serving.clone();
        let (close, told) = oneshot::channel();
        let activity = Arc::new(Activity { close: Mutex::new(Some(close)), ..Activity::default() });
        if open.len() >= 2 * MAX_CONNECTIONS {
            open.retain(|activity| activity.strong_count() > 0);
        }
        open.push(Arc::downgrade(&activity));
        let served = Arc::clone(&activity);
        let service = service_fn(move |request| {
            let taken = serving.take(request.headers());
            let busy = InFlight::start(&served);
            let wire = served.wire.clone();
            async move {
                let taken = match taken {
                    Ok(taken) => taken,
                    Err(refused) => {
                        let why = match refused {
                            Unanswered::NoTape => "no tape is running",
                            _ => "a session an earlier tape opened",
                        };
                        tracing::info!("{} {}: refused, {why}", request.method(), request.uri().path());
                        let refused = super::refused(refused);
                        return Ok::<_, Infallible>(refused.map(|body| busy.guard(body, None)));
                    }
                };
                // Boxed: hyper keeps and moves this future, which would otherwise hold the
                // handler's whole state (kilobytes) inline. Made in its box's room, not made
                // and then copied in whole.
                let handling = Box::write(Box::new_uninit(), handle(request, &taken.app, Some(wire)));
                let answered = Box::into_pin(handling).await;
                taken.answered(answered.headers());
                Ok(answered.map(|body| busy.guard(body, taken.held)))
            }
        });
        let io = TokioIo::new(Noted { io: stream, notes: Arc::clone(&activity) });
        let connection = graceful.watch(builder.serve_connection(io, service).into_owned());
        // The watcher runs as a task of its own, so that the connection's task looks at one
        // oneshot at a wake, not at the watcher's timer and messages.
        let (mut closing, closed) = oneshot::channel();
        tokio::spawn(async move {
            let why = tokio::select! {
                why = activity.watch(limits, told) => Some(why),
                () = closing.closed() => None, // the connection ended first
            };
            if let Some(why) = why {
                let _ = closing.send(why);
            }
        });
        tokio::spawn(async move {
            // The watcher's word drops the connection, which closes it.
            let ended = tokio::select! {
                biased;
                ended = connection => ended,
                Ok(why) = closed => match why {
                    Closed::Idle => {
                        tracing::debug!(
                            "{peer}: closed after {:?} idle with no request in flight",
                            limits.idle
                        );
                        Ok(())
                    }
                    Closed::SlowHead => {
                        tracing::info!("{peer} rejected: request head not complete within {:?}", limits.head);
                        Ok(())
                    }
                    Closed::Reclaimed => {
                        tracing::debug!(
                            "{peer}: idle, closed to make room for a new connection ({MAX_CONNECTIONS} open)"
                        );
                        Ok(())
                    }
                },
            };
            if let Err(e) = ended {
                // A request hyper refused before it reached us (400, 414,
                // 431) gets a log line like every other request.
                let refused = e.downcast_ref::<hyper::Error>().is_some_and(hyper::Error::is_parse);
                if refused {
                    tracing::info!("{peer} rejected by the HTTP layer: {e}");
                } else {
                    tracing::debug!("connection ended with an error: {e}");
                }
            }
            drop(permit);
        });
    }
    drop(listener);
    let app = serving.current();
    // Standalone streams would otherwise stay open for the whole grace.
    if let Some(app) = &app {
        app.engine().end_streams();
    }
    // Each connection answers what is under way, then closes; requests still waiting for an
    // answer after the grace get 503 with their id, not a cut connection.
    within_grace(graceful.shutdown(), app.as_deref()).await;
}

/// Resolves on the first stop from outside (SIGINT, SIGTERM, SIGHUP: the
/// terminal went away, SIGQUIT; on Windows Ctrl-C, Ctrl-Break, the console
/// closing, the system shutting down): each ends the daemon the same clean
/// way, summary included. They are listened for when this is called,
/// before the daemon says it is listening, so a stop right after that line
/// is never missed.
pub fn shutdown_signal() -> impl Future<Output = ()> {
    let mut stops = Stops::listen(&[Stop::Interrupt, Stop::Terminate, Stop::HangUp, Stop::Quit]);
    async move {
        let stop = stops.next().await;
        tracing::info!("{}: shutting down", stop.name());
    }
}

/// Makes a newly accepted connection's first read wait for the reactor's
/// word, as every other read does. tokio takes an accepted socket as
/// readable and tries it at once, so a request on a connection accepted
/// late (a recorder held up on a busy machine) was read before the
/// requests that had come earlier on connections already open, whose
/// readiness the reactor had yet to report. The reactor reports them in
/// the kernel's order, the new connection from when it was accepted.
///
/// Only on one thread: there the reactor runs on this thread, so it cannot
/// have reported the new socket between its accept and this. On a thread
/// a core it could have, on another thread, and this would drop that
/// report; and there the scheduler, not the kernel, orders what is read.
fn wait_for_the_reactor(stream: &TcpStream) {
    if Handle::current().runtime_flavor() != RuntimeFlavor::CurrentThread {
        return;
    }
    // A closure that says "would block" clears the readiness tokio assumed.
    let _ = stream.try_io(Interest::READABLE, || Err::<(), _>(std::io::ErrorKind::WouldBlock.into()));
}

/// A permit for one more connection. At the cap, one connection with no
/// request in flight (the one seen first in `open`, which lists them oldest
/// first) is told to close, so that a new client does not wait behind idle
/// ones; `None` if the semaphore was closed.
async fn room(connections: &Arc<Semaphore>, open: &mut Vec<Weak<Activity>>) -> Option<OwnedSemaphorePermit> {
    if let Ok(permit) = Arc::clone(connections).try_acquire_owned() {
        return Some(permit);
    }
    open.retain(|activity| activity.strong_count() > 0);
    let idle = open.iter().filter_map(Weak::upgrade).find(|a| a.in_flight.load(Ordering::Relaxed) == 0);
    if let Some(activity) = idle {
        activity.reclaim();
    }
    Arc::clone(connections).acquire_owned().await.ok()
}

/// What a connection is doing: requests in flight (answers still streaming
/// included), and counts of its reads, writes and requests (counts, not
/// times: no clock is read per read, write or request).
#[derive(Default)]
struct Activity {
    moves: AtomicU64,
    /// Requests started and ended: what counts as activity on HTTP/2,
    /// where pings and settings frames move bytes with no request.
    requests: AtomicU64,
    /// Told to close at once: the cap is reached and this connection is
    /// idle. A oneshot, not a `Notify` or a watch channel, which take a lock
    /// at every poll.
    close: Mutex<Option<oneshot::Sender<()>>>,
    reads: AtomicU64,
    /// `reads` when the last request started or ended: reads past it with
    /// nothing in flight are a request head on its way.
    settled: AtomicU64,
    in_flight: AtomicUsize,
    /// The client opened with the HTTP/2 preface: frames between requests
    /// (pings, settings) are not a request head.
    http2: AtomicBool,
    /// What an answer's body waits on of its writes.
    wire: Wire,
}

/// How often per limit a connection is looked at.
const CHECKS: u32 = 4;

/// A connection's time limits.
#[derive(Clone, Copy)]
struct Limits {
    /// No request in flight and nothing read or written.
    idle: Duration,
    /// From the first byte of an HTTP/1 request head to its end.
    head: Duration,
}

/// Why [`Activity::watch`] closed a connection.
enum Closed {
    Idle,
    SlowHead,
    /// Closed to make room for a new client.
    Reclaimed,
}

impl Activity {
    /// Tells the connection's watcher to close it now; once (a connection
    /// told already, or gone, hears nothing more).
    fn reclaim(&self) {
        if let Some(told) = lock(&self.close).take() {
            let _ = told.send(());
        }
    }

    fn touch(&self) {
        self.moves.fetch_add(1, Ordering::Relaxed);
    }

    fn wrote(&self) {
        self.touch();
        self.wire.wrote();
    }

    fn settle(&self) {
        self.settled.store(self.reads.load(Ordering::Relaxed), Ordering::Relaxed);
    }

    /// Resolves once a limit is passed, or the connection is told to close: no
    /// request in flight and nothing moved (on HTTP/2: no request started or
    /// ended) for `limits.idle`; an HTTP/1 request head begun and not
    /// finished for `limits.head`; no first request within `limits.head` of
    /// the connection's start. Each is seen so at [`CHECKS`] looks in a
    /// row, a quarter of the shorter limit apart, so it is noticed within a
    /// quarter of that limit after it passed.
    async fn watch(&self, limits: Limits, told: oneshot::Receiver<()>) -> Closed {
        tokio::select! {
            closed = self.limit(limits) => closed,
            Ok(()) = told => Closed::Reclaimed,
        }
    }

    async fn limit(&self, limits: Limits) -> Closed {
        let every = limits.idle.min(limits.head) / CHECKS;
        let looks = |limit: Duration| limit.as_nanos().div_ceil(every.as_nanos().max(1));
        let (idle_looks, head_looks) = (looks(limits.idle), looks(limits.head));
        let moved = || {
            let http2 = self.http2.load(Ordering::Relaxed);
            if http2 { self.requests.load(Ordering::Relaxed) } else { self.moves.load(Ordering::Relaxed) }
        };
        let mut seen = moved();
        let mut settled = self.settled.load(Ordering::Relaxed);
        let (mut quiet, mut heading, mut waiting) = (0u128, 0u128, 0u128);
        loop {
            tokio::time::sleep(every).await;
            let moves = moved();
            let idle = self.in_flight.load(Ordering::Relaxed) == 0;
            // No request yet: the first one must begin and end its head in time.
            let first = self.requests.load(Ordering::Relaxed) == 0;
            waiting = if first && idle { waiting + 1 } else { 0 };
            if waiting > head_looks {
                return Closed::SlowHead;
            }
            quiet = if moves == seen && idle { quiet + 1 } else { 0 };
            seen = moves;
            // The same head as at the last look: no request started or ended since.
            let same_head = self.settled.load(Ordering::Relaxed) == settled;
            settled = self.settled.load(Ordering::Relaxed);
            let head_begun =
                idle && !self.http2.load(Ordering::Relaxed) && self.reads.load(Ordering::Relaxed) > settled;
            heading = if head_begun && same_head { heading + 1 } else { u128::from(head_begun) };
            if quiet >= idle_looks {
                return Closed::Idle;
            }
            if heading > head_looks {
                return Closed::SlowHead;
            }
        }
    }
}

/// How an HTTP/2 connection opens (RFC 9113, section 3.4).
const HTTP2_PREFACE: &[u8] = b"PRI * HTTP/2.0";

/// A socket's reads and writes, noted in its [`Activity`].
impl Notes<TcpStream> for Arc<Activity> {
    fn read(&self, got: &[u8]) {
        if self.reads.fetch_add(1, Ordering::Relaxed) == 0 {
            let http2 = got.len() >= HTTP2_PREFACE.len() && got.starts_with(HTTP2_PREFACE);
            self.http2.store(http2, Ordering::Relaxed);
        }
        self.touch();
    }

    fn wrote(&self) {
        Activity::wrote(self);
    }
}

/// One request in flight on a connection, from its arrival until its
/// answer's body has been sent (or dropped).
struct InFlight(Arc<Activity>);

/// What an answer's body holds while it is sent: its request in flight on
/// the connection, and on its tape ([`Taken::held`]).
type BodyHolds = (InFlight, Option<OwnedSemaphorePermit>);

impl InFlight {
    fn start(activity: &Arc<Activity>) -> InFlight {
        activity.settle();
        activity.requests.fetch_add(1, Ordering::Relaxed);
        activity.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(Arc::clone(activity))
    }

    /// The answer's body, keeping the request in flight (and `held`) while it streams.
    fn guard(self, body: Body, held: Option<OwnedSemaphorePermit>) -> Holding<Body, BodyHolds> {
        Holding::new(body, (self, held))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.requests.fetch_add(1, Ordering::Relaxed);
        self.0.touch();
        self.0.settle();
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}
