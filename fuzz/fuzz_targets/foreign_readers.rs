//! The readers of other tools' recordings (`import --from`): whatever a
//! file holds, each format's reader refuses it or makes exchanges, never
//! panics, and every exchange it makes has an answer.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_tape::interchange::foreign;
use mcp_tape::normalize::Rules;

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else { return };
    let Ok(text) = std::str::from_utf8(rest) else { return };
    let reader = &foreign::READERS[usize::from(pick) % foreign::READERS.len()];
    if let Ok((exchanges, _)) = foreign::exchanges(reader, text, "fuzz", false, &Rules::default()) {
        for exchange in exchanges {
            assert!(!exchange.messages.is_empty(), "{}: an exchange without its answer", reader.name);
        }
    }
});
