//! Unix: process groups and signals (Linux adds the parent-death signal,
//! a child subreaper and `SCHED_BATCH`).

use std::io;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::signal::unix::{Signal, SignalKind, signal};

use super::Stop;

pub fn name(stop: Stop) -> &'static str {
    match stop {
        Stop::Interrupt => "SIGINT",
        Stop::Terminate => "SIGTERM",
        Stop::HangUp => "SIGHUP",
        Stop::Quit => "SIGQUIT",
    }
}

pub fn number(stop: Stop) -> i32 {
    signal_of(stop)
}

fn signal_of(stop: Stop) -> libc::c_int {
    match stop {
        Stop::Interrupt => libc::SIGINT,
        Stop::Terminate => libc::SIGTERM,
        Stop::HangUp => libc::SIGHUP,
        Stop::Quit => libc::SIGQUIT,
    }
}

/// One signal listened for.
pub struct StopListener(Signal);

impl StopListener {
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<()>> {
        self.0.poll_recv(cx)
    }
}

pub fn listen(stop: Stop) -> io::Result<StopListener> {
    signal(SignalKind::from_raw(signal_of(stop))).map(StopListener)
}

/// A spawned command's process group (its pid), and the watcher that ends
/// the group if mcp-tape is killed outright.
pub struct Tree {
    group: libc::pid_t,
    /// Taken and ended by [`Tree::end`] once the group is gone.
    guard: std::sync::Mutex<Option<Guard>>,
    /// The group has the terminal ([`Tree::give_terminal`]) until
    /// [`Tree::end`] takes it back.
    has_terminal: std::sync::atomic::AtomicBool,
}

/// How often the end of a process group is looked for.
const GONE_POLL: Duration = Duration::from_millis(20);

impl Tree {
    /// Spawns `command` in a process group of its own, which gets SIGKILL
    /// if mcp-tape dies however it dies (Linux's parent-death signal).
    ///
    /// # Errors
    ///
    /// The program cannot be started.
    pub fn spawn(command: &mut tokio::process::Command) -> io::Result<(tokio::process::Child, Option<Tree>)> {
        command.process_group(0);
        die_with_parent(command);
        become_subreaper();
        let guard = Guard::start();
        if let Some(guard) = &guard {
            guard.told_by(command);
        }
        let process = command.spawn()?;
        let tree = process.id().and_then(|pid| libc::pid_t::try_from(pid).ok()).map(|group| Tree {
            group,
            guard: guard.into(),
            has_terminal: false.into(),
        });
        Ok((process, tree))
    }

    /// Makes the tree the foreground of the terminal mcp-tape's stdin is,
    /// when mcp-tape has it in the foreground: the command reads the
    /// terminal as if run without mcp-tape (from the background a read
    /// would stop it, and the run would never end), and Ctrl-C reaches it
    /// from the terminal. A command that read before this is stopped, and
    /// goes on.
    pub fn give_terminal(&self) {
        // SAFETY: isatty, tcgetpgrp and getpgrp only read this process's state.
        let foreground = unsafe { libc::isatty(0) == 1 && libc::tcgetpgrp(0) == libc::getpgrp() };
        // SAFETY: tcsetpgrp on mcp-tape's own terminal, from its foreground group (no SIGTTOU).
        if foreground && unsafe { libc::tcsetpgrp(0, self.group) } == 0 {
            self.has_terminal.store(true, std::sync::atomic::Ordering::Relaxed);
            signal_group(self.group, libc::SIGCONT);
        }
    }

    /// Gives the terminal back to mcp-tape's own group, if the tree has it:
    /// from the background, with SIGTTOU blocked (which would stop
    /// mcp-tape) while it asks.
    fn take_terminal_back(&self) {
        if !self.has_terminal.swap(false, std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        // SAFETY: the signal sets are ours and initialised by sigemptyset before use; the
        // mask is this thread's, set back as it was; tcsetpgrp acts on mcp-tape's own terminal.
        unsafe {
            let mut blocked: libc::sigset_t = std::mem::zeroed();
            let mut before: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&raw mut blocked);
            libc::sigaddset(&raw mut blocked, libc::SIGTTOU);
            libc::pthread_sigmask(libc::SIG_BLOCK, &raw const blocked, &raw mut before);
            libc::tcsetpgrp(0, libc::getpgrp());
            libc::pthread_sigmask(libc::SIG_SETMASK, &raw const before, std::ptr::null_mut());
        }
    }

    /// Passes `stop` on to every process of the tree.
    pub fn pass_on(&self, stop: Stop) {
        signal_group(self.group, signal_of(stop));
    }

    /// Asks every process of the tree to end (SIGTERM).
    pub fn terminate(&self) {
        signal_group(self.group, libc::SIGTERM);
    }

    /// Ends every process of the tree at once (SIGKILL).
    pub fn kill(&self) {
        signal_group(self.group, libc::SIGKILL);
    }

    /// Ends what the command left behind once it has exited: its process
    /// group gets SIGTERM, then SIGKILL if anything of it is still there
    /// after `grace`. The guard then has nothing left to watch and is ended;
    /// if mcp-tape (a subreaper, on Linux) still has a child after that, the
    /// same for every process below it: those reparented here after leaving
    /// the group, what they started, and what is reparented here as those
    /// end, looked for again until none is left. Returns how many processes
    /// were still running.
    pub async fn end(&self, grace: Duration) -> usize {
        self.take_terminal_back();
        let mut left = 0;
        // Members reparented here stay in the group as zombies until reaped.
        let gone = |group| {
            while reap_any() {}
            !signal_group(group, 0)
        };
        let group = self.group;
        if group > 1 && !gone(group) {
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
        let guard = self.guard.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        if let Some(mut guard) = guard {
            let _ = guard.watcher.kill().await;
        }
        while reap_any() {}
        if !has_children() {
            // Nothing was reparented here: nothing below mcp-tape is left (no need to read
            // every process of the machine).
            return left;
        }
        let asked_until = tokio::time::Instant::now() + grace;
        // Past this, what SIGKILL has not ended (a process stuck in the kernel) is left.
        let given_up = asked_until + grace;
        let mut asked = std::collections::HashSet::new();
        loop {
            while reap_any() {}
            let running = left_behind();
            let now = tokio::time::Instant::now();
            if running.is_empty() || now >= given_up {
                break;
            }
            // Each is asked first (SIGTERM); one still there past the grace is ended (SIGKILL).
            for &pid in &running {
                if asked.insert(pid) {
                    left += 1;
                    signal_process(pid, libc::SIGTERM);
                } else if now >= asked_until {
                    signal_process(pid, libc::SIGKILL);
                }
            }
            tokio::time::sleep(GONE_POLL).await;
        }
        left
    }
}

/// A watcher of a process group for the case mcp-tape cannot act on: its
/// own sudden death (`kill -9`). A small shell in a group of its own reads
/// the group from a pipe only mcp-tape holds open, then waits for end of
/// file on it, which mcp-tape's death brings; then it sends the group
/// SIGTERM and, two seconds later, SIGKILL. The command itself tells it
/// the group before it execs, so nothing of the command runs unwatched
/// (told by mcp-tape after the spawn, a watcher once missed a command that
/// had started a process and was killed with mcp-tape at once). Dropped
/// (mcp-tape ending the usual way), the watcher is killed first.
struct Guard {
    watcher: tokio::process::Child,
    /// The write end of the watcher's pipe (close-on-exec: the command
    /// writes to it before its exec, and holds it no longer).
    told: std::io::PipeWriter,
}

impl Guard {
    /// Starts a watcher; `None` (logged) if the shell cannot start.
    fn start() -> Option<Guard> {
        let script = "read -r group || exit 0; read -r _; kill -TERM -$group 2>/dev/null; sleep 2; \
                      kill -KILL -$group 2>/dev/null";
        let started = std::io::pipe().and_then(|(read, told)| {
            let watcher = tokio::process::Command::new("sh")
                .args(["-c", script])
                .stdin(read)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .kill_on_drop(true)
                .process_group(0)
                .spawn()?;
            Ok(Guard { watcher, told })
        });
        started.map_err(|e| tracing::debug!("no guard for the command's process group: {e}")).ok()
    }

    /// Has `command`, in a process group of its own, write its pid (the
    /// group) to the watcher before it execs.
    fn told_by(&self, command: &mut tokio::process::Command) {
        let told = std::os::fd::AsRawFd::as_raw_fd(&self.told);
        // SAFETY: between fork and exec only async-signal-safe calls are made (getpid,
        // write), on the child's copy of a descriptor the parent keeps open through the
        // spawn; the line is built on the stack.
        unsafe {
            command.pre_exec(move || {
                let mut line = [0u8; 24];
                let mut at = line.len() - 1;
                line[at] = b'\n';
                let mut pid = libc::getpid().unsigned_abs();
                loop {
                    at -= 1;
                    line[at] = b'0' + (pid % 10) as u8;
                    pid /= 10;
                    if pid == 0 {
                        break;
                    }
                }
                let said = &line[at..];
                // A watcher that is gone cannot be told: the command runs unwatched, as with none.
                libc::write(told, said.as_ptr().cast(), said.len());
                Ok(())
            });
        }
    }
}

/// Makes mcp-tape a child subreaper (Linux): a process its children
/// started that outlives its own parent is reparented to mcp-tape, not to
/// init, so [`Tree::end`] finds it.
#[cfg(target_os = "linux")]
fn become_subreaper() {
    // SAFETY: prctl(2) on this process; no memory is passed.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1) } == -1 {
        tracing::debug!("could not become a child subreaper: {}", io::Error::last_os_error());
    }
}

#[cfg(not(target_os = "linux"))]
fn become_subreaper() {}

/// The child gets SIGKILL when the thread that spawned it ends (the
/// runtime's, which lives as long as mcp-tape); if mcp-tape died before
/// that was set, the child exits at once. It starts with the huge pages
/// the machine gives any process, whatever mcp-tape's own.
#[cfg(target_os = "linux")]
fn die_with_parent(command: &mut tokio::process::Command) {
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: between fork and exec only async-signal-safe calls are made
    // (prctl, getppid, _exit), touching no memory of the parent.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                return Err(io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            huge_pages(true);
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_command: &mut tokio::process::Command) {}

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

/// Reaps one exited child, if any; whether one was.
fn reap_any() -> bool {
    let mut status = 0;
    // SAFETY: waitpid(2) without blocking; `status` is ours. Called once
    // the children mcp-tape spawned itself are reaped, so it takes only
    // processes reparented to it.
    unsafe { libc::waitpid(-1, &raw mut status, libc::WNOHANG) > 0 }
}

/// Whether mcp-tape has a child (live, or exited and not yet reaped).
fn has_children() -> bool {
    // SAFETY: waitid(2) without blocking and without reaping (WNOWAIT); `info` is ours.
    let found = unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        libc::waitid(libc::P_ALL, 0, &raw mut info, libc::WEXITED | libc::WNOHANG | libc::WNOWAIT)
    };
    found == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::ECHILD)
}

/// Every live process below mcp-tape now (children, theirs, and so on):
/// once mcp-tape's own children are reaped, what a command left behind and
/// was reparented here, and what that started. Read from `/proc`; none
/// where there is no `/proc` (macOS).
fn left_behind() -> Vec<libc::pid_t> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    let processes: Vec<(libc::pid_t, libc::pid_t)> = entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<libc::pid_t>().ok())
        .filter_map(|pid| Some((pid, live_parent_of(pid)?)))
        .collect();
    let mut found = Vec::new();
    let mut parents = vec![std::process::id() as libc::pid_t];
    while let Some(parent) = parents.pop() {
        for &(pid, _) in processes.iter().filter(|(_, of)| *of == parent) {
            found.push(pid);
            parents.push(pid);
        }
    }
    found
}

/// A live process's parent, from `/proc/PID/stat` (its state and parent
/// come after the command name in parentheses, which may hold anything);
/// `None` for a zombie, which only waits to be reaped.
fn live_parent_of(pid: libc::pid_t) -> Option<libc::pid_t> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut after_name = stat[stat.rfind(')')? + 1..].split_whitespace();
    let state = after_name.next()?;
    (state != "Z").then_some(())?;
    after_name.next()?.parse().ok()
}

/// Standard error for the log writer. A write that meets a full pipe in
/// non-blocking mode waits until the pipe takes more, rather than fail and
/// lose the lines: with `2>&1` stderr is stdout's pipe, which the stdio
/// door drives non-blocking. There each batch piece (whole lines) also
/// takes its turn with the door's writes ([`shared_output`]), so neither
/// splits a line of the other's.
pub struct Stderr;

impl io::Write for Stderr {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        loop {
            match io::stderr().write(bytes) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => wait_writable(libc::STDERR_FILENO)?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                written => return written,
            }
        }
    }

    fn write_all(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        let _turn = shared_output::log_turn();
        while !bytes.is_empty() {
            match self.write(bytes)? {
                0 => return Err(io::ErrorKind::WriteZero.into()),
                n => bytes = &bytes[n..],
            }
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        io::stderr().flush()
    }
}

/// stdout and stderr as one pipe (`2>&1`): the stdio door's writes and the
/// log writer's take turns by whole lines. The door, once it found the two
/// to be one ([`shared_output::share_if_one`]), writes only while no log
/// piece is part-written, and marks when it is mid-line; the log writer
/// waits for the door's line to end before it starts a piece, and marks the
/// piece as under way until it is whole. Neither holds the lock while it
/// waits for the pipe.
pub mod shared_output {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
    use std::task::Waker;

    static SHARED: AtomicBool = AtomicBool::new(false);
    static SHARING: Mutex<Sharing> =
        Mutex::new(Sharing { door_mid_line: false, log_mid_piece: false, door: None });
    /// Signalled when the door's line ends.
    static LINE_ENDED: Condvar = Condvar::new();

    struct Sharing {
        door_mid_line: bool,
        log_mid_piece: bool,
        /// The door's writer, waiting for a log piece to end.
        door: Option<Waker>,
    }

    fn sharing() -> MutexGuard<'static, Sharing> {
        SHARING.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes note that stdout is what stderr is, if it is (the same pipe or
    /// socket): from then on the two writers take turns.
    pub fn share_if_one() {
        if super::same_file(std::path::Path::new("/dev/fd/1"), std::path::Path::new("/dev/fd/2")) {
            SHARED.store(true, Ordering::Relaxed);
        }
    }

    /// A log piece's turn: waits for the door's line to end, and holds the
    /// turn until dropped. Nothing when stdout is not stderr.
    pub fn log_turn() -> Option<LogTurn> {
        if !SHARED.load(Ordering::Relaxed) {
            return None;
        }
        let mut turns = sharing();
        while turns.door_mid_line {
            turns = LINE_ENDED.wait(turns).unwrap_or_else(PoisonError::into_inner);
        }
        turns.log_mid_piece = true;
        Some(LogTurn)
    }

    /// A log piece under way; its end lets the door write again.
    pub struct LogTurn;

    impl Drop for LogTurn {
        fn drop(&mut self) {
            let mut turns = sharing();
            turns.log_mid_piece = false;
            if let Some(door) = turns.door.take() {
                door.wake();
            }
        }
    }

    /// The door's write of `data` by `write` (one non-blocking call), when
    /// no log piece is part-written; `None` (with `waker` woken when one
    /// ends) while one is. As it is when stdout is not stderr.
    pub fn door_write(
        data: &[u8],
        waker: &Waker,
        write: impl FnOnce() -> std::io::Result<usize>,
    ) -> Option<std::io::Result<usize>> {
        if !SHARED.load(Ordering::Relaxed) {
            return Some(write());
        }
        let mut turns = sharing();
        if turns.log_mid_piece {
            turns.door = Some(waker.clone());
            return None;
        }
        let written = write();
        if let Ok(n @ 1..) = written {
            turns.door_mid_line = data[n - 1] != b'\n';
            if !turns.door_mid_line {
                LINE_ENDED.notify_all();
            }
        }
        Some(written)
    }
}

/// Waits until `fd` can be written to (or has failed, which the write
/// that follows reports).
fn wait_writable(fd: libc::c_int) -> io::Result<()> {
    let mut ready = libc::pollfd { fd, events: libc::POLLOUT, revents: 0 };
    // SAFETY: poll(2) on one pollfd of ours, for as long as it takes.
    if unsafe { libc::poll(&raw mut ready, 1, -1) } < 0 {
        let error = io::Error::last_os_error();
        if error.kind() != io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
    Ok(())
}

/// The exit code mcp-tape ends with for a process that ended with
/// `status`: its own code, or 128 + the signal that killed it.
pub fn exit_code(status: ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => code.clamp(0, 255) as u8,
        (None, Some(signal)) => (128 + signal).clamp(0, 255) as u8,
        (None, None) => 1,
    }
}

/// Standard output as a file of its own (a duplicate descriptor): written
/// unbuffered and outside std's lock on stdout, so that a thread waiting in
/// a write there holds up no other use of stdout (the flush before exit).
pub fn own_stdout() -> io::Result<std::fs::File> {
    use std::os::fd::AsFd;
    io::stdout().as_fd().try_clone_to_owned().map(std::fs::File::from)
}

/// Ends the process with `code` at once, once what was printed to stdout
/// is out: without the work an ordinary exit does that nobody waits for
/// (the runtime's threads ending one by one, the allocator giving its
/// pages back, exit handlers), which is most of the time a short run takes
/// to end after its last word (a test waits for its tape to end). Called
/// once everything the run writes is written and its files are closed.
/// A build that counts for a profile (`packaging/pgo.sh` builds with
/// `--cfg mcp_tape_counting`) exits the ordinary way: its counts are written
/// by an exit handler.
pub fn exit_now(code: u8) -> ! {
    let _ = io::Write::flush(&mut io::stdout());
    if cfg!(mcp_tape_counting) {
        std::process::exit(i32::from(code));
    }
    // SAFETY: _exit(2) ends the process; it touches no memory of ours.
    unsafe { libc::_exit(libc::c_int::from(code)) }
}

/// Lets go of mcp-tape's standard output, which from now on writes to
/// `/dev/null`: a reader waiting for its end (a test plugin waits so for
/// its tape, once the report is written) hears it now, not after the
/// process's teardown. Refused, nothing changes.
pub fn release_stdout() {
    use std::os::fd::AsRawFd;
    let _ = io::Write::flush(&mut io::stdout());
    let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") else { return };
    // SAFETY: dup2(2) of a descriptor of ours onto 1, which stays open (now /dev/null) for
    // whatever still writes to stdout.
    unsafe { libc::dup2(null.as_raw_fd(), 1) };
}

/// Whether this process (and the children it starts from now on) may
/// have transparent huge pages (Linux: PR_SET_THP_DISABLE, which children
/// inherit; refused, nothing changes). Elsewhere nothing changes.
#[cfg(not(target_os = "linux"))]
pub fn huge_pages(_allowed: bool) {}

#[cfg(target_os = "linux")]
pub fn huge_pages(allowed: bool) {
    // SAFETY: prctl(2) on this process; no memory is passed, nothing is
    // allocated (this also runs before the allocator has started, and in a
    // forked child before exec).
    unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, libc::c_ulong::from(!allowed), 0, 0, 0) };
}

/// The user's configuration directory: `$XDG_CONFIG_HOME`, else
/// `~/.config` (`~/Library/Application Support` on macOS).
pub fn config_dir() -> Option<std::path::PathBuf> {
    let home = || std::env::var_os("HOME").filter(|home| !home.is_empty()).map(std::path::PathBuf::from);
    if cfg!(target_os = "macos") {
        return home().map(|home| home.join("Library").join("Application Support"));
    }
    std::env::var_os("XDG_CONFIG_HOME")
        .filter(|dir| !dir.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| home().map(|home| home.join(".config")))
}

/// Writes `bytes` to a new file at `path` that only the user can read or
/// write (mode 0600); an existing file is an error, left as it is.
pub fn create_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// Whether `a` and `b` name one existing file (same device and inode,
/// through links).
pub fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// Marks the calling thread `SCHED_BATCH` (Linux): woken by a queued
/// entry, it no longer preempts the runtime thread that queued it, which
/// goes on reading and queueing other connections' exchanges first. Where
/// both share a core the batches grow and the wakes per exchange fall
/// (BENCHMARKS.md has the figure). It takes no privilege; should the
/// kernel refuse, the thread keeps its policy.
#[cfg(target_os = "linux")]
pub fn batch_thread() {
    // SAFETY: a plain C struct; all zeroes is a valid value (priority 0, as SCHED_BATCH needs).
    let param: libc::sched_param = unsafe { std::mem::zeroed() };
    // The system call, not libc's wrapper, which musl leaves unimplemented.
    // SAFETY: `param` is a valid sched_param for the call; pid 0 is this thread.
    let set = unsafe { libc::syscall(libc::SYS_sched_setscheduler, 0, libc::SCHED_BATCH, &raw const param) };
    if set != 0 {
        tracing::debug!("the cassette writer keeps its scheduling policy: {}", io::Error::last_os_error());
    }
}

#[cfg(not(target_os = "linux"))]
pub fn batch_thread() {}

/// Grows the pipe stderr is (when it is one) to hold at least `bytes`, so
/// that the log writer's large writes do not wait for the reader to make
/// room (each wait a sleep and a wake of the writer, and of the reader).
/// Linux only. A pipe that holds as much already, a refusal (past
/// `/proc/sys/fs/pipe-max-size`) or a stderr that is no pipe leave things
/// as they are.
#[cfg(target_os = "linux")]
pub fn widen_stderr_pipe(bytes: usize) {
    use std::os::fd::AsRawFd;
    let Ok(bytes) = libc::c_int::try_from(bytes) else { return };
    let stderr = io::stderr().as_raw_fd();
    // SAFETY: F_GETPIPE_SZ and F_SETPIPE_SZ read and change a pipe's room, nothing else; on
    // a file that is no pipe they fail, and nothing changes.
    unsafe {
        let room = libc::fcntl(stderr, libc::F_GETPIPE_SZ);
        if (0..bytes).contains(&room) {
            libc::fcntl(stderr, libc::F_SETPIPE_SZ, bytes);
        }
    }
}

#[cfg(not(target_os = "linux"))]
pub fn widen_stderr_pipe(_bytes: usize) {}
