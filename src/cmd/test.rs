//! `mcp-tape test`: a tape on loopback for as long as a command runs.

use std::path::PathBuf;
use std::sync::Arc;

use super::record::{http_recording, summarize_recording};
use super::replay::{load_cassettes, warn_if_empty};
use super::{
    RunRules, announce, bind, discard, load_rules, local_address, remove_wal_files, report_of, write_reports,
};
use serde_json::json;
use tokio::net::TcpListener;

use crate::cassette::store::{Cassette, Writer};
use crate::ci::{Line, Ran};
use crate::config::{Around, RecordMode, TestConfig, TestMode};
use crate::engine::replay::Unrecorded;
use crate::engine::{Engine, Mode};
use crate::error::Error;
use crate::limits::MAX_TAPE_LINE_BYTES;
use crate::os::{Stop, Stops};
use crate::transport::http::turns::{Serving, Turns};
use crate::transport::http::{App, server};
use crate::{ci, redact, report, util};

/// `mcp-tape test`: serves the tape on loopback for as long as the
/// command runs, then reports, then lets go of its stdout (a reader hears
/// its end once the reports are written); returns the exit code (the
/// command's, else 1 for misses or, with `--expired error`, stale
/// recordings). With `--tapes-on-stdin`, tape after tape ([`tapes`]).
///
/// # Errors
///
/// What stops the tape from starting (cassettes, port, upstream), a
/// command that cannot be started, a report that cannot be written.
pub(super) async fn run(config: TestConfig) -> Result<u8, Error> {
    let listener = bind(&config.front_door).await?;
    let url = format!("http://{}", local_address(&listener, &config.front_door)?);
    let command = match &config.around {
        Around::Tapes => return tapes(&config, listener, &url).await,
        Around::Command(command) => command,
    };
    let tape = TestTape::start(&config)?;
    announce(format!("test: tape at {url} ({}); running {}", tape.what, config.around.shown()));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(server::run(listener, Serving::One(Arc::clone(&tape.app)), async {
        let _ = stopped.await;
    }));
    let ran = ci::run(command, &url).await;
    tracing::debug!("test: the command has ended; the tape stops once the requests in flight are answered");
    let _ = stop.send(());
    let _ = serving.await;
    let ended = tape.finish(&config, ran)?;
    // The reports are written: a test plugin reading this run's stdout to its end goes on now.
    crate::os::release_stdout();
    Ok(ended.verdict)
}

/// `mcp-tape test --tapes-on-stdin`: a test runner's tapes, one after
/// another on `listener`, as stdin gives them: a tape's arguments (a JSON
/// array of what `mcp-tape test` takes), then its verdict. Each is told on
/// stdout: serving, or why not; at its verdict, its exit code, report and
/// what it said of its recording. Returns 0 at the end of input (a tape
/// still running then ends with no verdict, so it fails), 128 + N at a
/// stop N (the tape running ends interrupted).
///
/// # Errors
///
/// Stdout could not take the URL.
async fn tapes(config: &TestConfig, listener: TcpListener, url: &str) -> Result<u8, Error> {
    let turns = Arc::new(Turns::new(config.front_door.clone()));
    let mut stops = Stops::listen(&ci::STOPS);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(server::run(listener, Serving::Turns(Arc::clone(&turns)), async {
        let _ = stopped.await;
    }));
    announce(format!("test: tapes at {url}, one after another as stdin gives them"));
    ci::tell(url).map_err(|source| Error::Spawn { command: "--tapes-on-stdin".into(), source })?;
    let teller = ci::Teller::start();
    let tell = |message: serde_json::Value| teller.tell(message.to_string());
    let mut stdin = tokio::io::BufReader::new(crate::transport::stdio::stdin());
    let mut interrupted = None;
    while interrupted.is_none() {
        let line = tokio::select! {
            line = ci::read_line(&mut stdin, MAX_TAPE_LINE_BYTES) => line,
            stop = stops.next() => {
                interrupted = Some(stop);
                break;
            }
        };
        let args = match line {
            Ok(Line::Text(text)) => serde_json::from_slice::<Vec<String>>(&text)
                .map_err(|e| Error::Usage(format!("a tape's line: expected a JSON array of strings: {e}"))),
            Ok(Line::TooLong) => {
                Err(Error::Usage(format!("a tape's line: longer than {MAX_TAPE_LINE_BYTES} bytes")))
            }
            Ok(Line::End) | Err(_) => break,
        };
        // A cassette loads (and, below, a recording is written) off this
        // thread, which goes on serving and hearing stops meanwhile.
        let mut starting = tokio::task::spawn_blocking(move || {
            let config = crate::cli::tape(args?)?;
            Ok((TestTape::start(&config)?, config))
        });
        let started = tokio::select! {
            started = &mut starting => started,
            stop = stops.next() => {
                interrupted = Some(stop);
                // Never served: once started, its recording is thrown away.
                if let Ok(Ok((tape, config))) = starting.await {
                    let ran = ci::Ran { interrupted, ..ci::Ran::none() };
                    let _ = tokio::task::spawn_blocking(move || tape.finish(&config, Ok(ran))).await;
                }
                break;
            }
        };
        let (tape, tape_config) = match started.unwrap_or_else(|e| Err(Error::Usage(format!("a tape: {e}"))))
        {
            Ok(started) => started,
            Err(error) => {
                util::say(format_args!("mcp-tape: {error}"));
                tell(json!({ "error": error.to_string() }));
                continue;
            }
        };
        turns.begin(Arc::clone(&tape.app));
        let shown = tape_config.reports.title.clone().unwrap_or_else(|| tape.cassette.display().to_string());
        tracing::info!("test: tape {} ({})", util::printable(&shown), tape.what);
        tell(json!({ "serving": true }));
        let ran = ci::next_verdict(&mut stdin, &mut stops).await;
        interrupted = ran.interrupted;
        tracing::debug!("test: {}; the tape stops once the requests in flight are answered", ran.ended);
        turns.end().await;
        let mut finishing = tokio::task::spawn_blocking(move || {
            let finished = tape.finish(&tape_config, Ok(ran));
            (finished, tape_config)
        });
        let finished = loop {
            tokio::select! {
                finished = &mut finishing => break finished,
                // Heard, and the recording is still written whole.
                stop = stops.next(), if interrupted.is_none() => interrupted = Some(stop),
            }
        };
        tell(match finished {
            Ok((Ok(ended), tape_config)) => json!({
                "code": ended.verdict,
                "report": ended.report.json(ended.verdict == 0, tape_config.reports.title.as_deref()),
                "said": ended.said,
            }),
            Ok((Err(error), _)) => json!({ "code": 1, "error": error.to_string() }),
            Err(error) => json!({ "code": 1, "error": format!("a tape: {error}") }),
        });
    }
    let _ = stop.send(());
    let _ = serving.await;
    if teller.finish() {
        crate::os::release_stdout();
    }
    Ok(interrupted.map_or(0, Stop::exit_code))
}

/// One test's tape: what answers its requests, and where its recording
/// goes until the verdict keeps it or throws it away.
struct TestTape {
    app: Arc<App>,
    writer: Option<Writer>,
    /// The recording's own file, renamed onto the cassette if the run passes.
    target: Option<PathBuf>,
    cassette: PathBuf,
    /// What it does, for the log: "replaying", "recording from URL".
    what: String,
}

/// How a tape ended: the run's exit code, its report, and what it said
/// of its recording and its verdict.
struct TapeEnd {
    verdict: u8,
    report: report::Report,
    said: Vec<String>,
}

impl TestTape {
    /// Opens the cassette (or starts the recording) `config` names.
    ///
    /// # Errors
    ///
    /// Unusable cassettes, rules or upstream.
    fn start(config: &TestConfig) -> Result<TestTape, Error> {
        let cassette = config.paths.first().cloned().unwrap_or_default();
        let fresh = match config.mode {
            TestMode::Replay | TestMode::Missing => false,
            TestMode::All => true,
            // With no upstream, a missing cassette is replayed as absent: every request misses.
            TestMode::Once => !cassette.exists() && config.upstream.is_some(),
        };
        let recording = config.mode == TestMode::Missing || fresh;
        // A recording goes to a file of its own until the command passes: a
        // fresh one, or (--mode missing) a copy of the cassette, so that a
        // failing command leaves the cassette as it was.
        let target = recording.then(|| util::beside(&cassette, &format!("recording-{}", std::process::id())));
        let rules = load_rules(&config.rules)?;
        let mut faults = rules.faults;
        let (app, writer, what) = match (&config.upstream, target.as_deref()) {
            (_, None) => {
                // A cassette that is not there is no error: the tape starts,
                // and each request the command makes misses, naming it.
                let (present, absent): (Vec<PathBuf>, Vec<PathBuf>) =
                    config.paths.iter().cloned().partition(|path| path.exists());
                let (replay, carried) = load_cassettes(
                    &present,
                    &config.normalization,
                    config.on_miss,
                    config.pace,
                    config.max_age,
                )?;
                warn_if_empty(&replay, "test", &config.paths, "every request the command makes is a miss");
                faults.extend(carried);
                let absent =
                    absent.first().map(|path| util::printable(&path.display().to_string()).into_owned());
                let replay =
                    replay.with_match_rules(rules.matches).with_unrecorded(Unrecorded::Miss { absent });
                let engine = Engine::from(Mode::Replay(replay)).with_faults(faults);
                let app = Arc::new(App::new(engine, config.front_door.clone()));
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
                    RunRules { matches: rules.matches, faults, pseudonymize: rules.pseudonymize },
                    upstream,
                    config.front_door.clone(),
                )?;
                (app, Some(writer), format!("recording from {}", redact::url_for_log(&upstream.url)))
            }
            (None, Some(_)) => return Err(Error::Usage("recording needs --upstream URL".into())),
        };
        Ok(TestTape { app, writer, target, cassette, what })
    }

    /// Ends the tape once nothing serves it any more: keeps its recording
    /// if `ran` passed, throws it away if not, and writes the reports.
    ///
    /// # Errors
    ///
    /// `ran`'s own error; a recording or a report that cannot be written.
    fn finish(self, config: &TestConfig, ran: Result<Ran, Error>) -> Result<TapeEnd, Error> {
        let TestTape { app, writer, target, cassette, .. } = self;
        let mut said = Vec::new();
        let mut say = |line: String| {
            util::say(format_args!("{line}"));
            said.push(line);
        };
        let report = report_of(app.engine(), config.max_age);
        let upstream_failures = app.engine().upstream_failures();
        let lost = app.engine().lost();
        drop(app);
        let ran = match ran {
            Ok(ran) => ran,
            Err(error) => {
                if let Some(file) = &target {
                    discard(file);
                }
                return Err(error);
            }
        };
        let mut code = ran.code;
        if let Some(stop) = ran.interrupted {
            // An interrupted run did not pass, whatever the command made of the stop.
            code = stop.exit_code();
        }
        if let Some(writer) = writer {
            let failed = summarize_recording(writer);
            if failed > 0 && code == 0 {
                say(format!("mcp-tape: {}", Error::NotStored(failed)));
                code = 1; // the recording is incomplete: not kept, the run fails
            }
            if let (failed @ 1.., Some(first)) = &upstream_failures
                && code == 0
            {
                say(format!(
                    "mcp-tape: the upstream failed {failed} request(s), the first: {first}; the recording is \
                     incomplete"
                ));
                code = 1; // a cassette without those exchanges would pass later runs against nothing
            }
            if lost.count > 0 && code == 0 {
                say(format!("mcp-tape: {}", Error::Lost { count: lost.count, named: lost.named }));
                code = 1; // what the test saw would not be what its replay gives
            }
        }
        if let Some(file) = &target {
            if code == 0 {
                // The old cassette's WAL files would be read as the new one's.
                remove_wal_files(&cassette);
                std::fs::rename(file, &cassette)
                    .map_err(|source| Error::Write { path: cassette.clone(), source })?;
                say(format!("mcp-tape: the recording replaced {}", cassette.display()));
            } else {
                discard(file);
                say(format!("mcp-tape: the command failed; {} was left as it was", cassette.display()));
            }
        }
        let verdict = if code != 0 {
            code
        } else if (report.usage.misses() > 0 && !config.allow_misses) || report.stale_failure() {
            1
        } else {
            0
        };
        say(format!("mcp-tape: {}", report.summary()));
        match ran.interrupted {
            Some(stop) => say(format!(
                "mcp-tape: {}; interrupted by signal {} ({}); exit {verdict}",
                ran.ended,
                stop.number(),
                stop.name()
            )),
            None => say(format!("mcp-tape: {}; exit {verdict}", ran.ended)),
        }
        write_reports(&report, &config.reports, verdict == 0)?;
        let test = config.reports.title.clone().unwrap_or_else(|| config.around.shown());
        report::github::tell(&report, &test, verdict == 0);
        Ok(TapeEnd { verdict, report, said })
    }
}
