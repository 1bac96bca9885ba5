//! mcp-tape's own stdin and stdout as async byte streams. When they are
//! pipes or sockets on Unix (a client spawned mcp-tape: the usual case) they are
//! switched to non-blocking mode and driven by the runtime's reactor, so a
//! message costs a read or write call and no thread hand-off (tokio's own
//! stdin/stdout hand every call to its blocking pool). Anything else (a
//! terminal, a file) is read on a thread of its own, or written through
//! tokio's stdout. The descriptor's flags are restored when the stream goes.
//!
//! Why the `unsafe` here: with stdin read on a thread of its own and
//! tokio's stdout instead, `replay --stdio` served 7.1% of the messages per
//! second it serves this way (`bench/compare.py`, one client keeping 32
//! requests in flight, six rounds).

use std::io::Read;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::mpsc;

/// Standard input as an async byte stream.
pub fn stdin() -> Box<dyn AsyncRead + Unpin + Send> {
    #[cfg(unix)]
    if let Some(pipe) = reactor::Pipe::open(libc::STDIN_FILENO) {
        return Box::new(pipe);
    }
    Box::new(read_on_a_thread())
}

/// Standard output as an async byte stream.
pub fn stdout() -> Box<dyn AsyncWrite + Unpin + Send> {
    #[cfg(unix)]
    if let Some(pipe) = reactor::Pipe::open(libc::STDOUT_FILENO) {
        crate::os::shared_output::share_if_one();
        return Box::new(pipe);
    }
    Box::new(tokio::io::stdout())
}

/// A pipe or socket in non-blocking mode (Unix), driven by the reactor.
#[cfg(unix)]
mod reactor {
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
    pub(super) struct Pipe {
        fd: AsyncFd<Fd>,
        /// The descriptor's flags before, restored on drop.
        flags: libc::c_int,
    }

    impl Pipe {
        /// `fd` as a [`Pipe`] if it is a pipe or a socket the reactor takes.
        pub(super) fn open(fd: RawFd) -> Option<Pipe> {
            // SAFETY: fstat and fcntl on a descriptor this process holds; the
            // stat buffer is ours. `register` needs the descriptor open and the
            // same file for as long as the `AsyncFd` lives: stdin and stdout
            // are never closed by mcp-tape.
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
                match AsyncFd::register(Fd(fd)) {
                    Ok(fd) => Some(Pipe { fd, flags }),
                    Err(_) => {
                        libc::fcntl(fd, libc::F_SETFL, flags);
                        None
                    }
                }
            }
        }
    }

    impl Drop for Pipe {
        fn drop(&mut self) {
            // SAFETY: fcntl on the descriptor this process holds.
            unsafe {
                libc::fcntl(self.fd.get_ref().0, libc::F_SETFL, self.flags);
            }
        }
    }

    /// The result of a read(2) or write(2) call.
    fn outcome(n: isize) -> std::io::Result<usize> {
        if n < 0 { Err(std::io::Error::last_os_error()) } else { Ok(n as usize) }
    }

    impl AsyncRead for Pipe {
        fn poll_read(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<std::io::Result<()>> {
            loop {
                let mut ready = ready!(self.fd.poll_read_ready(cx))?;
                let unfilled = buf.initialize_unfilled();
                let read = ready.try_io(|fd| {
                    // SAFETY: read(2) into the unfilled part of the buffer, at most its length.
                    outcome(unsafe {
                        libc::read(fd.get_ref().0, unfilled.as_mut_ptr().cast(), unfilled.len())
                    })
                });
                match read {
                    Ok(Ok(n)) => {
                        buf.advance(n);
                        return Poll::Ready(Ok(()));
                    }
                    Ok(Err(e)) => return Poll::Ready(Err(e)),
                    Err(_would_block) => {}
                }
            }
        }
    }

    impl AsyncWrite for Pipe {
        fn poll_write(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            data: &[u8],
        ) -> Poll<std::io::Result<usize>> {
            loop {
                let mut ready = ready!(self.fd.poll_write_ready(cx))?;
                // With `2>&1`, a log piece part-written holds the door's turn.
                let Some(written) = crate::os::shared_output::door_write(data, cx.waker(), || {
                    let written = ready.try_io(|fd| {
                        // SAFETY: write(2) from `data`, at most its length.
                        outcome(unsafe { libc::write(fd.get_ref().0, data.as_ptr().cast(), data.len()) })
                    });
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
}

/// Standard input read on a thread of its own, for what the reactor cannot
/// wait on. The thread ends at the end of input or when the stream is
/// dropped and its next read returns; the process may end while it is
/// blocked in a read.
fn read_on_a_thread() -> Chunks {
    const CHUNK_BYTES: usize = 64 * 1024;
    let (chunks, received) = mpsc::channel::<Vec<u8>>(4);
    let spawned = std::thread::Builder::new().name("mcp-tape-stdin".into()).spawn(move || {
        let mut input = std::io::stdin().lock();
        let mut buffer = vec![0u8; CHUNK_BYTES];
        loop {
            match input.read(&mut buffer) {
                Ok(0) => return,
                Ok(n) => {
                    if chunks.blocking_send(buffer[..n].to_vec()).is_err() {
                        return;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    tracing::warn!("reading stdin failed: {e}");
                    return;
                }
            }
        }
    });
    if let Err(e) = spawned {
        tracing::error!("cannot start the stdin reader: {e}");
    }
    Chunks { received, current: Vec::new(), at: 0 }
}

/// Chunks from a channel as a byte stream; ends when the channel does.
struct Chunks {
    received: mpsc::Receiver<Vec<u8>>,
    current: Vec<u8>,
    at: usize,
}

impl AsyncRead for Chunks {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        if this.at == this.current.len() {
            match ready!(this.received.poll_recv(cx)) {
                Some(chunk) => (this.current, this.at) = (chunk, 0),
                None => return Poll::Ready(Ok(())), // the end of input
            }
        }
        let n = buf.remaining().min(this.current.len() - this.at);
        buf.put_slice(&this.current[this.at..this.at + n]);
        this.at += n;
        Poll::Ready(Ok(()))
    }
}
