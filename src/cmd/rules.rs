//! `mcp-tape rules suggest`: match rules from a usage report's misses.

use super::read_report;
use crate::config::SuggestConfig;
use crate::error::Error;
use crate::normalize::Rules;
use crate::suggest;

/// Prints the suggested `[[match]]` tables.
///
/// # Errors
///
/// A report that cannot be read; cassettes that cannot be.
pub(super) fn suggest(config: &SuggestConfig) -> Result<u8, Error> {
    let report = read_report(&config.report)?;
    let misses =
        suggest::misses(&report).map_err(|e| Error::Config(format!("{}: {e}", config.report.display())))?;
    let rules = Rules::new(&config.normalization)?;
    print!("{}", suggest::suggest(&misses, &config.cassettes, &rules)?);
    Ok(0)
}
