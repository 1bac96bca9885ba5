//! mcp-tape: a record/replay proxy daemon for MCP (Model Context Protocol)
//! traffic over Streamable HTTP and stdio.
//!
//! ```text
//! client ──HTTP───▶ transport::http ──┐
//! client ──stdio──▶ transport::stdio ─┴─▶ engine ──┬─▶ record ──▶ normalize ─▶ redact ─▶ store (SQLite writer)
//!                     │                            └─▶ replay ──▶ tape (in-memory index of cassettes)
//!                     │                                   └──▶ mcp fallback (mock answers)
//!                     └─ record: proxy ──HTTPS──▶ MCP server, or child ──stdin/stdout──▶ stdio server;
//!                        each answer shown to the engine's capture, released once committed
//! ```
//!
//! One direction: a front door (`transport`) turns bytes into one parsed
//! JSON-RPC message and the facts around it (a [`engine::Call`]); the
//! [`engine::Engine`] answers or says what to forward; the front door
//! frames the answer. The engine has no HTTP in it, and its two modes,
//! `engine::replay` and `engine::record`, never import each other (record's
//! `--mode missing` composes both in [`engine::Engine::Missing`]). A
//! transport is a module under `transport` that builds `Call`s and frames
//! `Step`s; `docs/ARCHITECTURE.md` walks through both and where a third goes.
//!
//! # Layout
//!
//! Bottom to top; each module uses only modules above it in this list.
//!
//! - [`limits`]: every bound on what mcp-tape is sent or reads, in one
//!   place (bytes, counts, waits).
//! - [`util`]: log-safe text (and text cut to a bound), a poison-proof
//!   lock, text split at a byte, the fast map of per-request lookups, a
//!   file written whole or not at all.
//! - [`logging`]: where log lines go (one buffer, one writer thread).
//! - [`model`]: the domain types (`Exchange`, `RecordedMessage`,
//!   `Direction`, `Era`, `MatchKey`, `ServiceRoute`, `ServiceAnswer`,
//!   `AnswerTemplate`) and
//!   canonical JSON; SQLite conversions of the stored ones.
//! - [`jsonrpc`]: the JSON-RPC 2.0 envelope: `Message`, `RequestId`,
//!   `Params` (and the cache of params read before), `ErrorCode`,
//!   `ErrorObject`; no MCP, no I/O.
//! - [`error`]: start-up errors ([`error::Error`]) and the one request
//!   error ([`error::RequestError`]): faults by side, mapped once to HTTP
//!   status and JSON-RPC error.
//! - [`config`]: plain validated settings.
//! - [`cli`]: clap definitions, validated into a [`config::Command`].
//! - [`matching`]: the match rules file (`mcp-tape.toml`, `--rules`):
//!   `[[match]]` tables read and checked at start, globs, pointer patterns,
//!   the `ignore` and `normalize` transforms.
//! - [`mcp`]: protocol knowledge: eras, versions, headers, stateless checks,
//!   mock answers ([`mcp::fallback`]), era conversions ([`mcp::convert`]).
//! - [`redact`]: sensitive body keys and header credentials.
//! - [`normalize`]: match keys, placeholders, field diffs.
//! - [`sse`]: the `text/event-stream` encoder and incremental parser.
//! - [`agent365`]: the Agent 365 service endpoints that are not MCP
//!   (gateway discovery, chat history): routes, listings, url rewriting.
//! - [`store`]: SQLite cassettes: open + migrate, writer thread, loader.
//! - [`template`]: answer templates: `{{argument}}` holes filled from a call.
//! - [`mocks`]: Agent 365 mock tooling server files read as answer templates.
//! - [`jsonl`]: cassettes as canonical JSON Lines (export, import).
//! - [`tape`]: the replay index and per-session cursors.
//! - [`engine`]: one message in, a [`engine::Step`] out: replay
//!   ([`engine::replay`]), record ([`engine::record`]), re-enacting a
//!   recorded stream ([`engine::reenact`]), which recording a match rule
//!   picks ([`engine::by_rule`], [`engine::nearest`]), what was worked out
//!   for params read before ([`engine::memory`]), and the ledger of what a run exercised
//!   ([`engine::ledger`]).
//! - [`report`]: a run's ledger told as a summary, JUnit XML, a JSON
//!   usage report (which `prune` and `rules suggest` read back) and an
//!   HTML page for a person (`report::html`).
//! - [`suggest`]: `rules suggest`: match rules from a report's misses,
//!   checked against the cassette.
//! - [`transport`]: the front doors: [`transport::http`] (hyper: rules,
//!   framing, the record proxy, the accept loop, the upstream client) and
//!   [`transport::stdio`] (line framing, the output writer, record's child
//!   process).
//! - [`drift`]: answers and tool catalogues compared (same, changed, gone;
//!   breaking, additive, cosmetic), and two cassettes (`diff`).
//! - [`verify`]: recordings re-sent to the live server and compared.
//! - [`ci`]: the command `mcp-tape test` wraps (its environment, its
//!   process group, the signals passed on).
//! - this file: [`run`] wires a command's parts together; `main.rs` parses
//!   the command line, starts logging, maps the outcome to an exit code.

pub mod agent365;
pub mod ci;
pub mod cli;
pub mod config;
pub mod drift;
pub mod engine;
pub mod error;
pub mod jsonl;
pub mod jsonrpc;
pub mod limits;
pub mod logging;
pub mod matching;
pub mod mcp;
pub mod mocks;
pub mod model;
pub mod normalize;
pub mod redact;
pub mod report;
pub mod sse;
pub mod store;
pub mod suggest;
pub mod tape;
pub mod template;
pub mod transport;
pub mod util;
pub mod verify;

use std::future::Future;
use std::io::BufReader;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::net::TcpListener;

use config::{
    Command, Expired, Front, FrontDoor, HttpUpstream, ImportConfig, ImportSource, MaxAge, Normalization,
    OnMiss, Pace, PruneConfig, RecordConfig, RecordMode, ReplayConfig, Reports, TestConfig, TestMode,
    Upstream,
};
use engine::record::Recorder;
use engine::replay::{Replay, ServiceAnswers};
use engine::{Engine, Facts};
use error::Error;
use matching::MatchRules;
use normalize::Rules;
use report::Report;
use store::{Cassette, Writer};
use tape::Tape;
use transport::http::{self, App, Proxy, server};
use transport::stdio::{self, Door, Ended};

/// Runs one command to completion; returns the exit code it ends with (a
/// stdio recording ends with its server's).
///
/// # Errors
///
/// Whatever stops the command: unusable cassettes, a port that cannot be
/// bound, bad input.
pub async fn run(command: Command) -> Result<u8, Error> {
    match command {
        Command::Replay(config) => match &config.front {
            Front::Http(front_door) => {
                let listener = bind(front_door).await?;
                replay(config, listener, server::shutdown_signal()).await.map(|()| 0)
            }
            Front::Stdio { .. } => replay_stdio(config, server::shutdown_signal()).await.map(|()| 0),
        },
        Command::Record(config) => match &config.upstream {
            Upstream::Http { front_door, .. } => {
                let listener = bind(front_door).await?;
                record(config, listener, server::shutdown_signal()).await.map(|()| 0)
            }
            Upstream::Stdio { .. } => record_stdio(config, server::shutdown_signal()).await,
        },
        Command::Test(config) => test(config).await,
        Command::Prune(config) => prune(&config).map(|()| 0),
        Command::SuggestRules(config) => {
            let report = read_report(&config.report)?;
            let misses = suggest::misses(&report)
                .map_err(|e| Error::Config(format!("{}: {e}", config.report.display())))?;
            let rules = Rules::new(&config.normalization.redact_keys, &config.normalization.ignore_params);
            print!("{}", suggest::suggest(&misses, &config.cassettes, &rules)?);
            Ok(0)
        }
        Command::Verify(config) => {
            let verified = verify::verify(&config).await?;
            print_findings(&verified.findings, config.format);
            for failure in &verified.failures {
                eprintln!("mcp-tape: could not verify {failure}");
            }
            if config.update {
                eprintln!("mcp-tape: rewrote {} recordings", verified.updated);
            }
            let failed = !verified.failures.is_empty() || verified.findings.fails(config.fail_on);
            Ok(u8::from(failed))
        }
        Command::Diff(config) => {
            let exchanges = |path: &PathBuf| -> Result<_, Error> {
                Ok(store::load(&store::cassette_files(std::slice::from_ref(path))?)?.exchanges)
            };
            let findings =
                drift::cassettes(&exchanges(&config.old)?, &exchanges(&config.new)?, &config.ignore_paths);
            print_findings(&findings, config.format);
            Ok(u8::from(findings.fails(config.fail_on)))
        }
        Command::Import(config) => import(&config).map(|()| 0),
        Command::Export(config) => {
            if let Some(output) = &config.output
                && same_file(output, &config.cassette)
            {
                return Err(Error::Usage(format!(
                    "-o {}: that is the cassette being exported; name another file",
                    output.display()
                )));
            }
            let loaded = store::load(std::slice::from_ref(&config.cassette))?;
            let written = match &config.output {
                Some(path) => util::write_whole(path, |file| jsonl::export(&loaded, file)),
                None => jsonl::export(&loaded, &mut std::io::stdout().lock()),
            };
            written.map(|()| 0).map_err(|source| Error::Write {
                path: config.output.clone().unwrap_or_else(|| "(standard output)".into()),
                source,
            })
        }
    }
}

/// Whether `a` and `b` name one existing file (same device and inode,
/// through links).
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

async fn bind(front_door: &FrontDoor) -> Result<TcpListener, Error> {
    TcpListener::bind(front_door.listen)
        .await
        .map_err(|source| Error::Bind { addr: front_door.listen.to_string(), source })
}

fn local_address(listener: &TcpListener, front_door: &FrontDoor) -> Result<SocketAddr, Error> {
    listener.local_addr().map_err(|source| Error::Bind { addr: front_door.listen.to_string(), source })
}

/// The readiness line, which scripts wait for (and read the port of, with
/// `--port 0`): logged at info level, or written to stderr as it is when
/// `MCP_TAPE_LOG` hides info lines.
fn announce(line: String) {
    if tracing::enabled!(tracing::Level::INFO) {
        tracing::info!("{line}");
    } else {
        eprintln!("{line}");
    }
}

/// The replay engine over the cassettes `config` names.
fn load_replay(config: &ReplayConfig) -> Result<Replay, Error> {
    let rules = load_rules(config.rules.as_deref())?;
    load_cassettes(&config.paths, &config.normalization, config.on_miss, config.pace, config.max_age)
        .map(|replay| replay.with_match_rules(rules))
}

/// The match rules `path` names (`--rules`), else those of
/// `mcp-tape.toml` in the working directory, else none; logged when any.
fn load_rules(path: Option<&Path>) -> Result<MatchRules, Error> {
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

/// The replay engine over the cassettes under `paths`.
fn load_cassettes(
    paths: &[PathBuf],
    normalization: &Normalization,
    on_miss: OnMiss,
    pace: Pace,
    max_age: Option<MaxAge>,
) -> Result<Replay, Error> {
    let files = store::cassette_files(paths)?;
    let rules = Rules::new(&normalization.redact_keys, &normalization.ignore_params);
    let loaded = store::load_as_text(&files)?;
    let templates = loaded.templates.len();
    let tape = Tape::new(loaded.exchanges, &rules).with_templates(loaded.templates);
    tracing::info!(
        "loaded {} exchanges{} for {} servers from {} cassettes{}",
        tape.len(),
        if templates > 0 { format!(" and {templates} answer templates") } else { String::new() },
        tape.servers().count(),
        files.len(),
        match tape.rejections() {
            0 => String::new(),
            n => format!(" ({n} recorded transport-level rejections left out: replay decides those itself)"),
        }
    );
    let service = ServiceAnswers::new(loaded.service_answers);
    Ok(Replay::new(tape, service, rules, on_miss, pace).with_max_age(max_age.map(|age| age.limit)))
}

/// What a run exercised, over the recordings `engine` could use.
fn report_of(engine: &Engine, max_age: Option<MaxAge>) -> Report {
    let stale_fails = max_age.is_some_and(|age| age.expired == Expired::Error);
    Report::new(engine.usage(), engine.replay().map(Replay::tape), stale_fails)
}

/// Writes the reports `reports` asks for; `passed`: the run's verdict.
fn write_reports(report: &Report, reports: &Reports, passed: bool) -> Result<(), Error> {
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

/// The end of a replay: the one-line summary of misses, the reports, and
/// the verdict.
///
/// # Errors
///
/// With `--fail-on-miss`, any miss; with `--expired error`, a recording
/// older than `--max-age` that answered; a report that cannot be written.
fn finish_replay(engine: &Engine, config: &ReplayConfig) -> Result<(), Error> {
    let report = report_of(engine, config.max_age);
    let misses: Vec<String> = report
        .usage
        .cases
        .iter()
        .filter(|(_, case)| case.misses > 0)
        .map(|(key, case)| format!("{key} ×{}", case.misses))
        .collect();
    let total = report.usage.misses();
    if misses.is_empty() {
        tracing::info!("stopped; no misses");
    } else {
        tracing::warn!("stopped; {total} misses: {}", misses.join("; "));
    }
    write_reports(&report, &config.reports, report.clean())?;
    if config.fail_on_miss && total > 0 {
        return Err(Error::Misses(total));
    }
    if report.stale_failure() {
        return Err(Error::Expired(report.usage.stale.len()));
    }
    Ok(())
}

/// Loads the cassettes, serves replay over HTTP on `listener` until
/// `shutdown`, then logs the miss summary. `config.front` gives the HTTP
/// rules.
///
/// # Errors
///
/// A cassette path that cannot be read or a cassette that cannot be used;
/// a stdio `config`; with `--fail-on-miss`, any miss.
pub async fn replay(
    config: ReplayConfig,
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
) -> Result<(), Error> {
    let Front::Http(front_door) = config.front.clone() else {
        return Err(Error::Config("replay over HTTP needs the HTTP front door's settings".into()));
    };
    let replay = load_replay(&config)?;
    let address = local_address(&listener, &front_door)?;
    let app = Arc::new(App { engine: Engine::Replay(replay), proxy: None, front_door });
    announce(format!("replay listening on http://{address}"));
    server::run(listener, Arc::clone(&app), shutdown).await;
    finish_replay(&app.engine, &config)
}

/// Loads the cassettes and serves replay on this process's stdin/stdout
/// until stdin closes or `shutdown`, then logs the miss summary.
///
/// # Errors
///
/// As [`replay`]; [`Error::Usage`] when the cassettes hold several servers
/// and none was chosen.
pub async fn replay_stdio(config: ReplayConfig, shutdown: impl Future<Output = ()>) -> Result<(), Error> {
    let Front::Stdio { server } = config.front.clone() else {
        return Err(Error::Config("replay over stdio needs the stdio front door's settings".into()));
    };
    let replay = load_replay(&config)?;
    let server = match server {
        Some(server) => server,
        None => {
            let servers: Vec<&str> = replay.tape().servers().collect();
            match servers.as_slice() {
                [] => "stdio".to_owned(),
                [only] => (*only).to_owned(),
                several => {
                    return Err(Error::Usage(format!(
                        "the cassettes hold {} servers ({}); choose one with --server",
                        several.len(),
                        several
                            .iter()
                            .map(|s| util::printable(s).into_owned())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )));
                }
            }
        }
    };
    announce(format!("replay on stdio as server {}", util::printable(&server)));
    let (output, mut to_client) = stdio::Writer::new(stdio::stdout());
    let door = Door { engine: Engine::Replay(replay), server, facts: Facts::default(), link: None };
    let ended =
        stdio::serve(&door, stdio::stdin(), &mut to_client, &output, shutdown, std::future::pending()).await;
    drop(output);
    to_client.drain().await;
    if let Err(e) = ended {
        tracing::warn!("reading stdin failed: {e}");
    }
    finish_replay(&door.engine, &config)
}

/// The cassette a recording writes, its directory made, and what it holds
/// already for `--mode missing`.
fn open_for_recording(
    cassette: &Path,
    mode: RecordMode,
    rules: &Rules,
) -> Result<(Cassette, Option<Tape>), Error> {
    if let Some(dir) = cassette.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| Error::Write { path: dir.to_owned(), source })?;
    }
    let cassette = Cassette::open(cassette)?;
    let existing = match mode {
        RecordMode::All => None,
        RecordMode::Missing => Some(Tape::new(cassette.exchanges_as_text()?, rules)),
    };
    Ok((cassette, existing))
}

/// Record over HTTP: the front door's app forwarding to `upstream` and
/// storing into `cassette` (with `mode`), and the cassette's writer.
fn http_recording(
    cassette: &Path,
    mode: RecordMode,
    normalization: &Normalization,
    match_rules: MatchRules,
    upstream: &HttpUpstream,
    front_door: FrontDoor,
) -> Result<(Arc<App>, Writer), Error> {
    let rules = Rules::new(&normalization.redact_keys, &normalization.ignore_params);
    let (cassette, existing) = open_for_recording(cassette, mode, &rules)?;
    let client = http::upstream::Upstream::new(&upstream.url, upstream.ca.as_deref(), upstream.timeouts)?;
    let writer = Writer::start(cassette)?;
    let recorder = Recorder::new(writer.handle(), rules.clone(), &upstream_host(&upstream.url));
    let proxy = Proxy::new(client, recorder.clone());
    let engine = recording_engine(recorder, existing, rules, match_rules);
    Ok((Arc::new(App { engine, proxy: Some(proxy), front_door }), writer))
}

/// The engine of a recording: record, or with `existing` (what the
/// cassette held), `--mode missing`, answering what `match_rules` pick
/// from it too.
fn recording_engine(
    recorder: Recorder,
    existing: Option<Tape>,
    rules: Rules,
    match_rules: MatchRules,
) -> Engine {
    match existing {
        None => Engine::Record(recorder),
        Some(tape) => Engine::Missing {
            cassette: Replay::new(
                tape,
                ServiceAnswers::default(),
                rules,
                config::OnMiss::Error,
                config::Pace::Instant,
            )
            .with_match_rules(match_rules),
            recorder,
        },
    }
}

/// The summary line of a recording that stopped; how many exchanges
/// failed to store.
fn summarize_recording(writer: Writer) -> u64 {
    let report = writer.finish();
    let per_server: Vec<String> =
        report.per_server.iter().map(|(server, n)| format!("{} {n}", util::printable(server))).collect();
    tracing::info!(
        "stopped; recorded {} exchanges ({}) to {}{}",
        report.total(),
        if per_server.is_empty() { "none".to_owned() } else { per_server.join(", ") },
        report.path.display(),
        if report.failed > 0 { format!("; {} failed to store", report.failed) } else { String::new() },
    );
    report.failed
}

/// A recording's end: [`Error::NotStored`] when any exchange failed to store.
fn all_stored(failed: u64) -> Result<(), Error> {
    if failed > 0 { Err(Error::NotStored(failed)) } else { Ok(()) }
}

/// What a recording says it came from: the upstream URL's `host[:port]`
/// (no scheme, user information or path).
fn upstream_host(url: &str) -> String {
    let authority = url.parse::<::http::Uri>().ok().and_then(|uri| uri.authority().cloned());
    match authority {
        Some(authority) => match authority.port() {
            Some(port) => format!("{}:{port}", authority.host()),
            None => authority.host().to_owned(),
        },
        None => "unknown".to_owned(),
    }
}

/// Opens the cassette, records through `listener` until `shutdown`, then
/// logs a one-line summary.
///
/// # Errors
///
/// An unusable cassette, upstream URL or CA file; a stdio `config`.
pub async fn record(
    config: RecordConfig,
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
) -> Result<(), Error> {
    let Upstream::Http { front_door, upstream } = config.upstream.clone() else {
        return Err(Error::Config("record over HTTP needs an HTTP upstream".into()));
    };
    let address = local_address(&listener, &front_door)?;
    let (app, writer) = http_recording(
        &config.cassette,
        config.mode,
        &config.normalization,
        MatchRules::default(),
        &upstream,
        front_door,
    )?;
    announce(format!("record listening on http://{address}, forwarding to {}", upstream.url));
    server::run(listener, Arc::clone(&app), shutdown).await;
    let failed = summarize_recording(writer);
    write_reports(&report_of(&app.engine, None), &config.reports, failed == 0)?;
    all_stored(failed)
}

/// Spawns the stdio server `config` names and records between it and
/// this process's stdin/stdout until stdin closes, the server exits or
/// `shutdown`; then ends the server and returns the exit code mcp-tape
/// ends with: the server's (128 + N if signal N ended it).
///
/// # Errors
///
/// An unusable cassette; a command that cannot be started.
pub async fn record_stdio(config: RecordConfig, shutdown: impl Future<Output = ()>) -> Result<u8, Error> {
    let Upstream::Stdio { command, server } = config.upstream.clone() else {
        return Err(Error::Config("record over stdio needs a stdio server's command".into()));
    };
    let rules = Rules::new(&config.normalization.redact_keys, &config.normalization.ignore_params);
    let (cassette, existing) = open_for_recording(&config.cassette, config.mode, &rules)?;
    let writer = Writer::start(cassette)?;
    let program = command.first().map_or("", |p| p.rsplit('/').next().unwrap_or(p));
    let recorder = Recorder::new(writer.handle(), rules.clone(), &format!("stdio:{program}"));
    let (output, mut to_client) = stdio::Writer::new(stdio::stdout());
    let shown = command.join(" ");
    let (mut child, link) = stdio::child::spawn(&command, recorder.clone(), output.clone())
        .map_err(|source| Error::Spawn { command: shown.clone(), source })?;
    announce(format!("record on stdio: {}, as server {}", util::printable(&shown), util::printable(&server)));
    let facts = Facts { credentials: redact::env_secrets(std::env::vars()), ..Facts::default() };
    let door = Door {
        engine: recording_engine(recorder, existing, rules, MatchRules::default()),
        server,
        facts,
        link: Some(link),
    };
    let ended = stdio::serve(&door, stdio::stdin(), &mut to_client, &output, shutdown, child.gone()).await;
    match ended {
        Ok(Ended::Input) => tracing::info!("stdin closed: closing the stdio server's stdin"),
        Ok(Ended::Stopped) => tracing::info!("stopping the stdio server"),
        Ok(Ended::Child) => tracing::info!("the stdio server closed its output"),
        Err(e) => tracing::warn!("reading stdin failed: {e}; stopping the stdio server"),
    }
    let report = report_of(&door.engine, None);
    drop(door); // closes the child's stdin
    drop(output);
    // The child's last output is relayed while it stops.
    let (stopped, ()) = tokio::join!(child.stop(), to_client.drain());
    let status = stopped.map_err(|source| Error::Spawn { command: shown, source })?;
    let failed = summarize_recording(writer);
    tracing::info!("the stdio server ended: {status}");
    write_reports(&report, &config.reports, failed == 0)?;
    all_stored(failed)?;
    Ok(stdio::child::exit_code(status))
}

/// `mcp-tape test`: serves the tape on loopback for as long as the
/// command runs, then reports; returns the exit code (the command's, else
/// 1 for misses or, with `--expired error`, stale recordings).
///
/// # Errors
///
/// What stops the tape from starting (cassettes, port, upstream), a
/// command that cannot be started, a report that cannot be written.
pub async fn test(config: TestConfig) -> Result<u8, Error> {
    let listener = bind(&config.front_door).await?;
    let url = format!("http://{}", local_address(&listener, &config.front_door)?);
    let cassette = config.paths.first().cloned().unwrap_or_default();
    let fresh = match config.mode {
        TestMode::Replay | TestMode::Missing => false,
        TestMode::All => true,
        TestMode::Once => !cassette.exists(),
    };
    let recording = config.mode == TestMode::Missing || fresh;
    // A recording goes to a file of its own until the command passes: a
    // fresh one, or (--mode missing) a copy of the cassette, so that a
    // failing command leaves the cassette as it was.
    let target = recording.then(|| sibling(&cassette, &format!("recording-{}", std::process::id())));
    let match_rules = load_rules(config.rules.as_deref())?;
    let (app, writer, what) = match (&config.upstream, target.as_deref()) {
        (_, None) => {
            let replay = load_cassettes(
                &config.paths,
                &config.normalization,
                config.on_miss,
                config.pace,
                config.max_age,
            )?
            .with_match_rules(match_rules);
            let front_door = config.front_door.clone();
            let app = Arc::new(App { engine: Engine::Replay(replay), proxy: None, front_door });
            (app, None, "replaying".to_owned())
        }
        (Some(upstream), Some(file)) => {
            let mode = if fresh { RecordMode::All } else { RecordMode::Missing };
            if !fresh && cassette.exists() {
                discard(file);
                Cassette::open_read_only(&cassette)?.copy_to(file)?;
            }
            let (app, writer) = http_recording(
                file,
                mode,
                &config.normalization,
                match_rules,
                upstream,
                config.front_door.clone(),
            )?;
            (app, Some(writer), format!("recording from {}", upstream.url))
        }
        (None, Some(_)) => return Err(Error::Usage("recording needs --upstream URL".into())),
    };
    announce(format!("test: tape at {url} ({what}); running {}", util::printable(&config.command.join(" "))));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(server::run(listener, Arc::clone(&app), async {
        let _ = stopped.await;
    }));
    let ran = ci::run(&config.command, &url).await;
    let _ = stop.send(());
    let _ = serving.await;
    let report = report_of(&app.engine, config.max_age);
    drop(app);
    let status = match ran {
        Ok(status) => status,
        Err(error) => {
            if let Some(file) = &target {
                discard(file);
            }
            return Err(error);
        }
    };
    let mut code = stdio::child::exit_code(status);
    if let Some(writer) = writer {
        let failed = summarize_recording(writer);
        if failed > 0 && code == 0 {
            eprintln!("mcp-tape: {}", Error::NotStored(failed));
            code = 1; // the recording is incomplete: not kept, the run fails
        }
    }
    if let Some(file) = &target {
        if code == 0 {
            // The old cassette's WAL files would be read as the new one's.
            remove_wal_files(&cassette);
            std::fs::rename(file, &cassette)
                .map_err(|source| Error::Write { path: cassette.clone(), source })?;
            eprintln!("mcp-tape: the recording replaced {}", cassette.display());
        } else {
            discard(file);
            eprintln!("mcp-tape: the command failed; {} was left as it was", cassette.display());
        }
    }
    let verdict = if code != 0 {
        code
    } else if (report.usage.misses() > 0 && !config.allow_misses) || report.stale_failure() {
        1
    } else {
        0
    };
    eprintln!("mcp-tape: {}", report.summary());
    eprintln!("mcp-tape: {status}; exit {verdict}");
    write_reports(&report, &config.reports, verdict == 0)?;
    Ok(verdict)
}

/// `path` with `.TAG` added to its file name: a file beside it.
fn sibling(path: &Path, tag: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_owned();
    name.push(format!(".{tag}"));
    path.with_file_name(name)
}

/// Removes a recording that is not kept, with SQLite's files beside it.
fn discard(file: &Path) {
    let _ = std::fs::remove_file(file);
    remove_wal_files(file);
}

/// Removes SQLite's `-wal` and `-shm` files beside `file`, if any.
fn remove_wal_files(file: &Path) {
    for path in [sibling(file, "wal"), sibling(file, "shm")] {
        let _ = std::fs::remove_file(path);
    }
}

/// The usage report (`--report`) at `path`, as JSON.
fn read_report(path: &Path) -> Result<serde_json::Value, Error> {
    let text =
        std::fs::read_to_string(path).map_err(|source| Error::Read { path: path.to_owned(), source })?;
    serde_json::from_str(&text).map_err(|e| Error::Config(format!("{}: not JSON: {e}", path.display())))
}

/// `mcp-tape prune`: removes from a cassette the recordings a passing
/// run's usage report lists as never used, printing each.
///
/// # Errors
///
/// A report that cannot be read or is not of a passing run; a cassette
/// that cannot be changed.
pub fn prune(config: &PruneConfig) -> Result<(), Error> {
    let report = read_report(&config.report)?;
    let rows = report::unused_rows(&report, &config.cassette)?;
    let mut cassette = Cassette::open(&config.cassette)?;
    let removed = cassette.remove(&rows)?;
    cassette.settle();
    for (row, what) in &removed {
        println!("removed #{row}: {}", util::printable(what));
    }
    eprintln!("mcp-tape: removed {} recordings from {}", removed.len(), config.cassette.display());
    Ok(())
}

/// Prints findings on standard output in `format`.
fn print_findings(findings: &drift::Findings, format: config::Format) {
    match format {
        config::Format::Text => print!("{}", findings.text()),
        config::Format::Json => println!("{:#}", findings.json()),
        config::Format::Markdown => print!("{}", findings.markdown()),
    }
}

/// `mcp-tape import`: JSON Lines or Agent 365 mocks into a cassette. All
/// input is read and checked before anything is written.
///
/// # Errors
///
/// Unreadable or bad input (named by line, or by file and tool); a
/// cassette that cannot be written.
pub fn import(config: &ImportConfig) -> Result<(), Error> {
    match &config.source {
        ImportSource::A365Mocks(dir) => {
            let mocks = mocks::read_dir(dir)?;
            let mut cassette = Cassette::open(&config.cassette)?;
            cassette.insert_templates(&mocks.templates)?;
            cassette.settle();
            let servers: std::collections::BTreeSet<&str> =
                mocks.templates.iter().map(|t| t.server.as_str()).collect();
            if !mocks.error_rates.is_empty() {
                tracing::warn!(
                    "errorRate is not reproduced (replay answers the same every time): {}",
                    util::printable(&mocks.error_rates.join(", "))
                );
            }
            eprintln!(
                "imported {} tools of {} servers ({} disabled, left out) into {}",
                mocks.templates.len(),
                servers.len(),
                mocks.disabled.len(),
                config.cassette.display()
            );
        }
        ImportSource::JsonLines(input) => {
            let mut cassette = Cassette::open(&config.cassette)?;
            let count = match input {
                Some(path) => {
                    let file = std::fs::File::open(path)
                        .map_err(|source| Error::Read { path: path.clone(), source })?;
                    jsonl::import(BufReader::new(file), &mut cassette)?
                }
                None => jsonl::import(std::io::stdin().lock(), &mut cassette)?,
            };
            cassette.settle();
            eprintln!("imported {count} lines into {}", config.cassette.display());
        }
    }
    Ok(())
}
