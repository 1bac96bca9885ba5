//! The command `mcp-tape test` wraps: spawned with the tape's URL in its
//! environment, in a process group of its own (so that it and everything
//! it starts get the signals mcp-tape passes on, and nothing else does),
//! never outliving mcp-tape: when it exits, what it left running is ended
//! ([`child::end_descendants`]); a signal is passed on, and a command still
//! running [`INTERRUPT_GRACE`] later, or at a second signal, gets SIGKILL.

use std::process::ExitStatus;
use std::time::Duration;

use tokio::signal::unix::{SignalKind, signal};

use crate::error::Error;
use crate::transport::stdio::child;

/// Where an agent finds the tape: mcp-tape's own variable.
pub const URL_VARIABLE: &str = "MCP_TAPE_URL";
/// Where the Agent 365 SDKs look for their MCP platform: set to the tape
/// too, so they use it with no code change.
pub const PLATFORM_VARIABLE: &str = "MCP_PLATFORM_ENDPOINT";

/// After a signal is passed on, how long the command gets to exit before
/// its process group gets SIGKILL.
pub const INTERRUPT_GRACE: Duration = Duration::from_secs(5);

/// How the command ended: its status, and the signal that interrupted the
/// run, if one did (the run then ends with 128 + it, whatever the status).
#[derive(Debug)]
pub struct Ran {
    pub status: ExitStatus,
    pub interrupted: Option<libc::c_int>,
}

/// Runs `command` with `url` in its environment until it exits, passing
/// SIGINT and SIGTERM on to its process group (SIGKILL after
/// [`INTERRUPT_GRACE`] or at a second signal), then ends what it left
/// running.
///
/// # Errors
///
/// [`Error::Spawn`]: the command could not be started or waited for.
pub async fn run(command: &[String], url: &str) -> Result<Ran, Error> {
    let shown = command.join(" ");
    let failed = |source| Error::Spawn { command: shown.clone(), source };
    let Some((program, arguments)) = command.split_first() else {
        return Err(failed(std::io::Error::new(std::io::ErrorKind::InvalidInput, "no command to run")));
    };
    let mut spawning = tokio::process::Command::new(program);
    spawning
        .args(arguments)
        .env(URL_VARIABLE, url)
        .env(PLATFORM_VARIABLE, url)
        .kill_on_drop(true)
        .process_group(0);
    child::die_with_parent(&mut spawning);
    let mut interrupt = signal(SignalKind::interrupt()).map_err(failed)?;
    let mut terminate = signal(SignalKind::terminate()).map_err(failed)?;
    child::become_subreaper();
    let mut process = spawning.spawn().map_err(failed)?;
    let group = process.id().and_then(|pid| i32::try_from(pid).ok());
    let guard = group.and_then(child::Guard::watch);
    let mut interrupted = None;
    let escalation = tokio::time::sleep(Duration::MAX);
    tokio::pin!(escalation);
    let status = loop {
        let received = tokio::select! {
            status = process.wait() => break status.map_err(failed)?,
            _ = interrupt.recv() => libc::SIGINT,
            _ = terminate.recv() => libc::SIGTERM,
            () = &mut escalation, if interrupted.is_some() => libc::SIGKILL,
        };
        let passed_on = match interrupted {
            None => {
                interrupted = Some(received);
                escalation.as_mut().reset(tokio::time::Instant::now() + INTERRUPT_GRACE);
                received
            }
            Some(_) => {
                tracing::warn!("{} is still running: SIGKILL", crate::util::printable(&shown));
                escalation.as_mut().reset(tokio::time::Instant::now() + Duration::from_secs(3600));
                libc::SIGKILL
            }
        };
        if let Some(group) = group {
            tracing::info!("passing signal {passed_on} on to {}", crate::util::printable(&shown));
            // SAFETY: kill(2) with a negative pid signals that process group; no memory is touched.
            unsafe {
                libc::kill(-group, passed_on);
            }
        }
    };
    if child::end_descendants(group, guard.as_ref(), child::TERM_GRACE).await > 0 {
        tracing::info!("{} left processes running; ended them", crate::util::printable(&shown));
    }
    Ok(Ran { status, interrupted })
}
