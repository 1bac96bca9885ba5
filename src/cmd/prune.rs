//! `mcp-tape prune`: recordings a passing run never used, removed (the
//! agent's model exchanges among them).

use super::read_report;
use crate::cassette::store::Cassette;
use crate::config::PruneConfig;
use crate::error::Error;
use crate::model::ModelExchange;
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
    let models = report::unused_model_rows(&report, &config.cassette)?;
    let mut cassette = Cassette::open(&config.cassette)?;
    let mut done = cassette.remove(&rows)?;
    let told: Vec<(i64, String)> = models
        .iter()
        .map(|unused| {
            (unused.source.row, format!("model {} {} {}", unused.model, unused.method, unused.target))
        })
        .collect();
    let holds = |row: i64, exchange: &ModelExchange| {
        models.iter().any(|unused| unused.source.row == row && unused.holds(exchange))
    };
    let from_models = cassette.remove_models(&told, holds)?;
    cassette.settle();
    done.removed.extend(from_models.removed);
    done.kept.extend(from_models.kept);
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
    let (removed, kept) = (done.removed.len(), done.kept.len());
    util::say(format_args!(
        "mcp-tape: removed {removed} recordings from {}; kept {kept}",
        config.cassette.display()
    ));
    Ok(0)
}
