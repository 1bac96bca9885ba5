//! `mcp-tape import`: JSON Lines, Agent 365 mock files or another tool's
//! recordings into a cassette.

use std::io::BufReader;
use std::path::Path;

use super::discard;
use crate::cassette::store::Cassette;
use crate::config::{ImportConfig, ImportSource};
use crate::error::Error;
use crate::interchange::{a365_mocks, foreign, jsonl};
use crate::util;

/// `mcp-tape import`: JSON Lines or Agent 365 mocks into a cassette. All
/// input is read and checked before anything is written. A new cassette
/// is written beside its place and moved there when the import is done, so
/// a refused (or killed) import leaves no file where none was.
///
/// # Errors
///
/// Unreadable or bad input (named by line, or by file and tool); a
/// cassette that cannot be written.
pub(super) fn run(config: &ImportConfig) -> Result<u8, Error> {
    if config.cassette.exists() {
        return import_into(config, &config.cassette);
    }
    let fresh = util::beside(&config.cassette, &format!("importing-{}", std::process::id()));
    let imported = import_into(config, &fresh).and_then(|code| {
        std::fs::rename(&fresh, &config.cassette)
            .map(|()| code)
            .map_err(|source| Error::Write { path: config.cassette.clone(), source })
    });
    if imported.is_err() {
        discard(&fresh);
    }
    imported
}

/// The import, into the cassette at `path`.
fn import_into(config: &ImportConfig, path: &Path) -> Result<u8, Error> {
    match &config.source {
        ImportSource::A365Mocks { dir, seed } => {
            let mocks = a365_mocks::read_dir(dir, *seed)?;
            let mut cassette = Cassette::open(path)?;
            cassette.insert_templates(&mocks.templates)?;
            cassette.settle();
            let servers: std::collections::BTreeSet<&str> =
                mocks.templates.iter().map(|t| t.server.as_str()).collect();
            if !mocks.error_rates.is_empty() {
                tracing::info!(
                    "errorRate fails the same calls every run with seed {seed} (import --seed for others): {}",
                    util::printable(&mocks.error_rates.join(", "))
                );
            }
            for server in &mocks.unpopulated {
                tracing::warn!(
                    "the snapshot of {} says UNPOPULATED (never captured from the live server): its mock file's schemas stand",
                    util::printable(server)
                );
            }
            if mocks.from_snapshots > 0 {
                util::say(format_args!(
                    "{} tools took their description and inputSchema from snapshots",
                    mocks.from_snapshots
                ));
            }
            util::say(format_args!(
                "imported {} tools of {} servers ({} disabled, left out) into {}",
                mocks.templates.len(),
                servers.len(),
                mocks.disabled.len(),
                config.cassette.display()
            ));
        }
        ImportSource::Foreign { reader, files, server } => {
            let mut cassette = Cassette::open(path)?;
            let imported = foreign::import(reader, files, server.as_deref(), &mut cassette)?;
            for (what, count) in &imported.skipped {
                tracing::warn!("left out: {count} × {what}");
            }
            let plural = |n: usize| if n == 1 { "" } else { "s" };
            util::say(format_args!(
                "imported {} exchange{} from {} {} file{} into {}",
                imported.exchanges,
                plural(imported.exchanges),
                files.len(),
                reader.name,
                plural(files.len()),
                config.cassette.display()
            ));
        }
        ImportSource::JsonLines(input) => {
            let mut cassette = Cassette::open(path)?;
            let count = match input {
                Some(path) => {
                    let file = std::fs::File::open(path)
                        .map_err(|source| Error::Read { path: path.clone(), source })?;
                    jsonl::import(BufReader::new(file), &mut cassette)?
                }
                None => jsonl::import(std::io::stdin().lock(), &mut cassette)?,
            };
            cassette.settle();
            util::say(format_args!("imported {count} lines into {}", config.cassette.display()));
        }
    }
    Ok(0)
}
