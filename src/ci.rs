//! The command `mcp-tape test` wraps: spawned with the tape's URL in its
//! environment, in a process tree of its own ([`Tree`]: on Unix a process
//! group, so that it and everything it starts get the signals mcp-tape
//! passes on, and nothing else does), never outliving mcp-tape: when it
//! exits, what it left running is ended ([`Tree::end`]); a stop is passed
//! on, and a command still running [`INTERRUPT_GRACE`] later, or at a
//! second stop, is ended (SIGKILL).

use std::process::ExitStatus;
use std::time::Duration;

use crate::error::Error;
use crate::os::{Stop, Stops, Tree};
use crate::transport::stdio::child;

/// Where an agent finds the tape: mcp-tape's own variable.
pub const URL_VARIABLE: &str = "MCP_TAPE_URL";
/// Where the Agent 365 SDKs look for their MCP platform: set to the tape
/// too, so they use it with no code change.
pub const PLATFORM_VARIABLE: &str = "MCP_PLATFORM_ENDPOINT";

/// After a stop is passed on, how long the command gets to exit before
/// its tree is ended.
pub const INTERRUPT_GRACE: Duration = Duration::from_secs(5);

/// How the command ended: its status, and the stop that interrupted the
/// run, if one did (the run then ends with 128 + its number, whatever the
/// status).
#[derive(Debug)]
pub struct Ran {
    pub status: ExitStatus,
    pub interrupted: Option<Stop>,
}

/// Runs `command` with `url` in its environment until it exits, passing
/// each stop (SIGINT, SIGTERM, SIGHUP, SIGQUIT; Ctrl-C, Ctrl-Break, the
/// console closing, a shutdown) on to its tree (ended after
/// [`INTERRUPT_GRACE`] or at a second stop), then ends what it left
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
    spawning.args(arguments).env(URL_VARIABLE, url).env(PLATFORM_VARIABLE, url).kill_on_drop(true);
    // Every stop: one not listened for ends mcp-tape with its default action (SIGHUP: at once,
    // its recording's files left behind), or, listened for elsewhere, not at all (SIGQUIT).
    let mut stops = Stops::listen(&[Stop::Interrupt, Stop::Terminate, Stop::HangUp, Stop::Quit]);
    let (mut process, tree) = Tree::spawn(&mut spawning).map_err(failed)?;
    if let Some(tree) = &tree {
        tree.give_terminal();
    }
    let mut interrupted = None;
    let escalation = tokio::time::sleep(Duration::MAX);
    tokio::pin!(escalation);
    let status = loop {
        let received = tokio::select! {
            status = process.wait() => break status.map_err(failed)?,
            stop = stops.next() => Some(stop),
            () = &mut escalation, if interrupted.is_some() => None,
        };
        match (interrupted, received) {
            (None, Some(stop)) => {
                interrupted = Some(stop);
                escalation.as_mut().reset(tokio::time::Instant::now() + INTERRUPT_GRACE);
                if let Some(tree) = &tree {
                    tracing::info!("passing {} on to {}", stop.name(), crate::util::printable(&shown));
                    tree.pass_on(stop);
                }
            }
            _ => {
                tracing::warn!("{} is still running: ending it", crate::util::printable(&shown));
                escalation.as_mut().reset(tokio::time::Instant::now() + Duration::from_secs(3600));
                if let Some(tree) = &tree {
                    tree.kill();
                }
            }
        }
    };
    if let Some(tree) = &tree
        && tree.end(child::TERM_GRACE).await > 0
    {
        tracing::info!("{} left processes running; ended them", crate::util::printable(&shown));
    }
    Ok(Ran { status, interrupted })
}
