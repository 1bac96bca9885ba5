//! `mcp-tape test`: a tape on loopback for as long as a command runs.

use std::path::PathBuf;
use std::sync::Arc;

use super::record::{http_recording, summarize_recording};
use super::replay::{load_cassettes, warn_if_empty};
use super::{
    RunRules, announce, bind, discard, load_rules, local_address, remove_wal_files, report_of, sibling,
    write_reports,
};
use crate::cassette::store::Cassette;
use crate::config::{Around, RecordMode, TestConfig, TestMode};
use crate::engine::replay::Unrecorded;
use crate::engine::{Engine, Mode};
use crate::error::Error;
use crate::transport::http::{App, server};
use crate::{ci, redact, report, util};

/// `mcp-tape test`: serves the tape on loopback for as long as the
/// command runs, then reports, then lets go of its stdout (a reader hears
/// its end once the reports are written); returns the exit code (the
/// command's, else 1 for misses or, with `--expired error`, stale
/// recordings).
///
/// # Errors
///
/// What stops the tape from starting (cassettes, port, upstream), a
/// command that cannot be started, a report that cannot be written.
pub(super) async fn run(config: TestConfig) -> Result<u8, Error> {
    let listener = bind(&config.front_door).await?;
    let url = format!("http://{}", local_address(&listener, &config.front_door)?);
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
    let target = recording.then(|| sibling(&cassette, &format!("recording-{}", std::process::id())));
    let rules = load_rules(&config.rules)?;
    let mut faults = rules.faults;
    let (app, writer, what) = match (&config.upstream, target.as_deref()) {
        (_, None) => {
            // A cassette that is not there is no error: the tape starts,
            // and each request the command makes misses, naming it.
            let (present, absent): (Vec<PathBuf>, Vec<PathBuf>) =
                config.paths.iter().cloned().partition(|path| path.exists());
            let (replay, carried) =
                load_cassettes(&present, &config.normalization, config.on_miss, config.pace, config.max_age)?;
            warn_if_empty(&replay, "test", &config.paths, "every request the command makes is a miss");
            faults.extend(carried);
            let absent = absent.first().map(|path| util::printable(&path.display().to_string()).into_owned());
            let replay = replay.with_match_rules(rules.matches).with_unrecorded(Unrecorded::Miss { absent });
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
                RunRules { matches: rules.matches, faults },
                upstream,
                config.front_door.clone(),
            )?;
            (app, Some(writer), format!("recording from {}", redact::url_for_log(&upstream.url)))
        }
        (None, Some(_)) => return Err(Error::Usage("recording needs --upstream URL".into())),
    };
    announce(format!("test: tape at {url} ({what}); running {}", config.around.shown()));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(server::run(listener, Arc::clone(&app), async {
        let _ = stopped.await;
    }));
    let ran = match &config.around {
        Around::Command(command) => ci::run(command, &url).await,
        Around::Verdict => ci::verdict_on_stdin(&url).await,
    };
    tracing::debug!("test: the command has ended; the tape stops once the requests in flight are answered");
    let _ = stop.send(());
    let _ = serving.await;
    let report = report_of(app.engine(), config.max_age);
    let upstream_failures = app.engine().upstream_failures();
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
        code = (128 + stop.number()).clamp(1, 255) as u8;
    }
    if let Some(writer) = writer {
        let failed = summarize_recording(writer);
        if failed > 0 && code == 0 {
            util::say(format_args!("mcp-tape: {}", Error::NotStored(failed)));
            code = 1; // the recording is incomplete: not kept, the run fails
        }
        if upstream_failures > 0 && code == 0 {
            util::say(format_args!(
                "mcp-tape: the upstream failed {upstream_failures} request(s) (see the log): the recording is \
                 incomplete"
            ));
            code = 1; // a cassette without those exchanges would pass later runs against nothing
        }
    }
    if let Some(file) = &target {
        if code == 0 {
            // The old cassette's WAL files would be read as the new one's.
            remove_wal_files(&cassette);
            std::fs::rename(file, &cassette)
                .map_err(|source| Error::Write { path: cassette.clone(), source })?;
            util::say(format_args!("mcp-tape: the recording replaced {}", cassette.display()));
        } else {
            discard(file);
            util::say(format_args!(
                "mcp-tape: the command failed; {} was left as it was",
                cassette.display()
            ));
        }
    }
    let verdict = if code != 0 {
        code
    } else if (report.usage.misses() > 0 && !config.allow_misses) || report.stale_failure() {
        1
    } else {
        0
    };
    util::say(format_args!("mcp-tape: {}", report.summary()));
    match ran.interrupted {
        Some(stop) => util::say(format_args!(
            "mcp-tape: {}; interrupted by signal {} ({}); exit {verdict}",
            ran.ended,
            stop.number(),
            stop.name()
        )),
        None => util::say(format_args!("mcp-tape: {}; exit {verdict}", ran.ended)),
    }
    write_reports(&report, &config.reports, verdict == 0)?;
    let test = config.reports.title.clone().unwrap_or_else(|| config.around.shown());
    report::github::tell(&report, &test, verdict == 0);
    // The reports are written: a test plugin reading this run's stdout to its end goes on now.
    crate::os::release_stdout();
    Ok(verdict)
}
