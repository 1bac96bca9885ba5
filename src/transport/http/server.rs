//! The accept loop: a bounded number of connections, HTTP/1.1 and HTTP/2 on
//! one port, a header read timeout, idle connections closed (a connection
//! with no request in flight, silent for the front door's idle timeout), and
//! one graceful shutdown path (stop accepting, let in-flight requests finish
//! within a grace period).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use super::{App, Body, handle};

/// Connections served at once; further ones wait in the listen backlog.
pub const MAX_CONNECTIONS: usize = 1024;
/// A client has this long to send its request headers.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// In-flight requests get this long to finish after a shutdown signal.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// Pause after a failed accept (e.g. out of file descriptors) before retrying.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Serves `app` on `listener` until `shutdown` resolves, then drains.
pub async fn run(listener: TcpListener, app: Arc<App>, shutdown: impl Future<Output = ()>) {
    let graceful = GracefulShutdown::new();
    let connections = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(HEADER_READ_TIMEOUT);
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            permit = Arc::clone(&connections).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break, // the semaphore is never closed
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
        let idle_timeout = app.front_door.idle_timeout;
        let app = Arc::clone(&app);
        let activity = Arc::new(Activity::default());
        let served = Arc::clone(&activity);
        let service = service_fn(move |request| {
            let app = Arc::clone(&app);
            let busy = InFlight::start(&served);
            async move { Ok::<_, Infallible>(handle(request, &app).await.map(|body| busy.guard(body))) }
        });
        let io = TokioIo::new(Tracked { io: stream, activity: Arc::clone(&activity) });
        let connection = graceful.watch(builder.serve_connection(io, service).into_owned());
        tokio::spawn(async move {
            tokio::select! {
                ended = connection => if let Err(e) = ended {
                    // A request hyper refused before it reached us (400, 414,
                    // 431) gets a log line like every other request.
                    let refused = e.downcast_ref::<hyper::Error>().is_some_and(hyper::Error::is_parse);
                    if refused {
                        tracing::info!("{peer} rejected by the HTTP layer: {e}");
                    } else {
                        tracing::debug!("connection ended with an error: {e}");
                    }
                },
                () = activity.idle(idle_timeout) => {
                    tracing::debug!("{peer}: closed after {idle_timeout:?} idle with no request in flight");
                }
            }
            drop(permit);
        });
    }
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(SHUTDOWN_GRACE) => {
            tracing::warn!("requests still in flight after {SHUTDOWN_GRACE:?}; stopping anyway");
        }
    }
}

/// Resolves on the first of SIGINT, SIGTERM, SIGHUP (the terminal went away)
/// or SIGQUIT: each ends the daemon the same clean way, summary included.
/// The handlers are installed when this is called, before the daemon says
/// it is listening, so a signal right after that line is never missed.
pub fn shutdown_signal() -> impl Future<Output = ()> {
    use tokio::signal::unix::{Signal, SignalKind, signal};
    /// Waits for one signal; forever if it could not be watched.
    async fn arrival(watched: &mut Option<Signal>) {
        match watched {
            Some(watched) => {
                watched.recv().await;
            }
            None => std::future::pending().await,
        }
    }
    let mut interrupt = signal(SignalKind::interrupt()).ok();
    let mut terminate = signal(SignalKind::terminate()).ok();
    let mut hangup = signal(SignalKind::hangup()).ok();
    let mut quit = signal(SignalKind::quit()).ok();
    async move {
        let name = tokio::select! {
            () = arrival(&mut interrupt) => "SIGINT",
            () = arrival(&mut terminate) => "SIGTERM",
            () = arrival(&mut hangup) => "SIGHUP",
            () = arrival(&mut quit) => "SIGQUIT",
        };
        tracing::info!("{name}: shutting down");
    }
}

/// What a connection is doing: requests in flight (answers still streaming
/// included), and a count of its reads and writes (a count, not a time: no
/// clock is read per read or write).
#[derive(Default)]
struct Activity {
    moves: AtomicU64,
    in_flight: AtomicUsize,
}

/// How often per idle limit a connection is looked at.
const IDLE_CHECKS: u32 = 4;

impl Activity {
    fn touch(&self) {
        self.moves.fetch_add(1, Ordering::Relaxed);
    }

    /// Resolves once no request has been in flight and nothing has moved for
    /// `limit`: seen so at [`IDLE_CHECKS`] looks in a row, `limit /
    /// IDLE_CHECKS` apart (so within a quarter of `limit` after it passed).
    async fn idle(&self, limit: Duration) {
        let mut seen = self.moves.load(Ordering::Relaxed);
        let mut quiet = 0;
        loop {
            tokio::time::sleep(limit / IDLE_CHECKS).await;
            let moves = self.moves.load(Ordering::Relaxed);
            if moves == seen && self.in_flight.load(Ordering::Relaxed) == 0 {
                quiet += 1;
                if quiet == IDLE_CHECKS {
                    return;
                }
            } else {
                quiet = 0;
                seen = moves;
            }
        }
    }
}

/// The socket, noting each read and write in its [`Activity`].
struct Tracked {
    io: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Tracked {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.touch();
        }
        polled
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write(cx, data);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write_vectored(cx, data);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// One request in flight on a connection, from its arrival until its
/// answer's body has been sent (or dropped).
struct InFlight(Arc<Activity>);

impl InFlight {
    fn start(activity: &Arc<Activity>) -> InFlight {
        activity.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(Arc::clone(activity))
    }

    /// The answer's body, keeping the request in flight while it streams.
    fn guard(self, body: Body) -> Body {
        Guarded { body, _in_flight: self }.boxed()
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.touch();
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

struct Guarded {
    body: Body,
    _in_flight: InFlight,
}

impl HttpBody for Guarded {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
