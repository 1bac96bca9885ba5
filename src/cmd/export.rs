//! `mcp-tape export`: a cassette as canonical JSON Lines, or as HAR 1.2.

use std::io::Write as _;

use crate::cassette::store::Cassette;
use crate::config::ExportConfig;
use crate::error::Error;
use crate::interchange::{foreign, jsonl};
use crate::util;

/// Writes the JSON Lines (or the HAR) to `-o FILE` (whole or not at all) or stdout.
///
/// # Errors
///
/// A cassette that cannot be read; `-o` naming the cassette itself; an
/// output that cannot be written.
pub(super) fn run(config: &ExportConfig) -> Result<u8, Error> {
    if let Some(output) = &config.output
        && crate::os::same_file(output, &config.cassette)
    {
        return Err(Error::Usage(format!(
            "-o {}: that is the cassette being exported; name another file",
            output.display()
        )));
    }
    let cassette = Cassette::open_read_only(&config.cassette)?;
    // Buffered: an export is many small writes (one syscall each, unbuffered).
    let write = |out: &mut dyn std::io::Write| {
        let mut out = std::io::BufWriter::new(out);
        if config.har {
            foreign::har::write(&cassette, &mut out)?;
        } else {
            let timings = if config.timings { jsonl::Timings::Kept } else { jsonl::Timings::Left };
            jsonl::export(&cassette, timings, &mut out)?;
        }
        out.flush()
    };
    let written = match &config.output {
        Some(path) => util::write_whole(path, |file| write(file)),
        None => write(&mut std::io::stdout().lock()),
    };
    // A failure to read the cassette reaches here inside an io::Error.
    written.map(|()| 0).map_err(|source| match source.downcast::<Error>() {
        Ok(read) => read,
        Err(source) => {
            Error::Write { path: config.output.clone().unwrap_or_else(|| "(standard output)".into()), source }
        }
    })
}
