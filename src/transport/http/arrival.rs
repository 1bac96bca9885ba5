//! When what an upstream connection read arrived: the connector under TLS
//! whose TCP connections keep, for their latest read, when its bytes
//! arrived ([`crate::os::Receipts`]: the kernel's stamp where it gives
//! one, else the read's time). Recording orders by it what the server said
//! on two connections at once (an answer on the POST, a log message on the
//! GET stream) as it came, not as the proxy got round to reading it.
//!
//! The time travels to each response as an extension ([`Arrival`]). It is
//! the connection's, not a stream's: on an HTTP/2 upstream every stream of
//! the connection shares one, so a response's arrival is the latest read of
//! the connection when it is looked at, perhaps another stream's frame,
//! never before its own bytes came.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, ready};

use hyper::Uri;
use hyper_util::client::legacy::connect::{Connected, HttpConnector};
use hyper_util::rt::TokioIo;
use tokio::io::ReadBuf;
use tokio::net::TcpStream;

use super::noted::{Noted, Notes};
use crate::engine::Arrived;
use crate::os::Receipts;

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
            let receipts = Receipts::ask(&io);
            Ok(TokioIo::new(Noted { io, notes: Stamp { arrival: Arc::default(), receipts } }))
        })
    }
}

/// What a connection's reads note: when the latest arrived.
pub(super) struct Stamp {
    arrival: Arc<Arrival>,
    receipts: Receipts,
}

impl Notes<TcpStream> for Stamp {
    fn poll_read(
        &self,
        io: Pin<&mut TcpStream>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if let Some(at) = ready!(self.receipts.poll_read(io, cx, buf))? {
            self.arrival.0.store(at, Ordering::Relaxed);
        }
        Poll::Ready(Ok(()))
    }

    fn connected(&self, connected: Connected) -> Connected {
        connected.extra(Arc::clone(&self.arrival))
    }
}
