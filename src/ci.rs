//! The command `mcp-tape test` wraps: spawned with the tape's URL in its
//! environment, in a process group of its own (so that it and everything
//! it starts get the signals mcp-tape passes on, and nothing else does),
//! never outliving mcp-tape.

use std::process::ExitStatus;

use tokio::signal::unix::{SignalKind, signal};

use crate::error::Error;
use crate::transport::stdio::child;

/// Where an agent finds the tape: mcp-tape's own variable.
pub const URL_VARIABLE: &str = "MCP_TAPE_URL";
/// Where the Agent 365 SDKs look for their MCP platform: set to the tape
/// too, so they use it with no code change.
pub const PLATFORM_VARIABLE: &str = "MCP_PLATFORM_ENDPOINT";

/// Runs `command` with `url` in its environment until it exits, passing
/// SIGINT and SIGTERM on to its process group.
///
/// # Errors
///
/// [`Error::Spawn`]: the command could not be started or waited for.
pub async fn run(command: &[String], url: &str) -> Result<ExitStatus, Error> {
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
    let mut process = spawning.spawn().map_err(failed)?;
    let group = process.id().and_then(|pid| i32::try_from(pid).ok());
    loop {
        let passed_on = tokio::select! {
            status = process.wait() => return status.map_err(failed),
            _ = interrupt.recv() => libc::SIGINT,
            _ = terminate.recv() => libc::SIGTERM,
        };
        if let Some(group) = group {
            tracing::info!("passing signal {passed_on} on to {}", crate::util::printable(&shown));
            // SAFETY: kill(2) with a negative pid signals that process group; no memory is touched.
            unsafe {
                libc::kill(-group, passed_on);
            }
        }
    }
}
