//! mcp-tape: a record/replay proxy daemon for MCP (Model Context Protocol)
//! traffic over Streamable HTTP.
//!
//! ```text
//! client ──HTTP──▶ server ──▶ route ──┬─▶ record ──▶ upstream ──HTTPS──▶ real MCP server
//!                                     │      └──▶ normalize ─▶ redact ─▶ store (SQLite writer)
//!                                     └─▶ replay ──▶ tape (in-memory index of cassettes)
//!                                            └──▶ mcp fallback (mock answers)
//! ```
//!
//! Both modes share the front door (`server`, `route`) and the
//! normalization rules, so that a recording made by `record` is matched by
//! `replay` with the same keys.
//!
//! # Layout
//!
//! - `main.rs`: thin: parse the command line, start logging, [`run`], exit code.
//! - [`agent365`]: the Agent 365 service endpoints that are not MCP
//!   (gateway discovery, chat history): routes, listings, url rewriting.
//! - [`cli`]: clap definitions, validated into a [`config::Command`].
//! - [`config`]: plain validated settings.
//! - [`error`]: start-up/store errors and HTTP-level rejections, each mapped once.
//! - [`jsonrpc`]: the JSON-RPC 2.0 envelope; no MCP, no I/O.
//! - [`mcp`]: protocol knowledge: eras, versions, headers, stateless checks,
//!   mock answers ([`mcp::fallback`]), era conversions ([`mcp::convert`]).
//! - [`normalize`]: canonical JSON, match keys, placeholders, field diffs.
//! - [`redact`]: sensitive body keys and header credentials.
//! - [`sse`]: the `text/event-stream` encoder and incremental parser.
//! - [`store`]: SQLite cassettes: open + migrate, writer thread, loader.
//! - [`jsonl`]: cassettes as canonical JSON Lines (export, import).
//! - [`tape`]: the replay index and per-session cursors.
//! - [`server`]: accept loop, connection limit, graceful shutdown, signals.
//! - [`route`]: the front door, replay's HTTP rules, framing; one log line each.
//! - [`replay`](mod@replay): answers from the tape, else the mock; sessions; misses.
//! - [`record`](mod@record): forward, tee, and hand each finished exchange to the writer.
//! - [`upstream`]: the one pooled hyper client over hyper-rustls.

pub mod agent365;
pub mod cli;
pub mod config;
pub mod error;
pub mod jsonl;
pub mod jsonrpc;
pub mod mcp;
pub mod normalize;
pub mod record;
pub mod redact;
pub mod replay;
pub mod route;
pub mod server;
pub mod sse;
pub mod store;
pub mod tape;
pub mod upstream;

use std::future::Future;
use std::io::{BufReader, Write};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::net::TcpListener;

use config::{Command, FrontDoor, RecordConfig, RecordMode, ReplayConfig};
use error::Error;
use normalize::Rules;
use record::Record;
use replay::{Replay, ServiceAnswers};
use route::{App, Mode};
use tape::Tape;

/// Runs one command to completion.
///
/// # Errors
///
/// Whatever stops the command: unusable cassettes, a port that cannot be
/// bound, bad input.
pub async fn run(command: Command) -> Result<(), Error> {
    match command {
        Command::Replay(config) => {
            let listener = bind(&config.front_door).await?;
            replay(config, listener, server::shutdown_signal()).await
        }
        Command::Record(config) => {
            let listener = bind(&config.front_door).await?;
            record(config, listener, server::shutdown_signal()).await
        }
        Command::Import(config) => {
            let mut cassette = store::Cassette::open(&config.cassette)?;
            let count = match &config.input {
                Some(path) => {
                    let file = std::fs::File::open(path)
                        .map_err(|source| Error::Io { path: path.clone(), source })?;
                    jsonl::import(BufReader::new(file), &mut cassette)?
                }
                None => jsonl::import(std::io::stdin().lock(), &mut cassette)?,
            };
            eprintln!("imported {count} lines into {}", config.cassette.display());
            Ok(())
        }
        Command::Export(config) => {
            let loaded = store::load(std::slice::from_ref(&config.cassette))?;
            let written = match &config.output {
                Some(path) => std::fs::File::create(path).and_then(|mut file| {
                    jsonl::export(&loaded, &mut file)?;
                    file.flush()
                }),
                None => jsonl::export(&loaded, &mut std::io::stdout().lock()),
            };
            written.map_err(|source| Error::Io {
                path: config.output.clone().unwrap_or_else(|| "(standard output)".into()),
                source,
            })
        }
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

/// `text` with its control characters escaped (`\n`, `\u{1b}`, ...), for
/// values from the network or a cassette that go into a log line: a method
/// name holding a newline or a terminal escape must not forge a line or
/// repaint the terminal.
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return text.into();
    }
    text.chars()
        .map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() })
        .collect::<String>()
        .into()
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

/// Locks a mutex whatever happened to its last holder: a panic mid-update in
/// one request must not take every later request down with it, and the maps
/// behind these locks stay usable.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Loads the cassettes, serves replay on `listener` until `shutdown`, then
/// logs the miss summary.
///
/// # Errors
///
/// A cassette path that cannot be read or a cassette that cannot be used;
/// with `--fail-on-miss`, any miss.
pub async fn replay(
    config: ReplayConfig,
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
) -> Result<(), Error> {
    let files = store::cassette_files(&config.paths)?;
    let rules = Rules::new(&config.normalization.redact_keys, &config.normalization.ignore_params);
    let loaded = store::load_as_text(&files)?;
    let tape = Tape::new(loaded.exchanges, &rules);
    tracing::info!(
        "loaded {} exchanges for {} servers from {} cassettes{}",
        tape.len(),
        tape.servers().count(),
        files.len(),
        match tape.rejections() {
            0 => String::new(),
            n => format!(" ({n} recorded transport-level rejections left out: replay decides those itself)"),
        }
    );
    let address = local_address(&listener, &config.front_door)?;
    let service = ServiceAnswers::new(loaded.service_answers);
    let replay = Arc::new(Replay::new(tape, service, rules, config.on_miss, config.pace));
    let app = Arc::new(App { mode: Mode::Replay(Arc::clone(&replay)), front_door: config.front_door });
    announce(format!("replay listening on http://{address}"));
    server::run(listener, app, shutdown).await;
    let misses = replay.misses();
    if misses.is_empty() {
        tracing::info!("stopped; no misses");
    } else {
        let total: u64 = misses.iter().map(|(_, n)| n).sum();
        let listed: Vec<String> = misses.iter().map(|(what, n)| format!("{what} ×{n}")).collect();
        tracing::warn!("stopped; {total} misses: {}", listed.join("; "));
        if config.fail_on_miss {
            return Err(Error::Misses(total));
        }
    }
    Ok(())
}

/// Opens the cassette, records through `listener` until `shutdown`, then
/// logs a one-line summary.
///
/// # Errors
///
/// An unusable cassette, upstream URL or CA file.
pub async fn record(
    config: RecordConfig,
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
) -> Result<(), Error> {
    if let Some(dir) = config.cassette.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| Error::Io { path: dir.to_owned(), source })?;
    }
    let cassette = store::Cassette::open(&config.cassette)?;
    let rules = Rules::new(&config.normalization.redact_keys, &config.normalization.ignore_params);
    let existing = match config.mode {
        RecordMode::All => None,
        RecordMode::Missing => Some(Tape::new(cassette.exchanges_as_text()?, &rules)),
    };
    let upstream = upstream::Upstream::new(&config.upstream, config.upstream_ca.as_deref(), config.timeouts)?;
    let address = local_address(&listener, &config.front_door)?;
    let writer = store::Writer::start(cassette);
    let app = Arc::new(App {
        mode: Mode::Record(Box::new(Record::new(
            upstream,
            rules,
            writer.handle(),
            existing,
            config.front_door.idle_timeout,
        ))),
        front_door: config.front_door,
    });
    announce(format!("record listening on http://{address}, forwarding to {}", config.upstream));
    server::run(listener, app, shutdown).await;
    let report = writer.finish();
    let per_server: Vec<String> =
        report.per_server.iter().map(|(server, n)| format!("{server} {n}")).collect();
    tracing::info!(
        "stopped; recorded {} exchanges ({}) to {}{}",
        report.total(),
        if per_server.is_empty() { "none".to_owned() } else { per_server.join(", ") },
        report.path.display(),
        if report.failed > 0 { format!("; {} failed to store", report.failed) } else { String::new() },
    );
    Ok(())
}
