//! `mcp-tape verify`: recordings re-sent to the live server and compared.

use super::print_findings;
use crate::config::VerifyConfig;
use crate::error::Error;
use crate::{util, verify};

/// Prints what changed; 1 when a finding reaches `--fail-on` or a
/// recording could not be verified.
///
/// # Errors
///
/// A cassette that cannot be read; a recording that cannot be rewritten.
pub(super) async fn run(config: &VerifyConfig) -> Result<u8, Error> {
    let verified = verify::verify(config).await?;
    print_findings(&verified.findings, config.format);
    for failure in &verified.failures {
        util::say(format_args!("mcp-tape: could not verify {failure}"));
    }
    if !verified.left_out.is_empty() {
        util::say(format_args!(
            "mcp-tape: left out {} request(s) whose params hold pseudonyms (the live server knows what they stand \
             for, not them): {}",
            verified.left_out.len(),
            util::printable(&verified.left_out.join(", "))
        ));
    }
    if config.update {
        util::say(format_args!("mcp-tape: rewrote {} recordings", verified.updated));
    }
    let failed = !verified.failures.is_empty() || verified.findings.fails(config.fail_on);
    Ok(u8::from(failed))
}
