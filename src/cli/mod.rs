//! The command line (clap) and its validation into a
//! [`Command`](crate::config::Command) (in `validate`). Nothing past
//! this module sees clap.

use std::path::PathBuf;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::config::{
    DEFAULT_IDLE_TIMEOUT, DEFAULT_PORT, FailOn, Format, OnMiss, Pace, RuleSources, TestMode,
};
use crate::interchange::foreign::{self, Reader};

mod validate;

pub use validate::tape;

/// Record and replay MCP (Model Context Protocol) traffic.
///
/// mcp-tape stands between an MCP client (an agent) and an MCP server over
/// Streamable HTTP or stdio. `record` forwards traffic to a real server and
/// stores each exchange in an SQLite cassette; `replay` answers from
/// cassettes with nothing upstream, and behaves like a small spec-compliant
/// MCP server where the cassettes hold no answer. Both protocol eras
/// (handshake 2024-11-05 to 2025-11-25, stateless 2026-07-28) are served on
/// every path and over stdio.
#[derive(Debug, Parser)]
#[command(name = "mcp-tape", version, propagate_version = true, max_term_width = 100)]
pub struct Cli {
    #[command(subcommand)]
    command: CliCommand,
}

#[derive(Debug, Subcommand)]
enum CliCommand {
    /// Serve recorded answers from cassettes, with a mock fallback.
    ///
    /// Loads every cassette under PATH and serves MCP on every path:
    /// /agents/servers/{name} (also the tenant and environment forms) is
    /// server {name}; any other path is a server of its own. A request a
    /// cassette holds is answered as recorded (caller's id and progress token
    /// stamped in; repeated requests in recorded order, then the last one
    /// again). Anything else gets the mock's answer: ping, notifications,
    /// empty lists, -32602 for unknown tools and prompts, -32601 for unknown
    /// methods. A request to a server with recordings that matches none of
    /// them is a miss (see --on-miss).
    ///
    /// Also served: GET /health, and the Agent 365 gateway discovery routes
    /// GET /agents/{agentId}/mcpServers and /agents/v2/{agentId}/mcpServers
    /// listing the servers the cassettes hold.
    ///
    /// With --stdio, speaks MCP on its own stdin/stdout instead (one
    /// JSON-RPC message per line; logs on stderr) as the server --server,
    /// and exits 0 when stdin closes.
    ///
    /// Stops on SIGINT, SIGTERM, SIGHUP or SIGQUIT and prints a summary of misses.
    Replay(ReplayArgs),
    /// Forward traffic to an upstream MCP server and store each exchange.
    ///
    /// A transparent proxy: every path and method is forwarded to the
    /// upstream (a base URL: a request to /P goes to URL/P), and its status,
    /// headers and body come back unchanged; SSE answers are relayed event by
    /// event. Each finished JSON-RPC exchange is normalized (ids and progress
    /// tokens as placeholders, credentials redacted: the bearer token seen on
    /// a request never reaches the cassette) and committed to
    /// DIR/NAME.sqlite before the client sees its final answer.
    ///
    /// An upstream that cannot be reached, fails or stays silent gets the
    /// client a 502 with a JSON-RPC error; nothing is stored for it.
    ///
    /// With --stdio -- CMD [ARGS...], mcp-tape is what the client spawns: it
    /// spawns CMD, relays every line between its own stdin/stdout and CMD's
    /// as it arrives (CMD's stderr goes to mcp-tape's), and exits with CMD's
    /// exit status. When its stdin closes, or on SIGINT/SIGTERM, it closes
    /// CMD's stdin, waits, then ends CMD (SIGTERM, then SIGKILL); CMD also
    /// gets SIGKILL if mcp-tape itself is killed.
    ///
    /// Stops on SIGINT, SIGTERM, SIGHUP or SIGQUIT with a one-line summary.
    Record(RecordArgs),
    /// Run a command (a test suite) against the tape, then report and exit.
    ///
    /// Starts the tape on a free loopback port (--port to choose), waits
    /// until it answers, and runs CMD with MCP_TAPE_URL and
    /// MCP_PLATFORM_ENDPOINT set to http://127.0.0.1:PORT (Agent 365 SDKs
    /// then use it unchanged). SIGINT and SIGTERM are passed on to CMD. When
    /// CMD exits, the tape stops and a summary is printed: requests, hits,
    /// misses by server, method and tool with the nearest recording's
    /// difference, and recordings never used.
    ///
    /// Exit status: CMD's (128+N if signal N ended it); 1 if CMD passed but
    /// a request missed (unless --allow-misses), a recording mode's upstream
    /// failed a request, or, with --expired error, a recording older than
    /// --max-age answered; 2 for a usage error.
    ///
    /// Modes (--mode, else MCP_TAPE_MODE in the environment, else replay):
    /// replay (vcrpy's none) answers from the cassettes and never contacts
    /// an upstream: a request they do not answer is a miss, but for
    /// housekeeping (initialize, ping, list calls, notifications) on a
    /// server they hold; missing (new_episodes) answers what the cassette
    /// holds and records the rest from --upstream into a copy of it, and
    /// all records everything into a fresh cassette; either replaces the
    /// old one only if CMD passes; once replays the cassette if it exists,
    /// else records it (as all; then it needs --upstream). The recording
    /// modes take one PATH: the cassette file.
    Test(TestArgs),
    /// Remove the recordings a passing run never used, as its --report says.
    Prune(PruneArgs),
    /// Match rules (mcp-tape.toml): suggest them from a run's misses.
    #[command(subcommand)]
    Rules(RulesCommand),
    /// Re-send recorded requests to the live server and report drift.
    ///
    /// One fresh session per recorded server and era; only list, read and
    /// get requests unless --include-calls (a call can change something).
    /// Each answer is compared with its recording (fields at --ignore-path
    /// left out) and printed as same, changed (with JSON pointers), gone,
    /// or error shape changed; tool catalogue changes are classified as
    /// breaking (tool removed, required parameter added, a parameter's type
    /// changed or removed, output schema narrowed), additive or cosmetic.
    /// Exit 1 on breaking drift (--fail-on changed: on any). --update
    /// writes the changed answers into the cassettes.
    Verify(VerifyArgs),
    /// Compare two cassettes (a re-recording with the old one) with the
    /// same classification as verify, for review in a pull request.
    Diff(DiffArgs),
    /// Write exchanges from JSON Lines (as `export` writes them), or Agent
    /// 365 mocks (--a365-mocks), into a cassette.
    Import(ImportArgs),
    /// Write every exchange of a cassette as canonical JSON Lines, for review.
    Export(ExportArgs),
    /// Search cassettes for secrets and personal data before they are
    /// committed.
    ///
    /// Every stored request, answer and aside (and service answer, answer
    /// template and model exchange) is searched for AWS access key ids,
    /// GitHub and Slack tokens, Slack webhooks, JWTs, PEM private keys, Azure
    /// storage keys, connection strings and SAS signatures, random-looking
    /// values under key names that say secret, token, password, credential
    /// or key, and personal data that is not pseudonymized: addresses
    /// (email), GUIDs (guid), people's names, titles and places (name),
    /// phone numbers (phone) and the [pseudonymize] table's terms (term).
    /// Addresses at example domains (RFC 2606) and at Microsoft's fictitious
    /// companies (contoso.com, fabrikam.com, ...) are nobody's. Each
    /// finding: cassette, exchange row, JSON pointer, kind and a masked
    /// preview. Exit 1 when anything is found, 0 when nothing is.
    Lint(LintArgs),
    /// Rewrite cassettes with the personal data in them pseudonymized, as
    /// record --pseudonymize would have stored them.
    ///
    /// Every file given (cassettes, or directories of them) is read first,
    /// so that one person has one pseudonym across all of them; each is then
    /// written anew beside itself and moved over itself, so that no original
    /// byte is left in it and a crash leaves it as it was. The key is
    /// MCP_TAPE_PSEUDONYM_KEY's (or the [pseudonymize] table's key_env's),
    /// else the one kept in the user's configuration directory. Running it
    /// again changes nothing. A cassette a recorder has open is refused.
    Pseudonymize(PseudonymizeArgs),
}

#[derive(Debug, Args)]
struct PseudonymizeArgs {
    /// Cassette files, or directories of them.
    #[arg(value_name = "CASSETTE", required = true)]
    paths: Vec<PathBuf>,
}

#[derive(Debug, Args)]
struct Listen {
    /// Address to listen on. Keep it on loopback unless you mean otherwise.
    #[arg(long, default_value = "127.0.0.1", value_name = "ADDR")]
    host: String,
    /// Port to listen on; 0 picks a free one (the log says which).
    #[arg(long, default_value_t = DEFAULT_PORT)]
    port: u16,
    /// Accept this host name in Host and Origin headers besides loopback
    /// names (repeatable). Requests naming any other host get 403.
    #[arg(long = "allow-host", value_name = "HOST")]
    allow_hosts: Vec<String>,
    /// Close a client connection that has no request in flight and has
    /// been silent this many seconds (idle keep-alive, half-sent preludes).
    #[arg(long = "client-idle-timeout", value_name = "SECONDS", default_value_t = DEFAULT_IDLE_TIMEOUT.as_secs())]
    client_idle_timeout: u64,
}

#[derive(Debug, Args)]
struct NormalizationArgs {
    /// Redact the value of this body key, in stored exchanges and before
    /// matching (repeatable; on top of built-in credential keys such as
    /// token, secret, password, api key, authorization, cookie).
    #[arg(long = "redact-key", value_name = "KEY")]
    redact_keys: Vec<String>,
    /// Scrub text of this shape from every stored string, and before
    /// matching: `builtin` for the secret shapes `mcp-tape lint` finds (AWS,
    /// GitHub, Slack, JWT, PEM private keys, Azure storage), or a regular
    /// expression (repeatable; give the same ones to record and replay).
    #[arg(long = "redact-pattern", value_name = "builtin|REGEX")]
    redact_patterns: Vec<String>,
    /// Leave this JSON pointer into params out of the match key, e.g.
    /// /arguments/requestId (repeatable; give the same ones to record and
    /// replay).
    #[arg(long = "ignore-param", value_name = "POINTER")]
    ignore_params: Vec<String>,
    /// Recording, give each person, address, GUID, phone number and listed
    /// term in what is stored a pseudonym of the same form, the same in
    /// every message and cassette made with one key (MCP_TAPE_PSEUDONYM_KEY,
    /// else a key kept in the user's configuration directory). The client
    /// still gets what the servers said. See docs/privacy.md; default
    /// MCP_TAPE_PSEUDONYMIZE=1.
    #[arg(long)]
    pseudonymize: bool,
}

#[derive(Debug, Args)]
struct ReportArgs {
    /// Write a JUnit XML report here when the run ends: one testsuite per
    /// server, one testcase per method and tool, prompt or resource; a miss
    /// is a failure; recordings never used are skipped testcases.
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Write a JSON usage report here when the run ends (what `prune
    /// --unused-from` reads).
    #[arg(long = "report", value_name = "FILE")]
    usage: Option<PathBuf>,
    /// Write an HTML report here when the run ends: one self-contained page
    /// with how each request was answered, each miss beside its nearest
    /// recordings (differing fields marked), unused recordings and a
    /// timeline.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// What the run was (a test's id and its cassette, as the pytest plugin
    /// and vitest helper give it), shown at the top of the HTML report and
    /// as `title` in the JSON one.
    #[arg(long, value_name = "TEXT")]
    title: Option<String>,
}

#[derive(Debug, Args)]
struct AgeArgs {
    /// Report recordings older than this many days when they answer.
    #[arg(long, value_name = "DAYS")]
    max_age: Option<u32>,
    /// What a recording older than --max-age does: `warn` logs it once;
    /// `error` also fails the run (exit 1 at the end).
    #[arg(long, value_enum, default_value_t = ExpiredArg::Warn, requires = "max_age")]
    expired: ExpiredArg,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum ExpiredArg {
    Warn,
    Error,
}

#[derive(Debug, Args)]
struct UpstreamArgs {
    /// Also trust the CA certificates in this PEM file for the upstream's TLS.
    #[arg(long, value_name = "FILE")]
    upstream_ca: Option<PathBuf>,
    /// Seconds to wait for a connection to the upstream.
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    connect_timeout: f64,
    /// Seconds to wait for the upstream's answer to begin.
    #[arg(long, value_name = "SECONDS", default_value_t = 60.0)]
    upstream_timeout: f64,
    /// Longest silence, in seconds, inside an answer to a POST before the
    /// answer is given up.
    #[arg(long, value_name = "SECONDS", default_value_t = 300.0)]
    idle_timeout: f64,
    /// Treat this request header's value as a credential: scrubbed from
    /// everything stored, wherever the upstream echoes it (repeatable; on
    /// top of Authorization, Cookie and API key headers).
    #[arg(long = "redact-header", value_name = "NAME")]
    redact_headers: Vec<String>,
    /// Record the agent's model too: the tape's /model/NAME stands for URL,
    /// the base URL its client had (openai=https://api.openai.com/v1 gives
    /// the client http://127.0.0.1:5309/model/openai), and its exchanges go
    /// on the same cassette (repeatable; default MCP_TAPE_MODEL: NAME=URL
    /// entries separated by spaces).
    #[arg(long = "model", value_name = "NAME=URL")]
    models: Vec<String>,
}

#[derive(Debug, Args)]
struct TestArgs {
    /// Cassette files, or directories of *.sqlite cassettes; in the
    /// recording modes, the one cassette file.
    #[arg(value_name = "PATH", default_value = "cassettes")]
    paths: Vec<PathBuf>,
    /// replay, missing, all or once (see above; vcrpy's none and
    /// new_episodes name replay and missing); default MCP_TAPE_MODE, else
    /// replay.
    #[arg(long, value_enum)]
    mode: Option<TestModeArg>,
    /// Base URL of the upstream MCP server, for the recording modes.
    #[arg(long, value_name = "URL")]
    upstream: Option<String>,
    #[command(flatten)]
    upstream_args: UpstreamArgs,
    /// Port on 127.0.0.1 to serve on; 0 picks a free one.
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// A request that missed does not fail a run whose command passed.
    #[arg(long)]
    allow_misses: bool,
    #[command(flatten)]
    serve: ServeArgs,
    /// No command and no cassette: a test runner's tapes, one after another
    /// on one port. Prints the URL on stdout, then reads stdin: a tape's
    /// arguments as a JSON array of what `mcp-tape test` takes for one
    /// test (cassette first; no --port), then that test's verdict (its exit
    /// code: 0 passed; anything but a number, or no line, is 1), then the
    /// next tape's. The test plugins run their tapes this way. Answers on
    /// stdout, one JSON object a line:
    /// {"serving":true} or {"error":TEXT} for a tape; {"code":N,"report":
    /// {..},"said":[..]} at its verdict. Connections stay open from one tape
    /// to the next; a request between two tapes gets 503. Ends at the end of
    /// input (a tape still running fails). Each tape's own flags go on its
    /// line, never on this one.
    #[arg(long, conflicts_with_all = [
        "command", "paths", "mode", "upstream", "allow_misses",
        "upstream_ca", "connect_timeout", "upstream_timeout", "idle_timeout", "redact_headers", "models",
        "on_miss", "pace", "rules", "faults", "junit", "usage", "html", "title", "max_age", "expired",
        "redact_keys", "redact_patterns", "ignore_params", "pseudonymize",
    ])]
    tapes_on_stdin: bool,
    /// The command to run, after `--`.
    #[arg(last = true, required_unless_present = "tapes_on_stdin", value_name = "CMD")]
    command: Vec<String>,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum TestModeArg {
    #[value(alias = "none")]
    Replay,
    #[value(alias = "new_episodes")]
    Missing,
    All,
    Once,
}

impl From<TestModeArg> for TestMode {
    fn from(mode: TestModeArg) -> TestMode {
        match mode {
            TestModeArg::Replay => TestMode::Replay,
            TestModeArg::Missing => TestMode::Missing,
            TestModeArg::All => TestMode::All,
            TestModeArg::Once => TestMode::Once,
        }
    }
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum FailOnArg {
    Breaking,
    Changed,
    Never,
}

impl From<FailOnArg> for FailOn {
    fn from(fail_on: FailOnArg) -> FailOn {
        match fail_on {
            FailOnArg::Breaking => FailOn::Breaking,
            FailOnArg::Changed => FailOn::Changed,
            FailOnArg::Never => FailOn::Never,
        }
    }
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum FormatArg {
    Text,
    Json,
    Markdown,
}

impl From<FormatArg> for Format {
    fn from(format: FormatArg) -> Format {
        match format {
            FormatArg::Text => Format::Text,
            FormatArg::Json => Format::Json,
            FormatArg::Markdown => Format::Markdown,
        }
    }
}

#[derive(Debug, Args)]
struct CompareArgs {
    /// Leave the field at this JSON pointer into each answer message out of
    /// the comparison, e.g. /result/_meta/timestamp (repeatable).
    #[arg(long = "ignore-path", value_name = "POINTER")]
    ignore_paths: Vec<String>,
    /// Exit 1 on `breaking` catalogue drift (default), on any difference
    /// (`changed`), or `never`.
    #[arg(long, value_enum, default_value_t = FailOnArg::Breaking)]
    fail_on: FailOnArg,
    /// text, json, or markdown (fits a pull request comment).
    #[arg(long, value_enum, default_value_t = FormatArg::Text)]
    format: FormatArg,
}

#[derive(Debug, Args)]
struct VerifyArgs {
    /// Cassette files, or directories of *.sqlite cassettes.
    #[arg(value_name = "CASSETTE", required = true)]
    cassettes: Vec<PathBuf>,
    /// Base URL of the live MCP server.
    #[arg(long, value_name = "URL")]
    upstream: String,
    #[command(flatten)]
    upstream_args: UpstreamArgs,
    /// Only this server's recordings.
    #[arg(long, value_name = "NAME")]
    server: Option<String>,
    /// Also re-send calls (tools/call and anything else that is not a list,
    /// read or get): they may have side effects.
    #[arg(long)]
    include_calls: bool,
    /// Write the live answers over the changed recordings (each cassette in
    /// one transaction).
    #[arg(long)]
    update: bool,
    /// A request header, e.g. "Authorization: Bearer TOKEN" (repeatable);
    /// MCP_TAPE_UPSTREAM_TOKEN in the environment sends a bearer token.
    /// Never stored, never printed.
    #[arg(long = "header", value_name = "NAME: VALUE")]
    headers: Vec<String>,
    #[command(flatten)]
    compare: CompareArgs,
}

#[derive(Debug, Args)]
struct DiffArgs {
    /// The old cassette (or directory of cassettes).
    #[arg(value_name = "OLD")]
    old: PathBuf,
    /// The new one.
    #[arg(value_name = "NEW")]
    new: PathBuf,
    #[command(flatten)]
    compare: CompareArgs,
}

/// The environment variable `verify` takes a bearer token from.
pub const TOKEN_VARIABLE: &str = "MCP_TAPE_UPSTREAM_TOKEN";

#[derive(Debug, Subcommand)]
enum RulesCommand {
    /// Print the [[match]] tables that would have answered a run's misses.
    ///
    /// Reads the misses from REPORT (the run's --report): for each missed
    /// server and tool (prompt, resource or method), a table whose
    /// normalize folds (case, space, number) or ignore pointers cover where
    /// the nearest recording differed, checked against CASSETTE (it says
    /// which recording the rule would answer with, or why it would still
    /// miss). Review before pasting into mcp-tape.toml.
    Suggest(SuggestArgs),
}

#[derive(Debug, Args)]
struct SuggestArgs {
    /// The cassettes the run replayed: files, or directories of *.sqlite.
    #[arg(value_name = "CASSETTE", required = true)]
    cassettes: Vec<PathBuf>,
    /// The usage report (--report) of the run that missed, or a directory
    /// of them (the pytest plugin's --mcp-tape-report DIR).
    #[arg(long = "from", value_name = "REPORT")]
    report: PathBuf,
    #[command(flatten)]
    normalization: NormalizationArgs,
}

#[derive(Debug, Args)]
struct PruneArgs {
    /// The cassette to remove recordings from.
    #[arg(value_name = "CASSETTE")]
    cassette: PathBuf,
    /// The usage report (--report) of a passing run over this cassette.
    #[arg(long, value_name = "REPORT")]
    unused_from: PathBuf,
}

#[derive(Debug, Args)]
struct ReplayArgs {
    /// Cassette files, or directories of *.sqlite cassettes.
    #[arg(value_name = "PATH", default_value = "cassettes")]
    paths: Vec<PathBuf>,
    /// Speak MCP on standard input and output instead of HTTP.
    #[arg(long, conflicts_with_all = ["host", "port", "allow_hosts"])]
    stdio: bool,
    /// With --stdio: the server whose recordings answer (default: the only
    /// server in the cassettes).
    #[arg(long, value_name = "SERVER", requires = "stdio")]
    server: Option<String>,
    #[command(flatten)]
    listen: Listen,
    /// Exit with status 1 at shutdown if any request missed, so a CI run
    /// fails loudly.
    #[arg(long)]
    fail_on_miss: bool,
    #[command(flatten)]
    serve: ServeArgs,
}

/// How replay answers and reports, for `replay` and `test`.
#[derive(Debug, Args)]
struct ServeArgs {
    /// On a miss: `tool-result` answers a listed tool's call with a failed
    /// tool result (`isError`) naming what differs, and any other miss with
    /// -32001; `error` answers -32001 naming the nearest recorded requests
    /// and what differs; `mock` answers as the mock would.
    #[arg(long, value_enum, default_value_t = MissPolicy::ToolResult)]
    on_miss: MissPolicy,
    /// `instant` sends a recorded stream's events as fast as the client
    /// reads them; `recorded` keeps the gaps the recording saw.
    #[arg(long, value_enum, default_value_t = PaceArg::Instant)]
    pace: PaceArg,
    #[command(flatten)]
    rules: RuleArgs,
    #[command(flatten)]
    reports: ReportArgs,
    #[command(flatten)]
    age: AgeArgs,
    #[command(flatten)]
    normalization: NormalizationArgs,
}

/// Where match and fault rules come from, for `replay`, `record` and `test`.
#[derive(Debug, Args)]
struct RuleArgs {
    /// Rules: a TOML file of [[match]] tables, which decide among the
    /// recordings of the same server, method and tool which one answers a
    /// request no recording matches exactly (ignore and normalize pointers;
    /// by exact, sequence or nearest), and [[fault]] tables, which make
    /// chosen calls fail. Default: ./mcp-tape.toml if it exists.
    #[arg(long, value_name = "FILE")]
    rules: Option<PathBuf>,
    /// A fault rule (repeatable): the keys of a [[fault]] table as a TOML
    /// inline table's, e.g. 'tool = "SendEmail", nth = [2], http = 429,
    /// retry_after = 1'. Applied after the rules file's.
    #[arg(long = "fault", value_name = "SPEC")]
    faults: Vec<String>,
}

impl From<RuleArgs> for RuleSources {
    fn from(args: RuleArgs) -> RuleSources {
        RuleSources { file: args.rules, faults: args.faults }
    }
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum PaceArg {
    Instant,
    Recorded,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum MissPolicy {
    ToolResult,
    Error,
    Mock,
}

impl From<MissPolicy> for OnMiss {
    fn from(policy: MissPolicy) -> OnMiss {
        match policy {
            MissPolicy::ToolResult => OnMiss::ToolResult,
            MissPolicy::Error => OnMiss::Error,
            MissPolicy::Mock => OnMiss::Mock,
        }
    }
}

impl From<PaceArg> for Pace {
    fn from(pace: PaceArg) -> Pace {
        match pace {
            PaceArg::Instant => Pace::Instant,
            PaceArg::Recorded => Pace::Recorded,
        }
    }
}

#[derive(Debug, Args)]
struct RecordArgs {
    /// Base URL of the upstream MCP server, e.g. https://agent365.svc.cloud.microsoft
    #[arg(long, value_name = "URL", required_unless_present = "stdio", conflicts_with = "stdio")]
    upstream: Option<String>,
    /// Record a stdio server: the command after `--` is spawned, and the
    /// client speaks to mcp-tape on its stdin/stdout.
    #[arg(long, requires = "command", conflicts_with_all = ["host", "port", "allow_hosts"])]
    stdio: bool,
    /// With --stdio: the server name exchanges are stored under. Default:
    /// the file name, without a script extension (.js, .mjs, .cjs, .ts,
    /// .py) or a trailing @version, of the command's last path-like
    /// argument (one holding a '/', or ending in such an extension), else
    /// of the command itself.
    #[arg(long, value_name = "SERVER", requires = "stdio")]
    server: Option<String>,
    /// With --stdio: the stdio server's command and arguments, after `--`.
    #[arg(last = true, value_name = "CMD")]
    command: Vec<String>,
    /// Directory the cassette is written to.
    #[arg(long, value_name = "DIR", default_value = "cassettes")]
    cassettes: PathBuf,
    /// Cassette name: exchanges go to DIR/NAME.sqlite.
    #[arg(long, default_value = "default")]
    name: String,
    /// `all` forwards and stores everything; `missing` answers what the
    /// cassette already holds and forwards and stores only the rest.
    #[arg(long, value_enum, default_value_t = ModeArg::All)]
    mode: ModeArg,
    #[command(flatten)]
    rules: RuleArgs,
    #[command(flatten)]
    upstream_args: UpstreamArgs,
    #[command(flatten)]
    reports: ReportArgs,
    #[command(flatten)]
    listen: Listen,
    #[command(flatten)]
    normalization: NormalizationArgs,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum ModeArg {
    All,
    Missing,
}

#[derive(Debug, Args)]
struct ImportArgs {
    /// File to read: JSON Lines as `export` writes them (`-` reads standard
    /// input), or with --from one or more recordings of another tool.
    #[arg(value_name = "FILE", required_unless_present = "a365_mocks", conflicts_with = "a365_mocks")]
    inputs: Vec<PathBuf>,
    /// The FILEs are another tool's recordings, in this format. Secrets
    /// are scrubbed as record scrubs them; all files go in together or none
    /// does.
    #[arg(long, value_name = "FORMAT", value_parser = foreign_reader())]
    from: Option<&'static Reader>,
    /// With --from: the server name for every exchange (else the Agent 365
    /// name or path in the file's URLs, else the file's name).
    #[arg(long, value_name = "NAME", requires = "from")]
    server: Option<String>,
    /// Read the Agent 365 mock tooling server's mocks instead: every
    /// DIR/<server>.json becomes answer templates for that server's tools
    /// (a call with any arguments is answered from the tool's
    /// responseTemplate, its {{argument}} holes filled in). A tool's
    /// errorRate fails that share of its calls, the same calls every run
    /// (see --seed), with the mock server's error, or its statusCode as
    /// the HTTP status when that is not a success. Catalogue snapshots
    /// beside DIR (snapshots/<server>.snapshot.json) give each tool the
    /// description and inputSchema captured from the live server.
    #[arg(long = "a365-mocks", value_name = "DIR")]
    a365_mocks: Option<PathBuf>,
    /// With --a365-mocks: the seed of the draw of the calls an errorRate
    /// fails (another seed, other calls).
    #[arg(long, value_name = "N", default_value_t = 0, requires = "a365_mocks")]
    seed: u64,
    /// Cassette to write (created if missing; exchanges are appended).
    #[arg(long, value_name = "FILE")]
    cassette: PathBuf,
}

/// `--from FORMAT`: one of [`foreign::READERS`], by name (each listed in
/// `--help` with what it reads).
fn foreign_reader() -> impl TypedValueParser<Value = &'static Reader> {
    let names = foreign::READERS.iter().map(|reader| PossibleValue::new(reader.name).help(reader.about));
    PossibleValuesParser::new(names)
        .try_map(|name| foreign::reader(&name).ok_or(format!("no reader is named {name}")))
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum ToArg {
    Jsonl,
    Har,
}

#[derive(Debug, Args)]
struct LintArgs {
    /// Cassette files, or directories of them.
    #[arg(value_name = "CASSETTE", required = true)]
    paths: Vec<PathBuf>,
    /// How to print the findings.
    #[arg(long, value_enum, default_value = "text")]
    format: LintFormatArg,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum LintFormatArg {
    Text,
    Json,
}

#[derive(Debug, Args)]
struct ExportArgs {
    /// Cassette to read.
    #[arg(value_name = "CASSETTE")]
    cassette: PathBuf,
    /// Where to write; standard output if not given.
    #[arg(long, short, value_name = "FILE")]
    output: Option<PathBuf>,
    /// `jsonl`: canonical JSON Lines, for review and `import`; `har`: HAR
    /// 1.2, for HAR viewers (and `import --from har`).
    #[arg(long, value_enum, default_value = "jsonl", value_name = "FORMAT")]
    to: ToArg,
    /// JSON Lines: also write when each exchange was recorded (`recordedAt`)
    /// and each message's milliseconds after its request (`offsetMs`), which
    /// `import` keeps and `--pace` replays by. Left out by default, so that
    /// two recordings of the same answers export alike.
    #[arg(long)]
    timings: bool,
}

#[cfg(test)]
mod tests {
    use super::validate::default_server;
    use super::*;
    use crate::config::{Command, Front, RecordConfig, Upstream};
    use crate::error::Error;

    fn command(args: &[&str]) -> Result<Command, Error> {
        Cli::try_parse_from(args).unwrap().into_command()
    }

    #[test]
    fn replay_defaults() {
        let Command::Replay(config) = command(&["mcp-tape", "replay"]).unwrap() else { panic!("not replay") };
        let Front::Http(front_door) = config.front else { panic!("not HTTP") };
        assert_eq!(front_door.listen, "127.0.0.1:5309".parse().unwrap());
        assert_eq!(config.paths, [PathBuf::from("cassettes")]);
        assert_eq!(config.on_miss, OnMiss::ToolResult);
    }

    #[test]
    fn record_builds_the_cassette_path() {
        let Command::Record(config) =
            command(&["mcp-tape", "record", "--upstream", "https://h/", "--name", "mail"]).unwrap()
        else {
            panic!("not record")
        };
        assert_eq!(config.cassette, PathBuf::from("cassettes/mail.sqlite"));
        let Upstream::Http { upstream, .. } = config.upstream else { panic!("not HTTP") };
        assert_eq!(upstream.url, "https://h");
    }

    #[test]
    fn stdio_record_takes_the_command_after_the_double_dash() {
        let stdio = |args: &[&str]| match command(args) {
            Ok(Command::Record(RecordConfig { upstream: Upstream::Stdio { command, server }, .. })) => {
                (command.join(" "), server)
            }
            other => panic!("not a stdio record: {other:?}"),
        };
        let (cmd, server) = stdio(&["mcp-tape", "record", "--stdio", "--", "python3", "srv/mail.py", "-v"]);
        assert_eq!((cmd.as_str(), server.as_str()), ("python3 srv/mail.py -v", "mail"));
        let named = stdio(&["mcp-tape", "record", "--stdio", "--server", "m", "--", "npx", "-y", "@a/b@1.2"]);
        assert_eq!(named.1, "m");
        let err = |args: &[&str]| command(args).err().map(|e| e.to_string());
        assert!(
            err(&["mcp-tape", "record", "--upstream", "http://x", "--", "cmd"]).unwrap().contains("--stdio")
        );
        assert!(Cli::try_parse_from(["mcp-tape", "record", "--stdio"]).is_err(), "a command is needed");
        assert!(Cli::try_parse_from(["mcp-tape", "record", "--stdio", "--port", "1", "--", "c"]).is_err());
        assert!(Cli::try_parse_from(["mcp-tape", "record", "--", "c"]).is_err(), "--upstream or --stdio");
    }

    #[test]
    fn test_modes_that_record_say_what_they_need() {
        let err = |args: &[&str]| command(args).err().map(|e| e.to_string()).unwrap_or_default();
        let no_upstream = err(&["mcp-tape", "test", "--mode", "all", "a.sqlite", "--", "true"]);
        assert!(no_upstream.contains("--mode all: records, so it needs --upstream URL"), "{no_upstream}");
        let a_directory =
            err(&["mcp-tape", "test", "--mode", "missing", "--upstream", "http://h", ".", "--", "true"]);
        assert!(a_directory.contains("--mode missing: records into one cassette"), "{a_directory}");
    }

    #[test]
    fn default_server_names_follow_the_stated_rule() {
        let of = |line: &str| default_server(&line.split(' ').map(str::to_owned).collect::<Vec<_>>());
        assert_eq!(of("npx -y @modelcontextprotocol/server-everything"), "server-everything");
        assert_eq!(of("npx -y @modelcontextprotocol/server-everything@2026.1.14"), "server-everything");
        assert_eq!(of("python3 tests/stdio_upstream.py --server mail"), "stdio_upstream");
        assert_eq!(of("node server.mjs"), "server");
        assert_eq!(of("/usr/local/bin/mcp-server-git --repository ."), "mcp-server-git");
        assert_eq!(of("uvx mcp-server-fetch"), "uvx");
        assert_eq!(of("mcp-tape replay --stdio cassettes/"), "cassettes");
    }

    #[test]
    fn bad_values_are_named() {
        let err = |args: &[&str]| command(args).unwrap_err().to_string();
        assert!(err(&["mcp-tape", "replay", "--host", "nowhere"]).contains("--host"));
        assert!(err(&["mcp-tape", "replay", "--ignore-param", "arguments"]).contains("--ignore-param"));
        assert!(err(&["mcp-tape", "record", "--upstream", "ftp://x"]).contains("--upstream"));
        assert!(err(&["mcp-tape", "record", "--upstream", "http://x", "--name", "a/b"]).contains("--name"));
        let zero = err(&["mcp-tape", "record", "--upstream", "http://x", "--idle-timeout", "0"]);
        assert!(zero.contains("--idle-timeout"), "{zero}");
    }
}
