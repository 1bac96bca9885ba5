//! The command `mcp-tape test` wraps: spawned with the tape's URL in its
//! environment, in a process tree of its own ([`Tree`]: on Unix a process
//! group, so that it and everything it starts get the signals mcp-tape
//! passes on, and nothing else does), never outliving mcp-tape: when it
//! exits, what it left running is ended ([`Tree::end`]); a stop is passed
//! on, and a command still running [`INTERRUPT_GRACE`] later, or at a
//! second stop, is ended (SIGKILL). Or no command: a test runner's tapes
//! taking turns, which read the lines of stdin whole and bounded
//! ([`read_line`]), a tape's verdict on the next one ([`next_verdict`]),
//! and tell the URL on stdout ([`tell`]) and their answers through a
//! thread of their own ([`Teller`]).

use std::process::ExitStatus;
use std::time::Duration;

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt};

use crate::error::Error;
use crate::limits::MAX_TELL_FLUSH_WAIT;
use crate::os::{Stop, Stops, Tree};
use crate::transport::stdio::child;

/// Where an agent finds the tape: mcp-tape's own variable.
pub const URL_VARIABLE: &str = "MCP_TAPE_URL";
/// Where the Agent 365 SDKs look for their MCP platform: set to the tape
/// too, so they use it with no code change.
pub const PLATFORM_VARIABLE: &str = "MCP_PLATFORM_ENDPOINT";

/// The stops a run listens for: every one, since one not listened for ends
/// mcp-tape with its default action (SIGHUP: at once, its recording's files left behind), or,
/// listened for elsewhere, not at all (SIGQUIT).
pub const STOPS: [Stop; 4] = [Stop::Interrupt, Stop::Terminate, Stop::HangUp, Stop::Quit];

/// After a stop is passed on, how long the command gets to exit before
/// its tree is ended.
pub const INTERRUPT_GRACE: Duration = Duration::from_secs(5);

/// How the command ended: its exit code, how it ended in words, and the
/// stop that interrupted the run, if one did (the run then ends with 128 +
/// its number, whatever the code).
#[derive(Debug)]
pub struct Ran {
    pub code: u8,
    pub ended: String,
    pub interrupted: Option<Stop>,
}

impl Ran {
    /// No verdict: the run failed (exit code 1).
    pub fn none() -> Ran {
        verdict(None)
    }

    fn exited(status: ExitStatus, interrupted: Option<Stop>) -> Ran {
        Ran { code: crate::os::exit_code(status), ended: status.to_string(), interrupted }
    }
}

/// The longest verdict line read: an exit code and a line end, with room to spare.
const VERDICT_BYTES: u64 = 64;

/// The verdict on the next line of `input`: an exit code (0-255; anything
/// else, or the end of input before a line, is 1); or no verdict,
/// interrupted, at the first of `stops`.
pub async fn next_verdict(input: &mut (impl AsyncBufRead + Unpin), stops: &mut Stops) -> Ran {
    tokio::select! {
        line = read_line(input, VERDICT_BYTES) => verdict(line.ok()),
        stop = stops.next() => Ran { interrupted: Some(stop), ..verdict(None) },
    }
}

/// A line on stdout, at once.
///
/// # Errors
///
/// Stdout's.
pub fn tell(line: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{line}").and_then(|()| stdout.flush())
}

/// Lines told on stdout in order by a thread of their own: telling never
/// waits for stdout's reader, so a test runner that stops reading stops
/// nothing else (the tapes' HTTP, the stops they listen for). Each line
/// told answers one line of input, so what waits is bounded by what the
/// runner wrote; once stdout is gone, what is told is dropped.
pub struct Teller {
    lines: std::sync::mpsc::Sender<String>,
    /// Hung up by the thread as it ends: every line written, or stdout gone.
    written: std::sync::mpsc::Receiver<()>,
}

impl Teller {
    pub fn start() -> Teller {
        let (lines, told) = std::sync::mpsc::channel::<String>();
        let (ends, written) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            use std::io::Write;
            let _ends = ends;
            let Ok(mut stdout) = crate::os::own_stdout() else { return };
            for line in told {
                if stdout.write_all(format!("{line}\n").as_bytes()).is_err() {
                    break;
                }
            }
        });
        Teller { lines, written }
    }

    /// Queues `line` for stdout.
    pub fn tell(&self, line: String) {
        let _ = self.lines.send(line);
    }

    /// Waits until every line told is written, or stdout is gone, at most
    /// [`MAX_TELL_FLUSH_WAIT`]; whether the thread is done with stdout (not
    /// still waiting in a write, holding it).
    pub fn finish(self) -> bool {
        let Teller { lines, written } = self;
        drop(lines);
        matches!(
            written.recv_timeout(MAX_TELL_FLUSH_WAIT),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected)
        )
    }
}

/// A line of input read whole.
pub enum Line {
    /// Its text, without the line end.
    Text(Vec<u8>),
    /// Longer than allowed: read past, not kept.
    TooLong,
    /// The end of input (a last line with no line end included).
    End,
}

/// The next line of `input`, at most `limit` bytes with its end.
///
/// # Errors
///
/// The input's.
pub async fn read_line(input: &mut (impl AsyncBufRead + Unpin), limit: u64) -> std::io::Result<Line> {
    let mut line = Vec::new();
    (&mut *input).take(limit).read_until(b'\n', &mut line).await?;
    if line.pop_if(|end| *end == b'\n').is_some() {
        return Ok(Line::Text(line));
    }
    if (line.len() as u64) < limit {
        return Ok(Line::End);
    }
    loop {
        line.clear();
        (&mut *input).take(limit).read_until(b'\n', &mut line).await?;
        if line.is_empty() || line.last() == Some(&b'\n') {
            return Ok(Line::TooLong);
        }
    }
}

/// A verdict line's run: its exit code, or 1 for anything else and for no line.
fn verdict(line: Option<Line>) -> Ran {
    let code = match line {
        Some(Line::Text(text)) => {
            std::str::from_utf8(&text).ok().and_then(|text| text.trim().parse::<u8>().ok())
        }
        Some(Line::TooLong | Line::End) | None => None,
    };
    let (code, ended) = match code {
        Some(code) => (code, format!("verdict {code}")),
        None => (1, "no verdict".to_owned()),
    };
    Ran { code, ended, interrupted: None }
}

/// Runs `command` with `url` in its environment until it exits, passing
/// each stop (SIGINT, SIGTERM, SIGHUP, SIGQUIT; Ctrl-C, Ctrl-Break, the
/// console closing, a shutdown) on to its tree (ended after
/// [`INTERRUPT_GRACE`] or at a second stop), then ends what it left
/// running.
///
/// # Errors
///
/// [`Error::Spawn`]: the command could not be started or waited for.
pub async fn run(command: &[String], url: &str) -> Result<Ran, Error> {
    let shown = command.join(" ");
    let failed = |source| Error::Spawn { command: shown.clone(), source };
    let Some((program, arguments)) = command.split_first() else {
        return Err(failed(std::io::Error::new(std::io::ErrorKind::InvalidInput, "no command to run")));
    };
    let mut spawning = tokio::process::Command::new(program);
    spawning.args(arguments).env(URL_VARIABLE, url).env(PLATFORM_VARIABLE, url).kill_on_drop(true);
    let mut stops = Stops::listen(&STOPS);
    let (mut process, tree) = Tree::spawn(&mut spawning).map_err(failed)?;
    if let Some(tree) = &tree {
        tree.give_terminal();
    }
    let mut interrupted = None;
    let escalation = tokio::time::sleep(Duration::MAX);
    tokio::pin!(escalation);
    let status = loop {
        let received = tokio::select! {
            status = process.wait() => break status.map_err(failed)?,
            stop = stops.next() => Some(stop),
            () = &mut escalation, if interrupted.is_some() => None,
        };
        match (interrupted, received) {
            (None, Some(stop)) => {
                interrupted = Some(stop);
                escalation.as_mut().reset(tokio::time::Instant::now() + INTERRUPT_GRACE);
                if let Some(tree) = &tree {
                    tracing::info!("passing {} on to {}", stop.name(), crate::util::printable(&shown));
                    tree.pass_on(stop);
                }
            }
            _ => {
                tracing::warn!("{} is still running: ending it", crate::util::printable(&shown));
                escalation.as_mut().reset(tokio::time::Instant::now() + Duration::from_secs(3600));
                if let Some(tree) = &tree {
                    tree.kill();
                }
            }
        }
    };
    if let Some(tree) = &tree
        && tree.end(child::TERM_GRACE).await > 0
    {
        tracing::info!("{} left processes running; ended them", crate::util::printable(&shown));
    }
    Ok(Ran::exited(status, interrupted))
}
