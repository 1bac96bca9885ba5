//! mcp-tape's own stdin and stdout as async byte streams. When they are
//! pipes or sockets on Unix (a client spawned mcp-tape: the usual case) they are
//! switched to non-blocking mode and driven by the runtime's reactor, so a
//! message costs a read or write call and no thread hand-off (tokio's own
//! stdin/stdout hand every call to its blocking pool). Anything else (a
//! terminal, a file) is read on a thread of its own, or written through
//! tokio's stdout. The descriptor's flags are restored when the stream goes.
//!
//! Why the descriptors' own calls (`os::fd`): with stdin read on a thread
//! of its own and tokio's stdout instead, `replay --stdio` served 7.1% of
//! the messages per second it serves this way (`bench/compare.py`, one
//! client keeping 32 requests in flight, six rounds).

use std::io::Read;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::mpsc;

/// Standard input as an async byte stream.
pub fn stdin() -> Box<dyn AsyncRead + Unpin + Send> {
    crate::os::stdin_pipe().unwrap_or_else(|| Box::new(read_on_a_thread()))
}

/// Standard output as an async byte stream.
pub fn stdout() -> Box<dyn AsyncWrite + Unpin + Send> {
    crate::os::stdout_pipe().unwrap_or_else(|| Box::new(tokio::io::stdout()))
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
