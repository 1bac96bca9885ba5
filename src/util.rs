//! Two small helpers every layer may use: values made safe for a log line,
//! and a lock that survives a panicked holder.

use std::borrow::Cow;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// `text` with its control characters escaped (`\n`, `\u{1b}`, ...), for
/// values from the network or a cassette that go into a log line: a method
/// name holding a newline or a terminal escape must not forge a line or
/// repaint the terminal.
pub fn printable(text: &str) -> Cow<'_, str> {
    // Control characters are C0 (below 0x20), DEL and C1 (U+0080 to U+009F,
    // whose UTF-8 starts with 0xc2): text without those bytes is borrowed
    // after one byte scan.
    let suspect = |b: u8| b < 0x20 || b == 0x7f || b == 0xc2;
    if !text.bytes().any(suspect) || !text.chars().any(char::is_control) {
        return text.into();
    }
    text.chars()
        .map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() })
        .collect::<String>()
        .into()
}

/// Locks a mutex whatever happened to its last holder: a panic mid-update in
/// one request must not take every later request down with it, and the maps
/// behind these locks stay usable.
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_plain_text_borrowed() {
        assert!(matches!(printable("tools/call"), Cow::Borrowed("tools/call")));
        assert_eq!(printable("a\nINFO fake\u{1b}[2J"), "a\\nINFO fake\\u{1b}[2J");
        assert_eq!(printable("csi\u{9b}1m"), "csi\\u{9b}1m");
        assert!(matches!(printable("café ½"), Cow::Borrowed("café ½")));
    }
}
