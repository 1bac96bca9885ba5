//! `mcp-tape rules suggest`: match rules from a usage report's misses.

use std::path::{Path, PathBuf};

use super::read_report;
use crate::config::SuggestConfig;
use crate::error::Error;
use crate::normalize::Rules;
use crate::suggest;

/// Prints the suggested `[[match]]` tables, for the misses of one report
/// or of every `*.json` report under a directory (the pytest plugin's and
/// vitest helper's per-test reports), one table per case.
///
/// # Errors
///
/// A report that cannot be read or is not a usage report; cassettes that
/// cannot be.
pub(super) fn suggest(config: &SuggestConfig) -> Result<u8, Error> {
    let mut misses: Vec<suggest::Miss> = Vec::new();
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

/// `path` itself, or the `*.json` files under it (sorted) when it is a
/// directory.
fn report_files(path: &Path) -> Result<Vec<PathBuf>, Error> {
    let io = |source| Error::Read { path: path.to_owned(), source };
    if !std::fs::metadata(path).map_err(io)?.is_dir() {
        return Ok(vec![path.to_owned()]);
    }
    let mut found = Vec::new();
    let mut directories = vec![path.to_owned()];
    while let Some(directory) = directories.pop() {
        let io = |source| Error::Read { path: directory.clone(), source };
        for entry in std::fs::read_dir(&directory).map_err(io)? {
            let entry = entry.map_err(io)?;
            let kind = entry.file_type().map_err(io)?;
            if kind.is_dir() {
                directories.push(entry.path());
            } else if entry.path().extension().is_some_and(|ext| ext == "json") {
                found.push(entry.path());
            }
        }
    }
    found.sort();
    if found.is_empty() {
        return Err(Error::Config(format!("{}: no *.json usage reports under it", path.display())));
    }
    Ok(found)
}
