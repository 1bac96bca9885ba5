//! Plain, validated settings. Built by `cli` from the command line; nothing
//! here knows of clap.

use std::net::SocketAddr;
use std::path::PathBuf;

/// The port the Agent 365 mock tooling server uses, so mcp-tape drops in.
pub const DEFAULT_PORT: u16 = 5309;

/// What to do when a server with recordings gets a request none matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnMiss {
    /// A `-32001` error naming the nearest recordings.
    Error,
    /// The mock's answer, as for a server with no recordings.
    Mock,
}

/// How fast replay sends the events of a recorded stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pace {
    /// As fast as the client reads them.
    Instant,
    /// With the gaps the recording saw.
    Recorded,
}

/// Settings shared by record and replay so that match keys agree.
#[derive(Clone, Debug, Default)]
pub struct Normalization {
    /// Extra body keys whose values are redacted (`--redact-key`).
    pub redact_keys: Vec<String>,
    /// JSON pointers into params left out of the match key (`--ignore-param`).
    pub ignore_params: Vec<String>,
}

/// The HTTP front door's rules, the same in every mode.
#[derive(Clone, Debug)]
pub struct FrontDoor {
    pub listen: SocketAddr,
    /// Host names accepted in `Host`/`Origin` besides loopback ones.
    pub allowed_hosts: Vec<String>,
    /// A connection with no request in flight that stays silent this long
    /// is closed, so idle or half-open sockets cannot hold every slot.
    pub idle_timeout: std::time::Duration,
}

/// How long record waits on the upstream.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timeouts {
    /// To open a connection (TCP and TLS).
    pub connect: std::time::Duration,
    /// From sending a request to the answer's status line and headers.
    pub response: std::time::Duration,
    /// Longest silence inside the body of an answer to a POST.
    pub idle: std::time::Duration,
}

/// The default of [`FrontDoor::idle_timeout`].
pub const DEFAULT_IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Where a daemon meets its client.
#[derive(Clone, Debug)]
pub enum Front {
    /// Streamable HTTP on a port.
    Http(FrontDoor),
    /// MCP over the process's own stdin/stdout (replay) as the server
    /// `server` (`None`: the only one the cassettes hold).
    Stdio { server: Option<String> },
}

#[derive(Clone, Debug)]
pub struct ReplayConfig {
    pub front: Front,
    /// Cassette files and directories of cassettes.
    pub paths: Vec<PathBuf>,
    pub on_miss: OnMiss,
    /// Exit non-zero at shutdown if any request missed.
    pub fail_on_miss: bool,
    pub pace: Pace,
    pub normalization: Normalization,
}

/// What record forwards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordMode {
    /// Forward and store everything.
    All,
    /// Answer what the cassette already holds; forward and store the rest.
    Missing,
}

/// The server record forwards to.
#[derive(Clone, Debug)]
pub enum Upstream {
    /// An MCP server over Streamable HTTP, served to clients on `front_door`.
    Http {
        front_door: FrontDoor,
        /// Base URL; request paths are appended.
        url: String,
        /// Extra trusted CA certificates (PEM) for the upstream's TLS.
        ca: Option<PathBuf>,
        timeouts: Timeouts,
    },
    /// A stdio server: `command` (program, then arguments) spawned as a
    /// child, speaking to the client on mcp-tape's own stdin/stdout;
    /// exchanges are stored under `server`.
    Stdio { command: Vec<String>, server: String },
}

#[derive(Clone, Debug)]
pub struct RecordConfig {
    pub upstream: Upstream,
    /// The cassette file recordings go to: `DIR/NAME.sqlite`.
    pub cassette: PathBuf,
    pub mode: RecordMode,
    pub normalization: Normalization,
}

#[derive(Clone, Debug)]
pub struct ImportConfig {
    /// JSON Lines input; `None` reads standard input.
    pub input: Option<PathBuf>,
    pub cassette: PathBuf,
}

#[derive(Clone, Debug)]
pub struct ExportConfig {
    pub cassette: PathBuf,
    /// JSON Lines output; `None` writes standard output.
    pub output: Option<PathBuf>,
}

/// One validated command.
#[derive(Clone, Debug)]
pub enum Command {
    Replay(ReplayConfig),
    Record(RecordConfig),
    Import(ImportConfig),
    Export(ExportConfig),
}

impl Command {
    /// Whether the command speaks MCP on mcp-tape's own stdin/stdout.
    pub fn is_stdio(&self) -> bool {
        match self {
            Command::Replay(config) => matches!(config.front, Front::Stdio { .. }),
            Command::Record(config) => matches!(config.upstream, Upstream::Stdio { .. }),
            Command::Import(_) | Command::Export(_) => false,
        }
    }
}
