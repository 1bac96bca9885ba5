//! Windows: a Job Object per spawned command, console control events as
//! stops. Ctrl-C and Ctrl-Break reach every process attached to the
//! console, the command's included, so a stop needs no passing on; what
//! must end is ended with the job.

use std::io;
use std::path::Path;
use std::process::ExitStatus;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::signal::windows::{CtrlBreak, CtrlC, CtrlClose, CtrlShutdown};
use windows_sys::Win32::Foundation::{CloseHandle, HANDLE};
use windows_sys::Win32::System::JobObjects::{
    AssignProcessToJobObject, CreateJobObjectW, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
    JOBOBJECT_BASIC_ACCOUNTING_INFORMATION, JOBOBJECT_EXTENDED_LIMIT_INFORMATION,
    JobObjectBasicAccountingInformation, JobObjectExtendedLimitInformation, QueryInformationJobObject,
    SetInformationJobObject, TerminateJobObject,
};

use super::Stop;

pub fn name(stop: Stop) -> &'static str {
    match stop {
        Stop::Interrupt => "Ctrl-C",
        Stop::Terminate => "Ctrl-Break",
        Stop::HangUp => "the console closing",
        Stop::Quit => "the system shutting down",
    }
}

/// The C runtime's `SIGINT` (2) and `SIGBREAK` (21); the other two as a
/// Unix shell would number them.
pub fn number(stop: Stop) -> i32 {
    match stop {
        Stop::Interrupt => 2,
        Stop::Terminate => 21,
        Stop::HangUp => 1,
        Stop::Quit => 3,
    }
}

/// One console control event listened for.
pub enum StopListener {
    C(CtrlC),
    Break(CtrlBreak),
    Close(CtrlClose),
    Shutdown(CtrlShutdown),
}

impl StopListener {
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<()>> {
        match self {
            StopListener::C(event) => event.poll_recv(cx),
            StopListener::Break(event) => event.poll_recv(cx),
            StopListener::Close(event) => event.poll_recv(cx),
            StopListener::Shutdown(event) => event.poll_recv(cx),
        }
    }
}

pub fn listen(stop: Stop) -> io::Result<StopListener> {
    use tokio::signal::windows as events;
    Ok(match stop {
        Stop::Interrupt => StopListener::C(events::ctrl_c()?),
        Stop::Terminate => StopListener::Break(events::ctrl_break()?),
        Stop::HangUp => StopListener::Close(events::ctrl_close()?),
        Stop::Quit => StopListener::Shutdown(events::ctrl_shutdown()?),
    })
}

/// A spawned command's Job Object: every process it starts is in it, and
/// all of them are ended when its handle closes (this value dropped, or
/// mcp-tape gone however it went).
pub struct Tree {
    job: Job,
}

/// A Job Object handle, closed on drop.
struct Job(HANDLE);

// SAFETY: a kernel handle may be used and closed from any thread; nothing
// else is shared through it.
unsafe impl Send for Job {}
// SAFETY: as above: the calls made on it take no lock of ours.
unsafe impl Sync for Job {}

impl Drop for Job {
    fn drop(&mut self) {
        // SAFETY: the handle is ours and closed once.
        unsafe {
            CloseHandle(self.0);
        }
    }
}

impl Tree {
    /// Spawns `command` and puts it in a Job Object that kills on close.
    /// A process it starts before it is in the job (the moment after it
    /// starts) is not in it.
    ///
    /// # Errors
    ///
    /// The program cannot be started.
    pub fn spawn(command: &mut tokio::process::Command) -> io::Result<(tokio::process::Child, Option<Tree>)> {
        let process = command.spawn()?;
        let tree = match (Job::killing_on_close(), process.raw_handle()) {
            (Ok(job), Some(handle)) => {
                // SAFETY: both handles are live: the job's is ours, the process's is the child's.
                if unsafe { AssignProcessToJobObject(job.0, handle as HANDLE) } == 0 {
                    tracing::debug!("the child is in no job: {}", io::Error::last_os_error());
                    None
                } else {
                    Some(Tree { job })
                }
            }
            (Err(e), _) => {
                tracing::debug!("no job for the child: {e}");
                None
            }
            (Ok(_), None) => None,
        };
        Ok((process, tree))
    }

    /// The console is every process's alike: nothing to hand over.
    pub fn give_terminal(&self) {}

    /// A console stop already reached every process of the tree.
    pub fn pass_on(&self, stop: Stop) {
        tracing::debug!("{} reached the command through the console", name(stop));
    }

    /// Ends every process of the tree (Windows has no request to end).
    pub fn terminate(&self) {
        self.kill();
    }

    /// Ends every process of the tree at once.
    pub fn kill(&self) {
        // SAFETY: the job handle is live while `self` is.
        if unsafe { TerminateJobObject(self.job.0, 1) } == 0 {
            tracing::debug!("the job could not be ended: {}", io::Error::last_os_error());
        }
    }

    /// Ends what the command left behind once it has exited; returns how
    /// many processes were still running.
    pub async fn end(&self, _grace: Duration) -> usize {
        let left = self.job.active_processes();
        if left > 0 {
            self.kill();
        }
        left
    }
}

impl Job {
    fn killing_on_close() -> io::Result<Job> {
        // SAFETY: no attributes, no name: a new anonymous job.
        let handle = unsafe { CreateJobObjectW(std::ptr::null(), std::ptr::null()) };
        if handle.is_null() {
            return Err(io::Error::last_os_error());
        }
        let job = Job(handle);
        // SAFETY: a plain C struct, all zeroes is a valid value.
        let mut limits: JOBOBJECT_EXTENDED_LIMIT_INFORMATION = unsafe { std::mem::zeroed() };
        limits.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
        // SAFETY: the pointer and size describe `limits`, which outlives the call.
        let set = unsafe {
            SetInformationJobObject(
                job.0,
                JobObjectExtendedLimitInformation,
                (&raw const limits).cast(),
                size_of::<JOBOBJECT_EXTENDED_LIMIT_INFORMATION>() as u32,
            )
        };
        if set == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(job)
    }

    /// How many processes are in the job now.
    fn active_processes(&self) -> usize {
        // SAFETY: a plain C struct, all zeroes is a valid value.
        let mut accounting: JOBOBJECT_BASIC_ACCOUNTING_INFORMATION = unsafe { std::mem::zeroed() };
        // SAFETY: the pointer and size describe `accounting`, which outlives the call.
        let read = unsafe {
            QueryInformationJobObject(
                self.0,
                JobObjectBasicAccountingInformation,
                (&raw mut accounting).cast(),
                size_of::<JOBOBJECT_BASIC_ACCOUNTING_INFORMATION>() as u32,
                std::ptr::null_mut(),
            )
        };
        if read == 0 { 0 } else { accounting.ActiveProcesses as usize }
    }
}

/// The exit code mcp-tape ends with for a process that ended with
/// `status`: its own, cut to 0-255.
pub fn exit_code(status: ExitStatus) -> u8 {
    status.code().map_or(1, |code| code.clamp(0, 255) as u8)
}

/// Standard output as a file of its own (a duplicate handle): written
/// unbuffered and outside std's lock on stdout, so that a thread waiting in
/// a write there holds up no other use of stdout (the flush before exit).
pub fn own_stdout() -> io::Result<std::fs::File> {
    use std::os::windows::io::AsHandle;
    io::stdout().as_handle().try_clone_to_owned().map(std::fs::File::from)
}

/// A reader of mcp-tape's standard output hears its end when the process
/// ends.
pub fn release_stdout() {}

/// Transparent huge pages are Linux's: nothing to do.
pub fn huge_pages(_allowed: bool) {}

/// Ends the process with `code`, once what was printed to stdout is out.
pub fn exit_now(code: u8) -> ! {
    std::process::exit(i32::from(code))
}

/// The user's configuration directory: `%APPDATA%`.
pub fn config_dir() -> Option<std::path::PathBuf> {
    std::env::var_os("APPDATA").filter(|dir| !dir.is_empty()).map(std::path::PathBuf::from)
}

/// Writes `bytes` to a new file at `path`, under the user's profile, whose
/// permissions let only the user read it; an existing file is an error,
/// left as it is.
pub fn create_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// Whether `a` and `b` name one existing file (the same path once links
/// and relative parts are resolved).
pub fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Only Linux has `SCHED_BATCH`.
pub fn batch_thread() {}

/// Only Linux sets a pipe's room.
pub fn widen_stderr_pipe(_bytes: usize) {}

/// Standard error for the log writer (Windows writes it blocking).
pub struct Stderr;

impl io::Write for Stderr {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        io::stderr().write(bytes)
    }

    fn flush(&mut self) -> io::Result<()> {
        io::stderr().flush()
    }
}
