//! mcp-tape: a record/replay proxy daemon for MCP (Model Context Protocol)
//! traffic.
//!
//! ```text
//! client ──HTTP──▶ transport::http ──▶ engine ──┬─▶ record ──▶ normalize ─▶ redact ─▶ store (SQLite writer)
//!                        ▲      │               │      (the front door forwards to the upstream and
//!                        │      └──proxy──▶ upstream ──HTTPS──▶ real MCP server    shows the answer to the capture)
//!                        │                      └─▶ replay ──▶ tape (in-memory index of cassettes)
//!                  answer framed                       └──▶ mcp fallback (mock answers)
//! ```
//!
//! One direction: a front door (`transport`) turns bytes into one parsed
//! JSON-RPC message and the facts around it (a [`engine::Call`]); the
//! [`engine::Engine`] answers or says what to forward; the front door
//! frames the answer. The engine has no HTTP in it, and its two modes,
//! `engine::replay` and `engine::record`, never import each other (record's
//! `--mode missing` composes both in [`engine::Engine::Missing`]). A new
//! transport (stdio next) is a module under `transport` that builds
//! `Call`s and frames `Step`s; `docs/ARCHITECTURE.md` walks through it.
//!
//! # Layout
//!
//! Bottom to top; each module uses only modules above it in this list.
//!
//! - [`util`]: log-safe text, a poison-proof lock.
//! - [`model`]: the domain types (`Exchange`, `RecordedMessage`,
//!   `Direction`, `Era`, `MatchKey`, `ServiceRoute`, `ServiceAnswer`) and
//!   canonical JSON; SQLite conversions of the stored ones.
//! - [`jsonrpc`]: the JSON-RPC 2.0 envelope: `Message`, `RequestId`,
//!   `ErrorCode`, `ErrorObject`; no MCP, no I/O.
//! - [`error`]: start-up errors ([`error::Error`]) and the one request
//!   error ([`error::RequestError`]): faults by side, mapped once to HTTP
//!   status and JSON-RPC error.
//! - [`config`]: plain validated settings.
//! - [`cli`]: clap definitions, validated into a [`config::Command`].
//! - [`mcp`]: protocol knowledge: eras, versions, headers, stateless checks,
//!   mock answers ([`mcp::fallback`]), era conversions ([`mcp::convert`]).
//! - [`redact`]: sensitive body keys and header credentials.
//! - [`normalize`]: match keys, placeholders, field diffs.
//! - [`sse`]: the `text/event-stream` encoder and incremental parser.
//! - [`agent365`]: the Agent 365 service endpoints that are not MCP
//!   (gateway discovery, chat history): routes, listings, url rewriting.
//! - [`store`]: SQLite cassettes: open + migrate, writer thread, loader.
//! - [`jsonl`]: cassettes as canonical JSON Lines (export, import).
//! - [`tape`]: the replay index and per-session cursors.
//! - [`engine`]: one message in, a [`engine::Step`] out: replay
//!   ([`engine::replay`]), record ([`engine::record`]), re-enacting a
//!   recorded stream ([`engine::reenact`]).
//! - [`transport`]: the front doors: [`transport::http`] (hyper: rules,
//!   framing, the record proxy, the accept loop, the upstream client).
//! - this file: [`run`] wires a command's parts together; `main.rs` parses
//!   the command line, starts logging, maps the outcome to an exit code.

pub mod agent365;
pub mod cli;
pub mod config;
pub mod engine;
pub mod error;
pub mod jsonl;
pub mod jsonrpc;
pub mod mcp;
pub mod model;
pub mod normalize;
pub mod redact;
pub mod sse;
pub mod store;
pub mod tape;
pub mod transport;
pub mod util;

use std::future::Future;
use std::io::{BufReader, Write};
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;

use config::{Command, FrontDoor, RecordConfig, RecordMode, ReplayConfig};
use engine::Engine;
use engine::record::Recorder;
use engine::replay::{Replay, ServiceAnswers};
use error::Error;
use normalize::Rules;
use tape::Tape;
use transport::http::{App, Proxy, server, upstream::Upstream};

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
                        .map_err(|source| Error::Read { path: path.clone(), source })?;
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
            written.map_err(|source| Error::Write {
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
    let replay = Replay::new(tape, service, rules, config.on_miss, config.pace);
    let app = Arc::new(App { engine: Engine::Replay(replay), proxy: None, front_door: config.front_door });
    announce(format!("replay listening on http://{address}"));
    server::run(listener, Arc::clone(&app), shutdown).await;
    let misses = app.engine.replay().map(Replay::misses).unwrap_or_default();
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
        std::fs::create_dir_all(dir).map_err(|source| Error::Write { path: dir.to_owned(), source })?;
    }
    let cassette = store::Cassette::open(&config.cassette)?;
    let rules = Rules::new(&config.normalization.redact_keys, &config.normalization.ignore_params);
    let existing = match config.mode {
        RecordMode::All => None,
        RecordMode::Missing => Some(Tape::new(cassette.exchanges_as_text()?, &rules)),
    };
    let upstream = Upstream::new(&config.upstream, config.upstream_ca.as_deref(), config.timeouts)?;
    let address = local_address(&listener, &config.front_door)?;
    let writer = store::Writer::start(cassette);
    let recorder = Recorder::new(writer.handle(), rules.clone());
    let proxy = Proxy::new(upstream, recorder.clone());
    let engine = match existing {
        None => Engine::Record(recorder),
        Some(tape) => Engine::Missing {
            cassette: Replay::new(
                tape,
                ServiceAnswers::default(),
                rules,
                config::OnMiss::Error,
                config::Pace::Instant,
            ),
            recorder,
        },
    };
    let app = Arc::new(App { engine, proxy: Some(proxy), front_door: config.front_door });
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
