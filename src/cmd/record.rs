//! `mcp-tape record`: a recording over HTTP (in front of an upstream URL)
//! or on stdio (between the client and a child process).

use std::future::Future;
use std::path::Path;
use std::sync::Arc;

use tokio::net::TcpListener;

use super::{
    RunRules, announce, bind, load_rules, loading, local_address, on_stdio, pseudonyms, report_of,
    write_reports,
};
use crate::cassette::store::{Cassette, Writer};
use crate::cassette::tape::Tape;
use crate::config::{self, FrontDoor, HttpUpstream, RecordConfig, RecordMode, Upstream};
use crate::engine::replay::{Replay, ServiceAnswers};
use crate::engine::{Engine, Facts, Lost, Mode, Recorder};
use crate::error::Error;
use crate::matching::MatchRules;
use crate::model::LlmExchange;
use crate::normalize::Normalization;
use crate::normalize::Rules as Normalizing;
use crate::pseudonym::Settings;
use crate::redact;
use crate::transport::http::turns::Serving;
use crate::transport::http::{self, App, Proxy, server};
use crate::transport::stdio::{self, Door, Ended};
use crate::util;

/// Records through the front door `config` names until a stop signal (or,
/// on stdio, the end of input or of the server).
///
/// # Errors
///
/// As [`http()`] and [`stdio()`].
pub(super) async fn run(config: RecordConfig) -> Result<u8, Error> {
    match &config.upstream {
        Upstream::Http { front_door, .. } => {
            let listener = bind(front_door).await?;
            http(config, listener, server::shutdown_signal()).await.map(|()| 0)
        }
        Upstream::Stdio { .. } => stdio(config, server::shutdown_signal()).await,
    }
}

/// What a cassette held when a `--mode missing` recording began: its MCP
/// exchanges and its model exchanges.
struct Existing {
    tape: Tape,
    llms: Vec<LlmExchange>,
}

/// The cassette a recording writes, its directory made (and the key its
/// recordings are pseudonymized with noted), and what it holds already for
/// `--mode missing`.
fn open_for_recording(
    cassette: &Path,
    mode: RecordMode,
    rules: &Normalizing,
) -> Result<(Cassette, Option<Existing>), Error> {
    if let Some(dir) = cassette.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| Error::Write { path: dir.to_owned(), source })?;
    }
    let cassette = Cassette::open(cassette)?;
    if let Some(pseudonyms) = rules.pseudonyms() {
        cassette.note_pseudonym_key(&pseudonyms.fingerprint())?;
    }
    let existing = match mode {
        RecordMode::All => None,
        RecordMode::Missing => Some(Existing {
            tape: Tape::new(cassette.exchanges_as_text()?, rules),
            llms: cassette.llm_exchanges()?,
        }),
    };
    Ok((cassette, existing))
}

/// Record over HTTP: the front door's app forwarding to `upstream` and
/// storing into `cassette` (with `mode`, answering from it what the match
/// rules pick too), injecting the run's faults, and the cassette's writer.
pub(super) fn http_recording(
    cassette: &Path,
    mode: RecordMode,
    normalization: &Normalization,
    RunRules { matches, faults, pseudonymize }: RunRules,
    upstream: &HttpUpstream,
    front_door: FrontDoor,
) -> Result<(Arc<App>, Writer), Error> {
    let rules = recording_rules(normalization, pseudonymize.as_ref())?;
    let (cassette, existing) = open_for_recording(cassette, mode, &rules)?;
    let client =
        http::upstream::UpstreamClient::new(&upstream.url, upstream.ca.as_deref(), upstream.timeouts)?;
    let llms = upstream
        .llms
        .iter()
        .map(|model| {
            let client =
                http::upstream::UpstreamClient::new(&model.url, upstream.ca.as_deref(), upstream.timeouts)
                    .map_err(|e| Error::Config(format!("--model {}: {e}", model.name)))?;
            Ok((model.name.clone(), client))
        })
        .collect::<Result<Vec<_>, Error>>()?;
    let writer = Writer::start(cassette)?;
    let recorder = Recorder::new(writer.handle(), rules.clone(), &upstream_host(&upstream.url));
    let link = Proxy::new(client).with_llms(llms);
    let engine = recording_engine(recorder, link, existing, rules, matches).with_faults(faults);
    let app = App::new(engine, front_door).redacting_headers(upstream.redact_headers.clone());
    Ok((Arc::new(app), writer))
}

/// The rules of a recording: `normalization`'s, and the pseudonyms it
/// asks for or the `[pseudonymize]` table (`table`) does.
fn recording_rules(normalization: &Normalization, table: Option<&Settings>) -> Result<Normalizing, Error> {
    let rules = Normalizing::new(normalization)?;
    Ok(match pseudonyms(normalization.pseudonymize, table)? {
        Some(pseudonyms) => rules.with_pseudonyms(pseudonyms),
        None => rules,
    })
}

/// The engine of a recording through `link`: record, or with `existing`
/// (what the cassette held), `--mode missing`, answering what
/// `match_rules` pick from it too.
fn recording_engine<L>(
    recorder: Recorder,
    link: L,
    existing: Option<Existing>,
    rules: Normalizing,
    match_rules: MatchRules,
) -> Engine<L> {
    let mode = match existing {
        None => Mode::Record { recorder, link },
        Some(Existing { tape, llms }) => Mode::Missing {
            cassette: Replay::new(
                tape,
                ServiceAnswers::default(),
                rules,
                config::OnMiss::Error,
                config::Pace::Instant,
            )
            .with_match_rules(match_rules)
            .with_llms(llms),
            recorder,
            link,
        },
    };
    Engine::from(mode)
}

/// The summary line of a recording that stopped; how many exchanges
/// failed to store.
pub(super) fn summarize_recording(writer: Writer) -> u64 {
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

/// A recording's end: [`Error::NotStored`] when any exchange failed to
/// store, [`Error::Lost`] when a client was given an answer that cannot be.
fn all_stored(failed: u64, Lost { count, named }: Lost) -> Result<(), Error> {
    match (failed, count) {
        (0, 0) => Ok(()),
        (0, count) => Err(Error::Lost { count, named }),
        (failed, _) => Err(Error::NotStored(failed)),
    }
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
pub async fn http(
    config: RecordConfig,
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
) -> Result<(), Error> {
    let Upstream::Http { front_door, upstream } = config.upstream.clone() else {
        return Err(Error::Config("record over HTTP needs an HTTP upstream".into()));
    };
    let address = local_address(&listener, &front_door)?;
    let mut shutdown = std::pin::pin!(shutdown);
    let (loaded, url) = (config.clone(), upstream.url.clone());
    let load = move || {
        let rules = load_rules(&loaded.rules)?;
        http_recording(&loaded.cassette, loaded.mode, &loaded.normalization, rules, &upstream, front_door)
    };
    let Some((app, writer)) = loading(load, shutdown.as_mut()).await? else {
        return Ok(());
    };
    announce(format!("record listening on http://{address}, forwarding to {}", redact::url_for_log(&url)));
    server::run(listener, Serving::One(Arc::clone(&app)), shutdown).await;
    let failed = summarize_recording(writer);
    let lost = app.engine().lost();
    write_reports(&report_of(app.engine(), None), &config.reports, failed == 0 && lost.count == 0)?;
    all_stored(failed, lost)
}

/// Spawns the stdio server `config` names and records between it and
/// this process's stdin/stdout until stdin closes, the server exits or
/// `shutdown`; then ends the server and returns the exit code mcp-tape
/// ends with: the server's (128 + N if signal N ended it).
///
/// # Errors
///
/// An unusable cassette; a command that cannot be started.
pub async fn stdio(config: RecordConfig, shutdown: impl Future<Output = ()>) -> Result<u8, Error> {
    let Upstream::Stdio { command, server } = config.upstream.clone() else {
        return Err(Error::Config("record over stdio needs a stdio server's command".into()));
    };
    let RunRules { matches, faults, pseudonymize } = load_rules(&config.rules)?;
    let rules = recording_rules(&config.normalization, pseudonymize.as_ref())?;
    let (cassette, existing) = open_for_recording(&config.cassette, config.mode, &rules)?;
    let writer = Writer::start(cassette)?;
    let program = command.first().map_or("", |p| p.rsplit('/').next().unwrap_or(p));
    let recorder = Recorder::new(writer.handle(), rules.clone(), &format!("stdio:{program}"));
    let lost = recorder.lost().clone();
    let (output, mut to_client) = stdio::ToClient::new(stdio::stdout());
    let shown = command.join(" ");
    let (mut child, link) = stdio::child::spawn(&command, output.clone())
        .map_err(|source| Error::Spawn { command: shown.clone(), source })?;
    announce(format!("record on stdio: {}, as server {}", util::printable(&shown), util::printable(&server)));
    let facts = Facts { credentials: redact::env_secrets(std::env::vars()), ..Facts::default() };
    let engine = recording_engine(recorder, link, existing, rules, matches).with_faults(on_stdio(faults));
    let door = Door::new(engine, server, facts);
    let ended = stdio::serve(&door, stdio::stdin(), &mut to_client, &output, shutdown, child.gone()).await;
    match ended {
        Ok(Ended::Input) => tracing::info!("stdin closed: closing the stdio server's stdin"),
        Ok(Ended::Stopped) => tracing::info!("stopping the stdio server"),
        Ok(Ended::Child) => tracing::info!("the stdio server closed its output"),
        Ok(Ended::Cut) => tracing::info!("a fault cut the stream: stopping the stdio server"),
        Err(e) => tracing::warn!("reading stdin failed: {e}; stopping the stdio server"),
    }
    let report = report_of(door.engine(), None);
    drop(door); // closes the child's stdin
    drop(output);
    // The child's last output is relayed while it stops.
    let (stopped, ()) = tokio::join!(child.stop(), to_client.drain());
    let status = stopped.map_err(|source| Error::Spawn { command: shown, source })?;
    let failed = summarize_recording(writer);
    tracing::info!("the stdio server ended: {status}");
    let lost = lost.so_far();
    write_reports(&report, &config.reports, failed == 0 && lost.count == 0)?;
    all_stored(failed, lost)?;
    Ok(crate::os::exit_code(status))
}
