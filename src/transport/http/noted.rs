//! A connection whose traffic something notes as it passes: the one
//! read/write wrapper of the HTTP door. The server's sockets note their
//! reads and writes for the idle and slow watch (`server`), the upstream's
//! when their reads arrived (`arrival`) and whether a request was answered
//! (`upstream`). Each says what it notes as a [`Notes`]; [`Noted`] passes
//! every call through to the connection and tells them.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use hyper_util::client::legacy::connect::{Connected, Connection};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::oneshot;

use crate::util::lock;

/// What a [`Noted`] connection over `T` is told, each with nothing to do
/// by default.
pub(super) trait Notes<T> {
    /// A read into `buf` from `io`: `io`'s own, unless the notes read
    /// another way (to learn more of it than the bytes).
    fn poll_read(&self, io: Pin<&mut T>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>>
    where
        T: AsyncRead,
    {
        io.poll_read(cx, buf)
    }

    /// A read brought `got` (never empty).
    fn read(&self, _got: &[u8]) {}

    /// A write is about to be tried.
    fn writing(&self) {}

    /// A write took at least a byte.
    fn wrote(&self) {}

    /// What a client connection says of itself to hyper-util (its extras).
    fn connected(&self, connected: Connected) -> Connected {
        connected
    }
}

/// `io`, its traffic told to `notes`.
pub(super) struct Noted<T, N> {
    pub(super) io: T,
    pub(super) notes: N,
}

impl<T: AsyncRead + Unpin, N: Notes<T> + Unpin> AsyncRead for Noted<T, N> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let Noted { io, notes } = &mut *self;
        let polled = notes.poll_read(Pin::new(io), cx, buf);
        if buf.filled().len() > before {
            notes.read(&buf.filled()[before..]);
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin, N: Notes<T> + Unpin> AsyncWrite for Noted<T, N> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        self.notes.writing();
        let polled = Pin::new(&mut self.io).poll_write(cx, data);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.notes.wrote();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.notes.writing();
        let polled = Pin::new(&mut self.io).poll_write_vectored(cx, data);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.notes.wrote();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

impl<T: Connection, N: Notes<T>> Connection for Noted<T, N> {
    fn connected(&self) -> Connected {
        self.notes.connected(self.io.connected())
    }
}

/// A connection's writes as an answer's body waits on them: what it must
/// know to tell that what it yielded has been written.
#[derive(Clone, Default)]
pub struct Wire(Arc<Awaited>);

#[derive(Default)]
struct Awaited {
    /// Fired at the next write; `any` says there are some.
    on_write: Mutex<Vec<oneshot::Sender<()>>>,
    any: AtomicBool,
}

impl Wire {
    /// Fires `written` at the connection's next write to its socket: the
    /// write that carries what the body yielded before, since hyper writes
    /// what it buffered before it waits on the body again (on HTTP/2, where
    /// one task writes every stream's frames, the next write of any).
    pub(super) fn after_next_write(&self, written: oneshot::Sender<()>) {
        lock(&self.0.on_write).push(written);
        self.0.any.store(true, Ordering::Release);
    }

    /// The connection wrote to its socket.
    pub(super) fn wrote(&self) {
        // A load first: the swap (a write) only when an answer waits.
        if self.0.any.load(Ordering::Acquire) && self.0.any.swap(false, Ordering::AcqRel) {
            for written in std::mem::take(&mut *lock(&self.0.on_write)) {
                let _ = written.send(()); // the answer that waited may be gone
            }
        }
    }
}
