//! The JSON Lines importer: any input is imported whole or refused whole
//! (nothing written), and what it imports exports and imports again the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_tape::interchange::jsonl;
use mcp_tape::cassette::store::Cassette;

fuzz_target!(|data: &[u8]| {
    let mut cassette = Cassette::open_in_memory().unwrap();
    match jsonl::import(data, &mut cassette) {
        Err(_) => {
            assert!(
                cassette.exchanges().unwrap().is_empty()
                    && cassette.service_answers().unwrap().is_empty()
                    && cassette.templates().unwrap().is_empty()
            );
        }
        Ok(_) => {
            let mut first = Vec::new();
            jsonl::export(&cassette, jsonl::Timings::Kept, &mut first).unwrap();
            let mut again = Cassette::open_in_memory().unwrap();
            jsonl::import(first.as_slice(), &mut again).unwrap();
            let mut second = Vec::new();
            jsonl::export(&again, jsonl::Timings::Kept, &mut second).unwrap();
            assert_eq!(first, second);
        }
    }
});
