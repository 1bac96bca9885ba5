//! Log lines: their format ([`Lines`]: UTC time, level, message, control
//! characters escaped) and where they go: each is appended to one shared
//! buffer, and one thread writes what gathered in large writes. A busy
//! daemon (a line per request) pays for a short lock and a copy per line,
//! not a write to stderr or a thread wake-up each. Lossless: past
//! [`MAX_PENDING_LOG_BYTES`] bytes a logging thread waits for the writer rather than
//! drop a line.

use std::cell::RefCell;
use std::fmt::{self, Write as _};
use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, MakeWriter};
use tracing_subscriber::registry::LookupSpan;

use crate::limits::{MAX_PENDING_LOG_BYTES, MAX_SHOWN_BYTES};
use crate::util::{clip, lock};

/// How long the writer lets lines gather after the first one of a batch:
/// the longest a line waits before it is written.
pub const GATHER: Duration = Duration::from_millis(10);

/// The logging side: a [`MakeWriter`] whose writers append whole lines.
#[derive(Clone)]
pub struct Sink {
    shared: Arc<Shared>,
    /// Whether lines go to a terminal, so [`info`]'s level is coloured as
    /// [`Lines`] colours the others.
    ansi: bool,
}

/// The writing side: ends the writer thread on drop, once every line
/// appended before is out.
pub struct Flusher {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

struct Shared {
    state: Mutex<State>,
    /// Signalled when the buffer gets its first line, or on close.
    lines: Condvar,
    /// Signalled when the writer has taken the buffer.
    room: Condvar,
}

#[derive(Default)]
struct State {
    pending: Vec<u8>,
    closed: bool,
}

/// Starts the writer thread, writing to `out`; `ansi` when `out` is a
/// terminal (the subscriber's own setting, for the lines [`info`] makes).
///
/// # Errors
///
/// When the thread cannot be started.
pub fn start(out: impl Write + Send + 'static, ansi: bool) -> std::io::Result<(Sink, Flusher)> {
    let shared = Arc::new(Shared { state: Mutex::default(), lines: Condvar::new(), room: Condvar::new() });
    let writer = Arc::clone(&shared);
    let thread =
        std::thread::Builder::new().name("mcp-tape-log".into()).spawn(move || drain(&writer, out))?;
    let sink = Sink { shared: Arc::clone(&shared), ansi };
    let _ = STARTED.set(sink.clone());
    Ok((sink, Flusher { shared, thread: Some(thread) }))
}

/// The sink the process started, for [`info`].
static STARTED: OnceLock<Sink> = OnceLock::new();

thread_local! {
    static LINE: RefCell<RequestLine> =
        const { RefCell::new(RequestLine { text: String::new(), second: None, stamp: String::new() }) };
}

/// A thread's request line being made, and the last timestamp it wrote
/// (within one second only the microseconds change).
struct RequestLine {
    text: String,
    second: Option<u64>,
    stamp: String,
}

/// Logs the line made of `pieces` at info level, as `tracing::info!` would
/// through [`Lines`] (same format, same filter, control characters escaped),
/// but appended here without tracing's dispatch or any formatting: the
/// request line, which every request pays for. Without a started sink (a
/// library user's own subscriber), it is `tracing::info!`.
pub fn info(pieces: &[&str]) {
    if !tracing::enabled!(Level::INFO) {
        return;
    }
    match STARTED.get() {
        Some(sink) => sink.info(pieces),
        None => tracing::info!("{}", pieces.concat()),
    }
}

impl Sink {
    /// Appends the info line made of `pieces` (see [`info`]).
    fn info(&self, pieces: &[&str]) {
        LINE.with_borrow_mut(|RequestLine { text, second, stamp }| {
            text.clear();
            push_timestamp(text, SystemTime::now(), second, stamp);
            // Writing to a String cannot fail.
            let _ = push_level(text, Level::INFO, self.ansi);
            for piece in pieces {
                let _ = Escaped(&mut *text).write_str(&clip(piece, MAX_SHOWN_BYTES));
            }
            text.push('\n');
            let _ = self.make_writer().write_all(text.as_bytes());
        });
    }
}

fn wait<'a>(condvar: &Condvar, guard: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
    condvar.wait(guard).unwrap_or_else(PoisonError::into_inner)
}

/// The writer thread: waits for a first line, lets more gather, writes them
/// all; until closed and empty. A failed write (stderr gone) drops what it
/// held and goes on, so logging threads are never left waiting.
fn drain(shared: &Shared, mut out: impl Write) {
    let mut batch = Vec::new();
    loop {
        let mut state = lock(&shared.state);
        while state.pending.is_empty() && !state.closed {
            state = wait(&shared.lines, state);
        }
        if state.pending.is_empty() {
            return; // closed, everything written
        }
        if !state.closed {
            drop(state);
            std::thread::sleep(GATHER);
            state = lock(&shared.state);
        }
        std::mem::swap(&mut state.pending, &mut batch);
        drop(state);
        shared.room.notify_all();
        let _ = out.write_all(&batch).and_then(|()| out.flush());
        batch.clear();
    }
}

impl Drop for Flusher {
    fn drop(&mut self) {
        lock(&self.shared.state).closed = true;
        self.shared.lines.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// One line's writer.
pub struct Line<'a> {
    shared: &'a Shared,
}

impl<'a> MakeWriter<'a> for Sink {
    type Writer = Line<'a>;

    fn make_writer(&'a self) -> Line<'a> {
        Line { shared: &self.shared }
    }
}

impl Write for Line<'_> {
    /// Appends all of `text` (the formatter hands over a whole line at
    /// once, so lines never interleave). After the writer thread has
    /// ended, writes straight to stderr.
    fn write(&mut self, text: &[u8]) -> std::io::Result<usize> {
        let mut state = lock(&self.shared.state);
        while state.pending.len() >= MAX_PENDING_LOG_BYTES && !state.closed {
            state = wait(&self.shared.room, state);
        }
        if state.closed {
            drop(state);
            std::io::stderr().write_all(text)?;
            return Ok(text.len());
        }
        let first = state.pending.is_empty();
        state.pending.extend_from_slice(text);
        drop(state);
        if first {
            self.shared.lines.notify_one();
        }
        Ok(text.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The line format: `2026-11-23T20:17:41.823637Z  INFO message`, fields
/// after the message as ` name=value`. Every control character a message
/// or value holds is escaped (`\n`, `\u{1b}`), so no logged text can forge a
/// line or reach a terminal as an escape sequence. Cheaper than
/// tracing-subscriber's full format, which the request line pays for on
/// every request.
pub struct Lines;

impl<S, N> FormatEvent<S, N> for Lines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut stamp = [0; 28];
        writer.write_str(timestamp(SystemTime::now(), &mut stamp))?;
        let ansi = writer.has_ansi_escapes();
        push_level(&mut writer, *event.metadata().level(), ansi)?;
        let mut fields = Fields { out: Escaped(&mut writer), result: Ok(()) };
        event.record(&mut fields);
        fields.result?;
        writer.write_char('\n')
    }
}

/// A level's name, right-aligned, and the space after it; coloured for a
/// terminal (`ansi`).
fn push_level(out: &mut impl fmt::Write, level: Level, ansi: bool) -> fmt::Result {
    let (colour, name) = match level {
        Level::ERROR => ("\x1b[31m", "ERROR"),
        Level::WARN => ("\x1b[33m", " WARN"),
        Level::INFO => ("\x1b[32m", " INFO"),
        Level::DEBUG => ("\x1b[34m", "DEBUG"),
        Level::TRACE => ("\x1b[35m", "TRACE"),
    };
    if ansi {
        out.write_str(colour)?;
        out.write_str(name)?;
        out.write_str("\x1b[0m ")
    } else {
        out.write_str(name)?;
        out.write_char(' ')
    }
}

/// `at` as `YYYY-MM-DDTHH:MM:SS.ffffffZ ` (UTC, microseconds) in `buffer`.
fn timestamp(at: SystemTime, buffer: &mut [u8; 28]) -> &str {
    let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    let seconds = since.as_secs();
    let (year, month, day) = civil_date((seconds / 86_400) as i64);
    let of_day = seconds % 86_400;
    let parts: [(usize, u64, usize); 7] = [
        (0, year.clamp(0, 9999) as u64, 4),
        (5, month, 2),
        (8, day, 2),
        (11, of_day / 3600, 2),
        (14, of_day / 60 % 60, 2),
        (17, of_day % 60, 2),
        (20, u64::from(since.subsec_micros()), 6),
    ];
    buffer.copy_from_slice(b"0000-00-00T00:00:00.000000Z ");
    for (at, value, width) in parts {
        write_digits(&mut buffer[at..at + width], value);
    }
    std::str::from_utf8(buffer).unwrap_or_default()
}

/// Appends [`timestamp`] of `at` to `line`. `stamp` holds the timestamp of
/// a time in `second`: within that second only the microseconds are new.
fn push_timestamp(line: &mut String, at: SystemTime, second: &mut Option<u64>, stamp: &mut String) {
    let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    if *second != Some(since.as_secs()) {
        *second = Some(since.as_secs());
        stamp.clear();
        stamp.push_str(timestamp(at, &mut [0; 28]));
    }
    line.push_str(&stamp[..20]);
    // A seventh leading digit keeps the six that follow it zero-padded.
    line.push_str(&itoa::Buffer::new().format(1_000_000 + since.subsec_micros())[1..]);
    line.push_str("Z ");
}

/// The last `digits.len()` decimal digits of `value`, zero-padded.
fn write_digits(digits: &mut [u8], mut value: u64) {
    for digit in digits.iter_mut().rev() {
        *digit = b'0' + (value % 10) as u8;
        value /= 10;
    }
}

/// The proleptic Gregorian date of a day counted from 1970-01-01.
fn civil_date(days: i64) -> (i64, u64, u64) {
    let days = days + 719_468; // from 0000-03-01, the start of a 400-year era
    let era = days.div_euclid(146_097);
    let of_era = days.rem_euclid(146_097);
    let year_of_era = (of_era - of_era / 1460 + of_era / 36_524 - of_era / 146_096) / 365;
    let of_year = of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * of_year + 2) / 153;
    let day = of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 { month_from_march + 3 } else { month_from_march - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month as u64, day as u64)
}

/// The message, then each other field as ` name=value`.
struct Fields<'a, 'w> {
    out: Escaped<'a, Writer<'w>>,
    result: fmt::Result,
}

impl Visit for Fields<'_, '_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if self.result.is_err() {
            return;
        }
        self.result = match field.name() {
            "message" => write!(self.out, "{value:?}"),
            name => write!(self.out, " {name}={value:?}"),
        };
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if self.result.is_err() {
            return;
        }
        self.result = match field.name() {
            "message" => self.out.write_str(value),
            name => write!(self.out, " {name}={value}"),
        };
    }
}

/// A writer that escapes control characters.
struct Escaped<'a, W>(&'a mut W);

impl<W: fmt::Write> fmt::Write for Escaped<'_, W> {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        if !crate::util::may_hold_controls(text) {
            return self.0.write_str(text);
        }
        let mut rest = text;
        while let Some(at) = rest.find(|c: char| c.is_control()) {
            self.0.write_str(&rest[..at])?;
            let control = rest[at..].chars().next().unwrap_or_default();
            write!(self.0, "{}", control.escape_default())?;
            rest = &rest[at + control.len_utf8()..];
        }
        self.0.write_str(rest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn a_timestamp_within_the_second_is_the_full_timestamp() {
        let (mut second, mut stamp, mut line) = (None, String::new(), String::new());
        for micros in [5_000_000, 5_000_001, 5_999_999, 6_000_000, 6_123_456, 86_400_000_000, 86_400_000_007]
        {
            let at = UNIX_EPOCH + Duration::from_micros(1_795_465_061_000_000 + micros);
            line.clear();
            push_timestamp(&mut line, at, &mut second, &mut stamp);
            assert_eq!(line, timestamp(at, &mut [0; 28]));
        }
    }

    #[test]
    fn timestamps_are_utc_dates_with_microseconds() {
        let mut buffer = [0; 28];
        let at = |seconds: u64, micros: u64| UNIX_EPOCH + Duration::from_micros(seconds * 1_000_000 + micros);
        for (seconds, micros, expected) in [
            (0, 0, "1970-01-01T00:00:00.000000Z "),
            (951_782_400, 5, "2000-02-29T00:00:00.000005Z "),
            (1_795_465_061, 823_637, "2026-11-23T20:17:41.823637Z "),
            (4_107_542_399, 999_999, "2100-02-28T23:59:59.999999Z "),
            (4_107_542_400, 0, "2100-03-01T00:00:00.000000Z "),
        ] {
            assert_eq!(timestamp(at(seconds, micros), &mut buffer), expected);
        }
    }

    /// What a subscriber with [`Lines`] writes while `log` runs.
    fn formatted(ansi: bool, log: impl FnOnce()) -> String {
        let out = Arc::new(Mutex::new(Vec::new()));
        let writer = {
            let out = Arc::clone(&out);
            move || Capture(Arc::clone(&out))
        };
        let subscriber =
            tracing_subscriber::fmt().with_ansi(ansi).event_format(Lines).with_writer(writer).finish();
        tracing::subscriber::with_default(subscriber, log);
        String::from_utf8(lock(&out).clone()).unwrap()
    }

    /// A line as a subscriber with [`Lines`] writes it: control characters
    /// in the message and in fields come out escaped, one line per event.
    #[test]
    fn lines_escape_control_characters() {
        let text = formatted(false, || {
            tracing::warn!("method={} done", "x\nINFO forged\u{1b}[2J\u{9b}1m");
            tracing::info!(peer = "a\rb", "plain");
        });
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(lines[0].ends_with(r"  WARN method=x\nINFO forged\u{1b}[2J\u{9b}1m done"), "{}", lines[0]);
        assert!(lines[1].ends_with(r"  INFO plain peer=a\rb"), "{}", lines[1]);
        assert_eq!(lines[0].as_bytes()[10], b'T');
    }

    struct Capture(Arc<Mutex<Vec<u8>>>);

    impl Write for Capture {
        fn write(&mut self, text: &[u8]) -> std::io::Result<usize> {
            lock(&self.0).extend_from_slice(text);
            Ok(text.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// A `Write` that keeps each write apart, so a test can see the batches.
    /// Its first write waits for the test's go-ahead.
    struct Recorded {
        writes: Arc<Mutex<Vec<Vec<u8>>>>,
        entered: mpsc::Sender<()>,
        gate: Option<mpsc::Receiver<()>>,
    }

    impl Write for Recorded {
        fn write(&mut self, text: &[u8]) -> std::io::Result<usize> {
            if let Some(gate) = self.gate.take() {
                self.entered.send(()).unwrap();
                gate.recv().unwrap();
            }
            lock(&self.writes).push(text.to_vec());
            Ok(text.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// The request line [`info`] makes looks like any line [`Lines`]
    /// formats, coloured level included when the output is a terminal.
    #[test]
    fn request_lines_look_like_the_others() {
        for ansi in [false, true] {
            let expected = formatted(ansi, || tracing::info!("POST server=a\nb"));
            let made = Arc::new(Mutex::new(Vec::new()));
            let (sink, flusher) = start(Capture(Arc::clone(&made)), ansi).unwrap();
            sink.info(&["POST ", "server=a\nb"]);
            drop(flusher);
            let made = String::from_utf8(lock(&made).clone()).unwrap();
            assert_eq!(expected.contains("\x1b[32m"), ansi, "{expected:?}");
            // The same line, after the timestamp.
            assert_eq!(made[27..], expected[27..]);
        }
    }

    /// Lines from four threads, three times what the buffer may hold, while
    /// the writer is stuck: no batch outgrows the bound (logging threads
    /// waited), and every line is written whole, each thread's in order.
    #[test]
    fn lines_wait_for_room_and_none_is_lost() {
        let writes = Arc::new(Mutex::new(Vec::new()));
        let (entered, writer_entered) = mpsc::channel();
        let (go, gate) = mpsc::channel();
        let out = Recorded { writes: Arc::clone(&writes), entered, gate: Some(gate) };
        let (sink, flusher) = start(out, false).unwrap();
        sink.make_writer().write_all(b"first\n").unwrap();
        writer_entered.recv().unwrap();
        let line = |t: usize, i: usize| format!("thread {t} line {i} {}\n", "x".repeat(i % 300));
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let sink = sink.clone();
                std::thread::spawn(move || {
                    for i in 0..20_000 {
                        sink.make_writer().write_all(line(t, i).as_bytes()).unwrap();
                    }
                })
            })
            .collect();
        while lock(&sink.shared.state).pending.len() < MAX_PENDING_LOG_BYTES {
            std::thread::yield_now();
        }
        go.send(()).unwrap();
        for thread in threads {
            thread.join().unwrap();
        }
        drop(flusher);
        let writes = lock(&writes);
        let longest_line = 400;
        assert!(
            writes.iter().all(|batch| batch.len() < MAX_PENDING_LOG_BYTES + longest_line),
            "a batch outgrew the bound"
        );
        let written = String::from_utf8(writes.concat()).unwrap();
        assert!(written.len() > 3 * MAX_PENDING_LOG_BYTES);
        assert_eq!(written.lines().next(), Some("first"));
        for t in 0..4 {
            let prefix = format!("thread {t} ");
            let mine: Vec<&str> = written.lines().filter(|l| l.starts_with(&prefix)).collect();
            let expected: Vec<String> =
                (0..20_000).map(|i| line(t, i).trim_end_matches('\n').to_owned()).collect();
            assert_eq!(mine, expected, "thread {t}");
        }
        assert_eq!(written.lines().count(), 80_001);
    }
}
