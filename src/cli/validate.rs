//! The parsed command line validated into a [`Command`]: each flag checked
//! and turned into the settings of `config`, with what is wrong named.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use clap::{Parser, ValueEnum};

use super::{
    AgeArgs, Cli, CliCommand, CompareArgs, ExpiredArg, LintFormatArg, Listen, ModeArg, NormalizationArgs,
    ReportArgs, RulesCommand, TOKEN_VARIABLE, TestArgs, TestModeArg, ToArg, UpstreamArgs, VerifyArgs,
};
use crate::config::{
    Around, Command, DEFAULT_IDLE_TIMEOUT, DiffConfig, Expired, ExportConfig, FailOn, Format, Front,
    FrontDoor, HttpUpstream, ImportConfig, ImportSource, LintConfig, LlmUpstream, MaxAge, PruneConfig,
    RecordConfig, RecordMode, ReplayConfig, Reports, SuggestConfig, TestConfig, TestMode, Timeouts, Upstream,
    VerifyConfig,
};
use crate::error::Error;
use crate::normalize::Normalization;

fn verify_config(args: VerifyArgs) -> Result<VerifyConfig, Error> {
    let mut headers = Vec::new();
    for header in &args.headers {
        let Some((name, value)) = header.split_once(':').filter(|(n, _)| !n.trim().is_empty()) else {
            return Err(Error::Config("--header: expected NAME: VALUE".into()));
        };
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
    }
    if let Ok(token) = std::env::var(TOKEN_VARIABLE)
        && !headers.iter().any(|(name, _)| name == "authorization")
    {
        headers.push(("authorization".into(), format!("Bearer {}", token.trim())));
    }
    let (ignore_paths, fail_on, format) = args.compare.validate()?;
    Ok(VerifyConfig {
        cassettes: args.cassettes,
        upstream: args.upstream_args.validate(args.upstream)?,
        server: args.server,
        include_calls: args.include_calls,
        ignore_paths,
        update: args.update,
        headers,
        fail_on,
        format,
    })
}

impl Cli {
    /// Validates the parsed command line into a [`Command`].
    ///
    /// # Errors
    ///
    /// [`Error::Config`] naming the flag and what is wrong with it.
    pub fn into_command(self) -> Result<Command, Error> {
        Ok(match self.command {
            CliCommand::Replay(args) => Command::Replay(ReplayConfig {
                front: if args.stdio {
                    Front::Stdio { server: args.server.map(validate_server).transpose()? }
                } else {
                    Front::Http(args.listen.validate()?)
                },
                paths: args.paths,
                on_miss: args.serve.on_miss.into(),
                fail_on_miss: args.fail_on_miss,
                pace: args.serve.pace.into(),
                rules: args.serve.rules.into(),
                normalization: args.serve.normalization.validate()?,
                reports: args.serve.reports.validate(),
                max_age: args.serve.age.validate(),
            }),
            CliCommand::Record(args) => {
                if args.name.is_empty()
                    || !args.name.chars().all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
                {
                    return Err(Error::Config(format!(
                        "--name {:?}: use letters, digits, '_', '.' and '-' only",
                        args.name
                    )));
                }
                if !args.stdio && !args.command.is_empty() {
                    return Err(Error::Config(format!(
                        "{:?} after `--`: a command is recorded only with --stdio",
                        args.command.join(" ")
                    )));
                }
                if args.stdio && !args.upstream_args.models.is_empty() {
                    return Err(Error::Config(
                        "--model with --stdio: a model client reaches the tape over HTTP, which a stdio \
                         recording does not serve; record the model with an HTTP recording (--upstream URL)"
                            .into(),
                    ));
                }
                let upstream = match args.upstream {
                    _ if args.stdio => Upstream::Stdio {
                        server: match args.server {
                            Some(server) => validate_server(server)?,
                            None => default_server(&args.command),
                        },
                        command: args.command,
                    },
                    Some(url) => {
                        let upstream = args.upstream_args.validate(url)?;
                        Upstream::Http { front_door: args.listen.validate()?, upstream }
                    }
                    None => return Err(Error::Config("--upstream URL or --stdio -- CMD is needed".into())),
                };
                Command::Record(RecordConfig {
                    upstream,
                    cassette: args.cassettes.join(format!("{}.sqlite", args.name)),
                    mode: match args.mode {
                        ModeArg::All => RecordMode::All,
                        ModeArg::Missing => RecordMode::Missing,
                    },
                    rules: args.rules.into(),
                    normalization: args.normalization.validate()?,
                    reports: args.reports.validate(),
                })
            }
            CliCommand::Test(args) => Command::Test(test_config(args)?),
            CliCommand::Verify(args) => Command::Verify(verify_config(args)?),
            CliCommand::Diff(args) => {
                let (ignore_paths, fail_on, format) = args.compare.validate()?;
                Command::Diff(DiffConfig { old: args.old, new: args.new, ignore_paths, fail_on, format })
            }
            CliCommand::Rules(RulesCommand::Suggest(args)) => Command::SuggestRules(SuggestConfig {
                cassettes: args.cassettes,
                report: args.report,
                normalization: args.normalization.validate()?,
            }),
            CliCommand::Prune(args) => {
                Command::Prune(PruneConfig { cassette: args.cassette, report: args.unused_from })
            }
            CliCommand::Import(args) => Command::Import(ImportConfig {
                source: match (args.a365_mocks, args.from, args.inputs) {
                    (Some(dir), ..) => ImportSource::A365Mocks { dir, seed: args.seed },
                    (None, Some(reader), files) => {
                        ImportSource::Foreign { reader, files, server: args.server }
                    }
                    (None, None, mut inputs) if inputs.len() == 1 => {
                        ImportSource::JsonLines(inputs.pop().filter(|path| path.as_os_str() != "-"))
                    }
                    (None, None, _) => {
                        return Err(Error::Usage(
                            "import reads one JSON Lines file (several files need --from FORMAT)".into(),
                        ));
                    }
                },
                cassette: args.cassette,
            }),
            CliCommand::Export(args) => Command::Export(ExportConfig {
                cassette: args.cassette,
                output: args.output,
                har: matches!(args.to, ToArg::Har),
                timings: args.timings,
            }),
            CliCommand::Pseudonymize(args) => Command::Pseudonymize(args.paths),
            CliCommand::Lint(args) => Command::Lint(LintConfig {
                paths: args.paths,
                format: match args.format {
                    LintFormatArg::Text => Format::Text,
                    LintFormatArg::Json => Format::Json,
                },
            }),
        })
    }
}

/// One tape of `mcp-tape test --tapes-on-stdin`: `args`, what `mcp-tape
/// test` takes for one test's tape, the test runner being its command.
///
/// # Errors
///
/// [`Error::Usage`]: arguments `mcp-tape test` refuses, or a port (the
/// tapes share the one their process serves on).
pub fn tape(args: Vec<String>) -> Result<TestConfig, Error> {
    if args.iter().any(|arg| arg == "--") {
        return Err(Error::Usage(
            "a tape's arguments: a tape runs no command after `--`: the test runner is the command".into(),
        ));
    }
    // The runner is the command: a stand-in for it, so that the line is read as `mcp-tape test` reads one.
    let runner = ["--", "(the test runner)"].map(String::from);
    let line = ["mcp-tape", "test"].map(String::from).into_iter().chain(args).chain(runner);
    let parsed = Cli::try_parse_from(line).map_err(|e| {
        // clap's first line says what is wrong; the rest is usage.
        let rendered = e.render().to_string();
        let first = rendered.lines().find(|line| !line.trim().is_empty()).unwrap_or_default();
        Error::Usage(format!("a tape's arguments: {}", first.trim_start_matches("error: ")))
    })?;
    match parsed.into_command()? {
        Command::Test(config) if config.front_door.listen.port() == 0 => {
            Ok(TestConfig { around: Around::Tapes, ..config })
        }
        Command::Test(_) => {
            Err(Error::Usage("a tape's --port: the tapes share the port their process serves on".into()))
        }
        _ => Err(Error::Usage("a tape's arguments are those of `mcp-tape test`".into())),
    }
}

/// The environment variable `test --mode` defaults to, so that a CI job
/// can set a mode without touching the command line, which wins.
pub const MODE_VARIABLE: &str = "MCP_TAPE_MODE";

fn test_config(args: TestArgs) -> Result<TestConfig, Error> {
    let mode = match (args.mode, std::env::var(MODE_VARIABLE)) {
        // Each tape's mode comes with the tape.
        _ if args.tapes_on_stdin => TestModeArg::Replay,
        (Some(mode), _) => mode,
        (None, Ok(value)) => TestModeArg::from_str(value.trim(), true).map_err(|_| {
            Error::Usage(format!(
                "{MODE_VARIABLE}={value:?}: expected replay, missing, all or once (or vcrpy's none, new_episodes)"
            ))
        })?,
        (None, Err(_)) => TestModeArg::Replay,
    };
    let mode_name = mode.to_possible_value().map(|name| name.get_name().to_owned()).unwrap_or_default();
    let mode = TestMode::from(mode);
    let upstream = match args.upstream {
        Some(url) => Some(args.upstream_args.validate(url)?),
        // `once` replays a cassette that exists; it needs the upstream only to record a missing one.
        None if matches!(mode, TestMode::Replay | TestMode::Once) => None,
        None => {
            return Err(Error::Usage(format!("--mode {}: records, so it needs --upstream URL", mode_name)));
        }
    };
    if mode != TestMode::Replay {
        let one_file = matches!(args.paths.as_slice(), [path] if !path.is_dir());
        if !one_file {
            return Err(Error::Usage(format!(
                "--mode {}: records into one cassette: give its file as the only PATH, e.g. cassettes/agent.sqlite",
                mode_name
            )));
        }
    }
    let listen = Listen {
        host: "127.0.0.1".into(),
        port: args.port,
        allow_hosts: Vec::new(),
        client_idle_timeout: DEFAULT_IDLE_TIMEOUT.as_secs(),
    };
    Ok(TestConfig {
        paths: args.paths,
        front_door: listen.validate()?,
        mode,
        upstream,
        around: if args.tapes_on_stdin { Around::Tapes } else { Around::Command(args.command) },
        allow_misses: args.allow_misses,
        on_miss: args.serve.on_miss.into(),
        pace: args.serve.pace.into(),
        rules: args.serve.rules.into(),
        normalization: args.serve.normalization.validate()?,
        reports: args.serve.reports.validate(),
        max_age: args.serve.age.validate(),
    })
}

/// The environment variable that turns `--pseudonymize` on (`1`, `true`,
/// `yes`, `on`) or leaves it off (`0`, `false`, `no`, `off`, empty).
pub const PSEUDONYMIZE_VARIABLE: &str = "MCP_TAPE_PSEUDONYMIZE";

/// What [`PSEUDONYMIZE_VARIABLE`] says.
///
/// # Errors
///
/// A value that is neither yes nor no.
fn pseudonymize_variable() -> Result<bool, Error> {
    let Ok(value) = std::env::var(PSEUDONYMIZE_VARIABLE) else { return Ok(false) };
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "" | "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(Error::Usage(format!("{PSEUDONYMIZE_VARIABLE}={value:?}: expected 1 or 0 (true or false)"))),
    }
}

/// The environment variable `--model` defaults to: `NAME=URL` entries
/// separated by spaces.
pub const MODEL_VARIABLE: &str = "MCP_TAPE_MODEL";

/// The agent's models `--model` names, else [`MODEL_VARIABLE`] does.
///
/// # Errors
///
/// An entry that is not `NAME=URL` with a name of letters, digits, `_`,
/// `.` and `-` (not dots alone) and an http(s) URL, or a name given twice.
fn llms(flags: Vec<String>) -> Result<Vec<LlmUpstream>, Error> {
    let (entries, from) = match std::env::var(MODEL_VARIABLE) {
        Ok(value) if flags.is_empty() => {
            (value.split_whitespace().map(str::to_owned).collect(), format!("{MODEL_VARIABLE}: "))
        }
        _ => (flags, "--model ".to_owned()),
    };
    let mut llms: Vec<LlmUpstream> = Vec::with_capacity(entries.len());
    for entry in entries {
        let shown = crate::redact::url_for_log(&entry);
        let bad = |why: &str| Error::Config(format!("{from}{shown:?}: {why}"));
        let (name, url) = entry
            .split_once('=')
            .ok_or_else(|| bad("expected NAME=URL, e.g. openai=https://api.openai.com/v1"))?;
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c)) {
            return Err(bad("the NAME takes letters, digits, '_', '.' and '-' only"));
        }
        if name.chars().all(|c| c == '.') {
            // Clients resolve `/model/..` and `/model/.` away before they send.
            return Err(bad(
                "the NAME must hold more than dots: a client reads /model/. and /model/.. as other paths",
            ));
        }
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(bad("expected an http:// or https:// URL after the '='"));
        }
        if llms.iter().any(|known| known.name == name) {
            return Err(bad("a model of that name is given already"));
        }
        llms.push(LlmUpstream { name: name.to_owned(), url: url.trim_end_matches('/').to_owned() });
    }
    Ok(llms)
}

impl UpstreamArgs {
    fn validate(self, url: String) -> Result<HttpUpstream, Error> {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(Error::Config(format!(
                "--upstream {:?}: expected an http:// or https:// URL",
                crate::redact::url_for_log(&url)
            )));
        }
        let seconds = |flag: &str, value: f64| {
            Duration::try_from_secs_f64(value).ok().filter(|d| !d.is_zero()).ok_or_else(|| {
                Error::Config(format!("{flag} {value}: expected a positive number of seconds"))
            })
        };
        Ok(HttpUpstream {
            url: url.trim_end_matches('/').to_owned(),
            ca: self.upstream_ca,
            timeouts: Timeouts {
                connect: seconds("--connect-timeout", self.connect_timeout)?,
                response: seconds("--upstream-timeout", self.upstream_timeout)?,
                idle: seconds("--idle-timeout", self.idle_timeout)?,
            },
            redact_headers: self.redact_headers.iter().map(|name| name.to_ascii_lowercase()).collect(),
            llms: llms(self.models)?,
        })
    }
}

impl ReportArgs {
    fn validate(self) -> Reports {
        Reports { junit: self.junit, usage: self.usage, html: self.html, title: self.title }
    }
}

impl AgeArgs {
    fn validate(self) -> Option<MaxAge> {
        let days = self.max_age?;
        Some(MaxAge {
            limit: Duration::from_secs(u64::from(days) * 86_400),
            expired: match self.expired {
                ExpiredArg::Warn => Expired::Warn,
                ExpiredArg::Error => Expired::Error,
            },
        })
    }
}

/// A server name given with `--server`: not empty, no control characters.
fn validate_server(server: String) -> Result<String, Error> {
    if server.is_empty() || server.chars().any(char::is_control) {
        return Err(Error::Config(format!("--server {server:?}: expected a server name")));
    }
    Ok(server)
}

/// The server a stdio recording is stored under when `--server` is not
/// given (the rule `--help` states): the file name of the command's last
/// path-like argument, else of the program, without a script extension or
/// a trailing `@version`.
pub(super) fn default_server(command: &[String]) -> String {
    const SCRIPTS: [&str; 5] = [".js", ".mjs", ".cjs", ".ts", ".py"];
    let path_like = |arg: &&String| arg.contains('/') || SCRIPTS.iter().any(|ext| arg.ends_with(ext));
    let named = command.iter().skip(1).rev().find(path_like).or(command.first());
    let file = named.map_or("", |path| {
        let path = path.trim_end_matches(['/', '\\']);
        path.rsplit(['/', '\\']).next().unwrap_or(path)
    });
    let file = SCRIPTS.iter().find_map(|ext| file.strip_suffix(ext)).unwrap_or(file);
    let file = match file.rfind('@') {
        Some(at) if at > 0 => &file[..at],
        _ => file,
    };
    if file.is_empty() { "stdio".to_owned() } else { file.to_owned() }
}

impl Listen {
    fn validate(self) -> Result<FrontDoor, Error> {
        let ip = match self.host.as_str() {
            "localhost" => IpAddr::V4(Ipv4Addr::LOCALHOST),
            other => other.parse().map_err(|_| {
                Error::Config(format!("--host {other:?}: expected an IP address such as 127.0.0.1 or ::1"))
            })?,
        };
        Ok(FrontDoor {
            listen: SocketAddr::new(ip, self.port),
            allowed_hosts: self.allow_hosts.into_iter().map(|h| h.to_ascii_lowercase()).collect(),
            idle_timeout: std::time::Duration::from_secs(self.client_idle_timeout.max(1)),
        })
    }
}

impl NormalizationArgs {
    fn validate(self) -> Result<Normalization, Error> {
        if let Some(bad) = self.ignore_params.iter().find(|p| !p.starts_with('/')) {
            return Err(Error::Config(format!(
                "--ignore-param {bad:?}: expected a JSON pointer into params, such as /arguments/requestId"
            )));
        }
        Ok(Normalization {
            redact_keys: self.redact_keys,
            ignore_params: self.ignore_params,
            redact_patterns: self.redact_patterns,
            pseudonymize: self.pseudonymize || pseudonymize_variable()?,
        })
    }
}

impl CompareArgs {
    fn validate(self) -> Result<(Vec<String>, FailOn, Format), Error> {
        if let Some(bad) = self.ignore_paths.iter().find(|p| !p.starts_with('/')) {
            return Err(Error::Config(format!(
                "--ignore-path {bad:?}: expected a JSON pointer into the answer, such as /result/_meta"
            )));
        }
        Ok((self.ignore_paths, self.fail_on.into(), self.format.into()))
    }
}
