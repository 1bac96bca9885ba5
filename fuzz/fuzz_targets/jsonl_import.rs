//! The JSON Lines importer: any input is imported whole or refused whole
//! (nothing written), and what it imports exports and imports again the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_tape::cassette::jsonl;
use mcp_tape::cassette::store::{Cassette, Loaded};

fn loaded(cassette: &Cassette) -> Loaded {
    Loaded {
        exchanges: cassette.exchanges().unwrap(),
        service_answers: cassette.service_answers().unwrap(),
        templates: cassette.templates().unwrap(),
    }
}

fuzz_target!(|data: &[u8]| {
    let mut cassette = Cassette::open_in_memory().unwrap();
    match jsonl::import(data, &mut cassette) {
        Err(_) => {
            let nothing = loaded(&cassette);
            assert!(
                nothing.exchanges.is_empty()
                    && nothing.service_answers.is_empty()
                    && nothing.templates.is_empty()
            );
        }
        Ok(_) => {
            let mut first = Vec::new();
            jsonl::export(&loaded(&cassette), &mut first).unwrap();
            let mut again = Cassette::open_in_memory().unwrap();
            jsonl::import(first.as_slice(), &mut again).unwrap();
            let mut second = Vec::new();
            jsonl::export(&loaded(&again), &mut second).unwrap();
            assert_eq!(first, second);
        }
    }
});
