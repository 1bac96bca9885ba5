//! `mcp-tape replay`: the cassettes served over HTTP or on stdio.

use std::collections::HashSet;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::net::TcpListener;

use super::{announce, bind, load_rules, loading, local_address, on_stdio, report_of, write_reports};
use crate::cassette::store::{self, Loaded};
use crate::cassette::tape::Tape;
use crate::config::{Front, MaxAge, OnMiss, Pace, ReplayConfig};
use crate::engine::replay::{Replay, ServiceAnswers};
use crate::engine::{Engine, Facts, Mode};
use crate::error::Error;
use crate::faults::{FaultRule, FaultRules};
use crate::model::Text;
use crate::normalize::Normalization;
use crate::normalize::Rules;
use crate::pseudonym::{self, KEY_VARIABLE, Key, Pseudonyms};
use crate::transport::http::turns::Serving;
use crate::transport::http::{App, server};
use crate::transport::stdio::{self, Door};
use crate::util;

/// Serves replay on the front door `config` names until a stop signal
/// (or, on stdio, the end of input).
///
/// # Errors
///
/// As [`http()`] and [`stdio()`].
pub(super) async fn run(config: ReplayConfig) -> Result<u8, Error> {
    match &config.front {
        Front::Http(front_door) => {
            let listener = bind(front_door).await?;
            http(config, listener, server::shutdown_signal()).await.map(|()| 0)
        }
        Front::Stdio { .. } => stdio(config, server::shutdown_signal()).await.map(|()| 0),
    }
}

/// The replay engine over the cassettes `config` names, and the fault
/// rules it injects (the rules file's and `--fault`'s, then the cassettes').
fn load_replay(config: &ReplayConfig) -> Result<(Replay, FaultRules), Error> {
    tracing::debug!("loading rules and cassettes");
    let rules = load_rules(&config.rules)?;
    let (replay, carried) =
        load_cassettes(&config.paths, &config.normalization, config.on_miss, config.pace, config.max_age)?;
    warn_if_empty(&replay, "replay", &config.paths, "every request gets the mock's answer");
    let mut faults = rules.faults;
    faults.extend(carried);
    Ok((replay.with_match_rules(rules.matches), faults))
}

/// The replay engine over the cassettes under `paths`, and the fault rules
/// their answer templates carry (Agent 365 mocks' `errorRate`).
pub(super) fn load_cassettes(
    paths: &[PathBuf],
    normalization: &Normalization,
    on_miss: OnMiss,
    pace: Pace,
    max_age: Option<MaxAge>,
) -> Result<(Replay, Vec<FaultRule>), Error> {
    let files = store::cassette_files(paths)?;
    let rules = Rules::new(normalization)?;
    let mut loaded = store::load_as_text(&files)?;
    let fingerprints = std::mem::take(&mut loaded.pseudonym_keys);
    let pseudonyms = replay_pseudonyms(&fingerprints, &loaded)?;
    let templates = loaded.templates.len();
    let carried: Vec<FaultRule> = loaded
        .templates
        .iter()
        .filter_map(|template| {
            let failure = template.failure.as_ref()?;
            let place = format!("errorRate {} of {} {}", failure.rate, template.server, template.tool);
            Some(FaultRule::from_mock(
                place,
                &template.server,
                &template.tool,
                failure.rate,
                failure.seed,
                failure.status,
            ))
        })
        .collect();
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
    if !carried.is_empty() {
        tracing::info!("{} answer templates fail a share of their calls (errorRate)", carried.len());
    }
    let service = ServiceAnswers::new(loaded.service_answers);
    let llms = loaded.llm_exchanges;
    if !llms.is_empty() {
        tracing::info!("loaded {} exchanges with the agent's model", llms.len());
    }
    let replay = Replay::new(tape, service, rules, on_miss, pace)
        .with_max_age(max_age.map(|age| age.limit))
        .with_llms(llms)
        .with_pseudonyms(fingerprints, pseudonyms);
    Ok((replay, carried))
}

/// The pseudonyms replay gives what requests send before they are
/// matched, when the cassettes were pseudonymized (with the keys of
/// `fingerprints`) and one of those keys is given ([`KEY_VARIABLE`], or
/// the one kept in the user's configuration directory); they know the
/// word pseudonyms `loaded` holds.
///
/// # Errors
///
/// A key that is too short, or a key file that cannot be read.
fn replay_pseudonyms(
    fingerprints: &[String],
    loaded: &Loaded<Text>,
) -> Result<Option<Arc<Pseudonyms>>, Error> {
    if fingerprints.is_empty() {
        return Ok(None);
    }
    let shown = fingerprints.join(", ");
    let Some((key, source)) = Key::given(None)? else {
        tracing::info!(
            "the cassettes are pseudonymized (key {shown}): requests are matched as they are sent \
             (set {KEY_VARIABLE} to their key to pseudonymize what they send first)"
        );
        return Ok(None);
    };
    if !fingerprints.contains(&key.fingerprint()) {
        tracing::warn!(
            "the pseudonym key {source} (fingerprint {}) is not the key the cassettes were pseudonymized \
             with ({shown}): requests are matched as they are sent",
            key.fingerprint()
        );
        return Ok(None);
    }
    let mut seen = HashSet::new();
    for exchange in &loaded.exchanges {
        pseudonym::note_words(&exchange.request, &mut seen);
        for message in &exchange.messages {
            pseudonym::note_words(&message.body, &mut seen);
        }
    }
    for exchange in &loaded.llm_exchanges {
        pseudonym::note_words(&exchange.request, &mut seen);
        for text in exchange.answer.json_texts() {
            pseudonym::note_words(text, &mut seen);
        }
    }
    tracing::info!("pseudonymizing what requests send before they are matched, with the key {source}");
    let pseudonyms = Pseudonyms::new(key, &pseudonym::Settings::default()).recognizing(seen);
    Ok(Some(Arc::new(pseudonyms)))
}

/// Says so (as `command`) when `replay` holds no recording at all under
/// `paths`, and what that means for each request (`consequence`).
pub(super) fn warn_if_empty(replay: &Replay, command: &str, paths: &[PathBuf], consequence: &str) {
    if replay.tape().servers().next().is_none() {
        let paths: Vec<String> = paths.iter().map(|path| path.display().to_string()).collect();
        tracing::warn!(
            "{command}: no recordings under {}: {consequence}",
            util::printable(&paths.join(", "))
        );
    }
}

/// The end of a replay: the one-line summary of misses, the reports, and
/// the verdict.
///
/// # Errors
///
/// With `--fail-on-miss`, any miss; with `--expired error`, a recording
/// older than `--max-age` that answered; a report that cannot be written.
fn finish_replay<L>(engine: &Engine<L>, config: &ReplayConfig) -> Result<(), Error> {
    let report = report_of(engine, config.max_age);
    let misses: Vec<String> = report
        .usage
        .cases
        .iter()
        .filter(|(_, case)| case.misses > 0)
        .map(|(key, case)| format!("{key} ×{}", case.misses))
        .collect();
    let total = report.usage.misses();
    let faults: Vec<String> = report
        .usage
        .cases
        .iter()
        .filter(|(_, case)| case.injected() > 0)
        .map(|(key, case)| format!("{key} ×{}", case.injected()))
        .collect();
    if !faults.is_empty() {
        let injected: u64 = report.usage.cases.values().map(|case| case.injected()).sum();
        tracing::info!("{injected} faults injected: {}", faults.join("; "));
    }
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
pub async fn http(
    config: ReplayConfig,
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
) -> Result<(), Error> {
    let Front::Http(front_door) = config.front.clone() else {
        return Err(Error::Config("replay over HTTP needs the HTTP front door's settings".into()));
    };
    let mut shutdown = std::pin::pin!(shutdown);
    let loaded = config.clone();
    let Some((replay, faults)) = loading(move || load_replay(&loaded), shutdown.as_mut()).await? else {
        return Ok(());
    };
    let address = local_address(&listener, &front_door)?;
    let engine = Engine::from(Mode::Replay(replay)).with_faults(faults);
    let app = Arc::new(App::new(engine, front_door));
    announce(format!("replay listening on http://{address}"));
    server::run(listener, Serving::One(Arc::clone(&app)), shutdown).await;
    finish_replay(app.engine(), &config)
}

/// Loads the cassettes and serves replay on this process's stdin/stdout
/// until stdin closes or `shutdown`, then logs the miss summary.
///
/// # Errors
///
/// As [`http()`]; [`Error::Usage`] when the cassettes hold several servers
/// and none was chosen.
pub async fn stdio(config: ReplayConfig, shutdown: impl Future<Output = ()>) -> Result<(), Error> {
    let Front::Stdio { server } = config.front.clone() else {
        return Err(Error::Config("replay over stdio needs the stdio front door's settings".into()));
    };
    let mut shutdown = std::pin::pin!(shutdown);
    let loaded = config.clone();
    let Some((replay, faults)) = loading(move || load_replay(&loaded), shutdown.as_mut()).await? else {
        return Ok(());
    };
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
    let (output, mut to_client) = stdio::ToClient::new(stdio::stdout());
    let engine = Engine::from(Mode::Replay(replay)).with_faults(on_stdio(faults));
    let door = Door::new(engine, server, Facts::default());
    let ended =
        stdio::serve(&door, stdio::stdin(), &mut to_client, &output, shutdown, std::future::pending()).await;
    drop(output);
    to_client.drain().await;
    if let Err(e) = ended {
        tracing::warn!("reading stdin failed: {e}");
    }
    finish_replay(door.engine(), &config)
}
