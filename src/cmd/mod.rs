//! The commands, one module per verb: each `run` takes its validated
//! settings and returns the exit code the command ends with. What several
//! share (the port, the readiness line, the match rules, the reports) is
//! here; `main.rs` parses the command line and starts logging.

mod diff;
mod export;
mod import;
mod lint;
mod prune;
mod pseudonymize;
pub mod record;
pub mod replay;
mod rules;
mod test;
mod verify;

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;

use tokio::net::TcpListener;

use crate::config::{Command, Expired, Format, FrontDoor, MaxAge, Reports, RuleSources};
use crate::engine::Engine;
use crate::error::Error;
use crate::faults::FaultRules;
use crate::interchange::foreign::read_regular_file;
use crate::limits::{MAX_REPORT_BYTES, MAX_RULES_FILE_BYTES};
use crate::matching::{self, MatchRules};
use crate::pseudonym::{self, Key, Pseudonyms};
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
        Command::Lint(config) => lint::run(&config),
        Command::Pseudonymize(paths) => pseudonymize::run(&paths),
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

/// Runs `load` (cassettes and rules, which can take a while) on a thread
/// of its own while watching `shutdown`: a stop signal meanwhile ends the
/// command at once (`None`), as it ends one that is serving.
pub(super) async fn loading<T: Send + 'static>(
    load: impl FnOnce() -> Result<T, Error> + Send + 'static,
    shutdown: Pin<&mut impl Future<Output = ()>>,
) -> Result<Option<T>, Error> {
    tokio::select! {
        loaded = tokio::task::spawn_blocking(load) => {
            loaded.unwrap_or_else(|failed| std::panic::resume_unwind(failed.into_panic())).map(Some)
        }
        () = shutdown => {
            tracing::info!("stopped while loading: nothing served");
            Ok(None)
        }
    }
}

/// The readiness line, which scripts wait for (and read the port of, with
/// `--port 0`): logged at info level, or written to stderr as it is when
/// `MCP_TAPE_LOG` hides info lines.
pub(super) fn announce(line: String) {
    if tracing::enabled!(tracing::Level::INFO) {
        tracing::info!("{line}");
    } else {
        util::say(format_args!("{line}"));
    }
}

/// The rules of a run: which recording answers, which calls fail, and
/// what a recording pseudonymizes (`[pseudonymize]`).
pub(super) struct RunRules {
    pub matches: MatchRules,
    pub faults: FaultRules,
    pub pseudonymize: Option<pseudonym::Settings>,
}

/// The rules of the file `sources` names (`--rules`), else those of
/// `mcp-tape.toml` in the working directory, else none; then the
/// `--fault` specs. Logged when any.
///
/// # Errors
///
/// [`Error::Read`] for a named file that cannot be read, [`Error::Rules`]
/// (file, line, reason) for one that is not a rules file, [`Error::Usage`]
/// for a bad `--fault`.
pub(super) fn load_rules(sources: &RuleSources) -> Result<RunRules, Error> {
    let file = match &sources.file {
        Some(path) => Some(path.clone()),
        None => Some(PathBuf::from(matching::DEFAULT_FILE)).filter(|path| path.is_file()),
    };
    let mut rules = match &file {
        Some(path) => {
            // A regular file of bounded size: a FIFO or /dev/zero is refused, not read for ever.
            let text = read_regular_file(path, MAX_RULES_FILE_BYTES, "a rules file")
                .map_err(|e| Error::Usage(format!("--rules: {e}")))?;
            let file = crate::faults::parse_rules_file(path, &text)?;
            RunRules { matches: file.matches, faults: file.faults, pseudonymize: file.pseudonymize }
        }
        None => {
            RunRules { matches: MatchRules::default(), faults: FaultRules::default(), pseudonymize: None }
        }
    };
    if let Some(path) = file {
        let shown = util::printable(&path.display().to_string()).into_owned();
        for (count, what) in [(rules.matches.rules().len(), "match"), (rules.faults.rules().len(), "fault")] {
            if count > 0 {
                tracing::info!("{what} rules: {count} from {shown}");
            }
        }
    }
    for (number, spec) in sources.faults.iter().enumerate() {
        rules.faults.add_spec(number + 1, spec)?;
    }
    Ok(rules)
}

/// The pseudonyms a recording gives what it stores, when it is `asked` to
/// (`--pseudonymize`) or the rules file has a `[pseudonymize]` table
/// (`table`): under the key found, and the run says where it was found.
///
/// # Errors
///
/// [`Error::Config`] for a key that is too short, or a key file that
/// cannot be read or made.
pub(super) fn pseudonyms(
    asked: bool,
    table: Option<&pseudonym::Settings>,
) -> Result<Option<Arc<Pseudonyms>>, Error> {
    if !asked && table.is_none() {
        return Ok(None);
    }
    let settings = table.cloned().unwrap_or_default();
    let (key, source) = Key::find(settings.key_env.as_deref())?;
    tracing::info!(
        "pseudonymizing what is stored, with the key {source} (fingerprint {})",
        key.fingerprint()
    );
    Ok(Some(Arc::new(Pseudonyms::new(key, &settings))))
}

/// `faults` as a front door without HTTP (stdio) can enact them: the
/// rules that answer with a status or lose a session (stdio has neither)
/// are left out, with a warning each.
pub(super) fn on_stdio(mut faults: FaultRules) -> FaultRules {
    faults.retain(|rule| {
        let kept = !rule.action.effect.as_ref().is_some_and(|effect| effect.needs_http());
        if !kept {
            tracing::warn!(
                "fault {} is left out: stdio has no HTTP statuses or sessions",
                util::printable(&rule.label())
            );
        }
        kept
    });
    faults
}

/// What a run exercised, over the recordings `engine` could use.
pub(super) fn report_of<L>(engine: &Engine<L>, max_age: Option<MaxAge>) -> Report {
    let stale_fails = max_age.is_some_and(|age| age.expired == Expired::Error);
    Report::new(engine.usage(), engine.recordings(), stale_fails).with_llms(engine.llm_recordings())
}

/// Writes the reports `reports` asks for; `passed`: the run's verdict.
pub(super) fn write_reports(report: &Report, reports: &Reports, passed: bool) -> Result<(), Error> {
    if let Some(path) = &reports.junit {
        report::write(path, &report.junit())?;
    }
    if let Some(path) = &reports.usage {
        report::write(path, &format!("{:#}\n", report.json(passed, reports.title.as_deref())))?;
    }
    if let Some(path) = &reports.html {
        report::write(path, &report.html(passed, reports.title.as_deref()))?;
    }
    Ok(())
}

/// Removes a cassette that is not kept, with SQLite's files beside it.
pub(super) fn discard(file: &Path) {
    let _ = std::fs::remove_file(file);
    remove_wal_files(file);
}

/// Removes SQLite's `-wal` and `-shm` files beside `file`, if any.
pub(super) fn remove_wal_files(file: &Path) {
    for suffix in ["-wal", "-shm"] {
        let mut name = file.as_os_str().to_owned();
        name.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(name));
    }
}

/// The usage report (`--report`) at `path`, as JSON.
pub(super) fn read_report(path: &Path) -> Result<serde_json::Value, Error> {
    let text = read_regular_file(path, MAX_REPORT_BYTES, "a usage report")?;
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
