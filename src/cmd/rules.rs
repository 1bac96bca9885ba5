//! `mcp-tape rules suggest`: match rules from a usage report's misses.

use std::path::{Path, PathBuf};

use super::read_report;
use crate::config::SuggestConfig;
use crate::error::Error;
use crate::normalize::Rules;
use crate::{suggest, util};

/// Prints the suggested `[[match]]` tables, for the misses of one report
/// or of every `*.json` report under a directory (the pytest plugin's and
/// vitest helper's per-test reports), one table per case.
///
/// # Errors
///
/// A report that cannot be read or is not a usage report; cassettes that
/// cannot be.
pub(super) fn suggest(config: &SuggestConfig) -> Result<u8, Error> {
    let mut misses: Vec<suggest::ReportedMiss> = Vec::new();
    for path in report_files(&config.report)? {
        let report = read_report(&path)?;
        let found =
            suggest::misses(&report).map_err(|e| Error::Config(format!("{}: {e}", path.display())))?;
        for miss in found {
            match misses.iter_mut().find(|seen| seen.case() == miss.case()) {
                Some(seen) => seen.misses += miss.misses,
                None => misses.push(miss),
            }
        }
    }
    let rules = Rules::new(&config.normalization)?;
    print!("{}", suggest::suggest(&misses, &config.cassettes, &rules)?);
    Ok(0)
}

/// `path` itself, or the `*.json` files under it ([`util::files_under`])
/// when it is a directory.
fn report_files(path: &Path) -> Result<Vec<PathBuf>, Error> {
    let metadata = std::fs::metadata(path).map_err(|source| Error::Read { path: path.to_owned(), source })?;
    if !metadata.is_dir() {
        return Ok(vec![path.to_owned()]);
    }
    let found = util::files_under(path, "json").map_err(|(path, source)| Error::Read { path, source })?;
    if found.is_empty() {
        return Err(Error::Config(format!("{}: no *.json usage reports under it", path.display())));
    }
    Ok(found)
}
