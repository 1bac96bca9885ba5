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
//! Replay is built; record mode has its command line but no proxy yet.
//!
//! # Layout
//!
//! - `main.rs`: thin: parse the command line, start logging, [`run`], exit code.
//! - [`cli`]: clap definitions, validated into a [`config::Command`].
//! - [`config`]: plain validated settings.
//! - [`error`]: start-up/store errors and HTTP-level rejections, each mapped once.
//! - [`jsonrpc`]: the JSON-RPC 2.0 envelope; no MCP, no I/O.
//! - [`mcp`]: protocol knowledge: eras, versions, headers, stateless checks,
//!   mock answers ([`mcp::fallback`]), era conversions ([`mcp::convert`]).
//! - [`normalize`]: canonical JSON, match keys, placeholders, field diffs.
//! - [`redact`]: sensitive body keys.
//! - [`sse`]: the `text/event-stream` encoder.
//! - [`store`]: SQLite cassettes: open + migrate, writer, loader.
//! - [`jsonl`]: cassettes as canonical JSON Lines (export, import).
//! - [`tape`]: the replay index and per-session cursors.
//! - [`server`]: accept loop, connection limit, graceful shutdown, signals.
//! - [`route`]: HTTP → parsed MCP call → mode → HTTP answer; one log line each.
//! - [`replay`]: answers from the tape, else the mock; sessions; misses.

pub mod cli;
pub mod config;
pub mod error;
pub mod jsonl;
pub mod jsonrpc;
pub mod mcp;
pub mod normalize;
pub mod redact;
pub mod replay;
pub mod route;
pub mod server;
pub mod sse;
pub mod store;
pub mod tape;

use std::future::Future;
use std::io::{BufReader, Write};
use std::sync::Arc;

use tokio::net::TcpListener;

use config::{Command, ReplayConfig};
use error::Error;
use normalize::Rules;
use replay::Replay;
use route::App;
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
            let listener = TcpListener::bind(config.front_door.listen)
                .await
                .map_err(|source| Error::Bind { addr: config.front_door.listen.to_string(), source })?;
            replay(config, listener, server::shutdown_signal()).await
        }
        Command::Record(config) => Err(Error::Config(format!(
            "record mode (upstream {}) is not implemented in this build yet; replay is",
            config.upstream
        ))),
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
            eprintln!("imported {count} exchanges into {}", config.cassette.display());
            Ok(())
        }
        Command::Export(config) => {
            let exchanges = store::load(std::slice::from_ref(&config.cassette))?;
            let written = match &config.output {
                Some(path) => std::fs::File::create(path).and_then(|mut file| {
                    jsonl::export(&exchanges, &mut file)?;
                    file.flush()
                }),
                None => jsonl::export(&exchanges, &mut std::io::stdout().lock()),
            };
            written.map_err(|source| Error::Io {
                path: config.output.clone().unwrap_or_else(|| "(standard output)".into()),
                source,
            })
        }
    }
}

/// Loads the cassettes, serves replay on `listener` until `shutdown`, then
/// logs the miss summary.
///
/// # Errors
///
/// A cassette path that cannot be read or a cassette that cannot be used.
pub async fn replay(
    config: ReplayConfig,
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
) -> Result<(), Error> {
    let files = store::cassette_files(&config.paths)?;
    let rules = Rules::new(&config.normalization.redact_keys, &config.normalization.ignore_params);
    let tape = Tape::new(store::load(&files)?, &rules);
    tracing::info!(
        "loaded {} exchanges for {} servers from {} cassettes",
        tape.len(),
        tape.servers().count(),
        files.len()
    );
    let address = listener
        .local_addr()
        .map_err(|source| Error::Bind { addr: config.front_door.listen.to_string(), source })?;
    let app =
        Arc::new(App { replay: Replay::new(tape, rules, config.on_miss), front_door: config.front_door });
    tracing::info!("replay listening on http://{address}");
    server::run(listener, Arc::clone(&app), shutdown).await;
    let misses = app.replay.misses();
    if misses.is_empty() {
        tracing::info!("stopped; no misses");
    } else {
        let total: u64 = misses.iter().map(|(_, n)| n).sum();
        let listed: Vec<String> = misses.iter().map(|(what, n)| format!("{what} ×{n}")).collect();
        tracing::warn!("stopped; {total} misses: {}", listed.join("; "));
    }
    Ok(())
}
