//! The readers of other tools' recordings (`import --from`): whatever a
//! file holds, each format's reader refuses it or makes exchanges, never
//! panics, and every exchange it makes has an answer.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_tape::cassette::foreign;
use mcp_tape::config::ForeignFormat;
use mcp_tape::normalize::Rules;

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else { return };
    let Ok(text) = std::str::from_utf8(rest) else { return };
    let format = ForeignFormat::ALL[usize::from(pick) % ForeignFormat::ALL.len()];
    if let Ok((exchanges, _)) = foreign::exchanges(format, text, "fuzz", false, &Rules::default()) {
        for exchange in exchanges {
            assert!(!exchange.messages.is_empty(), "{format:?}: an exchange without its answer");
        }
    }
});
