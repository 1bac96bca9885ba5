//! Small helpers every layer may use: values made safe for a log line (and
//! cut to a bound), a lock that survives a panicked holder, text split at
//! a byte, a fast map, the one bounded memo, a file written whole or not
//! at all.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use sha2::{Digest, Sha256};

use crate::limits::MAX_LARGE_WORK_BYTES;

/// A hash map for the lookups every request makes (the tape, cursors, the
/// ledger, the params cache): foldhash, several times cheaper than the
/// standard SipHash on short keys, still seeded at random per process.
pub type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// What was worked out before from a text (params as a client wrote them),
/// kept for the next time the very same text comes: the crate's one memo,
/// shared by every connection. Bounded: texts over [`Memo::MAX_TEXT`]
/// bytes are never kept, and it starts over when it holds
/// [`Memo::MAX_ENTRIES`] texts. A fast path's only store: what it keeps
/// must be what the plain path would work out again from the same text.
#[derive(Debug)]
pub struct Memo<V>(Mutex<FastMap<Box<str>, V>>);

impl<V> Default for Memo<V> {
    fn default() -> Memo<V> {
        Memo(Mutex::default())
    }
}

impl<V> Memo<V> {
    pub const MAX_ENTRIES: usize = 1024;
    pub const MAX_TEXT: usize = 4096;

    /// What `look` finds in the value kept for `text`, if any.
    pub fn find<R>(&self, text: &str, look: impl FnOnce(&V) -> Option<R>) -> Option<R> {
        if text.len() > Memo::<V>::MAX_TEXT {
            return None; // never kept: not worth hashing
        }
        lock(&self.0).get(text).and_then(look)
    }

    /// Keeps what `change` makes of the value kept for `text` (a new one
    /// from `V::default()`), unless the text is too long to keep.
    pub fn keep(&self, text: &str, change: impl FnOnce(&mut V))
    where
        V: Default,
    {
        if text.len() > Memo::<V>::MAX_TEXT {
            return;
        }
        let mut entries = lock(&self.0);
        if let Some(value) = entries.get_mut(text) {
            return change(value);
        }
        if entries.len() >= Memo::<V>::MAX_ENTRIES {
            entries.clear();
        }
        change(entries.entry(text.into()).or_default());
    }

    /// How many texts it holds.
    pub fn len(&self) -> usize {
        lock(&self.0).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Writes `line` and a newline to stderr, as `eprintln!` does, except
/// that a stderr that cannot take it (a closed pipe, a full disk) loses the
/// line and never the run: `eprintln!` panics there, and a command would
/// end before its report or cassette were written. One write: a reader
/// of the pipe (a test runner's worker) wakes once for it.
pub fn say(line: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    let _ = std::io::stderr().lock().write_all(format!("{line}\n").as_bytes());
}

/// `text` cut to at most `max` bytes (at a character boundary) with
/// `… (N bytes)` after it, when it is longer.
pub fn clip(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max {
        return text.into();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &text[..end], text.len()).into()
}

/// `text` with its control characters escaped (`\n`, `\u{1b}`, ...), for
/// values from the network or a cassette that go into a log line: a method
/// name holding a newline or a terminal escape must not forge a line or
/// repaint the terminal, nor a bidirectional control ([`is_unsafe`]) make a
/// name display as another.
pub fn printable(text: &str) -> Cow<'_, str> {
    if !may_hold_controls(text) || !text.chars().any(is_unsafe) {
        return text.into();
    }
    text.chars()
        .map(|c| if is_unsafe(c) { c.escape_default().to_string() } else { c.to_string() })
        .collect::<String>()
        .into()
}

/// Whether `c` must not reach a person as it is: a control character, or a
/// bidirectional control (the marks, embeddings, overrides and isolates,
/// U+061C, U+200E-U+200F, U+202A-U+202E, U+2066-U+2069), which reorders
/// the text around it on screen.
pub fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// Whether `text` may hold a character [`is_unsafe`] finds: it has a byte of
/// C0 (below 0x20), DEL (0x7f), or a first byte of one's UTF-8 (0xc2 for
/// U+0080 to U+009F, 0xd8 for U+061C, 0xe2 for the U+2000 block). Text
/// without one is safe as it is. One pass without an early exit, which
/// compiles to wide compares: the texts are short, and nearly all hold none.
pub fn may_hold_controls(text: &str) -> bool {
    text.bytes()
        .fold(false, |seen, b| seen | (b < 0x20) | (b == 0x7f) | (b == 0xc2) | (b == 0xd8) | (b == 0xe2))
}

/// `number`'s decimal digits (ASCII), written into the end of `digits`
/// without the formatting machinery (for what every request writes).
pub fn digits(mut number: u64, digits: &mut [u8; 20]) -> &[u8] {
    let mut start = digits.len();
    loop {
        start -= 1;
        digits[start] = b'0' + (number % 10) as u8;
        number /= 10;
        if number == 0 {
            break;
        }
    }
    &digits[start..]
}

/// Locks a mutex whatever happened to its last holder: a panic mid-update in
/// one request must not take every later request down with it, and the maps
/// behind these locks stay usable.
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs `work`, which may take long (ranking a request against thousands
/// of recordings), without holding an async worker: on a multi-threaded
/// runtime the worker hands its other tasks to another thread meanwhile
/// (`block_in_place`), so other clients' answers do not wait for it, and
/// such pieces of work run one fewer at once than there are cores (the
/// rest wait their turn), so those answers keep a core; on a
/// current-thread runtime (stdio, a test's tape and `record`: see
/// `Command::runs_on_one_thread`) or none, it runs as it is.
pub fn off_the_workers<T>(work: impl FnOnce() -> T) -> T {
    /// The long pieces of work under way.
    static LONG: Gate = Gate::new();
    in_place(|| LONG.pass(all_cores_but_one(), work))
}

/// An input past this many bytes is worked through by [`sized_work`] off
/// the async workers.
pub const LARGE_INPUT_BYTES: usize = 64 * 1024;

/// Runs `work` over an input of `size` bytes (reading, scrubbing and
/// matching a request take time in its size): past [`LARGE_INPUT_BYTES`]
/// with the worker's other tasks handed to another thread meanwhile, as
/// [`off_the_workers`] does but outside its limit (`work` may pass that
/// itself), then what it freed given back to the system (the thread may
/// idle long, holding it), else as it is.
pub fn sized_work<T>(size: usize, work: impl FnOnce() -> T) -> T {
    if size > LARGE_INPUT_BYTES {
        let done = in_place(work);
        crate::os::give_back_freed_memory();
        done
    } else {
        work()
    }
}

/// A large request's turn to be worked through: past [`LARGE_INPUT_BYTES`]
/// a request of `size` bytes waits until the large ones in work leave room
/// within [`MAX_LARGE_WORK_BYTES`] (held until the permit drops); a
/// smaller one goes at once.
pub async fn large_work_turn(size: usize) -> Option<tokio::sync::SemaphorePermit<'static>> {
    /// What is counted: KiB, so that the budget fits a permit count.
    const UNIT: usize = 1024;
    static BUDGET: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(MAX_LARGE_WORK_BYTES / UNIT);
    if size <= LARGE_INPUT_BYTES {
        return None;
    }
    let units = size.div_ceil(UNIT).min(MAX_LARGE_WORK_BYTES / UNIT);
    // The semaphore is never closed, and no request asks more than it holds.
    BUDGET.acquire_many(u32::try_from(units).unwrap_or(u32::MAX)).await.ok()
}

/// Runs `work` on this thread, having handed an async worker's other
/// tasks to another thread (`block_in_place`); on a current-thread runtime
/// or none, as it is.
fn in_place<T>(work: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(work)
        }
        _ => work(),
    }
}

/// At most a fixed number of pieces of work at once: a caller past it
/// waits (on its own thread: see [`off_the_workers`]) for one to end.
struct Gate {
    taken: Mutex<usize>,
    freed: std::sync::Condvar,
}

impl Gate {
    const fn new() -> Gate {
        Gate { taken: Mutex::new(0), freed: std::sync::Condvar::new() }
    }

    /// Runs `work` once fewer than `limit` others are running through this
    /// gate.
    fn pass<T>(&self, limit: usize, work: impl FnOnce() -> T) -> T {
        struct Leaving<'a>(&'a Gate);
        impl Drop for Leaving<'_> {
            fn drop(&mut self) {
                *lock(&self.0.taken) -= 1;
                self.0.freed.notify_one();
            }
        }
        let mut taken = lock(&self.taken);
        while *taken >= limit.max(1) {
            taken = self.freed.wait(taken).unwrap_or_else(PoisonError::into_inner);
        }
        *taken += 1;
        drop(taken);
        let _leaving = Leaving(self);
        work()
    }
}

/// One fewer than the cores this process may use, at least one: what
/// long pieces of work may take at once and leave a core for the rest.
fn all_cores_but_one() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES
        .get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get().saturating_sub(1).max(1)))
}

/// `text` split at each `separator` (an ASCII byte), as `split(char)`
/// splits it, by a plain byte scan: header values and paths are split for
/// every request, and a char searcher costs several times more.
pub fn pieces(text: &str, separator: u8) -> impl Iterator<Item = &str> {
    debug_assert!(separator.is_ascii());
    let mut rest = Some(text);
    std::iter::from_fn(move || {
        let text = rest?;
        let (piece, after) = match text.bytes().position(|b| b == separator) {
            Some(at) => (&text[..at], Some(&text[at + 1..])),
            None => (text, None),
        };
        rest = after;
        Some(piece)
    })
}

/// The segments of a URL path after its leading `/`, `/`s at the end left
/// out.
pub fn path_segments(path: &str) -> impl Iterator<Item = &str> {
    pieces(path.trim_end_matches('/'), b'/').skip(1)
}

/// The files under `directory` and its subdirectories whose extension is
/// `extension`, sorted by path. Hidden directories and links to
/// directories are not entered (a link to a parent would never end).
///
/// # Errors
///
/// The directory (or entry) that could not be read, and why.
pub fn files_under(directory: &Path, extension: &str) -> Result<Vec<PathBuf>, (PathBuf, std::io::Error)> {
    let mut found = Vec::new();
    let mut directories = vec![directory.to_owned()];
    while let Some(directory) = directories.pop() {
        let io = |error| (directory.clone(), error);
        for entry in std::fs::read_dir(&directory).map_err(io)? {
            let entry = entry.map_err(io)?;
            let path = entry.path();
            let is_directory = entry.file_type().map_err(|error| (path.clone(), error))?.is_dir();
            if is_directory && !entry.file_name().to_string_lossy().starts_with('.') {
                directories.push(path);
            } else if !is_directory && path.extension().is_some_and(|ext| ext == extension) {
                found.push(path);
            }
        }
    }
    found.sort();
    Ok(found)
}

/// Writes `path` whole or not at all: into a file beside it, synced, then
/// renamed over it, so a crash mid-write leaves the previous file as it was.
/// A path that is there but no regular file (`/dev/stdout`, a FIFO) is
/// written as it is.
pub fn write_whole(path: &Path, write: impl FnOnce(&mut File) -> std::io::Result<()>) -> std::io::Result<()> {
    replace(path, write, true)
}

/// Writes `path` whole or not at all for its readers (into a file beside
/// it, renamed over it), not synced: for what a run can write again, a
/// report, which a test suite writes once a test and reads at once, and
/// which a sync (milliseconds on a journaled disk) would make each test
/// wait for.
pub fn write_unsynced(
    path: &Path,
    write: impl FnOnce(&mut File) -> std::io::Result<()>,
) -> std::io::Result<()> {
    replace(path, write, false)
}

fn replace(
    path: &Path,
    write: impl FnOnce(&mut File) -> std::io::Result<()>,
    sync: bool,
) -> std::io::Result<()> {
    if std::fs::metadata(path).is_ok_and(|meta| !meta.is_file()) {
        return File::create(path).and_then(|mut file| write(&mut file));
    }
    let partial = beside(path, &format!("partial-{}", std::process::id()));
    let written = File::create(&partial).and_then(|mut file| {
        write(&mut file)?;
        std::io::Write::flush(&mut file)?;
        if sync { file.sync_all() } else { Ok(()) }
    });
    match written.and_then(|()| std::fs::rename(&partial, path)) {
        Ok(()) => Ok(()),
        Err(error) => {
            let _ = std::fs::remove_file(&partial);
            Err(error)
        }
    }
}

/// The longest name a file beside another is given as it is: the 255 bytes
/// file systems hold, less SQLite's longest suffix (`-journal`).
const LONGEST_BESIDE: usize = 247;

/// A file beside `path`: its name with `.TAG` added. Where that would pass
/// [`LONGEST_BESIDE`] bytes, the name is cut on a character and ends in `~`
/// and 16 hex digits of its SHA-256, so that a cassette whose own name fills
/// the file system's limit can still be written beside and renamed into.
pub fn beside(path: &Path, tag: &str) -> PathBuf {
    let name = path.file_name().unwrap_or_default();
    let whole = name.len() + 1 + tag.len();
    if whole <= LONGEST_BESIDE {
        let mut name = name.to_owned();
        name.push(format!(".{tag}"));
        return path.with_file_name(name);
    }
    let digest = Sha256::digest(name.as_encoded_bytes());
    let hex: String = digest[..8].iter().map(|byte| format!("{byte:02x}")).collect();
    let text = name.to_string_lossy();
    let room = LONGEST_BESIDE.saturating_sub(tag.len() + 2 + hex.len());
    let mut cut = room.min(text.len());
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    path.with_file_name(format!("{}~{hex}.{tag}", &text[..cut]))
}

/// The (year, month, day) of a count of days since 1970-01-01 (proleptic
/// Gregorian calendar).
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    // Shifted so years begin on 1 March: leap days fall at a year's end.
    let days = days + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days.rem_euclid(146_097);
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * shifted_month + 2) / 5 + 1) as u32;
    let month = if shifted_month < 10 { shifted_month + 3 } else { shifted_month - 9 } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// The days since 1970-01-01 of a (proleptic Gregorian) date.
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year.rem_euclid(400);
    let shifted_month = i64::from(if month > 2 { month - 3 } else { month + 9 });
    let day_of_year = (153 * shifted_month + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// Milliseconds since 1970 of an RFC 3339 time (`2026-02-17T20:25:23.123Z`,
/// `+01:00` offsets, any number of fraction digits), or `None`.
pub fn parse_rfc3339_ms(text: &str) -> Option<i64> {
    let number = |range: std::ops::Range<usize>| text.get(range)?.parse::<i64>().ok();
    let bytes = text.as_bytes();
    if bytes.len() < 19 || bytes[4] != b'-' || bytes[7] != b'-' || !matches!(bytes[10], b'T' | b't' | b' ') {
        return None;
    }
    let (year, month, day) = (number(0..4)?, number(5..7)?, number(8..10)?);
    let (hour, minute, second) = (number(11..13)?, number(14..16)?, number(17..19)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let mut rest = &text[19..];
    let mut millis = 0;
    if let Some(fraction) = rest.strip_prefix('.') {
        let digits = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let first3 = format!("{:0<3}", &fraction[..digits.min(3)]);
        millis = first3.parse::<i64>().ok()?;
        rest = &fraction[digits..];
    }
    let offset_minutes = match rest {
        "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let (hours, minutes) = rest[1..].split_once(':')?;
            sign * (hours.parse::<i64>().ok()? * 60 + minutes.parse::<i64>().ok()?)
        }
    };
    let days = days_from_civil(year, month as u32, day as u32);
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset_minutes * 60;
    Some(seconds * 1000 + millis)
}

/// `text` with its `%XX` escapes decoded; an escape that is not one, or
/// bytes that are not UTF-8, are kept as they are.
pub fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8(out).unwrap_or_else(|_| text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn a_file_beside_a_name_filling_the_limit_fits_it_with_its_journal() {
        let directory = std::env::temp_dir().join(format!("mcp-tape-beside-{}", std::process::id()));
        std::fs::create_dir_all(&directory).unwrap();
        let cassette = directory.join(format!("{}.sqlite", "測".repeat(80)));
        let other = directory.join(format!("{}試.sqlite", "測".repeat(79)));
        assert_eq!(
            beside(&directory.join("a.sqlite"), "recording-7"),
            directory.join("a.sqlite.recording-7")
        );
        let recording = beside(&cassette, "recording-4194304");
        let name = recording.file_name().unwrap().to_str().unwrap();
        assert!(name.len() <= LONGEST_BESIDE && name.ends_with(".recording-4194304"), "{name}");
        assert_ne!(recording, beside(&other, "recording-4194304"));
        assert_eq!(recording, beside(&cassette, "recording-4194304"));
        let journal = PathBuf::from(format!("{}-journal", recording.display()));
        File::create(&journal).unwrap();
        std::fs::remove_dir_all(&directory).unwrap();
    }

    #[test]
    fn clip_cuts_at_a_character_boundary_and_says_the_length() {
        assert_eq!(clip("short", 8), "short");
        assert_eq!(clip("abcdefgh", 8), "abcdefgh");
        assert_eq!(clip("abcdefghi", 8), "abcdefgh… (9 bytes)");
        // "é" is two bytes: a cut inside it moves back to its start.
        assert_eq!(clip("aaaaaaaé", 8), "aaaaaaa… (9 bytes)");
    }

    #[test]
    fn path_segments_split_as_split_does() {
        for path in ["/agents/servers/mcp_X", "/agents/servers/mcp_X//", "/", "", "x", "/a//b", "//", "/é/ü/"]
        {
            let trimmed = path.trim_end_matches('/');
            let expected: Vec<&str> = trimmed.split('/').skip(1).collect();
            assert_eq!(path_segments(path).collect::<Vec<_>>(), expected, "{path:?}");
        }
    }

    #[test]
    fn control_characters_are_escaped_and_plain_text_borrowed() {
        assert!(matches!(printable("tools/call"), Cow::Borrowed("tools/call")));
        assert_eq!(printable("a\nINFO fake\u{1b}[2J"), "a\\nINFO fake\\u{1b}[2J");
        assert_eq!(printable("csi\u{9b}1m"), "csi\\u{9b}1m");
        assert!(matches!(printable("café ½"), Cow::Borrowed("café ½")));
        // A bidirectional override would show "Send\u{202e}lmth.exe" as "Sendexe.htmll".
        assert_eq!(printable("Send\u{202E}lmth.exe"), "Send\\u{202e}lmth.exe");
        assert_eq!(printable("\u{2067}isolate\u{2069} \u{061C}"), "\\u{2067}isolate\\u{2069} \\u{61c}");
        assert!(matches!(printable("an em dash — and … stay"), Cow::Borrowed(_)));
    }

    #[test]
    fn dates_round_trip_and_rfc3339_times_are_read() {
        for days in [-719_468, -1, 0, 59, 10_957, 20_717, 2_932_896] {
            let (year, month, day) = civil_from_days(days);
            assert_eq!(days_from_civil(year, month, day), days, "{year}-{month}-{day}");
        }
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(parse_rfc3339_ms("1970-01-01T00:00:01Z"), Some(1000));
        assert_eq!(parse_rfc3339_ms("2026-02-17T20:25:23.5Z"), Some(1_771_359_923_500));
        assert_eq!(parse_rfc3339_ms("2026-02-17T21:25:23.500123+01:00"), Some(1_771_359_923_500));
        for bad in ["2026-02-17", "2026-13-01T00:00:00Z", "2026-02-17T20:25:23", "2026-02-17T20:25:23.Z"] {
            assert_eq!(parse_rfc3339_ms(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_gate_lets_through_at_most_its_limit_at_once() {
        let gate = Gate::new();
        let (inside, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
        std::thread::scope(|scope| {
            for _ in 0..8 {
                scope.spawn(|| {
                    for _ in 0..50 {
                        gate.pass(2, || {
                            let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                            most.fetch_max(now, Ordering::SeqCst);
                            std::thread::yield_now();
                            inside.fetch_sub(1, Ordering::SeqCst);
                        });
                    }
                });
            }
        });
        let most = most.load(Ordering::SeqCst);
        assert!((1..=2).contains(&most), "{most} at once");
    }
}
