//! Test fixtures: cassettes written through the store API, a replay server
//! started on port 0, and raw HTTP helpers.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use mcp_tape::cassette::store::Cassette;
use mcp_tape::config::{Front, FrontDoor, OnMiss, ReplayConfig};
use mcp_tape::model::{Direction, Era, RawExchange, RecordedMessage, Status, StreamShape};
use mcp_tape::normalize::Normalization;
use mcp_tape::normalize::Rules;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

/// A directory of cassettes that lives as long as the test.
pub struct Cassettes {
    dir: tempfile::TempDir,
}

impl Cassettes {
    pub fn new() -> Cassettes {
        Cassettes { dir: tempfile::tempdir().unwrap() }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `exchanges` into `NAME.sqlite` through the store's writer.
    pub fn write(&self, name: &str, exchanges: Vec<RawExchange>) -> PathBuf {
        let path = self.dir.path().join(format!("{name}.sqlite"));
        let mut cassette = Cassette::open(&path).unwrap();
        let rules = Rules::default();
        for exchange in exchanges {
            cassette.insert(&rules.exchange(exchange)).unwrap();
        }
        cassette.settle(); // as a recording leaves it
        path
    }
}

/// A recorded exchange: `request` answered by `messages` (all from the
/// server). A stateless-era request carries its envelope, as every real
/// recording of one does.
pub fn exchange(
    server: &str,
    era: Era,
    mut request: Value,
    content_type: &str,
    messages: Vec<Value>,
) -> RawExchange {
    if era == Era::Stateless {
        recorded_with_envelope(&mut request);
    }
    RawExchange {
        server: server.into(),
        era,
        protocol_version: match era {
            Era::Handshake => "2025-06-18".into(),
            Era::Stateless => "2026-07-28".into(),
        },
        request,
        status: Status::OK,
        content_type: content_type.into(),
        messages: messages
            .into_iter()
            .enumerate()
            .map(|(i, body)| RecordedMessage::new(10 * i as u64, Direction::Server, body))
            .collect(),
        asides: Vec::new(),
        stream: StreamShape::default(),
    }
}

/// A recorded handshake-era `tools/call` with a JSON answer of one text block.
pub fn tool_call(server: &str, tool: &str, arguments: Value, text: &str) -> RawExchange {
    exchange(
        server,
        Era::Handshake,
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}),
        "application/json",
        vec![json!({"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": text}]}})],
    )
}

/// A replay server running in this process on 127.0.0.1 port 0.
pub struct Replayer {
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), mcp_tape::error::Error>>,
}

pub struct Options {
    pub on_miss: OnMiss,
    pub pace: mcp_tape::config::Pace,
    pub allowed_hosts: Vec<String>,
    pub normalization: Normalization,
    pub idle_timeout: std::time::Duration,
    /// A rules file (`--rules`).
    pub rules: Option<PathBuf>,
    /// `--fault` specs.
    pub faults: Vec<String>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            on_miss: OnMiss::Error,
            pace: mcp_tape::config::Pace::Instant,
            allowed_hosts: Vec::new(),
            normalization: Normalization::default(),
            idle_timeout: mcp_tape::config::DEFAULT_IDLE_TIMEOUT,
            rules: None,
            faults: Vec::new(),
        }
    }
}

impl Replayer {
    pub async fn start(paths: &[&Path]) -> Replayer {
        Replayer::start_with(paths, Options::default()).await
    }

    pub async fn start_with(paths: &[&Path], options: Options) -> Replayer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let config = ReplayConfig {
            front: Front::Http(FrontDoor {
                listen: addr,
                allowed_hosts: options.allowed_hosts,
                idle_timeout: options.idle_timeout,
            }),
            paths: paths.iter().map(|p| p.to_path_buf()).collect(),
            on_miss: options.on_miss,
            fail_on_miss: false,
            pace: options.pace,
            rules: mcp_tape::config::RuleSources { file: options.rules, faults: options.faults },
            normalization: options.normalization,
            reports: mcp_tape::config::Reports::default(),
            max_age: None,
        };
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(mcp_tape::cmd::replay::http(config, listener, async {
            let _ = stopped.await;
        }));
        Replayer { addr, stop: Some(stop), task }
    }

    /// An empty replay: no cassettes, pure mock.
    pub async fn empty() -> (Cassettes, Replayer) {
        let cassettes = Cassettes::new();
        let replayer = Replayer::start(&[cassettes.path()]).await;
        (cassettes, replayer)
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Stops the server and returns what `replay` returned.
    pub async fn stop(mut self) -> Result<(), mcp_tape::error::Error> {
        let _ = self.stop.take().unwrap().send(());
        (&mut self.task).await.unwrap()
    }
}

/// An HTTP answer, read whole.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub text: String,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.text))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The JSON-RPC messages of an SSE answer, in order.
    pub fn events(&self) -> Vec<Value> {
        assert_eq!(self.header("content-type"), Some("text/event-stream"), "{self:?}");
        self.text
            .split("\n\n")
            .filter(|event| !event.trim().is_empty())
            .map(|event| {
                let data: Vec<&str> = event.lines().filter_map(|l| l.strip_prefix("data: ")).collect();
                serde_json::from_str(&data.join("\n")).unwrap()
            })
            .collect()
    }
}

pub const BOTH: &str = "application/json, text/event-stream";

/// POSTs `body` with JSON content type, `Accept` for both framings, plus `headers`.
pub async fn post(url: &str, headers: &[(&str, &str)], body: &str) -> Reply {
    let mut all = vec![("content-type", "application/json"), ("accept", BOTH)];
    for (name, value) in headers {
        all.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        all.push((name, value));
    }
    raw(reqwest::Method::POST, url, &all, body.to_owned()).await
}

/// Any request with exactly `headers`.
pub async fn raw(method: reqwest::Method, url: &str, headers: &[(&str, &str)], body: String) -> Reply {
    let mut request = reqwest::Client::new().request(method, url).body(body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    Reply { status, headers, text: response.text().await.unwrap() }
}

/// POSTs `body` (JSON, `Accept` for both framings, plus `headers`) and returns
/// the response unread, to read a streamed answer chunk by chunk.
pub async fn open_stream(url: &str, headers: &[(&str, &str)], body: &serde_json::Value) -> reqwest::Response {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", BOTH)
        .body(body.to_string());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.unwrap()
}

/// Opens the standalone (GET) stream of `session` at `url`.
pub async fn get_stream(url: &str, session: &str) -> reqwest::Response {
    let response = reqwest::Client::new()
        .get(url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", session)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "a GET stream opens");
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    response
}

/// The next chunk of a streamed answer, as text.
pub async fn next_chunk(response: &mut reqwest::Response) -> String {
    String::from_utf8(response.chunk().await.unwrap().expect("a chunk before the end").to_vec()).unwrap()
}

/// POSTs a JSON-RPC request `method` with `params` and numeric id 1.
pub async fn call(url: &str, headers: &[(&str, &str)], method: &str, params: Value) -> Reply {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    post(url, headers, &body.to_string()).await
}

/// Initializes a handshake session at `url` and returns its id.
pub async fn initialize(url: &str) -> String {
    let reply = call(
        url,
        &[],
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"}}),
    )
    .await;
    assert_eq!(reply.status, 200, "{reply:?}");
    reply.header("mcp-session-id").expect("initialize opens a session").to_owned()
}

/// Puts the stateless era's envelope into a recorded request's `_meta`.
pub fn recorded_with_envelope(request: &mut Value) {
    let params = request.as_object_mut().unwrap().entry("params").or_insert_with(|| json!({}));
    params["_meta"] = enveloped(json!({}))["_meta"].clone();
}

/// Params carrying the stateless era's envelope, plus `extra`.
pub fn enveloped(extra: Value) -> Value {
    let mut params = json!({"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
    }});
    params.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    params
}

/// A stateless-era request: envelope, and headers that agree with the body.
pub async fn stateless(url: &str, method: &str, extra: Value) -> Reply {
    let params = enveloped(extra);
    let name = params.get("name").or(params.get("uri")).and_then(Value::as_str).map(str::to_owned);
    let mut headers = vec![("mcp-protocol-version", "2026-07-28"), ("mcp-method", method)];
    if let Some(name) = &name {
        headers.push(("mcp-name", name));
    }
    call(url, &headers, method, params).await
}

/// A recorder running in this process on 127.0.0.1 port 0.
pub struct Recorder {
    pub addr: SocketAddr,
    pub cassette: PathBuf,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), mcp_tape::error::Error>>,
}

pub struct RecordOptions {
    pub mode: mcp_tape::config::RecordMode,
    pub timeouts: mcp_tape::config::Timeouts,
    pub upstream_ca: Option<PathBuf>,
    /// `--fault` specs.
    pub faults: Vec<String>,
    /// `--redact-header` names (lowercase).
    pub redact_headers: Vec<String>,
    pub normalization: Normalization,
}

impl Default for RecordOptions {
    fn default() -> RecordOptions {
        let patient = std::time::Duration::from_secs(30);
        RecordOptions {
            mode: mcp_tape::config::RecordMode::All,
            timeouts: mcp_tape::config::Timeouts { connect: patient, response: patient, idle: patient },
            upstream_ca: None,
            faults: Vec::new(),
            redact_headers: Vec::new(),
            normalization: Normalization::default(),
        }
    }
}

impl Recorder {
    pub async fn start(upstream: &str, dir: &Path, options: RecordOptions) -> Recorder {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let cassette = dir.join("recorded.sqlite");
        let config = mcp_tape::config::RecordConfig {
            upstream: mcp_tape::config::Upstream::Http {
                front_door: FrontDoor {
                    listen: addr,
                    allowed_hosts: Vec::new(),
                    idle_timeout: mcp_tape::config::DEFAULT_IDLE_TIMEOUT,
                },
                upstream: mcp_tape::config::HttpUpstream {
                    url: upstream.to_owned(),
                    ca: options.upstream_ca,
                    timeouts: options.timeouts,
                    redact_headers: options.redact_headers,
                    llms: Vec::new(),
                },
            },
            cassette: cassette.clone(),
            mode: options.mode,
            rules: mcp_tape::config::RuleSources { file: None, faults: options.faults },
            normalization: options.normalization,
            reports: mcp_tape::config::Reports::default(),
        };
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(mcp_tape::cmd::record::http(config, listener, async {
            let _ = stopped.await;
        }));
        Recorder { addr, cassette, stop: Some(stop), task }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Stops the recorder (everything finished is committed by then) and
    /// returns the cassette's exchanges.
    pub async fn stop(self) -> Vec<mcp_tape::model::Exchange> {
        let (exchanges, ended) = self.stop_as_it_ends().await;
        ended.unwrap();
        exchanges
    }

    /// Stops the recorder and returns the cassette's exchanges and how the
    /// recording ended (an error when it lacks an answer a client was given).
    pub async fn stop_as_it_ends(
        mut self,
    ) -> (Vec<mcp_tape::model::Exchange>, Result<(), mcp_tape::error::Error>) {
        let _ = self.stop.take().unwrap().send(());
        let ended = (&mut self.task).await.unwrap();
        (Cassette::open(&self.cassette).unwrap().exchanges().unwrap(), ended)
    }
}

/// Reads a process's log `lines` until one holds `wanted`, for at most
/// `patience`; returns what it read, that line included. Panics when the
/// log ends first or time runs out.
pub async fn until_logged<R: tokio::io::AsyncBufRead + Unpin>(
    lines: &mut tokio::io::Lines<R>,
    wanted: &str,
    patience: std::time::Duration,
) -> String {
    let mut log = String::new();
    tokio::time::timeout(patience, async {
        while let Some(line) = lines.next_line().await.unwrap() {
            log.push_str(&line);
            log.push('\n');
            if line.contains(wanted) {
                return;
            }
        }
        panic!("the log ended before {wanted:?}:\n{log}");
    })
    .await
    .unwrap_or_else(|_| panic!("no {wanted:?} in the log in time"));
    log
}

/// The rest of a process's log `lines`, to its end.
pub async fn rest_of_log<R: tokio::io::AsyncBufRead + Unpin>(lines: &mut tokio::io::Lines<R>) -> String {
    let mut log = String::new();
    while let Some(line) = lines.next_line().await.unwrap() {
        log.push_str(&line);
        log.push('\n');
    }
    log
}

/// Resolves once process `pid` has ended (a zombie no one has reaped
/// included), or at once when there is no such process: its pidfd becomes
/// readable then (Linux 5.3), an event rather than a look at `/proc` now
/// and then. The process need not be a child of this one.
pub async fn ended(pid: i32) {
    // SAFETY: pidfd_open takes a pid and flags, and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    let Ok(fd) = i32::try_from(fd) else { return };
    if fd < 0 {
        return; // no such process
    }
    // SAFETY: `fd` was opened just now by this process, and nothing else owns it.
    let owned = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    let interest = tokio::io::Interest::READABLE;
    // SAFETY: the AsyncFd owns the descriptor, which stays open and the same until it is dropped.
    let registered = unsafe { tokio::io::unix::AsyncFd::register_with_interest(owned, interest) };
    let pidfd = registered.map_err(|e| e.to_string()).expect("the pidfd registered with the reactor");
    let _ = pidfd.readable().await.expect("the pidfd polled");
}

/// A FIFO at `path`, for a command to say something through ([`said`]).
pub fn fifo(path: &Path) {
    assert!(std::process::Command::new("mkfifo").arg(path).status().unwrap().success(), "mkfifo {path:?}");
}

/// What a command wrote into the FIFO at `path` (until it closed it):
/// opening the FIFO waits for the writer, reading for its words. On a
/// thread of its own, which a writer that never comes leaves blocked.
pub async fn said(path: &Path) -> String {
    let (tell, told) = oneshot::channel();
    let path = path.to_owned();
    std::thread::spawn(move || {
        let _ = tell.send(std::fs::read_to_string(&path));
    });
    told.await.unwrap().unwrap()
}
