//! `mcp-tape diff`: what changed between two cassettes.

use std::path::PathBuf;

use super::print_findings;
use crate::cassette::store;
use crate::config::DiffConfig;
use crate::drift;
use crate::error::Error;

/// Prints the findings; 1 when one reaches `--fail-on`.
///
/// # Errors
///
/// A cassette that cannot be read.
pub(super) fn run(config: &DiffConfig) -> Result<u8, Error> {
    let load = |path: &PathBuf| store::load(&store::cassette_files(std::slice::from_ref(path))?);
    let (old, new) = (load(&config.old)?, load(&config.new)?);
    let mut findings = drift::cassettes(&old.exchanges, &new.exchanges, &config.ignore_paths);
    drift::llms(&mut findings, &old.llm_exchanges, &new.llm_exchanges, &config.ignore_paths);
    print_findings(&findings, config.format);
    Ok(u8::from(findings.fails(config.fail_on)))
}
