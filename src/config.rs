//! Plain, validated settings. Built by `cli` from the command line; nothing
//! here knows of clap.

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::interchange::foreign::Reader;
use crate::normalize::Normalization;

/// The port the Agent 365 mock tooling server uses, so mcp-tape drops in.
pub const DEFAULT_PORT: u16 = 5309;

/// What to do when a server with recordings gets a request none matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnMiss {
    /// A `-32001` error naming the nearest recordings, for every miss.
    Error,
    /// A listed tool's miss as a failed tool result (`isError`), which
    /// every agent framework hands its model; any other miss as `Error`.
    ToolResult,
    /// A listed tool's, prompt's or resource's miss as its method's result
    /// saying what was not recorded; any other miss gets the mock's answer.
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

/// Where a run's match and fault rules come from.
#[derive(Clone, Debug, Default)]
pub struct RuleSources {
    /// The rules file (`--rules`); `None`: `mcp-tape.toml` if it exists.
    pub file: Option<PathBuf>,
    /// `--fault` specs, in order.
    pub faults: Vec<String>,
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

/// What a stale recording (older than `--max-age`) does to a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expired {
    /// A warning when it is first used; the run still passes.
    Warn,
    /// The run fails (exit 1 at the end), the answer is still served.
    Error,
}

/// `--max-age DAYS` and `--expired`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaxAge {
    pub limit: std::time::Duration,
    pub expired: Expired,
}

/// The reports a run writes when it ends.
#[derive(Clone, Debug, Default)]
pub struct Reports {
    /// JUnit XML (`--junit`).
    pub junit: Option<PathBuf>,
    /// The JSON usage report `prune` reads (`--report`).
    pub usage: Option<PathBuf>,
    /// The HTML report a person reads (`--html`).
    pub html: Option<PathBuf>,
    /// What the run was, for the HTML and JSON reports (`--title`).
    pub title: Option<String>,
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
    pub rules: RuleSources,
    pub normalization: Normalization,
    pub reports: Reports,
    pub max_age: Option<MaxAge>,
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
    Http { front_door: FrontDoor, upstream: HttpUpstream },
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
    /// Fault rules (what a rule answers from the cassette with `--mode
    /// missing` too).
    pub rules: RuleSources,
    pub normalization: Normalization,
    pub reports: Reports,
}

/// How `test` uses its cassettes (VCR's record modes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TestMode {
    /// Answer from the cassettes; never contact an upstream.
    Replay,
    /// Answer what the cassette holds, record the rest.
    Missing,
    /// Record everything into a fresh cassette that replaces the old one
    /// only if the command passes.
    All,
    /// Record (as `All`) if the cassette does not exist yet, else replay.
    Once,
}

/// An HTTP upstream to record from.
#[derive(Clone, Debug)]
pub struct HttpUpstream {
    /// Base URL; request paths are appended.
    pub url: String,
    /// Extra trusted CA certificates (PEM) for the upstream's TLS.
    pub ca: Option<PathBuf>,
    pub timeouts: Timeouts,
    /// Request headers whose values are scrubbed as credentials
    /// (`--redact-header`, lowercase), besides the built-in ones.
    pub redact_headers: Vec<String>,
    /// The agent's models recorded beside the upstream (`--model`).
    pub llms: Vec<LlmUpstream>,
}

/// One of the agent's models (`--model NAME=URL`): the tape's
/// `/model/NAME` stands for `url`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LlmUpstream {
    pub name: String,
    /// Base URL, without a trailing slash.
    pub url: String,
}

/// What a `test` tape runs around: the run ends when it does, with its
/// exit code.
#[derive(Clone, Debug)]
pub enum Around {
    /// A command, program first.
    Command(Vec<String>),
    /// A test runner's tapes, one after another, each with its verdict, as
    /// stdin gives them (`--tapes-on-stdin`); and each of those tapes.
    Tapes,
}

impl Around {
    /// What the run is called in its log and its reports.
    pub fn shown(&self) -> String {
        match self {
            Around::Command(command) => crate::util::printable(&command.join(" ")).into_owned(),
            Around::Tapes => "the tapes on stdin".to_owned(),
        }
    }
}

/// `mcp-tape test`: the tape for the length of one command.
#[derive(Clone, Debug)]
pub struct TestConfig {
    /// Replay: cassette files and directories; recording modes: the one
    /// cassette file.
    pub paths: Vec<PathBuf>,
    pub front_door: FrontDoor,
    pub mode: TestMode,
    /// Required by every mode but `Replay`.
    pub upstream: Option<HttpUpstream>,
    /// What the tape serves for as long as it runs.
    pub around: Around,
    /// Misses do not fail a run whose command passed.
    pub allow_misses: bool,
    pub on_miss: OnMiss,
    pub pace: Pace,
    pub rules: RuleSources,
    pub normalization: Normalization,
    pub reports: Reports,
    pub max_age: Option<MaxAge>,
}

/// When a comparison (`verify`, `diff`) fails the command (exit 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailOn {
    /// A breaking catalogue change.
    Breaking,
    /// Any difference at all.
    Changed,
    /// Never: a report only.
    Never,
}

/// How findings are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
    Markdown,
}

/// `mcp-tape verify`: recordings against the live server.
#[derive(Clone, Debug)]
pub struct VerifyConfig {
    /// Cassette files and directories of cassettes.
    pub cassettes: Vec<PathBuf>,
    pub upstream: HttpUpstream,
    /// Only this server's recordings.
    pub server: Option<String>,
    /// Also re-send calls (anything that is not a list, read or get).
    pub include_calls: bool,
    /// JSON pointers into answers left out of the comparison.
    pub ignore_paths: Vec<String>,
    /// Write changed answers over the recorded ones.
    pub update: bool,
    /// Extra request headers (credentials): sent, never stored or printed.
    pub headers: Vec<(String, String)>,
    pub fail_on: FailOn,
    pub format: Format,
}

/// `mcp-tape diff`: two sets of recordings.
#[derive(Clone, Debug)]
pub struct DiffConfig {
    pub old: PathBuf,
    pub new: PathBuf,
    pub ignore_paths: Vec<String>,
    pub fail_on: FailOn,
    pub format: Format,
}

/// `mcp-tape prune`: remove the recordings a passing run never used.
#[derive(Clone, Debug)]
pub struct PruneConfig {
    pub cassette: PathBuf,
    /// The usage report (`--report`) of that run.
    pub report: PathBuf,
}

/// `mcp-tape rules suggest`: match rules for the misses of a run.
#[derive(Clone, Debug)]
pub struct SuggestConfig {
    /// The cassettes the run replayed (files or directories).
    pub cassettes: Vec<PathBuf>,
    /// The usage report (`--report`) of that run.
    pub report: PathBuf,
    pub normalization: Normalization,
}

/// What `import` reads.
#[derive(Clone, Debug)]
pub enum ImportSource {
    /// JSON Lines as `export` writes them; `None` reads standard input.
    JsonLines(Option<PathBuf>),
    /// A directory of Agent 365 mock files (`mocks/<server>.json`), and
    /// the seed of the draw of the calls their `errorRate`s fail.
    A365Mocks { dir: PathBuf, seed: u64 },
    /// Recordings of another tool, all in one transaction; `server` names
    /// the server of every exchange.
    Foreign { reader: &'static Reader, files: Vec<PathBuf>, server: Option<String> },
}

#[derive(Clone, Debug)]
pub struct ImportConfig {
    pub source: ImportSource,
    pub cassette: PathBuf,
}

#[derive(Clone, Debug)]
pub struct ExportConfig {
    pub cassette: PathBuf,
    /// The output file; `None` writes standard output.
    pub output: Option<PathBuf>,
    /// HAR 1.2 instead of JSON Lines.
    pub har: bool,
    /// JSON Lines with `recordedAt` and `offsetMs`.
    pub timings: bool,
}

/// `mcp-tape lint`: cassettes searched for secrets.
#[derive(Clone, Debug)]
pub struct LintConfig {
    pub paths: Vec<PathBuf>,
    /// Text or JSON.
    pub format: Format,
}

/// One validated command.
#[derive(Clone, Debug)]
pub enum Command {
    Replay(ReplayConfig),
    Record(RecordConfig),
    Test(TestConfig),
    Prune(PruneConfig),
    SuggestRules(SuggestConfig),
    Verify(VerifyConfig),
    Diff(DiffConfig),
    Import(ImportConfig),
    Export(ExportConfig),
    Lint(LintConfig),
    /// `pseudonymize`: the cassettes (files or directories) to rewrite.
    Pseudonymize(Vec<PathBuf>),
}

impl Command {
    /// Whether the command speaks MCP on mcp-tape's own stdin/stdout.
    pub fn is_stdio(&self) -> bool {
        match self {
            Command::Replay(config) => matches!(config.front, Front::Stdio { .. }),
            Command::Record(config) => matches!(config.upstream, Upstream::Stdio { .. }),
            Command::Test(_)
            | Command::Prune(_)
            | Command::SuggestRules(_)
            | Command::Verify(_)
            | Command::Diff(_)
            | Command::Import(_)
            | Command::Export(_)
            | Command::Lint(_)
            | Command::Pseudonymize(_) => false,
        }
    }

    /// Whether this is a tape that lives as long as a command (`test`):
    /// under the test plugins, one for each test, so its start and end are
    /// what a test waits for.
    pub fn is_test(&self) -> bool {
        matches!(self, Command::Test(_))
    }

    /// Whether one thread does all its async work, with no hand-offs
    /// between threads. A stdio command serves one client on one stream;
    /// a tape for a test ([`Command::is_test`]) serves a test's few
    /// requests and has no threads to start. `record` hears its clients in
    /// the order their bytes arrived: a runtime of several threads runs
    /// the task it woke last first, so of two requests that arrived
    /// together (a client's GET stream and its POST, sent at once on a busy
    /// machine) it would forward the later first, and the upstream would
    /// hear them in an order the client did not send. Recording is bound
    /// by its upstream and its cassette writer's thread, not by this one.
    pub fn runs_on_one_thread(&self) -> bool {
        self.is_stdio() || self.is_test() || matches!(self, Command::Record(_))
    }

    /// Whether this serves until it is stopped (`replay`, `record`), where
    /// every other command ends when its work is done.
    pub fn is_daemon(&self) -> bool {
        matches!(self, Command::Replay(_) | Command::Record(_))
    }
}
