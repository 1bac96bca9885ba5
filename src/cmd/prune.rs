//! `mcp-tape prune`: recordings a passing run never used, removed (the
//! agent's model exchanges among them).

use super::read_report;
use crate::cassette::store::Cassette;
use crate::config::PruneConfig;
use crate::error::Error;
use crate::model::LlmExchange;
use crate::report;
use crate::util;

/// `mcp-tape prune`: removes from a cassette the recordings a passing
/// run's usage report lists as never used, printing each.
///
/// # Errors
///
/// A report that cannot be read or is not of a passing run; a cassette
/// that cannot be changed.
pub(super) fn run(config: &PruneConfig) -> Result<u8, Error> {
    let report = read_report(&config.report)?;
    let rows: Vec<_> = report::unused_rows(&report, &config.cassette)?
        .into_iter()
        .map(|unused| (unused.row, unused.key, unused.occurrence))
        .collect();
    let llms = report::unused_llm_rows(&report, &config.cassette)?;
    let mut cassette = Cassette::open(&config.cassette)?;
    let mut done = cassette.remove(&rows)?;
    let told: Vec<(i64, String)> = llms
        .iter()
        .map(|unused| {
            (unused.source.row, format!("model {} {} {}", unused.model, unused.method, unused.target))
        })
        .collect();
    let holds = |row: i64, exchange: &LlmExchange| {
        llms.iter().any(|unused| unused.source.row == row && unused.holds(exchange))
    };
    let from_llms = cassette.remove_llms(&told, holds)?;
    cassette.settle();
    done.removed.extend(from_llms.removed);
    done.kept.extend(from_llms.kept);
    for (row, what) in &done.removed {
        println!("removed #{row}: {}", util::printable(what));
    }
    for (row, what) in &done.kept {
        match what.as_str() {
            "" => util::say(format_args!("mcp-tape: kept #{row}: the cassette has no such row any more")),
            what => util::say(format_args!(
                "mcp-tape: kept #{row}: it now holds another recording ({}) than the report's; \
                 the cassette changed since that run",
                util::printable(what)
            )),
        }
    }
    let left = cassette.recordings()?;
    let kept = match done.kept.len() {
        0 => String::new(),
        n => format!("; {} the report listed kept, as said above", recordings(n)),
    };
    util::say(format_args!(
        "mcp-tape: removed {} from {}; {} left in it{kept}",
        recordings(done.removed.len()),
        config.cassette.display(),
        recordings(left),
    ));
    Ok(0)
}

/// `n` recordings, in words.
fn recordings(n: usize) -> String {
    match n {
        1 => "1 recording".into(),
        n => format!("{n} recordings"),
    }
}
