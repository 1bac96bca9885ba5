//! When what an upstream connection read arrived: the connector under TLS
//! whose TCP connections keep, for their latest read, the time the kernel
//! received its bytes (Linux: `SO_TIMESTAMPNS` on the socket, the time
//! coming with each `recvmsg`; elsewhere the time of the read). Recording
//! orders by it what the server said on two connections at once (an
//! answer on the POST, a log message on the GET stream) as it came, not as
//! the proxy got round to reading it.
//!
//! The time travels to each response as an extension ([`Arrival`]).

use std::future::Future;
#[cfg(target_os = "linux")]
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
#[cfg(target_os = "linux")]
use std::task::ready;
use std::task::{Context, Poll};

use hyper::Uri;
use hyper_util::client::legacy::connect::{Connected, HttpConnector};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, ReadBuf};
use tokio::net::TcpStream;

use super::noted::{Noted, Notes};
use crate::engine::Arrived;

/// When a connection's latest read arrived (the system clock's
/// nanoseconds; 0 before any read).
#[derive(Default, Debug)]
pub struct Arrival(AtomicU64);

impl Arrival {
    /// When the bytes of the connection's latest read arrived.
    pub fn latest(&self) -> Option<Arrived> {
        match self.0.load(Ordering::Relaxed) {
            0 => None,
            nanos => Some(Arrived::at(nanos)),
        }
    }
}

/// The TCP connector whose connections keep their [`Arrival`].
#[derive(Clone)]
pub(super) struct Stamping(pub(super) HttpConnector);

/// A TCP connection that keeps when its latest read arrived.
pub(super) type Stamped = TokioIo<Noted<TcpStream, Stamp>>;

impl tower_service::Service<Uri> for Stamping {
    type Response = Stamped;
    type Error = <HttpConnector as tower_service::Service<Uri>>::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Stamped, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let connecting = self.0.call(uri);
        Box::pin(async move {
            let io = connecting.await?.into_inner();
            #[cfg(target_os = "linux")]
            let kernel = crate::os::fd::stamp_receipts(io.as_raw_fd());
            #[cfg(not(target_os = "linux"))]
            let kernel = false;
            Ok(TokioIo::new(Noted { io, notes: Stamp { arrival: Arc::default(), kernel } }))
        })
    }
}

/// What a connection's reads note: when the latest arrived.
pub(super) struct Stamp {
    arrival: Arc<Arrival>,
    /// The kernel stamps what the socket receives (Linux).
    kernel: bool,
}

impl Notes<TcpStream> for Stamp {
    /// Once the socket is readable, one `recvmsg` that also says when the
    /// kernel received what it read, where the kernel stamps it.
    fn poll_read(
        &self,
        io: Pin<&mut TcpStream>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        #[cfg(target_os = "linux")]
        if self.kernel {
            if let Some(at) = ready!(crate::os::fd::poll_receive_stamped(&io, cx, buf))? {
                self.arrival.0.store(at, Ordering::Relaxed);
            }
            return Poll::Ready(Ok(()));
        }
        io.poll_read(cx, buf)
    }

    /// Where the kernel does not stamp them, bytes arrived when read.
    fn read(&self, _got: &[u8]) {
        if !self.kernel {
            self.arrival.0.store(Arrived::now().nanos(), Ordering::Relaxed);
        }
    }

    fn connected(&self, connected: Connected) -> Connected {
        connected.extra(Arc::clone(&self.arrival))
    }
}
