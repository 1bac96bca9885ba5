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
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use hyper::Uri;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

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
            let io = connecting.await?;
            Ok(Stamped {
                #[cfg(target_os = "linux")]
                kernel: kernel::stamp(io.inner()),
                io,
                arrival: Arc::default(),
            })
        })
    }
}

/// A TCP connection that keeps when its latest read arrived.
pub(super) struct Stamped {
    io: TokioIo<TcpStream>,
    arrival: Arc<Arrival>,
    /// The kernel stamps what the socket receives.
    #[cfg(target_os = "linux")]
    kernel: bool,
}

impl Connection for Stamped {
    fn connected(&self) -> Connected {
        self.io.connected().extra(Arc::clone(&self.arrival))
    }
}

impl hyper::rt::Read for Stamped {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        #[cfg(target_os = "linux")]
        if self.kernel {
            return kernel::poll_read(self.io.inner(), &self.arrival, cx, buf);
        }
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        if polled.is_ready() {
            self.arrival.0.store(Arrived::now().nanos(), Ordering::Relaxed);
        }
        polled
    }
}

impl hyper::rt::Write for Stamped {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
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

#[cfg(target_os = "linux")]
mod kernel {
    use std::io::{self, ErrorKind};
    use std::mem::MaybeUninit;
    use std::os::fd::{AsRawFd, RawFd};
    use std::sync::atomic::Ordering;
    use std::task::{Context, Poll, ready};

    use tokio::io::Interest;
    use tokio::net::TcpStream;

    use super::Arrival;

    /// Asks the kernel to stamp what `stream` receives; false when it will not.
    pub(super) fn stamp(stream: &TcpStream) -> bool {
        let on: libc::c_int = 1;
        // SAFETY: the option's value is a c_int that lives through the call,
        // and its size is given.
        let set = unsafe {
            libc::setsockopt(
                stream.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_TIMESTAMPNS,
                (&raw const on).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        set == 0
    }

    /// Reads from `stream` into `buf` once it is readable, noting in
    /// `arrival` when the kernel received what was read.
    pub(super) fn poll_read(
        stream: &TcpStream,
        arrival: &Arrival,
        cx: &mut Context<'_>,
        mut buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            ready!(stream.poll_read_ready(cx))?;
            // SAFETY: `receive` writes only initialized bytes into the
            // unfilled part and says how many; exactly that many are then
            // marked filled.
            let unfilled = unsafe { buf.as_mut() };
            match stream.try_io(Interest::READABLE, || receive(stream.as_raw_fd(), unfilled)) {
                Ok((got, at)) => {
                    if let Some(at) = at {
                        arrival.0.store(at, Ordering::Relaxed);
                    }
                    // SAFETY: `receive` initialized the first `got` bytes of the unfilled part.
                    unsafe { buf.advance(got) };
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    /// One `recvmsg` into `into`: how many bytes, and when the kernel
    /// received them (the system clock's nanoseconds), if it said.
    fn receive(fd: RawFd, into: &mut [MaybeUninit<u8>]) -> io::Result<(usize, Option<u64>)> {
        let mut part = libc::iovec { iov_base: into.as_mut_ptr().cast(), iov_len: into.len() };
        // Room for one control message carrying a timespec, aligned for it.
        let mut control = [0u64; 8];
        // SAFETY: an all-zero msghdr is a valid empty one.
        let mut header: libc::msghdr = unsafe { std::mem::zeroed() };
        header.msg_iov = &raw mut part;
        header.msg_iovlen = 1;
        header.msg_control = control.as_mut_ptr().cast();
        header.msg_controllen = size_of_val(&control) as _;
        // SAFETY: the header points at `part` (the caller's buffer, which the
        // kernel fills) and `control`, both alive through the call.
        let got = unsafe { libc::recvmsg(fd, &raw mut header, 0) };
        let Ok(got) = usize::try_from(got) else { return Err(io::Error::last_os_error()) };
        let mut at = None;
        // SAFETY: the control messages are walked with the kernel's macros
        // over the buffer it filled, and a timespec is read only from one
        // that says it holds one.
        unsafe {
            let mut message = libc::CMSG_FIRSTHDR(&raw const header);
            while !message.is_null() {
                if (*message).cmsg_level == libc::SOL_SOCKET && (*message).cmsg_type == libc::SCM_TIMESTAMPNS
                {
                    let time: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(message).cast());
                    let nanos = u64::try_from(time.tv_sec).unwrap_or(0) * 1_000_000_000
                        + u64::try_from(time.tv_nsec).unwrap_or(0);
                    at = Some(nanos);
                }
                message = libc::CMSG_NXTHDR(&raw const header, message);
            }
        }
        Ok((got, at))
    }
}
