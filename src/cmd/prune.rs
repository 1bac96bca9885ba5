//! `mcp-tape prune`: recordings a passing run never used, removed.

use super::read_report;
use crate::cassette::store::Cassette;
use crate::config::PruneConfig;
use crate::error::Error;
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
    let rows = report::unused_rows(&report, &config.cassette)?;
    let mut cassette = Cassette::open(&config.cassette)?;
    let removed = cassette.remove(&rows)?;
    cassette.settle();
    for (row, what) in &removed {
        println!("removed #{row}: {}", util::printable(what));
    }
    eprintln!("mcp-tape: removed {} recordings from {}", removed.len(), config.cassette.display());
    Ok(0)
}
