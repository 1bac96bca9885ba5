//! Record's link to a stdio server: the child process. It runs in a process
//! group of its own and gets SIGKILL if mcp-tape dies, however it dies
//! (Linux's parent-death signal); its stderr is mcp-tape's. When it ends,
//! so does what it started: its process group gets SIGTERM, then SIGKILL
//! after a grace, also when the child itself has already exited (an
//! `npx`, `uvx` or `sh -c` wrapper leaves the real server one level down),
//! and mcp-tape is a child subreaper, so descendants that left the group
//! are reparented to it and ended the same way ([`end_descendants`]). If
//! mcp-tape is killed outright, a [`Guard`] it started ends the group.
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
use crate::engine::{Flight, Flights, Heard, Said};
use crate::limits::{MAX_CHILD_LINE_BYTES, MAX_QUEUED_CHILD_LINES};
use crate::util::{lock, printable};

/// After its stdin closes, the child has this long to exit on its own...
pub const STDIN_CLOSE_GRACE: Duration = Duration::from_secs(2);
/// ...then this long after SIGTERM, before SIGKILL.
pub const TERM_GRACE: Duration = Duration::from_secs(2);

/// The running child process.
pub struct Child {
    process: tokio::process::Child,
    /// Its process group (its pid), known even after it is reaped.
    group: Option<libc::pid_t>,
    /// Ends the group if mcp-tape dies before [`Child::stop`].
    guard: Option<Guard>,
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
        .kill_on_drop(true)
        .process_group(0);
    die_with_parent(&mut spawning);
    become_subreaper();
    let mut process = spawning.spawn()?;
    let group = process.id().and_then(|pid| libc::pid_t::try_from(pid).ok());
    let (Some(stdin), Some(stdout)) = (process.stdin.take(), process.stdout.take()) else {
        return Err(std::io::Error::other("the child's stdin and stdout were not piped"));
    };
    let (input, queued) = mpsc::channel(MAX_QUEUED_CHILD_LINES);
    let (drop_input, dropping) = oneshot::channel();
    tokio::spawn(write_input(stdin, queued, dropping));
    let flights = Arc::new(Mutex::new(Flights::default()));
    let (closed, gone) = oneshot::channel();
    let relay = tokio::spawn(relay_output(stdout, Arc::clone(&flights), output, closed));
    let guard = group.and_then(Guard::watch);
    let child = Child { process, group, guard, drop_input: Some(drop_input), gone: Some(gone), relay };
    Ok((child, Link { input, flights }))
}

/// A watcher of a process group for the case mcp-tape cannot act on: its
/// own sudden death (`kill -9`). A small shell in a group of its own waits
/// for end of file on a pipe only mcp-tape writes to, which its death
/// closes; then it sends the group SIGTERM and, two seconds later, SIGKILL.
/// Dropped (mcp-tape ending the usual way), the watcher is killed first.
pub struct Guard {
    watcher: tokio::process::Child,
}

impl Guard {
    /// Starts watching `group`; `None` (logged) if the shell cannot start.
    pub fn watch(group: libc::pid_t) -> Option<Guard> {
        let script =
            format!("read -r _; kill -TERM -{group} 2>/dev/null; sleep 2; kill -KILL -{group} 2>/dev/null");
        let started = tokio::process::Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .process_group(0)
            .spawn();
        match started {
            Ok(watcher) => Some(Guard { watcher }),
            Err(e) => {
                tracing::debug!("no guard for process group {group}: {e}");
                None
            }
        }
    }
}

impl Guard {
    /// The watcher's process id: a child of mcp-tape that is not one the
    /// command left behind.
    fn pid(&self) -> Option<libc::pid_t> {
        self.watcher.id().and_then(|pid| libc::pid_t::try_from(pid).ok())
    }
}

/// Makes mcp-tape a child subreaper (Linux): a process its children
/// started that outlives its own parent is reparented to mcp-tape, not to
/// init, so [`end_descendants`] finds it.
#[cfg(target_os = "linux")]
pub fn become_subreaper() {
    // SAFETY: prctl(2) on this process; no memory is passed.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1) } == -1 {
        tracing::debug!("could not become a child subreaper: {}", std::io::Error::last_os_error());
    }
}

#[cfg(not(target_os = "linux"))]
pub fn become_subreaper() {}

/// How often the end of a process group is looked for.
const GONE_POLL: Duration = Duration::from_millis(20);

/// Ends what a child left behind once it has exited: its process `group`
/// gets SIGTERM, then SIGKILL if anything of it is still there after
/// `grace`; then the same for the processes reparented to mcp-tape (it is
/// a subreaper) that left the group, each reaped, but `guard`'s watcher.
/// Returns how many processes were still running.
pub async fn end_descendants(group: Option<libc::pid_t>, guard: Option<&Guard>, grace: Duration) -> usize {
    let mut left = 0;
    // Members reparented here stay in the group as zombies until reaped.
    let gone = |group| {
        while reap_any() {}
        !signal_group(group, 0)
    };
    if let Some(group) = group.filter(|g| *g > 1)
        && !gone(group)
    {
        left += 1;
        signal_group(group, libc::SIGTERM);
        let deadline = tokio::time::Instant::now() + grace;
        while !gone(group) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(GONE_POLL).await;
        }
        if !gone(group) {
            tracing::warn!("processes of the group ignored SIGTERM for {grace:?}: SIGKILL");
            signal_group(group, libc::SIGKILL);
        }
    }
    let watcher = guard.and_then(Guard::pid);
    let orphans: Vec<libc::pid_t> = reparented().into_iter().filter(|pid| Some(*pid) != watcher).collect();
    if !orphans.is_empty() {
        left += orphans.len();
        for &pid in &orphans {
            signal_process(pid, libc::SIGTERM);
        }
        let deadline = tokio::time::Instant::now() + grace;
        let mut running = orphans;
        while !running.is_empty() && tokio::time::Instant::now() < deadline {
            running.retain(|&pid| !reaped(pid));
            tokio::time::sleep(GONE_POLL).await;
        }
        for &pid in &running {
            signal_process(pid, libc::SIGKILL);
        }
    }
    // Whatever was reparented here and has exited is reaped, not left a zombie.
    while reap_any() {}
    left
}

/// Sends `signal` (0: none, only a check) to process group `group`;
/// whether any process of it is there.
fn signal_group(group: libc::pid_t, signal: libc::c_int) -> bool {
    // SAFETY: kill(2) with a negative pid; no memory is shared.
    unsafe { libc::kill(-group, signal) == 0 }
}

fn signal_process(pid: libc::pid_t, signal: libc::c_int) {
    // SAFETY: kill(2); no memory is shared.
    unsafe {
        libc::kill(pid, signal);
    }
}

/// Whether child `pid` has exited (and is now reaped).
fn reaped(pid: libc::pid_t) -> bool {
    let mut status = 0;
    // SAFETY: waitpid(2) on one child, without blocking; `status` is ours.
    let got = unsafe { libc::waitpid(pid, &raw mut status, libc::WNOHANG) };
    got == pid || got == -1
}

/// Reaps one exited child, if any; whether one was.
fn reap_any() -> bool {
    let mut status = 0;
    // SAFETY: waitpid(2) without blocking; `status` is ours. Called once
    // the children mcp-tape spawned itself are reaped, so it takes only
    // processes reparented to it.
    unsafe { libc::waitpid(-1, &raw mut status, libc::WNOHANG) > 0 }
}

/// The processes whose parent is mcp-tape now, its own children excepted
/// (they are reaped before this is asked): descendants reparented to it.
fn reparented() -> Vec<libc::pid_t> {
    let me = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<libc::pid_t>().ok())
        .filter(|pid| parent_of(*pid) == Some(me))
        .collect()
}

/// A process's parent, from `/proc/PID/stat` (its fourth field, after the
/// command name in parentheses, which may hold anything).
fn parent_of(pid: libc::pid_t) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(1)?.parse().ok()
}

/// The child gets SIGKILL when the thread that spawned it ends (the
/// runtime's, which lives as long as mcp-tape); if mcp-tape died before
/// that was set, the child exits at once.
#[cfg(target_os = "linux")]
pub fn die_with_parent(command: &mut tokio::process::Command) {
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: between fork and exec only async-signal-safe calls are made
    // (prctl, getppid, _exit), touching no memory of the parent.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_command: &mut tokio::process::Command) {}

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
    let message = std::str::from_utf8(&line)
        .ok()
        .and_then(|text| Some((text, Said::read(text)?)))
        .filter(|(_, said)| said.body.get("jsonrpc").and_then(Value::as_str) == Some("2.0"));
    let Some((text, value)) = message else {
        let shown: String = String::from_utf8_lossy(&line).chars().take(120).collect();
        tracing::warn!(
            "the stdio server wrote a line that is not JSON-RPC; relayed, not stored: {}",
            printable(&shown)
        );
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
    /// gets [`STDIN_CLOSE_GRACE`] to exit, then SIGTERM and [`TERM_GRACE`],
    /// then SIGKILL (each signal to its whole process group); then what it
    /// left behind ([`end_descendants`]). Waits for the relay of its last
    /// output and returns its exit status.
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
                self.signal(libc::SIGTERM);
                match tokio::time::timeout(TERM_GRACE, self.process.wait()).await {
                    Ok(status) => status?,
                    Err(_) => {
                        tracing::warn!("the stdio server ignored SIGTERM for {TERM_GRACE:?}: SIGKILL");
                        self.signal(libc::SIGKILL);
                        self.process.wait().await?
                    }
                }
            }
        };
        let left = end_descendants(self.group, self.guard.as_ref(), TERM_GRACE).await;
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

    /// Sends `signal` to the child's process group.
    fn signal(&self, signal: libc::c_int) {
        if let Some(group) = self.group {
            signal_group(group, signal);
        }
    }
}

/// The exit code mcp-tape ends with for a child that ended with `status`:
/// its own code, or 128 + the signal that killed it.
pub fn exit_code(status: ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => code.clamp(0, 255) as u8,
        (None, Some(signal)) => (128 + signal).clamp(0, 255) as u8,
        (None, None) => 1,
    }
}
