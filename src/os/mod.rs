//! What differs by operating system, behind one interface, so that the
//! rest of the crate names no platform:
//!
//! - [`Tree`]: a spawned command and whatever it starts, ended together and
//!   never outliving mcp-tape. Unix: a process group of its own, a watcher
//!   that ends it if mcp-tape is killed outright, and on Linux the
//!   parent-death signal and a child subreaper. Windows: a Job Object that
//!   kills every process in it when mcp-tape's handle closes, however
//!   mcp-tape ends.
//! - [`Stops`]: the requests to stop that reach mcp-tape from outside.
//!   Unix: SIGINT, SIGTERM, SIGHUP, SIGQUIT. Windows: Ctrl-C, Ctrl-Break, the
//!   console closing, the system shutting down.
//! - [`exit_code`], [`exit_now`], [`release_stdout`], [`own_stdout`],
//!   [`huge_pages`], [`same_file`], [`batch_thread`],
//!   [`widen_stderr_pipe`], [`Stderr`]: how a process's end reads as an exit
//!   code, an exit with no work nobody waits for, a stdout whose reader hears
//!   its end before the process ends, stdout as a file of its own, a short
//!   run's memory in small pages (a daemon's in huge ones), whether two
//!   paths are one file, a thread that yields to the runtime, a stderr pipe
//!   that takes a batch of log lines at once (Linux only), and stderr
//!   written whole even when another writer made it non-blocking.
//! - [`config_dir`], [`create_private`]: where the user's configuration
//!   is kept, and a new file there only the user can read (mode 0600 on
//!   Unix; under the user's profile on Windows).
//! - [`stdin_pipe`], [`stdout_pipe`]: stdin and stdout driven by the
//!   reactor when they are pipes or sockets (Unix; `fd`, a descriptor's own
//!   calls).
//! - [`Receipts`]: a TCP stream's reads that say when their bytes arrived
//!   (the kernel's stamp on Linux, the read's time elsewhere).
//! - [`give_back_freed_memory`]: a thread's freed pages back to the system
//!   (mimalloc's `mi_collect`, not on macOS, whose system allocator serves).
//!
//! Every `unsafe` block of the crate is here (and in its platform files),
//! each with the reason it is sound.

#[cfg(unix)]
mod fd;
#[cfg(unix)]
mod unix;
#[cfg(unix)]
use unix as imp;
#[cfg(windows)]
mod windows;
#[cfg(windows)]
use windows as imp;

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

pub use imp::{
    Stderr, Tree, batch_thread, config_dir, create_private, exit_code, exit_now, huge_pages, own_stdout,
    release_stdout, same_file, widen_stderr_pipe,
};

/// mcp-tape's own stdin as a stream the reactor drives, when it is a pipe
/// or a socket (Unix): each read one call, no thread hand-off.
pub fn stdin_pipe() -> Option<Box<dyn AsyncRead + Unpin + Send>> {
    #[cfg(unix)]
    return fd::Pipe::stdin().map(|pipe| Box::new(pipe) as _);
    #[cfg(not(unix))]
    None
}

/// mcp-tape's own stdout as a stream the reactor drives, when it is a pipe
/// or a socket (Unix); shared with another process, it is written whole
/// even so.
pub fn stdout_pipe() -> Option<Box<dyn AsyncWrite + Unpin + Send>> {
    #[cfg(unix)]
    return fd::Pipe::stdout().map(|pipe| {
        imp::shared_output::share_if_one();
        Box::new(pipe) as _
    });
    #[cfg(not(unix))]
    None
}

/// A TCP stream's reads that say when their bytes arrived: when the kernel
/// received them where it stamps them (Linux, `SO_TIMESTAMPNS`), else when
/// they were read. Either is the system clock's nanoseconds past its epoch,
/// the clock a user-space `SystemTime::now()` reads, so the two compare.
pub struct Receipts {
    /// The kernel stamps what the socket receives.
    kernel: bool,
}

impl Receipts {
    /// Asks the kernel to stamp what `stream` receives, where it can.
    pub fn ask(stream: &TcpStream) -> Receipts {
        #[cfg(target_os = "linux")]
        return Receipts { kernel: fd::stamp_receipts(std::os::fd::AsRawFd::as_raw_fd(stream)) };
        #[cfg(not(target_os = "linux"))]
        {
            let _ = stream;
            Receipts { kernel: false }
        }
    }

    /// Whether the kernel stamps what the stream receives.
    pub fn by_kernel(&self) -> bool {
        self.kernel
    }

    /// One read from `stream` into `buf`: when what it read arrived; none
    /// when it read nothing (the end).
    pub fn poll_read(
        &self,
        stream: Pin<&mut TcpStream>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<Option<u64>>> {
        let before = buf.filled().len();
        #[cfg(target_os = "linux")]
        if self.kernel {
            let stamped = ready!(fd::poll_receive_stamped(&stream, cx, buf))?;
            return Poll::Ready(Ok(stamped.or_else(|| read_now(buf, before))));
        }
        ready!(stream.poll_read(cx, buf))?;
        Poll::Ready(Ok(read_now(buf, before)))
    }
}

/// Now, if `buf` holds more than its first `before` bytes (the clock is
/// read only then).
fn read_now(buf: &ReadBuf<'_>, before: usize) -> Option<u64> {
    (buf.filled().len() > before).then(|| {
        let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
    })
}

/// Gives the memory the calling thread freed back to the system now: a
/// thread keeps freed pages for later, and one that worked through a large
/// request may then idle long.
pub fn give_back_freed_memory() {
    #[cfg(not(target_os = "macos"))]
    // SAFETY: mi_collect takes no pointer; it only frees the pages of the
    // thread's heap that no block uses.
    unsafe {
        libmimalloc_sys::mi_collect(true)
    }
}

/// A request to stop that comes from outside.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// SIGINT; Ctrl-C.
    Interrupt,
    /// SIGTERM; Ctrl-Break.
    Terminate,
    /// SIGHUP (the terminal went away); the console window closing.
    HangUp,
    /// SIGQUIT; the system shutting down.
    Quit,
}

impl Stop {
    /// What it is called where it comes from.
    pub fn name(self) -> &'static str {
        imp::name(self)
    }

    /// Its number, for an exit code of 128 + it: the signal's on Unix, the C
    /// runtime's `SIGINT` and `SIGBREAK` on Windows.
    pub fn number(self) -> i32 {
        imp::number(self)
    }

    /// The exit code of a run it interrupted: 128 + its number.
    pub fn exit_code(self) -> u8 {
        (128 + self.number()).clamp(1, 255) as u8
    }
}

/// The stops being listened for.
pub struct Stops(Vec<(Stop, imp::StopListener)>);

impl Stops {
    /// Listens for `which` from now on, so that one arriving right after
    /// this returns is not missed; one that cannot be listened for (logged)
    /// is never heard.
    pub fn listen(which: &[Stop]) -> Stops {
        let listening = which.iter().filter_map(|&stop| match imp::listen(stop) {
            Ok(listener) => Some((stop, listener)),
            Err(e) => {
                tracing::debug!("cannot listen for {}: {e}", stop.name());
                None
            }
        });
        Stops(listening.collect())
    }

    /// The next stop that arrives; never, when none is listened for.
    pub async fn next(&mut self) -> Stop {
        std::future::poll_fn(|cx| {
            for (stop, listener) in &mut self.0 {
                if listener.poll_recv(cx).is_ready() {
                    return Poll::Ready(*stop);
                }
            }
            Poll::Pending
        })
        .await
    }
}
