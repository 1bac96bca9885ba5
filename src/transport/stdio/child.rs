//! Record's link to a stdio server: the child process, in a process tree
//! of its own that never outlives mcp-tape ([`crate::os::Tree`]); its
//! stderr is mcp-tape's. When it ends, so does what it started, also when
//! the child itself has already exited (an `npx`, `uvx` or `sh -c` wrapper
//! leaves the real server one level down): [`crate::os::Tree::end`].
//!
//! Lines to the child go through one writer task; lines from the child are
//! relayed to the client as they arrive, each shown first to the engine's
//! [`Flights`], which say which exchange it belongs to. A final answer
//! goes to the client only once its held commit resolves (else the client
//! gets the error it resolves to instead). A line that is not a JSON-RPC
//! message is relayed unchanged and stored nowhere. When the child closes
//! its output, the flights still open store nothing.

use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::Output;
use super::lines::{Lines, Piece};
use crate::engine::{AsWritten, Flight, Flights, Heard};
use crate::limits::{MAX_CHILD_LINE_BYTES, MAX_QUEUED_CHILD_LINES};
use crate::os::Tree;
use crate::util::{lock, printable};

/// After its stdin closes, the child has this long to exit on its own...
pub const STDIN_CLOSE_GRACE: Duration = Duration::from_secs(2);
/// ...then this long after it is asked to end (SIGTERM), before it is
/// ended (SIGKILL).
pub const TERM_GRACE: Duration = Duration::from_secs(2);

/// The running child process.
pub struct Child {
    process: tokio::process::Child,
    /// It and what it starts, known even after it is reaped.
    tree: Option<Tree>,
    /// Tells the writer of the child's stdin to drop what is still queued.
    drop_input: Option<oneshot::Sender<()>>,
    /// Resolves when the child's stdout closes (it exited, as a rule).
    gone: Option<oneshot::Receiver<()>>,
    relay: JoinHandle<()>,
}

/// What the front door uses to reach the child: a recording engine's link.
#[derive(Clone)]
pub struct Link {
    input: mpsc::Sender<Piece>,
    flights: Arc<Mutex<Flights>>,
}

/// Spawns `command` (program, then arguments) with piped stdin and stdout;
/// what it writes is relayed to `output`.
///
/// # Errors
///
/// The program cannot be started.
pub fn spawn(command: &[String], output: Output) -> std::io::Result<(Child, Link)> {
    let Some((program, arguments)) = command.split_first() else {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "no command to run"));
    };
    let mut spawning = tokio::process::Command::new(program);
    spawning
        .args(arguments)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    let (mut process, tree) = Tree::spawn(&mut spawning)?;
    let (Some(stdin), Some(stdout)) = (process.stdin.take(), process.stdout.take()) else {
        return Err(std::io::Error::other("the child's stdin and stdout were not piped"));
    };
    let (input, queued) = mpsc::channel(MAX_QUEUED_CHILD_LINES);
    let (drop_input, dropping) = oneshot::channel();
    tokio::spawn(write_input(stdin, queued, dropping));
    let flights = Arc::new(Mutex::new(Flights::default()));
    let (closed, gone) = oneshot::channel();
    let relay = tokio::spawn(relay_output(stdout, Arc::clone(&flights), output, closed));
    let child = Child { process, tree, drop_input: Some(drop_input), gone: Some(gone), relay };
    Ok((child, Link { input, flights }))
}

/// Writes each queued piece to the child's stdin, until every sender is
/// gone (then the child's stdin closes) or `dropping` says to drop what
/// is still queued (logged with its size).
async fn write_input(
    mut stdin: ChildStdin,
    mut queued: mpsc::Receiver<Piece>,
    dropping: oneshot::Receiver<()>,
) {
    tokio::pin!(dropping);
    loop {
        let piece = tokio::select! {
            piece = queued.recv() => piece,
            _ = &mut dropping => break,
        };
        let Some(piece) = piece else { return }; // every sender is gone: stdin closes
        let bytes = match piece {
            Piece::Line(mut line) => {
                line.push(b'\n');
                line
            }
            Piece::Overlong { mut bytes, end } => {
                if end {
                    bytes.push(b'\n');
                }
                bytes
            }
        };
        let written = tokio::select! {
            written = async { stdin.write_all(&bytes).await.and(stdin.flush().await) } => written,
            _ = &mut dropping => {
                log_dropped(bytes.len(), &mut queued);
                return;
            }
        };
        if let Err(e) = written {
            tracing::warn!("the stdio server's stdin is closed: {e}");
            return;
        }
    }
    log_dropped(0, &mut queued);
}

/// Logs the lines still queued for a child being stopped (and `partly`
/// bytes of one it had begun to take), which it will never get.
fn log_dropped(partly: usize, queued: &mut mpsc::Receiver<Piece>) {
    let (mut lines, mut bytes) = (usize::from(partly > 0), partly);
    while let Ok(piece) = queued.try_recv() {
        lines += 1;
        bytes += match piece {
            Piece::Line(line) => line.len(),
            Piece::Overlong { bytes, .. } => bytes.len(),
        };
    }
    if lines > 0 {
        tracing::warn!("the stdio server never read {lines} line(s) ({bytes} bytes) sent to it: dropped");
    }
}

impl Link {
    /// Registers `flight`, whose request is about to be sent: the answer
    /// it gets from the child is shown to it.
    pub fn expect(&self, flight: Flight) {
        lock(&self.flights).expect(flight);
    }

    /// Where lines for the child's stdin are queued.
    pub(super) fn input(&self) -> &mpsc::Sender<Piece> {
        &self.input
    }
}

/// Relays the child's output to the client, showing each message to the
/// flights; signals `closed` when the output ends.
async fn relay_output(
    stdout: ChildStdout,
    flights: Arc<Mutex<Flights>>,
    output: Output,
    closed: oneshot::Sender<()>,
) {
    let mut lines = Lines::new(stdout, MAX_CHILD_LINE_BYTES);
    let mut overlong = false;
    loop {
        match lines.next().await {
            Ok(Some(Piece::Line(line))) => relay_line(line, &flights, &output).await,
            Ok(Some(Piece::Overlong { mut bytes, end })) => {
                if !overlong {
                    tracing::warn!(
                        "a line longer than {MAX_CHILD_LINE_BYTES} bytes from the stdio server: relayed, not stored"
                    );
                }
                overlong = !end;
                if end {
                    bytes.push(b'\n');
                }
                output.raw(bytes).await;
            }
            Ok(None) => break,
            Err(e) => {
                tracing::warn!("reading the stdio server's output failed: {e}");
                break;
            }
        }
    }
    lock(&flights).close("the stdio server closed its output before the answer");
    let _ = closed.send(()); // nobody waits once the client has gone
}

/// One line from the child, to the client, shown to the flights first.
async fn relay_line(line: Vec<u8>, flights: &Mutex<Flights>, output: &Output) {
    let read = std::str::from_utf8(&line).ok().and_then(|text| Some((text, AsWritten::read(text)?)));
    let unread = read.is_none();
    let message = read.filter(|(_, said)| said.body.get("jsonrpc").and_then(Value::as_str) == Some("2.0"));
    let Some((text, value)) = message else {
        let shown: String = String::from_utf8_lossy(&line).chars().take(120).collect();
        if unread && line.trim_ascii_start().starts_with(b"{") {
            // JSON to its client, maybe (a lone surrogate, deep nesting, `1e999`): not to be lost unsaid.
            lock(flights).unreadable(&shown);
        } else {
            tracing::warn!(
                "the stdio server wrote a line that is not JSON-RPC; relayed, not stored: {}",
                printable(&shown)
            );
        }
        output.line(line).await;
        return;
    };
    let heard = lock(flights).heard(value, text.len());
    match heard {
        Heard::Final(commit) => match commit.await {
            Ok(()) => output.line(line).await,
            Err(instead) => output.line(instead.body()).await,
        },
        Heard::Message | Heard::Dropped => output.line(line).await,
    };
}

impl Child {
    /// Resolves when the child closes its output; at once after the first time.
    pub async fn gone(&mut self) {
        match self.gone.take() {
            Some(gone) => drop(gone.await),
            None => std::future::pending().await,
        }
    }

    /// Ends the child once its stdin is closed (the [`Link`] dropped): it
    /// gets [`STDIN_CLOSE_GRACE`] to exit, then its tree is asked to end
    /// and gets [`TERM_GRACE`], then it is ended; then what it left behind
    /// ([`Tree::end`]). Waits for the relay of its last output and returns
    /// its exit status.
    pub async fn stop(mut self) -> std::io::Result<ExitStatus> {
        let status = match tokio::time::timeout(STDIN_CLOSE_GRACE, self.process.wait()).await {
            Ok(status) => status?,
            Err(_) => {
                // What it has not read by now it never will: its stdin closes.
                if let Some(drop_input) = self.drop_input.take() {
                    let _ = drop_input.send(());
                }
                tracing::info!(
                    "the stdio server is still running {STDIN_CLOSE_GRACE:?} after its stdin closed: SIGTERM"
                );
                self.tree.as_ref().inspect(|tree| tree.terminate());
                match tokio::time::timeout(TERM_GRACE, self.process.wait()).await {
                    Ok(status) => status?,
                    Err(_) => {
                        tracing::warn!("the stdio server ignored SIGTERM for {TERM_GRACE:?}: SIGKILL");
                        self.tree.as_ref().inspect(|tree| tree.kill());
                        self.process.wait().await?
                    }
                }
            }
        };
        let left = match &self.tree {
            Some(tree) => tree.end(TERM_GRACE).await,
            None => 0,
        };
        if left > 0 {
            tracing::info!("the stdio server left processes running; ended them");
        }
        // Its output may be held open by a process it left behind: wait a little, not forever.
        if tokio::time::timeout(TERM_GRACE, &mut self.relay).await.is_err() {
            tracing::warn!("the stdio server's output is still open after it exited; stopped relaying it");
            self.relay.abort();
        }
        Ok(status)
    }
}
