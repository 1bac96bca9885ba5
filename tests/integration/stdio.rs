//! The stdio front door through the real binary over pipes: replay on its
//! own stdin/stdout in both eras, bad lines, server choice; record with a
//! child process: what is stored, what is relayed, secrets from the child's
//! environment, the child's lifetime (normal end, SIGTERM, `kill -9`) and
//! exit status, a child that dies mid-exchange. `mcp-tape replay --stdio`
//! itself is the well-behaved MCP child; shell one-liners misbehave.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use mcp_tape::cassette::store::Cassette;
use mcp_tape::model::{Direction, Era, RawExchange, RecordedMessage, Status, StreamShape};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::watch;

use crate::support::*;

/// Bound on any wait for a process (an answer, an exit, a log line).
const PATIENCE: Duration = Duration::from_secs(30);

const BIN: &str = env!("CARGO_BIN_EXE_mcp-tape");

/// The binary with its stdin and stdout as pipes; stderr collected.
pub(crate) struct Peer {
    child: Child,
    stdin: Option<ChildStdin>,
    /// `None` once a test took it to read on its own.
    pub(crate) stdout: Option<Lines<BufReader<ChildStdout>>>,
    log: watch::Receiver<String>,
}

impl Peer {
    pub(crate) fn spawn(args: &[&str], env: &[(&str, &str)]) -> Peer {
        let mut child = Command::new(BIN)
            .args(args)
            .envs(env.iter().copied())
            .env("MCP_TAPE_LOG", "info")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let (logged, log) = watch::channel(String::new());
        let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
        tokio::spawn(async move {
            while let Ok(Some(line)) = stderr.next_line().await {
                logged.send_modify(|log| {
                    log.push_str(&line);
                    log.push('\n');
                });
            }
        });
        Peer {
            stdin: child.stdin.take(),
            stdout: Some(BufReader::new(child.stdout.take().unwrap()).lines()),
            child,
            log,
        }
    }

    async fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(bytes).await.unwrap();
        stdin.flush().await.unwrap();
    }

    pub(crate) async fn send(&mut self, message: Value) {
        self.send_raw(format!("{message}\n").as_bytes()).await;
    }

    pub(crate) async fn next_line(&mut self) -> String {
        let stdout = self.stdout.as_mut().expect("stdout is read here");
        let line = tokio::time::timeout(PATIENCE, stdout.next_line()).await.expect("no line in time");
        line.unwrap().unwrap_or_else(|| panic!("stdout ended; log:\n{}", self.log.borrow().as_str()))
    }

    pub(crate) async fn next(&mut self) -> Value {
        let line = self.next_line().await;
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }

    /// Sends a request and returns the next message.
    async fn ask(&mut self, id: Value, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).await;
        self.next().await
    }

    /// Closes stdin and waits for the exit; returns it and the whole log.
    pub(crate) async fn close(mut self) -> (ExitStatus, String) {
        drop(self.stdin.take());
        self.wait().await
    }

    pub(crate) async fn wait(mut self) -> (ExitStatus, String) {
        let status =
            tokio::time::timeout(PATIENCE, self.child.wait()).await.expect("no exit in time").unwrap();
        // The log task ends with stderr; give it that long, not longer.
        let _ = tokio::time::timeout(PATIENCE, self.log.wait_for(|_| false)).await;
        (status, self.log.borrow().clone())
    }

    fn pid(&self) -> i32 {
        self.child.id().unwrap() as i32
    }
}

fn handshake(version: &str) -> Value {
    json!({"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "stdio-test", "version": "1"}})
}

/// A cassette with one server, `mcp_Desk`: a recorded tool call that
/// echoes `secret` back, and one that asks the client (elicitation) before
/// answering.
fn desk(cassettes: &Cassettes, secret: &str) -> PathBuf {
    let asking = RawExchange {
        server: "mcp_Desk".into(),
        era: Era::Handshake,
        protocol_version: "2025-06-18".into(),
        request: json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "book", "arguments": {}}}),
        status: Status::OK,
        content_type: "text/event-stream".into(),
        messages: vec![
            RecordedMessage {
                offset_ms: 1,
                direction: Direction::Server,
                body: json!({"jsonrpc": "2.0", "id": 0, "method": "elicitation/create",
                    "params": {"message": "Which room?", "requestedSchema": {"type": "object", "properties": {}}}}),
                written: None,
                shallow: false,
            },
            RecordedMessage {
                offset_ms: 2,
                direction: Direction::Client,
                body: json!({"jsonrpc": "2.0", "id": 0, "result": {"action": "accept", "content": {}}}),
                written: None,
                shallow: false,
            },
            RecordedMessage {
                offset_ms: 3,
                direction: Direction::Server,
                body: json!({"jsonrpc": "2.0", "id": 4, "result": {"content": [{"type": "text", "text": "booked"}]}}),
                written: None,
                shallow: false,
            },
        ],
        asides: Vec::new(),
        stream: StreamShape::default(),
    };
    cassettes
        .write("desk", vec![tool_call("mcp_Desk", "whoami", json!({}), &format!("you are {secret}")), asking])
}

fn text(answer: &Value) -> &str {
    answer["result"]["content"][0]["text"].as_str().unwrap_or_else(|| panic!("no text: {answer}"))
}

#[tokio::test]
async fn replay_over_stdio_answers_both_eras_and_outlives_bad_lines() {
    let cassettes = Cassettes::new();
    desk(&cassettes, "Megan");
    let mut replay = Peer::spawn(&["replay", "--stdio", cassettes.path().to_str().unwrap()], &[]);
    let init = replay.ask(json!(1), "initialize", handshake("2025-06-18")).await;
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18", "{init}");
    replay.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
    let hit = replay.ask(json!("a"), "tools/call", json!({"name": "whoami", "arguments": {}})).await;
    assert_eq!((hit["id"].clone(), text(&hit)), (json!("a"), "you are Megan"));

    replay.send_raw(b"this is not JSON\n").await;
    let garbled = replay.next().await;
    assert_eq!((garbled["id"].clone(), garbled["error"]["code"].clone()), (Value::Null, json!(-32700)));
    let mut huge = vec![b'x'; 5 * 1024 * 1024];
    huge.push(b'\n');
    replay.send_raw(&huge).await;
    let refused = replay.next().await;
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("longer than 4194304 bytes"), "{refused}");
    let unknown = replay.ask(json!(7), "tools/call", json!({"name": "nope"})).await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");

    let discover = replay.ask(json!(8), "server/discover", enveloped(json!({}))).await;
    assert_eq!(discover["result"]["supportedVersions"], json!(["2026-07-28"]), "{discover}");
    let stateless =
        replay.ask(json!(9), "tools/call", enveloped(json!({"name": "whoami", "arguments": {}}))).await;
    assert_eq!(
        (text(&stateless), stateless["result"]["resultType"].clone()),
        ("you are Megan", json!("complete"))
    );
    let bare = replay
        .ask(
            json!(10),
            "tools/list",
            json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2099-01-01"}}),
        )
        .await;
    assert_eq!(bare["error"]["code"], -32022, "an unserved version, told from the envelope: {bare}");

    let (status, log) = replay.close().await;
    assert!(status.success(), "{status}: {log}");
    assert!(log.contains("replay on stdio as server mcp_Desk"), "the only server is the default: {log}");
}

#[tokio::test]
async fn replay_over_stdio_reenacts_a_server_request_and_waits_for_the_reply() {
    let cassettes = Cassettes::new();
    desk(&cassettes, "Megan");
    let mut replay = Peer::spawn(&["replay", "--stdio", cassettes.path().to_str().unwrap()], &[]);
    replay.ask(json!(1), "initialize", handshake("2025-06-18")).await;
    let asked = replay.ask(json!(2), "tools/call", json!({"name": "book", "arguments": {}})).await;
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    replay
        .send(json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {}}}))
        .await;
    let answer = replay.next().await;
    assert_eq!((answer["id"].clone(), text(&answer)), (json!(2), "booked"));
    assert!(replay.close().await.0.success());
}

#[tokio::test]
async fn replay_over_stdio_needs_a_server_chosen_among_several() {
    let cassettes = Cassettes::new();
    desk(&cassettes, "Megan");
    cassettes.write("other", vec![tool_call("mcp_Other", "t", json!({}), "x")]);
    let (status, log) =
        Peer::spawn(&["replay", "--stdio", cassettes.path().to_str().unwrap()], &[]).close().await;
    assert_eq!(status.code(), Some(2), "{log}");
    assert!(log.contains("2 servers (mcp_Desk, mcp_Other); choose one with --server"), "{log}");
    let mut chosen =
        Peer::spawn(&["replay", "--stdio", cassettes.path().to_str().unwrap(), "--server", "mcp_Other"], &[]);
    chosen.ask(json!(1), "initialize", handshake("2025-11-25")).await;
    assert_eq!(text(&chosen.ask(json!(2), "tools/call", json!({"name": "t", "arguments": {}})).await), "x");
    assert!(chosen.close().await.0.success());
}

/// `mcp-tape record --stdio` into `into/NAME.sqlite` of `command`.
fn record(into: &Path, name: &str, server: &[&str], command: &[&str], env: &[(&str, &str)]) -> Peer {
    let mut args = vec!["record", "--stdio", "--cassettes", into.to_str().unwrap(), "--name", name];
    args.extend(server.iter().copied().chain(["--"]).chain(command.iter().copied()));
    Peer::spawn(&args, env)
}

/// `mcp-tape record --stdio` of `mcp-tape replay --stdio` over the desk.
fn record_desk(desk: &Path, into: &Path, env: &[(&str, &str)]) -> Peer {
    let command = [BIN, "replay", "--stdio", desk.to_str().unwrap()];
    record(into, "recorded", &["--server", "mcp_Desk"], &command, env)
}

fn every_byte_under(dir: &Path) -> Vec<u8> {
    let mut bytes = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        bytes.extend(std::fs::read(entry.unwrap().path()).unwrap());
    }
    bytes
}

#[tokio::test]
async fn record_over_stdio_stores_each_exchange_without_the_childs_secrets_and_replays_it_over_http() {
    const SECRET: &str = "tok-7c1e5b0d9a2f";
    let upstream = Cassettes::new();
    let desk = desk(&upstream, SECRET);
    let recorded = tempfile::tempdir().unwrap();
    let mut record = record_desk(&desk, recorded.path(), &[("DESK_API_TOKEN", SECRET)]);
    let init = record.ask(json!(1), "initialize", handshake("2025-06-18")).await;
    assert_eq!(init["result"]["serverInfo"]["name"], "mcp-tape", "the child's answer: {init}");
    record.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
    let whoami = record.ask(json!(2), "tools/call", json!({"name": "whoami", "arguments": {}})).await;
    assert_eq!(text(&whoami), format!("you are {SECRET}"), "relayed unchanged to the client");
    let asked = record.ask(json!(3), "tools/call", json!({"name": "book", "arguments": {}})).await;
    assert_eq!(asked["method"], "elicitation/create");
    record
        .send(json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {}}}))
        .await;
    assert_eq!(text(&record.next().await), "booked");
    let (status, log) = record.close().await;
    assert!(status.success(), "{status}: {log}");
    assert!(log.contains("recorded 3 exchanges (mcp_Desk 3)"), "{log}");

    let bytes = every_byte_under(recorded.path());
    assert!(
        !bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()),
        "the child's token reached the cassette"
    );
    let exchanges = Cassette::open(&recorded.path().join("recorded.sqlite")).unwrap().exchanges().unwrap();
    let book = exchanges.iter().find(|e| e.request["params"]["name"] == "book").unwrap();
    let directions: Vec<Direction> = book.messages.iter().map(|m| m.direction).collect();
    assert_eq!(
        directions,
        [Direction::Server, Direction::Client, Direction::Server],
        "the client's reply joins"
    );
    assert_eq!(book.content_type, "text/event-stream");

    let replay = Replayer::start(&[recorded.path()]).await;
    let url = replay.url("/agents/servers/mcp_Desk");
    let session = crate::support::initialize(&url).await;
    let headers = [("mcp-session-id", session.as_str())];
    let answer = call(&url, &headers, "tools/call", json!({"name": "whoami", "arguments": {}})).await;
    assert_eq!(text(&answer.json()), "you are [REDACTED]", "a stdio recording replays over HTTP");
    replay.stop().await.unwrap();
}

/// A shell one-liner as the stdio server.
fn record_shell(script: &str, into: &Path) -> Peer {
    record(into, "shell", &[], &["sh", "-c", script], &[])
}

fn stored(into: &Path) -> usize {
    Cassette::open(&into.join("shell.sqlite")).unwrap().exchanges().unwrap().len()
}

#[tokio::test]
async fn a_child_that_dies_mid_exchange_stores_nothing_and_its_status_is_record_s() {
    let into = tempfile::tempdir().unwrap();
    let progress =
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}"#;
    let mut record = record_shell(&format!("read line; echo '{progress}'; exit 3"), into.path());
    let seen =
        record.ask(json!(5), "tools/call", json!({"name": "slow", "_meta": {"progressToken": 1}})).await;
    assert_eq!(seen["method"], "notifications/progress", "relayed as it arrived");
    let (status, log) = record.wait().await;
    assert_eq!(status.code(), Some(3), "{log}");
    assert!(log.contains("closed its output before the answer; not stored"), "{log}");
    assert_eq!(stored(into.path()), 0, "nothing partial is stored");
}

#[tokio::test]
async fn text_a_child_writes_that_is_not_json_rpc_is_relayed_and_not_stored() {
    let into = tempfile::tempdir().unwrap();
    let answer = r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}"#;
    let mut record = record_shell(
        &format!("echo 'starting up...'; read line; echo '{answer}'; cat >/dev/null"),
        into.path(),
    );
    assert_eq!(record.next_line().await, "starting up...");
    let listed = record.ask(json!(1), "tools/list", json!({})).await;
    assert_eq!(listed["result"]["tools"], json!([]));
    let (status, log) = record.close().await;
    assert!(status.success(), "{log}");
    assert!(log.contains("not JSON-RPC; relayed, not stored: starting up..."), "{log}");
    assert_eq!(stored(into.path()), 1);
}

/// Whether process `pid` is gone (or a zombie no one has reaped yet).
fn gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

/// Waits (bounded) until `pid` has ended.
async fn until_gone(pid: i32) {
    tokio::time::timeout(PATIENCE, ended(pid))
        .await
        .unwrap_or_else(|_| panic!("process {pid} outlived mcp-tape"));
}

/// The pid a shell child announces on stderr (which is record's), as a
/// line `child pid N`.
async fn child_pid(record: &mut Peer) -> i32 {
    let announced =
        |line: &str| line.strip_prefix("child pid ").and_then(|pid| pid.trim().parse::<i32>().ok());
    let waited = tokio::time::timeout(
        PATIENCE,
        record.log.wait_for(|log| log.lines().any(|l| announced(l).is_some())),
    );
    assert!(matches!(waited.await, Ok(Ok(_))), "no pid announced:\n{}", record.log.borrow().as_str());
    record.log.borrow().lines().find_map(announced).unwrap()
}

#[tokio::test]
async fn the_child_never_outlives_record() {
    // Ignores its stdin closing, and SIGTERM too: only SIGKILL ends it.
    let stubborn = "trap '' TERM; echo child pid $$ >&2; while :; do sleep 1; done";
    let into = tempfile::tempdir().unwrap();

    let mut ended = record_shell(stubborn, into.path());
    let pid = child_pid(&mut ended).await;
    let (status, log) = ended.close().await;
    assert!(gone(pid), "stdin closed, then TERM, then KILL: {log}");
    assert_eq!(status.code(), Some(128 + 9), "the child's end (SIGKILL) is record's status: {log}");
    assert!(log.contains("ignored SIGTERM"), "{log}");

    let mut terminated = record_shell("echo child pid $$ >&2; exec sleep 600", into.path());
    let pid = child_pid(&mut terminated).await;
    let record_pid = terminated.pid();
    std::process::Command::new("kill").args(["-TERM", &record_pid.to_string()]).status().unwrap();
    let (status, log) = terminated.wait().await;
    assert!(gone(pid), "{log}");
    assert_eq!(status.code(), Some(128 + 15), "sleep ends on SIGTERM: {log}");

    let mut killed = record_shell("echo child pid $$ >&2; exec sleep 600", into.path());
    let pid = child_pid(&mut killed).await;
    std::process::Command::new("kill").args(["-KILL", &killed.pid().to_string()]).status().unwrap();
    until_gone(pid).await;
}

#[tokio::test]
async fn completed_exchanges_survive_kill_9_of_record() {
    let upstream = Cassettes::new();
    let desk = desk(&upstream, "Megan");
    let recorded = tempfile::tempdir().unwrap();
    let mut record = record_desk(&desk, recorded.path(), &[]);
    record.ask(json!(0), "initialize", handshake("2025-06-18")).await;
    for n in 1..=20 {
        assert_eq!(
            text(&record.ask(json!(n), "tools/call", json!({"name": "whoami", "arguments": {}})).await),
            "you are Megan"
        );
    }
    std::process::Command::new("kill").args(["-KILL", &record.pid().to_string()]).status().unwrap();
    let (status, _) = record.wait().await;
    assert_eq!(status.code(), None, "killed");
    let exchanges = Cassette::open(&recorded.path().join("recorded.sqlite")).unwrap().exchanges().unwrap();
    assert_eq!(exchanges.len(), 21, "every answer a client saw is in the cassette");
}

/// Record's serve loop once wrote the child's output only between client
/// lines: with the child writing before it reads and the client writing
/// faster than the child reads, the loop waited to forward a line while the
/// child waited for its output to be taken, and neither moved.
#[tokio::test]
async fn a_chatty_child_and_a_busy_client_do_not_deadlock_record() {
    const CHILD_LINES: usize = 20_000;
    let into = tempfile::tempdir().unwrap();
    let note = r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}"#;
    let script = format!("yes '{note}' | head -n {CHILD_LINES}; cat >/dev/null");
    let mut record = record_shell(&script, into.path());
    let mut stdout = record.stdout.take().unwrap();
    let reader = tokio::spawn(async move {
        let mut seen = 0;
        while seen < CHILD_LINES && stdout.next_line().await.unwrap().is_some() {
            seen += 1;
        }
        seen
    });
    let padding = "p".repeat(1000);
    let line = format!(
        "{}\n",
        json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"note": padding}})
    );
    let both = async {
        for _ in 0..2000 {
            record.send_raw(line.as_bytes()).await;
        }
        reader.await.unwrap()
    };
    let seen = tokio::time::timeout(PATIENCE, both).await.expect("record stopped moving");
    assert_eq!(seen, CHILD_LINES);
    let (status, log) = record.close().await;
    assert!(status.success(), "{log}");
}

/// `replay --stdio 2>&1` read by a slow reader, as many runners capture a
/// command's output: stdout is driven non-blocking, and with stderr the
/// same file the log writer met a full buffer as an error and dropped the
/// rest of its batch mid-line (the next answer then went on that line),
/// and a log piece and an answer written in parts split each other. Now
/// every answer and every log line arrives whole. The output is a socket
/// with small buffers (a pipe would be widened to 1 MiB), so that it is
/// full most of the time.
#[tokio::test]
async fn replay_over_stdio_with_stderr_on_stdout_loses_no_line_under_load() {
    use std::io::Read;
    use std::os::fd::AsRawFd;
    const REQUESTS: usize = 1000;
    let cassettes = Cassettes::new();
    desk(&cassettes, "Megan");
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    for (socket, option) in [(&theirs, libc::SO_SNDBUF), (&ours, libc::SO_RCVBUF)] {
        let size: libc::c_int = 8192;
        // SAFETY: setsockopt on a socket of ours, from a c_int of ours.
        let set = unsafe {
            libc::setsockopt(
                socket.as_raw_fd(),
                libc::SOL_SOCKET,
                option,
                (&raw const size).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        assert_eq!(set, 0);
    }
    let command = format!("exec {BIN} replay --stdio {} 2>&1", cassettes.path().display());
    let mut child = Command::new("sh")
        .args(["-c", &command])
        .stdin(Stdio::piped())
        .stdout(std::os::fd::OwnedFd::from(theirs))
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let feeding = tokio::spawn(async move {
        for n in 0..REQUESTS {
            let ask = json!({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                "params": {"name": "whoami", "arguments": {"who": format!("caller {n} {}", "x".repeat(400))}}});
            stdin.write_all(format!("{ask}\n").as_bytes()).await.unwrap();
        }
    });
    // A slow reader: 2 KiB at a time, 5 ms apart, on a thread of its own.
    let reading = std::thread::spawn(move || {
        let mut ours = ours;
        let (mut output, mut chunk) = (Vec::new(), vec![0; 2048]);
        loop {
            match ours.read(&mut chunk).unwrap() {
                0 => return output,
                n => output.extend_from_slice(&chunk[..n]),
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    });
    feeding.await.unwrap();
    let status = tokio::time::timeout(PATIENCE, child.wait()).await.expect("an exit in time").unwrap();
    assert!(status.success());
    let output = String::from_utf8(reading.join().unwrap()).unwrap();
    let mut answered = Vec::new();
    let mut missed = 0;
    for line in output.lines() {
        if line.starts_with('{') {
            let answer: Value =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("a split answer ({e}): {line}"));
            answered.push(answer["id"].as_u64().unwrap());
        } else {
            assert!(line.starts_with("20") && line.as_bytes()[10] == b'T', "a split log line: {line}");
            missed += usize::from(line.contains(" WARN mcp-tape: no recorded answer for mcp_Desk"));
        }
    }
    assert_eq!(answered, (0..REQUESTS as u64).collect::<Vec<_>>(), "every answer, in order");
    assert_eq!(missed, REQUESTS, "every miss's log line");
}
