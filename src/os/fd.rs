//! A descriptor's own calls (Unix): a pipe or socket of the process's own
//! (stdin, stdout) in non-blocking mode, driven by the reactor ([`Pipe`]:
//! each read straight into the reader's buffer, each write one call), and
//! on Linux a socket whose reads say when the kernel received their bytes
//! (`SO_TIMESTAMPNS`).

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A descriptor the reactor can wait on.
struct Fd(RawFd);

impl AsRawFd for Fd {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

/// A pipe or socket in non-blocking mode, driven by the reactor.
pub struct Pipe {
    fd: AsyncFd<Fd>,
    /// The descriptor's flags before, restored on drop.
    flags: libc::c_int,
}

impl Pipe {
    /// Standard input as a [`Pipe`], if it is a pipe or a socket the reactor takes.
    pub fn stdin() -> Option<Pipe> {
        Pipe::open(libc::STDIN_FILENO)
    }

    /// Standard output as a [`Pipe`], if it is a pipe or a socket the reactor takes.
    pub fn stdout() -> Option<Pipe> {
        Pipe::open(libc::STDOUT_FILENO)
    }

    fn open(fd: RawFd) -> Option<Pipe> {
        let flags = non_blocking_pipe(fd)?;
        // SAFETY: `fd` is stdin or stdout, which stay open and the same file
        // while the process runs: mcp-tape never closes them.
        match unsafe { AsyncFd::register(Fd(fd)) } {
            Ok(fd) => Some(Pipe { fd, flags }),
            Err(_) => {
                set_flags(fd, flags);
                None
            }
        }
    }
}

impl Drop for Pipe {
    fn drop(&mut self) {
        set_flags(self.fd.get_ref().0, self.flags);
    }
}

impl AsyncRead for Pipe {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        loop {
            let mut ready = ready!(self.fd.poll_read_ready(cx))?;
            match ready.try_io(|fd| read(fd.get_ref().0, buf)) {
                Ok(read) => return Poll::Ready(read),
                Err(_would_block) => {}
            }
        }
    }
}

impl AsyncWrite for Pipe {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<std::io::Result<usize>> {
        loop {
            let mut ready = ready!(self.fd.poll_write_ready(cx))?;
            // With `2>&1`, a log piece part-written holds the door's turn.
            let Some(written) = super::imp::shared_output::door_write(data, cx.waker(), || {
                let written = ready.try_io(|fd| write(fd.get_ref().0, data));
                written.unwrap_or_else(|_would_block| Err(std::io::ErrorKind::WouldBlock.into()))
            }) else {
                return Poll::Pending;
            };
            match written {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                result => return Poll::Ready(result),
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(())) // nothing is buffered here
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// Switches `fd` to non-blocking mode if it is a pipe or a socket, and
/// gives the flags it had (for [`set_flags`] to restore); `None`, with
/// nothing changed, for anything else (a terminal, a file).
fn non_blocking_pipe(fd: RawFd) -> Option<libc::c_int> {
    // SAFETY: an all-zero stat is a valid one for fstat to fill; fstat and
    // fcntl take a descriptor and (for fstat) that buffer, alive through the call.
    unsafe {
        let mut stat: libc::stat = std::mem::zeroed();
        if libc::fstat(fd, &mut stat) != 0 {
            return None;
        }
        let kind = stat.st_mode & libc::S_IFMT;
        if kind != libc::S_IFIFO && kind != libc::S_IFSOCK {
            return None;
        }
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return None;
        }
        Some(flags)
    }
}

/// Sets `fd`'s status flags (what [`non_blocking_pipe`] gave back).
fn set_flags(fd: RawFd, flags: libc::c_int) {
    // SAFETY: fcntl with F_SETFL takes an integer, no pointer.
    unsafe {
        libc::fcntl(fd, libc::F_SETFL, flags);
    }
}

/// One read(2) from `fd` into the unfilled part of `buf`, marking what it
/// read filled.
fn read(fd: RawFd, buf: &mut ReadBuf<'_>) -> io::Result<()> {
    // SAFETY: read(2) writes only initialized bytes into the unfilled part,
    // at most its length, and says how many.
    let unfilled = unsafe { buf.unfilled_mut() };
    // SAFETY: the pointer and length are the unfilled part's, alive through the call.
    let got = unsafe { libc::read(fd, unfilled.as_mut_ptr().cast(), unfilled.len()) };
    let got = usize::try_from(got).map_err(|_| io::Error::last_os_error())?;
    // SAFETY: read(2) initialized the first `got` bytes of the unfilled part.
    unsafe { buf.assume_init(got) };
    buf.advance(got);
    Ok(())
}

/// One write(2) of `data` to `fd`: how much of it was written.
fn write(fd: RawFd, data: &[u8]) -> io::Result<usize> {
    // SAFETY: write(2) reads at most `data.len()` bytes from `data`, alive through the call.
    let written = unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) };
    usize::try_from(written).map_err(|_| io::Error::last_os_error())
}

/// Asks the kernel to stamp what the socket `fd` receives; false when it will not.
#[cfg(target_os = "linux")]
pub fn stamp_receipts(fd: RawFd) -> bool {
    let on: libc::c_int = 1;
    // SAFETY: the option's value is a c_int that lives through the call,
    // and its size is given.
    let set = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&raw const on).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    set == 0
}

/// Once `stream` (stamped by [`stamp_receipts`]) is readable, one
/// [`receive_stamped`] from it: when the kernel received what it read, if
/// it said (a read of the end has no stamp).
#[cfg(target_os = "linux")]
pub fn poll_receive_stamped(
    stream: &tokio::net::TcpStream,
    cx: &mut Context<'_>,
    buf: &mut ReadBuf<'_>,
) -> Poll<io::Result<Option<u64>>> {
    loop {
        ready!(stream.poll_read_ready(cx))?;
        let fd = stream.as_raw_fd();
        match stream.try_io(tokio::io::Interest::READABLE, || receive_stamped(fd, buf)) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            received => return Poll::Ready(received),
        }
    }
}

/// One `recvmsg` from the socket `fd` (stamped by [`stamp_receipts`]) into
/// the unfilled part of `buf`, marking what it read filled: when the kernel
/// received those bytes (the system clock's nanoseconds), if it said.
#[cfg(target_os = "linux")]
pub fn receive_stamped(fd: RawFd, buf: &mut ReadBuf<'_>) -> io::Result<Option<u64>> {
    // SAFETY: recvmsg writes only initialized bytes into the unfilled part,
    // at most its length, and says how many.
    let unfilled = unsafe { buf.unfilled_mut() };
    let mut part = libc::iovec { iov_base: unfilled.as_mut_ptr().cast(), iov_len: unfilled.len() };
    // Room for one control message carrying a timespec, aligned for it.
    let mut control = [0u64; 8];
    // SAFETY: an all-zero msghdr is a valid empty one.
    let mut header: libc::msghdr = unsafe { std::mem::zeroed() };
    header.msg_iov = &raw mut part;
    header.msg_iovlen = 1;
    header.msg_control = control.as_mut_ptr().cast();
    header.msg_controllen = size_of_val(&control) as _;
    // SAFETY: the header points at `part` (the unfilled part, which the
    // kernel fills) and `control`, both alive through the call.
    let got = unsafe { libc::recvmsg(fd, &raw mut header, 0) };
    let got = usize::try_from(got).map_err(|_| io::Error::last_os_error())?;
    // SAFETY: recvmsg initialized the first `got` bytes of the unfilled part.
    unsafe { buf.assume_init(got) };
    buf.advance(got);
    let mut at = None;
    // SAFETY: the control messages are walked with the kernel's macros
    // over the buffer it filled, and a timespec is read only from one
    // that says it holds one.
    unsafe {
        let mut message = libc::CMSG_FIRSTHDR(&raw const header);
        while !message.is_null() {
            if (*message).cmsg_level == libc::SOL_SOCKET && (*message).cmsg_type == libc::SCM_TIMESTAMPNS {
                let time: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(message).cast());
                let nanos = u64::try_from(time.tv_sec).unwrap_or(0) * 1_000_000_000
                    + u64::try_from(time.tv_nsec).unwrap_or(0);
                at = Some(nanos);
            }
            message = libc::CMSG_NXTHDR(&raw const header, message);
        }
    }
    Ok(at)
}
