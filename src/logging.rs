//! Log lines: one format for every line, both front doors' request lines
//! included ([`LineFormat`]: UTC time, level, message, control characters
//! escaped), and where they go: each is appended to one shared buffer, and
//! one thread writes what gathered in large writes. A busy daemon (a line
//! per request) pays for a short lock and a copy per line, not a write to
//! stderr or a thread wake-up each. Lossless: past [`MAX_PENDING_LOG_BYTES`]
//! bytes a logging thread waits for the writer rather than drop a line, and
//! the [`Flusher`] waits for every line to be written.
//!
//! Why not `tracing-appender`: its non-blocking writer is lossless only
//! while the process runs. Its guard waits one second for the backlog at
//! exit (and prints to stdout, the MCP stream of a stdio command, when the
//! queue is full): with stderr taking 1 ms a write, 937 of 5,000 lines were
//! out when the guard returned.

use std::fmt::{self, Write as _};
use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, MakeWriter};
use tracing_subscriber::registry::LookupSpan;

use crate::limits::MAX_PENDING_LOG_BYTES;
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

/// Starts the writer thread, writing to `out`.
///
/// # Errors
///
/// When the thread cannot be started.
pub fn start(out: impl Write + Send + 'static) -> std::io::Result<(Sink, Flusher)> {
    let shared = Arc::new(Shared { state: Mutex::default(), lines: Condvar::new(), room: Condvar::new() });
    let writer = Arc::clone(&shared);
    let thread =
        std::thread::Builder::new().name("mcp-tape-log".into()).spawn(move || drain(&writer, out))?;
    Ok((Sink { shared: Arc::clone(&shared) }, Flusher { shared, thread: Some(thread) }))
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
        SystemTime.format_time(&mut writer)?;
        writer.write_char(' ')?;
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

    /// LineFormat from four threads, three times what the buffer may hold, while
    /// the writer is stuck: no batch outgrows the bound (logging threads
    /// waited), and every line is written whole, each thread's in order.
    #[test]
    fn lines_wait_for_room_and_none_is_lost() {
        let writes = Arc::new(Mutex::new(Vec::new()));
        let (entered, writer_entered) = mpsc::channel();
        let (go, gate) = mpsc::channel();
        let out = Recorded { writes: Arc::clone(&writes), entered, gate: Some(gate) };
        let (sink, flusher) = start(out).unwrap();
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
