//! The incremental SSE parser: however the bytes are split into chunks,
//! the same events come out, and nothing grows past its bound.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_tape::sse::Parser;

fn events(chunks: &[&[u8]]) -> Vec<(Vec<u8>, String)> {
    let mut parser = Parser::default();
    let mut found = Vec::new();
    for chunk in chunks {
        parser.push(chunk);
        while let Ok(Some((raw, event))) = parser.next_event() {
            found.push((raw.to_vec(), event.data));
        }
    }
    found
}

fuzz_target!(|data: &[u8]| {
    let Some((&split, body)) = data.split_first() else { return };
    let at = usize::from(split) % (body.len() + 1);
    let whole = events(&[body]);
    let parts = events(&[&body[..at], &body[at..]]);
    assert_eq!(whole, parts, "split at {at}");
    let raw: Vec<u8> = whole.iter().flat_map(|(raw, _)| raw.clone()).collect();
    assert!(body.starts_with(&raw), "events are the input's own bytes, in order");
});
