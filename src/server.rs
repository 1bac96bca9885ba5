//! The accept loop: a bounded number of connections, HTTP/1.1 and HTTP/2 on
//! one port, a header read timeout, and one graceful shutdown path (stop
//! accepting, let in-flight requests finish within a grace period).

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::route::{self, App};

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
        let app = Arc::clone(&app);
        let service = service_fn(move |request| {
            let app = Arc::clone(&app);
            async move { Ok::<_, Infallible>(route::handle(request, &app).await) }
        });
        let connection = graceful.watch(builder.serve_connection(TokioIo::new(stream), service).into_owned());
        tokio::spawn(async move {
            if let Err(e) = connection.await {
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
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(SHUTDOWN_GRACE) => {
            tracing::warn!("requests still in flight after {SHUTDOWN_GRACE:?}; stopping anyway");
        }
    }
}

/// Resolves on the first of SIGINT, SIGTERM, SIGHUP (the terminal went away)
/// or SIGQUIT: each ends the daemon the same clean way, summary included.
pub async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    /// Waits for one signal; forever if it cannot be watched.
    async fn arrival(kind: SignalKind) {
        match signal(kind) {
            Ok(mut watched) => {
                watched.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    }
    let name = tokio::select! {
        () = arrival(SignalKind::interrupt()) => "SIGINT",
        () = arrival(SignalKind::terminate()) => "SIGTERM",
        () = arrival(SignalKind::hangup()) => "SIGHUP",
        () = arrival(SignalKind::quit()) => "SIGQUIT",
    };
    tracing::info!("{name}: shutting down");
}
