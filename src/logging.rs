//! Log lines: one format for every line, both front doors' request lines
//! included ([`LineFormat`]: UTC time, level, message, control characters
//! escaped), and where they go: each is appended to one shared buffer, and
//! one thread writes what gathered in large writes. A busy daemon (a line
//! per request) pays for a short lock and a copy per line, not a write to
//! stderr or a thread wake-up each. Lossless while stderr is read: past
//! [`MAX_PENDING_LOG_BYTES`] bytes a logging thread waits for the writer
//! rather than drop a line, and the [`Flusher`] waits for every line to be
//! written. A stderr nobody reads (a full pipe) stalls the writer: after
//! [`MAX_LOG_ROOM_WAIT`] without room lines are dropped and counted, so the
//! daemon goes on answering and can stop, until a write goes through again
//! and says how many were dropped; at exit the [`Flusher`] waits at most
//! [`MAX_LOG_FLUSH_WAIT`]. The line every HTTP
//! request leaves skips the subscriber's event machinery: [`write_direct`]
//! appends the same line to the same buffer.
//!
//! Why not `tracing-appender`: its non-blocking writer is lossless only
//! while the process runs. Its guard waits one second for the backlog at
//! exit (and prints to stdout, the MCP stream of a stdio command, when the
//! queue is full): with stderr taking 1 ms a write, 937 of 5,000 lines were
//! out when the guard returned.

use std::fmt::{self, Write as _};
use std::io::Write;
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, MakeWriter};
use tracing_subscriber::registry::LookupSpan;

use crate::limits::{MAX_LOG_FLUSH_WAIT, MAX_LOG_ROOM_WAIT, MAX_PENDING_LOG_BYTES};
use crate::util::lock;

/// How long the writer lets lines gather after the first one of a batch:
/// the longest a line waits before it is written.
pub const GATHER: Duration = Duration::from_millis(10);

/// The logging side: a [`MakeWriter`] whose writers append whole lines.
#[derive(Clone)]
pub struct Sink {
    shared: Arc<Shared>,
}

/// The writing side: ends the writer thread on drop, once every line
/// appended before is out (or [`MAX_LOG_FLUSH_WAIT`] has passed).
pub struct Flusher {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    /// Hung up by the writer thread as it ends.
    ended: mpsc::Receiver<()>,
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
    /// No room came within [`MAX_LOG_ROOM_WAIT`]: lines are dropped until a
    /// write goes through.
    stalled: bool,
    /// Lines dropped while stalled, not yet told.
    dropped: u64,
}

/// Starts the writer thread, writing to `out`.
///
/// # Errors
///
/// When the thread cannot be started.
pub fn start(out: impl Write + Send + 'static) -> std::io::Result<(Sink, Flusher)> {
    let shared = Arc::new(Shared { state: Mutex::default(), lines: Condvar::new(), room: Condvar::new() });
    let writer = Arc::clone(&shared);
    let (ending, ended) = mpsc::channel::<()>();
    let thread = std::thread::Builder::new().name("mcp-tape-log".into()).spawn(move || {
        drain(&writer, out);
        drop(ending);
    })?;
    Ok((Sink { shared: Arc::clone(&shared) }, Flusher { shared, thread: Some(thread), ended }))
}

fn wait<'a>(condvar: &Condvar, guard: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
    condvar.wait(guard).unwrap_or_else(PoisonError::into_inner)
}

/// The writer thread: waits for a first line, lets more gather (until
/// [`GATHER`] has passed or the [`Flusher`] closes: an exit never waits out
/// the gathering), writes them all ([`write_in_pieces`]); until closed and
/// empty. A failed write (stderr
/// gone) drops what it held and goes on, so logging threads are never left
/// waiting.
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
        let until = Instant::now() + GATHER;
        while !state.closed {
            // Only a close signals `lines` while the buffer holds lines: it ends the gathering early.
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            state = shared.lines.wait_timeout(state, left).unwrap_or_else(PoisonError::into_inner).0;
        }
        std::mem::swap(&mut state.pending, &mut batch);
        drop(state);
        shared.room.notify_all();
        let written = write_in_pieces(&mut out, &batch, PIECE);
        batch.clear();
        let mut state = lock(&shared.state);
        if written.is_ok() && state.stalled {
            state.stalled = false;
            let dropped = std::mem::take(&mut state.dropped);
            drop(state);
            let mut told = String::new();
            // Writing to a String does not fail.
            let _ = write_head(&mut told, SystemTime::now(), Level::WARN, false).and_then(|()| {
                writeln!(told, "{dropped} log lines were dropped: standard error was not read")
            });
            let _ = write_in_pieces(&mut out, told.as_bytes(), PIECE);
        }
    }
}

/// The most the writer writes before it lets other threads of its core run.
const PIECE: usize = 32 * 1024;

/// Writes `batch` (whole lines) to `out` in pieces of whole lines, each at
/// most `piece` bytes where a line is no longer, yielding the core between
/// pieces: where the writer shares a core with the async runtime (a daemon
/// pinned to one), a busy daemon's batch (some 180 KB in 10 ms) would
/// otherwise hold every request in flight behind one long write.
fn write_in_pieces(out: &mut impl Write, mut batch: &[u8], piece: usize) -> std::io::Result<()> {
    while batch.len() > piece {
        // The last line end within the piece, else (a longer line) the first after it.
        let end = memchr::memrchr(b'\n', &batch[..piece])
            .or_else(|| memchr::memchr(b'\n', &batch[piece..]).map(|at| piece + at))
            .map_or(batch.len(), |at| at + 1);
        out.write_all(&batch[..end])?;
        batch = &batch[end..];
        if !batch.is_empty() {
            std::thread::yield_now();
        }
    }
    out.write_all(batch)?;
    out.flush()
}

impl Drop for Flusher {
    /// Waits for the writer to write every line, [`MAX_LOG_FLUSH_WAIT`] at
    /// most: a stderr nobody reads never lets it, and the process then
    /// ends without it.
    fn drop(&mut self) {
        lock(&self.shared.state).closed = true;
        self.shared.lines.notify_one();
        self.shared.room.notify_all();
        if let Some(thread) = self.thread.take() {
            match self.ended.recv_timeout(MAX_LOG_FLUSH_WAIT) {
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let _ = thread.join();
                }
            }
        }
    }
}

/// One line's writer.
pub struct LogLine<'a> {
    shared: &'a Shared,
}

impl<'a> MakeWriter<'a> for Sink {
    type Writer = LogLine<'a>;

    fn make_writer(&'a self) -> LogLine<'a> {
        LogLine { shared: &self.shared }
    }
}

impl Write for LogLine<'_> {
    /// Appends all of `text` (the formatter hands over a whole line at
    /// once, so lines never interleave); with the buffer full, waits for
    /// room, or drops the line while stderr is stalled. After the writer
    /// thread has ended, writes straight to stderr.
    fn write(&mut self, text: &[u8]) -> std::io::Result<usize> {
        let mut state = lock(&self.shared.state);
        while state.pending.len() >= MAX_PENDING_LOG_BYTES && !state.closed {
            if !state.stalled {
                let (waited, timeout) = self
                    .shared
                    .room
                    .wait_timeout(state, MAX_LOG_ROOM_WAIT)
                    .unwrap_or_else(PoisonError::into_inner);
                state = waited;
                state.stalled = timeout.timed_out() && state.pending.len() >= MAX_PENDING_LOG_BYTES;
                continue;
            }
            state.dropped += 1;
            return Ok(text.len());
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
/// line or reach a terminal as an escape sequence.
pub struct LineFormat;

impl<S, N> FormatEvent<S, N> for LineFormat
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
        let ansi = writer.has_ansi_escapes();
        write_head(&mut writer, SystemTime::now(), *event.metadata().level(), ansi)?;
        let mut fields = Fields { out: Escaped(&mut writer), result: Ok(()) };
        event.record(&mut fields);
        fields.result?;
        writer.write_char('\n')
    }
}

/// Where [`write_direct`] writes and how: the daemon's sink, whether its
/// lines are coloured (a terminal), and whether they are shown at all.
struct DirectSink {
    sink: Sink,
    ansi: bool,
    shown: bool,
}

static DIRECT: OnceLock<DirectSink> = OnceLock::new();

/// Lets [`write_direct`] append lines to `sink` itself, coloured when
/// `ansi`, as the subscriber that writes to the same sink with
/// [`LineFormat`] would; none when `shown` is false, which is the
/// subscriber's filter decided once for the lines written directly
/// (mcp-tape opens no spans, so it cannot change from line to line).
/// Once per process; later calls change nothing.
pub fn write_directly_to(sink: Sink, ansi: bool, shown: bool) {
    let _ = DIRECT.set(DirectSink { sink, ansi, shown });
}

/// A line [`write_direct`] writes, piece by piece: mcp-tape's own text as it
/// is, text from outside (a client, a cassette) with its control characters
/// escaped, as [`LineFormat`] escapes every message. Only the outside pieces
/// are looked at: a line per request is written this way.
pub struct Direct<'a>(&'a mut String);

impl<'a> Direct<'a> {
    /// Pieces appended to `text` (for a line also logged as an event:
    /// escaping twice changes nothing, an escape has no control character).
    pub fn new(text: &'a mut String) -> Direct<'a> {
        Direct(text)
    }

    /// mcp-tape's own text, which holds no control character.
    pub fn push(&mut self, text: &str) {
        self.0.push_str(text);
    }

    /// A character of mcp-tape's own (a digit, say).
    pub fn push_char(&mut self, c: char) {
        self.0.push(c);
    }

    /// Text from outside, its control characters escaped.
    pub fn push_outside(&mut self, text: &str) {
        // The usual short name is printable ASCII: seen so in one pass.
        if text.bytes().all(|b| matches!(b, b' '..=b'~')) {
            self.0.push_str(text);
        } else {
            // Writing to a String does not fail.
            let _ = Escaped(&mut *self.0).write_str(text);
        }
    }
}

/// Appends the line `write` makes at `level` to the sink
/// [`write_directly_to`] named, as the line [`LineFormat`] makes of an
/// event with that message: the request line every request leaves,
/// without the event's way through the subscriber. `write` is also handed
/// the time the line is stamped with (the clock read once for both).
/// Nothing is written (and `write` not called) when the sink was named
/// with its lines not shown. False, with nothing written, when no sink was
/// named: the caller logs the line as an event.
pub fn write_direct(level: Level, write: impl FnOnce(&mut Direct<'_>, SystemTime)) -> bool {
    let Some(DirectSink { sink, ansi, shown }) = DIRECT.get() else { return false };
    if !shown {
        return true;
    }
    let mut line = String::with_capacity(160);
    let now = SystemTime::now();
    if write_head(&mut line, now, level, *ansi).is_ok() {
        write(&mut Direct(&mut line), now);
        line.push('\n');
        // Appending to the sink's buffer fails only once stderr is gone.
        let _ = sink.make_writer().write_all(line.as_bytes());
    }
    true
}

/// `time` in UTC to the microsecond, as `2026-11-23T20:17:41.823637Z`
/// (a time before 1970 as 1970's first instant).
fn write_time(out: &mut impl fmt::Write, time: SystemTime) -> fmt::Result {
    write!(out, "{}", humantime::format_rfc3339_micros(time.max(std::time::UNIX_EPOCH)))
}

/// What every line starts with: its time, then its level and the space
/// after it ([`write_time`], [`push_level`]).
fn write_head(out: &mut impl fmt::Write, time: SystemTime, level: Level, ansi: bool) -> fmt::Result {
    write_time(out, time)?;
    out.write_char(' ')?;
    push_level(out, level, ansi)
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

/// A writer that escapes control characters and bidirectional controls.
struct Escaped<'a, W>(&'a mut W);

impl<W: fmt::Write> fmt::Write for Escaped<'_, W> {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        if !crate::util::may_hold_controls(text) {
            return self.0.write_str(text);
        }
        let mut rest = text;
        while let Some(at) = rest.find(crate::util::is_unsafe) {
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

    /// LineFormat start with the UTC time to the microsecond, then the level.
    #[test]
    fn lines_start_with_the_utc_time_and_the_level() {
        let text = formatted(false, || tracing::info!("hello"));
        let (stamp, rest) = text.split_once(' ').unwrap();
        assert_eq!(stamp.len(), "2026-11-23T20:17:41.823637Z".len(), "{text}");
        assert!(stamp.ends_with('Z') && stamp.as_bytes()[10] == b'T', "{text}");
        assert_eq!(rest, " INFO hello\n");
    }

    /// The time at known instants: the epoch, a leap day of a year divisible
    /// by 400, the last second of a year divisible by 100 but not by 400's
    /// February, a year's last microsecond.
    #[test]
    fn times_are_utc_civil_dates() {
        let at = |seconds: u64, micros: u64| {
            let mut text = String::new();
            let time = std::time::UNIX_EPOCH + Duration::from_secs(seconds) + Duration::from_micros(micros);
            write_time(&mut text, time).unwrap();
            text
        };
        assert_eq!(at(0, 0), "1970-01-01T00:00:00.000000Z");
        assert_eq!(at(951_782_400, 42), "2000-02-29T00:00:00.000042Z");
        assert_eq!(at(951_868_800, 0), "2000-03-01T00:00:00.000000Z");
        assert_eq!(at(4_107_542_399, 0), "2100-02-28T23:59:59.000000Z");
        assert_eq!(at(4_107_542_400, 0), "2100-03-01T00:00:00.000000Z");
        assert_eq!(at(1_798_761_599, 999_999), "2026-12-31T23:59:59.999999Z");
        assert_eq!(at(1_795_726_661, 823_637), "2026-11-26T20:57:41.823637Z");
        let before = std::time::UNIX_EPOCH - Duration::from_secs(5);
        let mut text = String::new();
        write_time(&mut text, before).unwrap();
        assert_eq!(text, "1970-01-01T00:00:00.000000Z");
    }

    /// What a subscriber with [`LineFormat`] writes while `log` runs.
    fn formatted(ansi: bool, log: impl FnOnce()) -> String {
        let out = Arc::new(Mutex::new(Vec::new()));
        let writer = {
            let out = Arc::clone(&out);
            move || Capture(Arc::clone(&out))
        };
        let subscriber =
            tracing_subscriber::fmt().with_ansi(ansi).event_format(LineFormat).with_writer(writer).finish();
        tracing::subscriber::with_default(subscriber, log);
        String::from_utf8(lock(&out).clone()).unwrap()
    }

    /// A line as a subscriber with [`LineFormat`] writes it: control characters
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

    proptest::proptest! {
        /// A batch goes out whole and in order, each write whole lines, at most a
        /// piece long unless it is one line longer than that.
        #[test]
        fn batches_are_written_as_pieces_of_whole_lines(
            lengths in proptest::collection::vec(proptest::prop_oneof![8 => 0usize..60, 1 => 60usize..300], 0..60),
            piece in 1usize..200,
        ) {
            let batch: Vec<u8> = lengths
                .iter()
                .enumerate()
                .flat_map(|(at, &length)| std::iter::repeat_n(b'a' + (at % 26) as u8, length).chain([b'\n']))
                .collect();
            let writes = Arc::new(Mutex::new(Vec::new()));
            let mut out = Recorded { writes: Arc::clone(&writes), entered: mpsc::channel().0, gate: None };
            write_in_pieces(&mut out, &batch, piece).unwrap();
            let writes = lock(&writes);
            proptest::prop_assert_eq!(writes.concat(), batch);
            for write in writes.iter().filter(|write| !write.is_empty()) {
                proptest::prop_assert_eq!(write.last(), Some(&b'\n'), "whole lines");
                let lines = write.iter().filter(|&&b| b == b'\n').count();
                proptest::prop_assert!(write.len() <= piece || lines == 1, "{} bytes, {lines} lines", write.len());
            }
        }

        /// Outside text pushed onto a line is what the plain escaping writer makes of it:
        /// printable ASCII (taken as it is) with at most one character of another kind.
        #[test]
        fn outside_text_is_escaped_as_the_plain_writer_escapes(
            text in "[ -~]{0,12}[\\x00-\\x1f\\x7f-\\u{a0}\\u{61c}\\u{200e}\\u{202a}-\\u{202e}\\u{2066}-\\u{2069}é]?[ -~]{0,12}"
        ) {
            let mut pushed = String::new();
            Direct::new(&mut pushed).push_outside(&text);
            let mut plain = String::new();
            Escaped(&mut plain).write_str(&text).unwrap();
            proptest::prop_assert_eq!(pushed, plain);
        }
    }

    /// A line written directly is the line the subscriber writes for the
    /// same message, control characters escaped, the time aside; and it
    /// goes through the sink.
    #[test]
    fn direct_lines_are_the_subscribers_lines() {
        let message = "POST server=a\nINFO forged\u{1b}[2J method=-";
        let through_subscriber = formatted(false, || tracing::info!("{message}"));
        let out = Arc::new(Mutex::new(Vec::new()));
        let (sink, flusher) = start(Capture(Arc::clone(&out))).unwrap();
        write_directly_to(sink, false, true);
        assert!(write_direct(Level::INFO, |line, _| line.push_outside(message)));
        drop(flusher);
        let direct = String::from_utf8(lock(&out).clone()).unwrap();
        let after_time = |line: &str| line.split_once(' ').map(|(_, rest)| rest.to_owned());
        assert_eq!(after_time(&direct), after_time(&through_subscriber), "{direct}");
        assert_eq!(direct.lines().count(), 1, "{direct}");
        assert!(direct.ends_with(" INFO POST server=a\\nINFO forged\\u{1b}[2J method=-\n"), "{direct}");
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

    /// A `Write` that keeps each write apart, and marks the end of a batch
    /// (the writer's flush) with an empty one, so a test can see the pieces
    /// and the batches. Its first write waits for the test's go-ahead, if it
    /// was given a gate.
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
            lock(&self.writes).push(Vec::new());
            Ok(())
        }
    }

    /// Each write a [`Recorded`] writer was given.
    type Writes = Arc<Mutex<Vec<Vec<u8>>>>;

    /// A logging sink whose writer is stuck in writing its first line
    /// ("first") until `go` is sent: what it wrote, `go`, the sink, its flusher.
    fn stuck_in_first_write() -> (Writes, mpsc::Sender<()>, Sink, Flusher) {
        let writes = Arc::new(Mutex::new(Vec::new()));
        let (entered, writer_entered) = mpsc::channel();
        let (go, gate) = mpsc::channel();
        let out = Recorded { writes: Arc::clone(&writes), entered, gate: Some(gate) };
        let (sink, flusher) = start(out).unwrap();
        sink.make_writer().write_all(b"first\n").unwrap();
        writer_entered.recv().unwrap();
        (writes, go, sink, flusher)
    }

    /// LineFormat from four threads, three times what the buffer may hold, while
    /// the writer is stuck: no batch outgrows the bound (logging threads
    /// waited), and every line is written whole, each thread's in order.
    #[test]
    fn lines_wait_for_room_and_none_is_lost() {
        let (writes, go, sink, flusher) = stuck_in_first_write();
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
            writes
                .split(Vec::is_empty)
                .all(|batch| batch.concat().len() < MAX_PENDING_LOG_BYTES + longest_line),
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

    /// A stderr nobody reads (a writer stuck in its first write): a full
    /// buffer used to hold every logging thread, so a daemon stopped
    /// answering and never heard SIGTERM, and the flusher held the exit.
    /// Past the room wait lines are dropped at once and counted, said once
    /// a write goes through; a flusher whose writer never returns lets the
    /// process go after its wait.
    #[test]
    fn a_stalled_stderr_drops_lines_and_lets_the_process_stop() {
        let (writes, go, sink, flusher) = stuck_in_first_write();
        let filler = vec![b'x'; MAX_PENDING_LOG_BYTES];
        sink.make_writer().write_all(&filler).unwrap();
        let started = std::time::Instant::now();
        sink.make_writer().write_all(b"waits, then is dropped\n").unwrap();
        assert!(started.elapsed() >= MAX_LOG_ROOM_WAIT, "it waited for room first");
        for _ in 0..1000 {
            sink.make_writer().write_all(b"dropped\n").unwrap();
        }
        assert!(started.elapsed() < MAX_LOG_ROOM_WAIT * 3, "once stalled, lines do not wait");
        go.send(()).unwrap();
        while lock(&sink.shared.state).stalled {
            std::thread::yield_now();
        }
        sink.make_writer().write_all(b"after\n").unwrap();
        drop(flusher);
        let written = String::from_utf8(lock(&writes).concat()).unwrap();
        assert!(
            written.contains("1001 log lines were dropped: standard error was not read\n"),
            "{}",
            &written[..80]
        );
        assert!(written.ends_with("after\n") && !written.contains("dropped\ndropped"));

        // A writer that never comes back: its `go` is never sent.
        let (_, _never, sink, flusher) = stuck_in_first_write();
        sink.make_writer().write_all(b"never written\n").unwrap();
        let stopping = std::time::Instant::now();
        drop(flusher);
        let waited = stopping.elapsed();
        assert!(waited >= MAX_LOG_FLUSH_WAIT && waited < MAX_LOG_FLUSH_WAIT * 2, "{waited:?}");
    }
}
