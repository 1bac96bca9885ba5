//! The `mcp-tape` binary: parse the command line, start logging, run the
//! command, and map its outcome to an exit code (0 ok, 1 failure, 2 usage;
//! a stdio recording ends with its server's code).

use std::error::Error as _;
use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;
use mcp_tape::cli::Cli;

/// Requests allocate many small, short-lived objects (JSON trees, header
/// maps); mimalloc, as its crate ships it, serves those faster than the
/// system allocator (BENCHMARKS.md). Not on macOS, where its C needs the
/// SDK's headers to build (a cross build has none) and the system
/// allocator serves.
#[cfg(not(target_os = "macos"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Runs before anything allocates (an init array entry with a priority runs
/// ahead of every plain one, the allocator's own start among them): the
/// process begins with no transparent huge pages. The allocator asks for
/// them, and the first allocation of each thread, the main one's before
/// `main`, then has the kernel clear a 2 MiB page: about a tenth of the CPU
/// time a tape for one test takes from start to end, for no gain in a run
/// that short. A daemon takes them back in `main`.
///
/// The one `unsafe` outside `src/os/`: the linker's section for it. Sound,
/// as the function takes no argument, touches no memory and allocates
/// nothing (one `prctl`).
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
#[used]
#[unsafe(link_section = ".init_array.00100")]
static SMALL_PAGES_FIRST: extern "C" fn() = small_pages_first;

#[cfg(target_os = "linux")]
extern "C" fn small_pages_first() {
    mcp_tape::os::huge_pages(false);
}

/// The async runtime: one thread for a command that runs on one
/// ([`mcp_tape::config::Command::runs_on_one_thread`]), else a thread a core.
fn runtime(one_thread: bool) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = match one_thread {
        true => tokio::runtime::Builder::new_current_thread(),
        false => tokio::runtime::Builder::new_multi_thread(),
    };
    builder.enable_all().build()
}

fn main() -> ExitCode {
    let command = match Cli::parse().into_command() {
        Ok(command) => command,
        Err(e) => {
            mcp_tape::util::say(format_args!("mcp-tape: {e}"));
            return ExitCode::from(2);
        }
    };
    if command.is_daemon() {
        // Huge pages pay for a process that serves long; every other run keeps small ones.
        mcp_tape::os::huge_pages(true);
    }
    // Log lines gather in one buffer that a writer thread empties in large
    // writes: a busy daemon pays for a copy per request, not a write to stderr
    // (nor, when stderr is a pipe, a wait for its reader at each write).
    let ansi = std::io::stderr().is_terminal();
    mcp_tape::os::widen_stderr_pipe(mcp_tape::limits::LOG_PIPE_BYTES);
    let (writer, flush_on_drop) = match mcp_tape::logging::start(mcp_tape::os::Stderr) {
        Ok(started) => started,
        Err(e) => {
            mcp_tape::util::say(format_args!("mcp-tape: cannot start the log writer: {e}"));
            return ExitCode::FAILURE;
        }
    };
    tracing_subscriber::fmt()
        .with_ansi(ansi)
        .event_format(mcp_tape::logging::LineFormat)
        .with_writer(writer.clone())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("MCP_TAPE_LOG").unwrap_or_else(|_| "info".into()),
        )
        .init();
    // The filter is asked once whether request lines are shown, not at each request.
    let request_lines =
        tracing::enabled!(target: mcp_tape::transport::http::REQUEST_LINES, tracing::Level::INFO);
    mcp_tape::logging::write_directly_to(writer, ansi, request_lines);
    let runtime = match runtime(command.runs_on_one_thread()) {
        Ok(runtime) => runtime,
        Err(e) => {
            mcp_tape::util::say(format_args!("mcp-tape: cannot start the async runtime: {e}"));
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(mcp_tape::cmd::run(command));
    // Without waiting for a load a stop signal cut short (it ends on its own thread).
    runtime.shutdown_background();
    drop(flush_on_drop); // every log line out before the final word
    let code = match outcome {
        Ok(code) => code,
        Err(e) => {
            mcp_tape::util::say(format_args!("mcp-tape: {e}"));
            let mut cause = e.source();
            while let Some(inner) = cause {
                mcp_tape::util::say(format_args!("  caused by: {inner}"));
                cause = inner.source();
            }
            if matches!(e, mcp_tape::error::Error::Usage(_) | mcp_tape::error::Error::Rules { .. }) {
                2
            } else {
                1
            }
        }
    };
    // Everything the command wrote is written and its files are closed: a test waiting for its
    // tape to end waits for nothing more.
    mcp_tape::os::exit_now(code)
}
