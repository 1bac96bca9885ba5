//! One stdio client keeping a fixed number of requests in flight: spawns
//! COMMAND, writes a `tools/call` line whenever an answer line comes back
//! (so IN_FLIGHT are always outstanding), and after a second of warm-up
//! counts answers for SECONDS. Prints `{"messages_per_s": …, "answers": …}`.
//!
//! Usage: stdio-load SECONDS IN_FLIGHT COMMAND [ARGS...]

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const WARM_UP: Duration = Duration::from_secs(1);

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: stdio-load SECONDS IN_FLIGHT COMMAND [ARGS...]";
    let seconds: f64 = args.next().ok_or(usage)?.parse()?;
    let in_flight: usize = args.next().ok_or(usage)?.parse()?;
    let program = args.next().ok_or(usage)?;
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    let stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?);
    // One credit per answer: the writer sends a request for each.
    let (credits, credited) = mpsc::channel::<()>();
    let writer = std::thread::spawn(move || -> std::io::Result<()> {
        let mut id: u64 = 0;
        while credited.recv().is_ok() {
            id += 1;
            let line = format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"lookup\",\"arguments\":{{\"n\":500}}}}}}\n"
            );
            match stdin.write_all(line.as_bytes()).and_then(|()| stdin.flush()) {
                Ok(()) => {}
                // The measurement is over and the reader has let go of the server's output:
                // it may have ended first. Anything else is a failure.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
                Err(e) => return Err(e),
            }
        }
        Ok(())
    });
    for _ in 0..in_flight {
        credits.send(())?;
    }
    let started = Instant::now();
    let measured_from = started + WARM_UP;
    let until = measured_from + Duration::from_secs_f64(seconds);
    let mut answers: u64 = 0;
    for line in stdout.lines() {
        let line = line?;
        if !line.contains("\"result\"") {
            return Err(format!("not an answer: {line}").into());
        }
        let now = Instant::now();
        if now >= until {
            break;
        }
        if now >= measured_from {
            answers += 1;
        }
        credits.send(())?;
    }
    drop(credits);
    writer.join().map_err(|_| "the writer panicked")??;
    child.wait()?;
    let rate = answers as f64 / seconds;
    println!("{{\"messages_per_s\": {rate:.0}, \"answers\": {answers}}}");
    Ok(())
}
