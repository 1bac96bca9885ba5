//! The commands, one module per verb: each `run` takes its validated
//! settings and returns the exit code the command ends with. What several
//! share (the port, the readiness line, the match rules, the reports) is
//! here; `main.rs` parses the command line and starts logging.

mod diff;
mod export;
mod import;
mod prune;
pub mod record;
pub mod replay;
mod rules;
mod test;
mod verify;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use tokio::net::TcpListener;

use crate::config::{Command, Expired, Format, FrontDoor, MaxAge, Reports};
use crate::engine::Engine;
use crate::engine::replay::Replay;
use crate::error::Error;
use crate::matching::MatchRules;
use crate::report::{self, Report};
use crate::{drift, util};

/// Runs one command to completion; returns the exit code it ends with (a
/// stdio recording ends with its server's).
///
/// # Errors
///
/// Whatever stops the command: unusable cassettes, a port that cannot be
/// bound, bad input.
pub async fn run(command: Command) -> Result<u8, Error> {
    match command {
        Command::Replay(config) => replay::run(config).await,
        Command::Record(config) => record::run(config).await,
        Command::Test(config) => test::run(config).await,
        Command::Prune(config) => prune::run(&config),
        Command::SuggestRules(config) => rules::suggest(&config),
        Command::Verify(config) => verify::run(&config).await,
        Command::Diff(config) => diff::run(&config),
        Command::Import(config) => import::run(&config),
        Command::Export(config) => export::run(&config),
    }
}

pub(super) async fn bind(front_door: &FrontDoor) -> Result<TcpListener, Error> {
    TcpListener::bind(front_door.listen)
        .await
        .map_err(|source| Error::Bind { addr: front_door.listen.to_string(), source })
}

pub(super) fn local_address(listener: &TcpListener, front_door: &FrontDoor) -> Result<SocketAddr, Error> {
    listener.local_addr().map_err(|source| Error::Bind { addr: front_door.listen.to_string(), source })
}

/// The readiness line, which scripts wait for (and read the port of, with
/// `--port 0`): logged at info level, or written to stderr as it is when
/// `MCP_TAPE_LOG` hides info lines.
pub(super) fn announce(line: String) {
    if tracing::enabled!(tracing::Level::INFO) {
        tracing::info!("{line}");
    } else {
        eprintln!("{line}");
    }
}

/// The match rules `path` names (`--rules`), else those of
/// `mcp-tape.toml` in the working directory, else none; logged when any.
pub(super) fn load_rules(path: Option<&Path>) -> Result<MatchRules, Error> {
    let rules = MatchRules::load(path)?;
    if !rules.is_empty() {
        tracing::info!(
            "match rules: {} from {}",
            rules.rules().len(),
            util::printable(&rules.file().display().to_string())
        );
    }
    Ok(rules)
}

/// What a run exercised, over the recordings `engine` could use.
pub(super) fn report_of<L>(engine: &Engine<L>, max_age: Option<MaxAge>) -> Report {
    let stale_fails = max_age.is_some_and(|age| age.expired == Expired::Error);
    Report::new(engine.usage(), engine.replay().map(Replay::tape), stale_fails)
}

/// Writes the reports `reports` asks for; `passed`: the run's verdict.
pub(super) fn write_reports(report: &Report, reports: &Reports, passed: bool) -> Result<(), Error> {
    if let Some(path) = &reports.junit {
        report::write(path, &report.junit())?;
    }
    if let Some(path) = &reports.usage {
        report::write(path, &format!("{:#}\n", report.json(passed)))?;
    }
    if let Some(path) = &reports.html {
        report::write(path, &report.html(passed))?;
    }
    Ok(())
}

/// `path` with `.TAG` added to its file name: a file beside it.
pub(super) fn sibling(path: &Path, tag: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_owned();
    name.push(format!(".{tag}"));
    path.with_file_name(name)
}

/// The usage report (`--report`) at `path`, as JSON.
pub(super) fn read_report(path: &Path) -> Result<serde_json::Value, Error> {
    let text =
        std::fs::read_to_string(path).map_err(|source| Error::Read { path: path.to_owned(), source })?;
    serde_json::from_str(&text).map_err(|e| Error::Config(format!("{}: not JSON: {e}", path.display())))
}

/// Prints findings on standard output in `format`.
pub(super) fn print_findings(findings: &drift::Findings, format: Format) {
    match format {
        Format::Text => print!("{}", findings.text()),
        Format::Json => println!("{:#}", findings.json()),
        Format::Markdown => print!("{}", findings.markdown()),
    }
}
