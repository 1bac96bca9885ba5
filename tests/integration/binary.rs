//! The real `mcp-tape` binary: its help, its exit codes on unusable input,
//! clean shutdown on SIGINT/SIGTERM with the miss summary, and the JSON
//! Lines import/export round trip.

use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::support::*;

/// Bound on any wait for the daemon (start-up, shutdown).
const PATIENCE: Duration = Duration::from_secs(30);

const BIN: &str = env!("CARGO_BIN_EXE_mcp-tape");

fn run(args: &[&str]) -> std::process::Output {
    std::process::Command::new(BIN).args(args).output().unwrap()
}

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The binary serving replay on a free port.
pub(crate) struct Daemon {
    child: Child,
    pub url: String,
    log: tokio::task::JoinHandle<String>,
}

impl Daemon {
    pub async fn start(args: &[&str]) -> Daemon {
        let mut command = Command::new(BIN);
        command.args(["replay", "--port", "0"]).args(args);
        Daemon::spawn(command).await
    }

    /// The binary run with `args`, which must make it listen.
    pub async fn run(args: &[&str]) -> Daemon {
        let mut command = Command::new(BIN);
        command.args(args);
        Daemon::spawn(command).await
    }

    /// The binary run with `args` and the variables `env`, which must make
    /// it listen.
    pub async fn run_with(args: &[&str], env: &[(&str, &str)]) -> Daemon {
        let mut command = Command::new(BIN);
        command.args(args).envs(env.iter().copied());
        Daemon::spawn(command).await
    }

    /// The binary recording `upstream` into `cassettes` on a free port.
    pub async fn record(upstream: &str, cassettes: &std::path::Path) -> Daemon {
        let mut command = Command::new(BIN);
        command.args(["record", "--port", "0", "--upstream", upstream, "--cassettes"]).arg(cassettes);
        Daemon::spawn(command).await
    }

    /// Runs `command`, which must end up as a listening `mcp-tape`.
    async fn spawn(mut command: Command) -> Daemon {
        let mut child = command.stderr(Stdio::piped()).kill_on_drop(true).spawn().unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let mut seen = String::new();
        let url = tokio::time::timeout(PATIENCE, async {
            while let Some(line) = lines.next_line().await.unwrap() {
                seen.push_str(&line);
                seen.push('\n');
                if let Some(at) = line.find("listening on http://") {
                    let rest = &line[at + "listening on ".len()..];
                    return rest.split([',', ' ']).next().unwrap_or_default().to_owned();
                }
            }
            panic!("the daemon exited before listening:\n{seen}");
        })
        .await
        .expect("the daemon did not start listening in time");
        let log = tokio::spawn(async move {
            let mut rest = seen;
            while let Ok(Some(line)) = lines.next_line().await {
                rest.push_str(&line);
                rest.push('\n');
            }
            rest
        });
        Daemon { child, url, log }
    }

    /// The daemon's process id.
    pub fn pid(&self) -> u32 {
        self.child.id().unwrap()
    }

    /// Sends `signal` (a name, as `kill` takes it: `TERM`, `STOP`).
    pub fn signal(&self, signal: &str) {
        let pid = self.child.id().unwrap().to_string();
        let sent = std::process::Command::new("kill").args([&format!("-{signal}"), &pid]).status().unwrap();
        assert!(sent.success());
    }

    /// Waits until a `STOP` has stopped every thread of the daemon (its
    /// stop is reported to its parent), leaving the report for `wait`.
    pub fn until_stopped(&self) {
        let pid = libc::id_t::try_from(self.child.id().unwrap()).unwrap();
        // SAFETY: an all-zero siginfo_t is a valid one for waitid to fill.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid fills `info`, which lives through the call.
        let waited = unsafe { libc::waitid(libc::P_PID, pid, &raw mut info, libc::WSTOPPED | libc::WNOWAIT) };
        assert_eq!(waited, 0, "{}", std::io::Error::last_os_error());
    }

    /// Sends `signal` and returns the exit status and everything it logged.
    pub async fn stop(mut self, signal: &str) -> (ExitStatus, String) {
        self.signal(signal);
        let status =
            tokio::time::timeout(PATIENCE, self.child.wait()).await.expect("no exit in time").unwrap();
        (status, self.log.await.unwrap())
    }
}

#[test]
fn help_reads_like_a_manual() {
    let top = run(&["--help"]);
    assert!(top.status.success());
    let text = String::from_utf8_lossy(&top.stdout);
    for word in ["replay", "record", "import", "export", "Streamable HTTP"] {
        assert!(text.contains(word), "--help lacks {word}:\n{text}");
    }
    let replay = String::from_utf8_lossy(&run(&["replay", "--help"]).stdout).into_owned();
    for word in [
        "--on-miss",
        "--port",
        "5309",
        "--host",
        "127.0.0.1",
        "--ignore-param",
        "/agents/servers/{name}",
        "SIGTERM",
    ] {
        assert!(replay.contains(word), "replay --help lacks {word}:\n{replay}");
    }
    let record = String::from_utf8_lossy(&run(&["record", "--help"]).stdout).into_owned();
    for word in ["--upstream", "--cassettes", "--name", "--host", "--port"] {
        assert!(record.contains(word), "record --help lacks {word}:\n{record}");
    }
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(run(&["replay", "--port", "many"]).status.code(), Some(2));
    let bad_host = run(&["replay", "--host", "example.com"]);
    assert_eq!(bad_host.status.code(), Some(2));
    assert!(stderr(&bad_host).contains("--host"), "{}", stderr(&bad_host));
}

#[test]
fn unusable_cassettes_stop_start_up_with_a_clear_message() {
    let cassettes = Cassettes::new();
    let dir = cassettes.path();
    let not_sqlite = dir.join("notes.sqlite");
    std::fs::write(&not_sqlite, "meeting notes, not a cassette").unwrap();
    let output = run(&["replay", not_sqlite.to_str().unwrap(), "--port", "0"]);
    assert_eq!(output.status.code(), Some(1));
    let message = stderr(&output);
    assert!(message.contains("notes.sqlite") && message.contains("not an SQLite database"), "{message}");
    assert_eq!(std::fs::read(&not_sqlite).unwrap(), b"meeting notes, not a cassette", "left untouched");

    let damaged = dir.join("damaged.sqlite");
    let mut bytes = b"SQLite format 3\0".to_vec();
    bytes.extend(std::iter::repeat_n(0xA5u8, 4096));
    std::fs::write(&damaged, &bytes).unwrap();
    let output = run(&["replay", damaged.to_str().unwrap(), "--port", "0"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("damaged.sqlite"), "{}", stderr(&output));

    let output = run(&["replay", dir.join("missing").to_str().unwrap(), "--port", "0"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("cannot read"), "{}", stderr(&output));
}

/// An exchange with no answer loaded silently, and replay over stdio then
/// wrote nothing while the client waited for ever; JSON Lines import made
/// such exchanges.
#[test]
fn an_exchange_without_an_answer_is_refused_at_load_and_at_import() {
    let cassettes = Cassettes::new();
    let mut answerless = tool_call("mcp_Mail", "Send", json!({}), "sent");
    answerless.messages.clear();
    let path = cassettes.write("answerless", vec![answerless]);
    let output = run(&["export", path.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let said = stderr(&output);
    assert!(said.contains("answerless.sqlite") && said.contains("holds no answer"), "{said}");

    let lines = cassettes.path().join("answerless.jsonl");
    std::fs::write(&lines, r#"{"server":"s","era":"handshake","protocolVersion":"2025-06-18","request":{"jsonrpc":"2.0","id":1,"method":"ping"},"status":200,"contentType":"application/json","messages":[]}"#).unwrap();
    let imported = cassettes.path().join("imported.sqlite");
    let output = run(&["import", lines.to_str().unwrap(), "--cassette", imported.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("line 1: \"messages\" is empty"), "{}", stderr(&output));
}

/// Request lines follow `MCP_TAPE_LOG`, by level and by target.
#[tokio::test]
async fn request_lines_follow_the_log_filter() {
    let cassettes = Cassettes::new();
    cassettes.write("mail", vec![tool_call("mcp_MailTools", "GetMessage", json!({"id": "1"}), "hello")]);
    let filters = [
        (None, true),
        (Some("warn"), false),
        (Some("info,mcp_tape::transport::http=warn"), false),
        (Some("warn,mcp_tape::transport::http=info"), true),
    ];
    for (filter, shown) in filters {
        let mut command = Command::new(BIN);
        command.args(["replay", "--port", "0", cassettes.path().to_str().unwrap()]);
        match filter {
            Some(filter) => command.env("MCP_TAPE_LOG", filter),
            None => command.env_remove("MCP_TAPE_LOG"),
        };
        let daemon = Daemon::spawn(command).await;
        let url = format!("{}/agents/servers/mcp_MailTools", daemon.url);
        let hit =
            call(&url, &[], "tools/call", json!({"name": "GetMessage", "arguments": {"id": "1"}})).await;
        assert_eq!(hit.json()["result"]["content"][0]["text"], "hello");
        let (status, log) = daemon.stop("TERM").await;
        assert!(status.success(), "{status:?}\n{log}");
        let line = "POST server=mcp_MailTools method=tools/call tool=GetMessage hit status=200";
        assert_eq!(log.contains(line), shown, "MCP_TAPE_LOG={filter:?}:\n{log}");
    }
}

/// A stderr pipe is widened to take a busy daemon's batch of log lines in one
/// write (the default pipe holds 64 KiB).
#[cfg(target_os = "linux")]
#[test]
fn a_stderr_pipe_takes_a_batch_of_log_lines_at_once() {
    use std::io::BufRead;
    use std::os::fd::AsRawFd;
    let cassettes = Cassettes::new();
    let mut daemon = std::process::Command::new(BIN)
        .args(["replay", "--port", "0", cassettes.path().to_str().unwrap()])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = daemon.stderr.take().unwrap();
    let pipe = stderr.as_raw_fd();
    let mut lines = std::io::BufReader::new(stderr).lines();
    assert!(lines.any(|line| line.unwrap().contains("listening on http://")), "the daemon did not start");
    // SAFETY: `pipe` is open (`lines` holds it); F_GETPIPE_SZ only reads the pipe's room.
    let room = unsafe { libc::fcntl(pipe, libc::F_GETPIPE_SZ) };
    daemon.kill().unwrap();
    daemon.wait().unwrap();
    assert!(room >= 1 << 20, "the pipe holds {room} bytes");
}

#[tokio::test]
async fn sigterm_stops_cleanly_with_a_summary_of_misses() {
    let cassettes = Cassettes::new();
    cassettes.write("mail", vec![tool_call("mcp_MailTools", "GetMessage", json!({"id": "1"}), "hello")]);
    let daemon = Daemon::start(&[cassettes.path().to_str().unwrap()]).await;
    let url = format!("{}/agents/servers/mcp_MailTools", daemon.url);
    let hit = call(&url, &[], "tools/call", json!({"name": "GetMessage", "arguments": {"id": "1"}})).await;
    assert_eq!(hit.json()["result"]["content"][0]["text"], "hello");
    for id in ["2", "3"] {
        let miss =
            call(&url, &[], "tools/call", json!({"name": "GetMessage", "arguments": {"id": id}})).await;
        let result = &miss.json()["result"];
        assert_eq!(result["isError"], true, "a listed tool's miss is a failed call: {}", miss.text);
        let text = result["content"][0]["text"].as_str().unwrap();
        assert!(text.contains(&format!(r#"/arguments/id (recorded "1", requested "{id}")"#)), "{text}");
    }
    let (status, log) = daemon.stop("TERM").await;
    assert!(status.success(), "{status:?}\n{log}");
    assert!(
        log.contains("POST server=mcp_MailTools method=tools/call tool=GetMessage hit status=200"),
        "{log}"
    );
    assert!(log.contains("method=tools/call tool=GetMessage miss status=200"), "{log}");
    assert!(log.contains("nearest recording differs at /arguments/id"), "{log}");
    assert!(log.contains("2 misses: mcp_MailTools tools/call GetMessage ×2"), "{log}");
}

/// A stop signal while the cassettes load ends the load: here a cassette
/// another process holds locked, which the load waits 5 s for and then
/// fails to read (before, the signal waited for that: exit 1, "locked").
#[tokio::test]
async fn a_stop_signal_ends_a_load() {
    let cassettes = Cassettes::new();
    let path =
        cassettes.write("mail", vec![tool_call("mcp_MailTools", "GetMessage", json!({"id": "1"}), "hi")]);
    let holder = rusqlite::Connection::open(&path).unwrap();
    holder.pragma_update(None, "journal_mode", "DELETE").unwrap();
    holder.execute_batch("BEGIN EXCLUSIVE; UPDATE exchange SET status = status;").unwrap();
    let mut child = Command::new(BIN)
        .args(["replay", "--port", "0", path.to_str().unwrap()])
        .env("MCP_TAPE_LOG", "debug")
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut log = until_logged(&mut lines, "loading rules and cassettes", PATIENCE).await;
    let pid = child.id().unwrap().to_string();
    assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let status = tokio::time::timeout(PATIENCE, child.wait()).await.expect("no exit in time").unwrap();
    log.push_str(&rest_of_log(&mut lines).await);
    assert!(status.success(), "{status:?}\n{log}");
    assert!(log.contains("stopped while loading: nothing served"), "{log}");
    assert!(!log.contains("listening on") && !log.contains("locked"), "{log}");
    drop(holder);
}

#[tokio::test]
async fn replay_writes_its_junit_and_usage_reports_at_shutdown() {
    let cassettes = Cassettes::new();
    cassettes.write(
        "mail",
        vec![
            tool_call("mcp_MailTools", "GetMessage", json!({"id": "1"}), "hello"),
            tool_call("mcp_MailTools", "SendMail", json!({"to": "a"}), "sent"),
        ],
    );
    let junit = cassettes.path().join("out.xml");
    let usage = cassettes.path().join("usage.json");
    let args = [
        cassettes.path().to_str().unwrap(),
        "--junit",
        junit.to_str().unwrap(),
        "--report",
        usage.to_str().unwrap(),
    ];
    let daemon = Daemon::start(&args).await;
    let url = format!("{}/agents/servers/mcp_MailTools", daemon.url);
    for id in ["1", "2"] {
        call(&url, &[], "tools/call", json!({"name": "GetMessage", "arguments": {"id": id}})).await;
    }
    let (status, log) = daemon.stop("TERM").await;
    assert!(status.success(), "{log}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains(r#"<testsuite name="mcp_MailTools" tests="2" failures="1" errors="0" skipped="1""#),
        "{xml}"
    );
    assert!(xml.contains("/arguments/id: recorded &quot;1&quot;, requested &quot;2&quot;"), "{xml}");
    assert!(xml.contains(r#"name="unused recording: tools/call SendMail""#), "{xml}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&usage).unwrap()).unwrap();
    assert_eq!(report["passed"], false, "a miss: not a passing run");
    assert_eq!(report["cases"][0]["hits"], 1);
    assert_eq!(report["cases"][0]["misses"], 1);
    assert_eq!(report["unused"][0]["subject"], "SendMail");
}

#[tokio::test]
async fn fail_on_miss_makes_the_exit_status_say_so() {
    let cassettes = Cassettes::new();
    cassettes.write("mail", vec![tool_call("mcp_MailTools", "GetMessage", json!({"id": "1"}), "hello")]);
    let daemon = Daemon::start(&[cassettes.path().to_str().unwrap(), "--fail-on-miss"]).await;
    let url = format!("{}/agents/servers/mcp_MailTools", daemon.url);
    let miss = call(&url, &[], "tools/call", json!({"name": "GetMessage", "arguments": {"id": "7"}})).await;
    assert_eq!(miss.json()["result"]["isError"], true, "{}", miss.text);
    let (status, log) = daemon.stop("TERM").await;
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(log.contains("1 requests missed the recordings (--fail-on-miss)"), "{log}");
}

/// A method name with a newline and a terminal escape once wrote a forged
/// log line (and repainted the terminal): every logged value is escaped.
#[tokio::test]
async fn network_input_cannot_forge_log_lines() {
    let dir = tempfile::tempdir().unwrap();
    let cassette = dir.path().join("forge.sqlite");
    let mut store = mcp_tape::cassette::store::Cassette::open(&cassette).unwrap();
    let recorded = tool_call("mcp_Forge", "known", json!({"a": 1}), "x");
    store.insert(&mcp_tape::normalize::Rules::default().exchange(recorded)).unwrap();
    drop(store);
    let daemon = Daemon::start(&[dir.path().to_str().unwrap()]).await;
    let forged = r"tools/list\n2026-01-01T00:00:00Z  INFO forged line \u001b[31mred";
    let body = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"{forged}"}}"#);
    post(&format!("{}/agents/servers/mcp_Forge", daemon.url), &[], &body).await;
    let miss = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "known", "arguments": {"a\nINFO forged too": 2}}});
    post(&format!("{}/agents/servers/mcp_Forge", daemon.url), &[], &miss.to_string()).await;
    let (_, log) = daemon.stop("TERM").await;
    assert!(log.contains("\\n2026-01-01"), "the newline is shown escaped:\n{log}");
    assert!(!log.contains('\u{1b}'), "no terminal escape reaches the log:\n{log}");
    for line in log.lines() {
        assert!(
            !line.contains("forged") || line.contains("method=") || line.contains("no recorded answer"),
            "{line}"
        );
        assert!(
            !line.trim_start().starts_with("2026-01-01T00:00:00Z") && !line.starts_with("INFO forged"),
            "{line}"
        );
    }
}

/// Replay once opened cassettes read-write (to migrate them), so a
/// read-only checkout or a `:ro` container mount could not be replayed.
/// Here the cassette directory is a read-only bind mount in a mount
/// namespace of the daemon's own (`unshare -m`, as root).
#[tokio::test]
async fn cassettes_on_a_read_only_mount_are_served() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = mcp_tape::cassette::store::Cassette::open(&dir.path().join("ro.sqlite")).unwrap();
    let recorded = tool_call("mcp_ReadOnly", "GetRooms", json!({}), "Room 4.12");
    store.insert(&mcp_tape::normalize::Rules::default().exchange(recorded)).unwrap();
    drop(store);
    let mount = dir.path().to_str().unwrap();
    let mut command = Command::new("unshare");
    let script = r#"mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && touch "$1/probe" 2>/dev/null && exit 3; exec "$2" replay "$1" --port 0"#;
    command.args(["-m", "sh", "-c", script, "sh", mount, BIN]);
    let daemon = Daemon::spawn(command).await;
    let reply = call(
        &format!("{}/agents/servers/mcp_ReadOnly", daemon.url),
        &[],
        "tools/call",
        json!({"name": "GetRooms", "arguments": {}}),
    )
    .await;
    assert_eq!(reply.json()["result"]["content"][0]["text"], "Room 4.12", "{reply:?}");
    let (status, log) = daemon.stop("TERM").await;
    assert!(status.success(), "{log}");
}

/// With info lines hidden, `--port 0` once never told which port it chose;
/// SIGHUP and SIGQUIT once ended the daemon without its summary.
#[tokio::test]
async fn readiness_is_announced_at_any_log_level_and_every_stop_signal_is_clean() {
    let cassettes = Cassettes::new();
    for signal in ["HUP", "QUIT"] {
        let mut command = Command::new(BIN);
        command.env("MCP_TAPE_LOG", "warn").args([
            "replay",
            "--port",
            "0",
            cassettes.path().to_str().unwrap(),
        ]);
        let daemon = Daemon::spawn(command).await;
        assert!(
            post(&format!("{}/mcp", daemon.url), &[], r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
                .await
                .status
                == 200
        );
        let (status, _) = daemon.stop(signal).await;
        assert!(status.success(), "SIG{signal}: {status:?}");
    }
    let daemon = Daemon::start(&[cassettes.path().to_str().unwrap()]).await;
    let (status, log) = daemon.stop("HUP").await;
    assert!(
        status.success() && log.contains("SIGHUP: shutting down") && log.contains("stopped; no misses"),
        "{log}"
    );
    // Serving nothing recorded is said at start: every request gets the mock's answer.
    assert!(
        log.contains("replay: no recordings under") && log.contains("every request gets the mock's answer"),
        "{log}"
    );
}

/// Requests hyper refuses before they reach the router (malformed, head
/// too large) once left no log line at all.
#[tokio::test]
async fn requests_refused_by_the_http_layer_are_logged() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let cassettes = Cassettes::new();
    let daemon = Daemon::start(&[cassettes.path().to_str().unwrap()]).await;
    let address = daemon.url.trim_start_matches("http://").to_owned();
    let mut peer = tokio::net::TcpStream::connect(&address).await.unwrap();
    peer.write_all(b"NOT HTTP AT ALL\r\n\r\n").await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(PATIENCE, peer.read_to_end(&mut answer)).await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 400"), "{answer:?}");
    let (_, log) = daemon.stop("TERM").await;
    assert!(log.contains("rejected by the HTTP layer"), "{log}");
}

/// A client that hung up while record waited on the upstream left no log
/// line for its request (hyper dropped the handler), though the upstream
/// saw it: a log that must account for every request missed one.
#[tokio::test]
async fn a_request_whose_client_hangs_up_still_gets_its_log_line() {
    use tokio::io::AsyncWriteExt;
    let upstream = crate::upstream::start().await;
    let cassettes = Cassettes::new();
    let daemon = Daemon::record(&upstream.url(), cassettes.path()).await;
    let address = daemon.url.trim_start_matches("http://").to_owned();
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"silent"}}"#;
    let mut peer = tokio::net::TcpStream::connect(&address).await.unwrap();
    let request = format!(
        "POST /agents/servers/mcp_Gone HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nAccept: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        crate::upstream::TOKEN,
        body.len()
    );
    peer.write_all(request.as_bytes()).await.unwrap();
    // Hang up once the upstream holds the request (it never answers "silent").
    tokio::time::timeout(PATIENCE, upstream.state.until_called("tools/call"))
        .await
        .expect("the request reached the upstream");
    drop(peer);
    let (_, log) = daemon.stop("TERM").await;
    let line = log.lines().find(|l| l.contains("POST server=mcp_Gone method=tools/call"));
    assert!(line.is_some_and(|l| l.contains("(the client went away before the answer)")), "{log}");
}

/// On SIGTERM, a request still waiting on a silent upstream when the
/// shutdown grace ran out was cut with no status at all; it gets 503 and
/// a JSON-RPC error with its id.
#[tokio::test]
async fn a_request_still_waiting_when_the_grace_ends_gets_503_with_its_id() {
    let upstream = crate::upstream::start().await;
    let cassettes = Cassettes::new();
    let mut command = Command::new(BIN);
    command
        .args([
            "record",
            "--port",
            "0",
            "--upstream",
            &upstream.url(),
            "--upstream-timeout",
            "120",
            "--cassettes",
        ])
        .arg(cassettes.path());
    let daemon = Daemon::spawn(command).await;
    let url = format!("{}/agents/servers/mcp_Waiting", daemon.url);
    let auth = format!("Bearer {}", crate::upstream::TOKEN);
    let body =
        json!({"jsonrpc": "2.0", "id": 42, "method": "tools/call", "params": {"name": "silent"}}).to_string();
    let waiting = tokio::spawn(async move { post(&url, &[("authorization", &auth)], &body).await });
    tokio::time::timeout(PATIENCE, upstream.state.until_called("tools/call"))
        .await
        .expect("the request reached the upstream");
    let (status, log) = daemon.stop("TERM").await;
    let answer = waiting.await.unwrap();
    assert_eq!(answer.status, 503, "{answer:?}");
    assert_eq!(answer.json()["id"], 42, "{answer:?}");
    assert!(answer.json()["error"]["message"].as_str().unwrap().contains("shutdown grace"), "{answer:?}");
    assert!(status.success(), "{log}");
    assert!(!log.contains("stopping anyway"), "the 503 went out within the grace's last second: {log}");
}

/// A client hanging up in the middle of a recorded stream once lost its
/// exchange without a word in the log.
#[tokio::test]
async fn a_client_leaving_mid_stream_in_record_is_logged() {
    let upstream = crate::upstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::record(&upstream.url(), dir.path()).await;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "gated"}});
    let auth = format!("Bearer {}", crate::upstream::TOKEN);
    let url = format!("{}/agents/servers/mcp_MailTools", daemon.url);
    let mut stream = open_stream(&url, &[("authorization", &auth)], &body).await;
    assert!(next_chunk(&mut stream).await.contains("started"));
    drop(stream);
    let (status, log) = daemon.stop("TERM").await;
    assert!(status.success(), "{log}");
    assert!(log.contains("the client went away before the answer finished; not stored"), "{log}");
    assert!(log.contains("recorded 0 exchanges"), "{log}");
}

/// A server that asks the client something on an answer stream and answers
/// without waiting: the client's reply comes after the exchange is stored.
/// The exchange is stored as it happened; the reply goes upstream and the
/// log says it was not stored.
#[tokio::test]
async fn a_reply_after_its_exchange_ended_is_forwarded_and_logged() {
    let upstream = crate::upstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::record(&upstream.url(), dir.path()).await;
    let auth = format!("Bearer {}", crate::upstream::TOKEN);
    let url = format!("{}/agents/servers/mcp_MailTools", daemon.url);
    let headers = [("authorization", auth.as_str()), ("mcp-session-id", "upstream-session-1")];
    let body =
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "elicit_unwaited"}});
    let answered = post(&url, &headers, &body.to_string()).await;
    let events = answered.events();
    assert_eq!(
        events.first().map(|e| e["method"].clone()),
        Some(json!("elicitation/create")),
        "{answered:?}"
    );
    assert_eq!(events.last().map(|e| e["id"].clone()), Some(json!(1)), "{answered:?}");
    let reply = json!({"jsonrpc": "2.0", "id": "srv-2", "result": {"action": "decline"}});
    assert_eq!(post(&url, &headers, &reply.to_string()).await.status, 202);
    let (status, log) = daemon.stop("TERM").await;
    assert!(status.success(), "{log}");
    assert!(log.contains(r#"reply to the server's request "srv-2" came after that exchange ended"#), "{log}");
    assert!(log.contains("recorded 1 exchange"), "{log}");
}

/// A client's POST and its GET stream, sent at once on two connections,
/// reach the upstream in the order they reached the recorder, also when
/// one wake-up finds both waiting (a busy machine held the recorder back:
/// here it is stopped while they arrive). A recorder on several threads
/// ran the task woken last first, and the GET went upstream first; on one
/// thread, a GET on a connection accepted after the stop was read at once
/// (tokio takes an accepted socket as readable), ahead of the POST on the
/// open one. The upstream tells the order by when its kernel received
/// each request, not by when its own runtime read them.
#[tokio::test]
async fn requests_that_arrive_together_reach_the_upstream_in_their_order() {
    use hyper::Method;
    use tokio::io::AsyncWriteExt;
    const ROUNDS: usize = 8;
    let upstream = crate::upstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::record(&upstream.url(), dir.path()).await;
    let address = daemon.url.trim_start_matches("http://").to_owned();
    let notification = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    let post = format!(
        "POST /agents/servers/mcp_MailTools HTTP/1.1\r\nhost: {address}\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\nmcp-session-id: upstream-session-1\r\n\
         authorization: Bearer {}\r\ncontent-length: {}\r\n\r\n{notification}",
        crate::upstream::TOKEN,
        notification.len()
    );
    let get = format!(
        "GET /agents/servers/mcp_MailTools HTTP/1.1\r\nhost: {address}\r\naccept: text/event-stream\r\n\
         mcp-session-id: upstream-session-1\r\n\r\n"
    );
    for round in 0..ROUNDS {
        let mut first = tokio::net::TcpStream::connect(&address).await.unwrap();
        let mut second = tokio::net::TcpStream::connect(&address).await.unwrap();
        daemon.signal("STOP");
        daemon.until_stopped();
        first.write_all(post.as_bytes()).await.unwrap();
        second.write_all(get.as_bytes()).await.unwrap();
        daemon.signal("CONT");
        tokio::time::timeout(PATIENCE, upstream.state.until_seen(2 * (round + 1)))
            .await
            .expect("the upstream did not hear both requests");
        let mut heard = upstream.state.heads.lock().unwrap()[2 * round..].to_vec();
        heard.sort_by_key(|(received, _)| *received);
        let heard: Vec<Method> = heard.into_iter().map(|(_, method)| method).collect();
        assert_eq!(heard, [Method::POST, Method::GET], "round {round}");
    }
}

/// On a full disk, record once answered clients 200 for exchanges it could
/// not store. Here the cassette directory is a 192 KiB tmpfs in the
/// recorder's own mount namespace; every answer a client got must be in the
/// cassette (exported inside the namespace when record stops), and every
/// exchange that was not stored must have reached its client as an error.
#[tokio::test]
async fn a_full_disk_never_answers_200_for_an_unstored_exchange() {
    let upstream = crate::upstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mount = dir.path().join("cassettes");
    std::fs::create_dir(&mount).unwrap();
    let exported = dir.path().join("export.jsonl");
    let script = r#"mount -t tmpfs -o size=192k tmpfs "$1" || exit 3
"$2" record --port 0 --upstream "$3" --cassettes "$1" --name full &
recorder=$!
trap 'kill -TERM $recorder; wait $recorder; code=$?; "$2" export "$1/full.sqlite" -o "$4"; exit $code' TERM
wait $recorder"#;
    let mut command = Command::new("unshare");
    command.args(["-m", "sh", "-c", script, "sh"]).arg(&mount).arg(BIN).arg(upstream.url()).arg(&exported);
    let daemon = Daemon::spawn(command).await;
    let auth = format!("Bearer {}", crate::upstream::TOKEN);
    let url = format!("{}/agents/servers/mcp_Full", daemon.url);
    let filler = "x".repeat(6000);
    let (mut answered, mut refused) = (Vec::new(), 0);
    for id in 1..=120 {
        // Odd ids get a JSON answer, even ones an SSE stream.
        let tool = if id % 2 == 1 { "fill" } else { "progress" };
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": {"n": id, "filler": filler}}});
        let reply = post(&url, &[("authorization", &auth)], &body.to_string()).await;
        if tool == "progress" {
            assert_eq!(reply.status, 200, "a stream's status goes out before its end: {reply:?}");
            let last = reply.events().pop().unwrap();
            assert_eq!(last["id"], id);
            match last["error"]["code"].as_i64() {
                None => answered.push(id),
                Some(code) => {
                    assert_eq!(code, -32603, "the stream ends with the not-stored error");
                    refused += 1;
                }
            }
            continue;
        }
        match reply.status {
            200 => answered.push(id),
            507 => {
                assert_eq!(reply.json()["id"], id, "the error carries the caller's id");
                assert_eq!(reply.json()["error"]["code"], -32603);
                refused += 1;
            }
            other => panic!("unexpected {other}: {}", reply.text),
        }
    }
    let (status, log) = daemon.stop("TERM").await;
    // Exchanges were lost: record says so in its exit status (it exited 0 before).
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(log.contains("exchanges could not be stored"), "{log}");
    assert!(!log.contains("another process holds"), "no other process held the cassette: {log}");
    assert!(log.contains("full.sqlite is full: "), "the stop names the full disk: {log}");
    assert!(refused > 0 && !answered.is_empty(), "the disk filled up part way: {} answered", answered.len());
    assert!(answered.iter().any(|id| id % 2 == 0), "some streams were stored before the disk filled");
    assert!(!answered.contains(&120), "the last stream, on a full disk, ended with the error");
    let stored: Vec<i64> = std::fs::read_to_string(&exported)
        .unwrap()
        .lines()
        .map(|line| {
            serde_json::from_str::<Value>(line).unwrap()["request"]["params"]["arguments"]["n"]
                .as_i64()
                .unwrap()
        })
        .collect();
    for id in &answered {
        assert!(stored.contains(id), "exchange {id} was answered 200 but is not in the cassette");
    }
}

#[tokio::test]
async fn sigint_stops_cleanly() {
    let cassettes = Cassettes::new();
    let daemon = Daemon::start(&[cassettes.path().to_str().unwrap()]).await;
    let reply = call(&format!("{}/mcp", daemon.url), &[], "ping", json!({})).await;
    assert_eq!(reply.json()["result"], json!({}));
    let (status, log) = daemon.stop("INT").await;
    assert!(status.success(), "{status:?}\n{log}");
    assert!(log.contains("SIGINT") && log.contains("no misses"), "{log}");
}

/// Root cause: record's stop waited for every request in flight, and a
/// session's GET stream, relayed from the upstream, ends only when the
/// upstream or the client ends it: SIGINT took the whole 10 s grace with
/// one open. The recording's end now ends the streams it relays.
#[tokio::test]
async fn record_stopping_ends_the_get_stream_it_relays() {
    let fixture = crate::upstream::start().await;
    let cassettes = Cassettes::new();
    let daemon = Daemon::record(&fixture.url(), cassettes.path()).await;
    let server = format!("{}/agents/servers/mcp_MailTools", daemon.url);
    let auth = format!("Bearer {}", crate::upstream::TOKEN);
    let init =
        call(&server, &[("authorization", &auth)], "initialize", json!({"protocolVersion": "2025-06-18"}))
            .await;
    let session = init.header("mcp-session-id").expect("a session").to_owned();
    let mut stream = get_stream(&server, &session).await;
    let ended = tokio::spawn(async move { tokio::time::timeout(PATIENCE, stream.chunk()).await });
    let (status, log) = daemon.stop("INT").await;
    assert!(status.success(), "{status:?}\n{log}");
    let end = ended.await.unwrap().expect("the stream ended with the recording");
    assert!(matches!(end, Ok(None)), "{end:?}");
    assert!(!log.contains("still in flight"), "{log}");
}

#[tokio::test]
async fn import_export_round_trip_and_replay() {
    let dir = Cassettes::new();
    let input = dir.path().join("in.jsonl");
    let line = json!({
        "server": "mcp_CalendarTools", "era": "handshake", "protocolVersion": "2025-06-18",
        "request": {"jsonrpc": "2.0", "id": 12, "method": "tools/call",
            "params": {"name": "GetRooms", "arguments": {}}},
        "status": 200, "contentType": "application/json",
        "messages": [{"offsetMs": 4, "direction": "server",
            "body": {"jsonrpc": "2.0", "id": 12, "result": {"content": [{"type": "text", "text": "Room 1"}]}}}],
    });
    std::fs::write(&input, format!("{line}\n")).unwrap();
    let cassette = dir.path().join("cal.sqlite");
    let imported = run(&["import", input.to_str().unwrap(), "--cassette", cassette.to_str().unwrap()]);
    assert!(imported.status.success(), "{}", stderr(&imported));

    let exported = run(&["export", cassette.to_str().unwrap()]);
    assert!(exported.status.success());
    let text = String::from_utf8(exported.stdout).unwrap();
    let parsed: Value = serde_json::from_str(text.trim()).unwrap();
    assert_eq!(parsed["request"]["id"], "mcp-tape:request-id");
    assert_eq!(parsed["messages"][0]["body"]["result"], line["messages"][0]["body"]["result"]);

    let again = dir.path().join("again.sqlite");
    std::fs::write(dir.path().join("out.jsonl"), &text).unwrap();
    let reimported = run(&[
        "import",
        dir.path().join("out.jsonl").to_str().unwrap(),
        "--cassette",
        again.to_str().unwrap(),
    ]);
    assert!(reimported.status.success());
    let re_exported = run(&["export", again.to_str().unwrap()]);
    assert_eq!(String::from_utf8(re_exported.stdout).unwrap(), text, "export is canonical and stable");

    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, "{\"server\": 1}\n").unwrap();
    let refused = run(&["import", bad.to_str().unwrap(), "--cassette", again.to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(stderr(&refused).contains("line 1"), "{}", stderr(&refused));

    let daemon = Daemon::start(&[cassette.to_str().unwrap()]).await;
    let url = format!("{}/agents/servers/mcp_CalendarTools", daemon.url);
    let reply = call(&url, &[], "tools/call", json!({"name": "GetRooms", "arguments": {}})).await;
    assert_eq!(reply.json()["result"]["content"][0]["text"], "Room 1");
    daemon.stop("TERM").await;
}

/// Whether process `pid` still runs (a zombie waiting to be reaped does not).
fn running(pid: &str) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())) else { return false };
    let state = stat.rfind(')').and_then(|end| stat[end + 1..].split_whitespace().next());
    state != Some("Z")
}

/// A stdio server behind a wrapper left its real server running: the
/// wrapper's child in its process group, and one that left the group
/// (`setsid`), outlived mcp-tape after stdin EOF.
#[test]
fn record_stdio_ends_what_its_server_started() {
    let dir = tempfile::tempdir().unwrap();
    let (grouped, left) = (dir.path().join("grouped"), dir.path().join("left"));
    let script = format!(
        "sleep 302 & echo $! > {}; setsid sleep 303 & echo $! > {}; exec cat",
        grouped.display(),
        left.display()
    );
    let cassettes = dir.path().to_str().unwrap();
    let output = std::process::Command::new(BIN)
        .args(["record", "--stdio", "--cassettes", cassettes, "--name", "forks", "--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    for (what, file) in [("in the group", &grouped), ("out of the group", &left)] {
        let pid = std::fs::read_to_string(file).unwrap();
        assert!(
            !running(&pid),
            "the server's child {what} ({}) still runs:\n{}",
            pid.trim(),
            stderr(&output)
        );
    }
}

/// `test` exited 0 with the command's background process still running.
#[test]
fn test_ends_what_its_command_left_running() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let script = format!("sleep 301 & echo $! > {}; exit 0", pid_file.display());
    let output = std::process::Command::new(BIN)
        .args(["test", dir.path().to_str().unwrap(), "--", "sh", "-c", &script])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    assert!(!running(&pid), "the command's sleep ({}) still runs", pid.trim());
    assert!(stderr(&output).contains("left processes running; ended them"), "{}", stderr(&output));
    // A command that leaves nothing behind is not said to have (mcp-tape's own watcher is not its).
    let output = std::process::Command::new(BIN)
        .args(["test", dir.path().to_str().unwrap(), "--", "true"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(!stderr(&output).contains("left processes running"), "{}", stderr(&output));
}

/// A command that ignores SIGTERM was waited for for ever, and the
/// interrupted run then exited 0.
#[tokio::test]
async fn an_interrupted_test_ends_a_stubborn_command_and_says_it_was_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready");
    fifo(&ready);
    let script = format!("trap '' INT TERM; echo $$ > {}; sleep 300; exit 0", ready.display());
    let mut test = Command::new(BIN)
        .args(["test", dir.path().to_str().unwrap(), "--", "sh", "-c", &script])
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let command = tokio::time::timeout(PATIENCE, said(&ready)).await.expect("the command said its pid");
    let pid = test.id().unwrap().to_string();
    assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let status = tokio::time::timeout(PATIENCE, test.wait()).await.expect("test ended").unwrap();
    assert_eq!(status.code(), Some(128 + 15), "interrupted by SIGTERM");
    assert!(!running(&command), "the command ({}) still runs", command.trim());
}

/// After `kill -9` of a recorder, its stdio server (parent-death signal)
/// went, but what the server had started ran on.
#[tokio::test]
async fn a_killed_recorder_leaves_no_grandchild_running() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("grandchild");
    fifo(&pid_file);
    let script = format!("sleep 304 & echo $! > {}; exec cat", pid_file.display());
    let cassettes = dir.path().to_str().unwrap();
    let mut record = Command::new(BIN)
        .args(["record", "--stdio", "--cassettes", cassettes, "--name", "killed", "--", "sh", "-c", &script])
        .stdin(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let grandchild = tokio::time::timeout(PATIENCE, said(&pid_file)).await.expect("the shell said its child");
    record.start_kill().unwrap();
    record.wait().await.unwrap();
    tokio::time::timeout(PATIENCE, ended(grandchild.trim().parse().unwrap()))
        .await
        .unwrap_or_else(|_| panic!("the grandchild ({}) outlived the killed recorder", grandchild.trim()));
}

/// A stdio server that never reads, and a client that sends 40 MB: the
/// recorder sat blocked on the full queue and ignored SIGTERM.
#[tokio::test]
async fn sigterm_ends_a_recorder_whose_server_never_reads() {
    use tokio::io::AsyncWriteExt;
    let dir = tempfile::tempdir().unwrap();
    let cassettes = dir.path().to_str().unwrap();
    let mut record = Command::new(BIN)
        .args([
            "record",
            "--stdio",
            "--cassettes",
            cassettes,
            "--name",
            "deaf",
            "--",
            "sh",
            "-c",
            "exec sleep 300",
        ])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = record.stdin.take().unwrap();
    let (ten_sent, sent) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let mut ten_sent = Some(ten_sent);
        let padding = "x".repeat(100 * 1024);
        for id in 0..400 {
            let line = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": "t", "arguments": {"pad": padding}}});
            if stdin.write_all(format!("{line}\n").as_bytes()).await.is_err() {
                return; // the recorder is gone
            }
            if id == 9
                && let Some(ten_sent) = ten_sent.take()
            {
                let _ = ten_sent.send(());
            }
        }
    });
    tokio::time::timeout(PATIENCE, sent)
        .await
        .expect("the client's lines went out")
        .expect("ten lines were written before the recorder stopped reading");
    let pid = record.id().unwrap().to_string();
    assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let mut log = String::new();
    let mut stderr = record.stderr.take().unwrap();
    let ended = tokio::time::timeout(PATIENCE, async {
        tokio::io::AsyncReadExt::read_to_string(&mut stderr, &mut log).await.unwrap();
        record.wait().await.unwrap()
    })
    .await;
    let status = ended.expect("the recorder ended after SIGTERM");
    assert!(log.contains("stopping the stdio server"), "{log}");
    assert!(log.contains("never read") && log.contains("dropped"), "{log}");
    assert!(log.contains("stopped; recorded 0 exchanges"), "{log}");
    assert_eq!(status.code(), Some(128 + 15), "the server's status: SIGTERM ended it\n{log}");
}

/// The recipe docs/cassettes.md gives for review: `git diff` of a changed
/// cassette shows its exchanges as JSON lines through `mcp-tape export`.
#[test]
fn git_diff_shows_a_changed_cassettes_exchanges_through_export() {
    let cassettes = Cassettes::new();
    let repo = cassettes.path();
    let git = |args: &[&str]| {
        let output = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"])
            .args(args)
            .current_dir(repo)
            .output()
            .unwrap();
        assert!(output.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout).unwrap()
    };
    git(&["init", "-q"]);
    std::fs::write(repo.join(".gitattributes"), "*.sqlite diff=mcp-tape\n").unwrap();
    git(&["config", "diff.mcp-tape.textconv", &format!("{BIN} export")]);
    cassettes.write("mail", vec![tool_call("mcp_MailTools", "GetMessage", json!({"id": "1"}), "hello")]);
    git(&["add", "."]);
    git(&["commit", "-q", "-m", "recorded"]);
    cassettes.write("mail", vec![tool_call("mcp_MailTools", "GetMessage", json!({"id": "2"}), "again")]);
    let diff = git(&["diff", "--", "mail.sqlite"]);
    assert!(!diff.contains("Binary files"), "{diff}");
    let added: Vec<&str> = diff.lines().filter(|l| l.starts_with("+{")).collect();
    assert_eq!(added.len(), 1, "the new exchange, one JSON line: {diff}");
    assert!(added[0].contains(r#""text":"again""#) && added[0].contains(r#""id":"2""#), "{diff}");
    assert!(!diff.lines().any(|l| l.starts_with("-{")), "the first exchange is unchanged: {diff}");
}

/// Root cause: the "forwarding to" line printed `--upstream` as given, and
/// an unreachable upstream's 502 named it so: a password in the URL's user
/// information, or a key in its query, went to every log and every client.
/// They are now shown as `***`; the upstream still gets them.
#[tokio::test]
async fn an_upstream_urls_credentials_are_in_no_log_line_and_no_answer() {
    const PASSWORD: &str = "pa55-w0rd";
    const KEY: &str = "k3y-4e9b1";
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let daemon =
        Daemon::record(&format!("http://ada:{PASSWORD}@{closed}/mcp?api_key={KEY}&v=1"), dir.path()).await;
    let body = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list"});
    let reply = post(&format!("{}/mcp", daemon.url), &[], &body.to_string()).await;
    assert_eq!(reply.status, 502, "{reply:?}");
    assert!(reply.text.contains(&format!("http://ada:***@{closed}/mcp?api_key=***&v=1")), "{}", reply.text);
    let (status, log) = daemon.stop("TERM").await;
    assert!(status.success(), "{log}");
    for secret in [PASSWORD, KEY] {
        assert!(
            !log.contains(secret) && !reply.text.contains(secret),
            "{secret} shown:\n{log}\n{}",
            reply.text
        );
    }
    assert!(log.contains("forwarding to http://ada:***@"), "{log}");
}

/// A command's grandchild in a session of its own, whose parent ended
/// before it: `Tree::end` signalled the processes reparented to mcp-tape
/// once, and what they had started, reparented in turn as they ended, ran
/// on under init. Both `test` and `record --stdio` end it now.
#[test]
fn a_grandchild_in_a_session_of_its_own_is_ended_too() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    // The inner shell waits on its sleep (the `:` after it keeps it from exec'ing), then its parent ends.
    // Its output goes elsewhere, so that a grandchild left running holds no pipe of this test's.
    let script = format!(
        "setsid sh -c 'sleep 305 & echo $! > {}; wait; :' </dev/null >/dev/null 2>&1 & sleep 0.3",
        pid_file.display()
    );
    let cassettes = dir.path().to_str().unwrap();
    let runs: [&[&str]; 2] = [
        &["test", cassettes, "--", "sh", "-c", &script],
        &["record", "--stdio", "--cassettes", cassettes, "--name", "setsid", "--", "sh", "-c", &script],
    ];
    for args in runs {
        let output = std::process::Command::new(BIN).args(args).stdin(Stdio::null()).output().unwrap();
        assert!(output.status.success(), "{args:?}: {}", stderr(&output));
        let pid = std::fs::read_to_string(&pid_file).unwrap();
        assert!(
            !running(&pid),
            "{}: the grandchild ({}) still runs:\n{}",
            args[0],
            pid.trim(),
            stderr(&output)
        );
        std::fs::remove_file(&pid_file).unwrap();
    }
}

/// A stderr that takes nothing (`/dev/full`; a closed pipe is the same):
/// `test` and `import` printed their summaries with `eprintln!`, which
/// panics there, and ended with 101: `test` wrote no report, `import` left
/// its `.importing-PID` file behind.
#[test]
fn a_stderr_that_takes_nothing_ends_no_command_early() {
    let dir = tempfile::tempdir().unwrap();
    let full = || std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
    let report = dir.path().join("report.json");
    let status = std::process::Command::new(BIN)
        .args(["test", dir.path().to_str().unwrap(), "--report", report.to_str().unwrap(), "--", "true"])
        .stderr(full())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(report.is_file(), "test wrote its report");
    let lines = dir.path().join("in.jsonl");
    let line = r#"{"contentType":"application/json","era":"handshake","messages":[{"body":{"id":1,"jsonrpc":"2.0","result":{}},"direction":"server"}],"protocolVersion":"2025-06-18","request":{"id":1,"jsonrpc":"2.0","method":"ping"},"server":"s","status":200}"#;
    std::fs::write(&lines, format!("{line}\n")).unwrap();
    std::fs::create_dir(dir.path().join("imported")).unwrap();
    let cassette = dir.path().join("imported").join("c.sqlite");
    let status = std::process::Command::new(BIN)
        .args(["import", lines.to_str().unwrap(), "--cassette", cassette.to_str().unwrap()])
        .stderr(full())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(cassette.is_file(), "import wrote its cassette");
    let left: Vec<_> =
        std::fs::read_dir(cassette.parent().unwrap()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, [std::ffi::OsString::from("c.sqlite")], "nothing but the cassette");
}

/// On a terminal, `test` ran its command in a background process group:
/// a command that read the terminal (`pytest --pdb`) was stopped by the
/// read (state T), and the run never ended. The command now has the
/// terminal while it runs. Run in a pseudo-terminal by Python's `pty`.
#[test]
fn a_command_under_test_reads_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let harness = r#"
import os, pty, select, sys, time
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
os.write(fd, b"typed\n")
out, status, deadline = b"", None, time.monotonic() + 20
while status is None and time.monotonic() < deadline:
    if select.select([fd], [], [], 0.1)[0]:
        try:
            out += os.read(fd, 4096)
        except OSError:
            pass
    done, code = os.waitpid(pid, os.WNOHANG)
    if done:
        status = os.waitstatus_to_exitcode(code)
if status is None:
    os.kill(pid, 9)
print(status, out.decode(errors="replace").replace("\r", ""))
"#;
    let output = std::process::Command::new("python3")
        .args([
            "-c",
            harness,
            BIN,
            "test",
            dir.path().to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "read x; echo read: $x",
        ])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(said.starts_with("0 "), "the run did not end with 0: {said}\n{}", stderr(&output));
    assert!(said.contains("read: typed"), "{said}");
}

/// SIGHUP ended `test` at once (its default action), leaving its
/// recording's three files (`.recording-PID` and its WAL and shared
/// memory); SIGQUIT, listened for elsewhere, did nothing. Each is now
/// passed on to the command, and the run ends as for SIGTERM.
#[tokio::test]
async fn sighup_and_sigquit_end_test_and_leave_no_file_behind() {
    let upstream = crate::upstream::start().await;
    for (signal, number) in [("HUP", 1), ("QUIT", 3)] {
        let dir = tempfile::tempdir().unwrap();
        let ready = dir.path().join("ready");
        fifo(&ready);
        let cassette = dir.path().join("c.sqlite");
        let script = format!("echo $$ > {}; sleep 300", ready.display());
        let mut test = Command::new(BIN)
            .args(["test", cassette.to_str().unwrap(), "--mode", "all", "--upstream", &upstream.url()])
            .args(["--", "sh", "-c", &script])
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        tokio::time::timeout(PATIENCE, said(&ready)).await.expect("the command said its pid");
        let pid = test.id().unwrap().to_string();
        assert!(
            std::process::Command::new("kill")
                .args([&format!("-{signal}"), &pid])
                .status()
                .unwrap()
                .success()
        );
        let status = tokio::time::timeout(Duration::from_secs(10), test.wait())
            .await
            .unwrap_or_else(|_| panic!("SIG{signal}: test still running 10 s later"))
            .unwrap();
        assert_eq!(status.code(), Some(128 + number), "SIG{signal}");
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, [std::ffi::OsString::from("ready")], "SIG{signal} left files");
    }
}

/// Root cause: with a stderr nobody reads (a full pipe), every thread that
/// logged waited for room for ever: the daemon stopped answering, and its
/// SIGTERM handler, a task on those threads, never ran; only SIGKILL ended
/// it. Lines are now dropped (and counted) once stderr has had no room for
/// a second, and the exit waits for the log writer a few seconds at most.
#[tokio::test]
async fn a_daemon_whose_stderr_nobody_reads_stops_on_sigterm() {
    let cassettes = Cassettes::new();
    let mut child = Command::new(BIN)
        .args(["replay", "--port", "0", cassettes.path().to_str().unwrap()])
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let url = tokio::time::timeout(PATIENCE, async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(at) = line.find("listening on ") {
                return line[at + "listening on ".len()..].to_owned();
            }
        }
        panic!("the daemon exited before listening");
    })
    .await
    .unwrap();
    // From here on nobody reads stderr (`lines` stays open, unread). Each request leaves a
    // line of about 600 bytes (long names are cut to 256 bytes): 12,000 of them are twice what
    // the pipe (1 MiB) and the log buffer (4 MiB) hold.
    let target = format!("{url}/mcp/{}", "s".repeat(300));
    let body =
        json!({"jsonrpc": "2.0", "id": 1, "method": "m".repeat(300), "params": {"name": "t".repeat(300)}})
            .to_string();
    let client = reqwest::Client::new();
    let mut answered = 0;
    'load: for _ in 0..(12_000 / 16) {
        let posts: Vec<_> = (0..16)
            .map(|_| {
                let request = client
                    .post(&target)
                    .header("content-type", "application/json")
                    .header("accept", BOTH)
                    .body(body.clone());
                tokio::spawn(tokio::time::timeout(Duration::from_secs(3), request.send()))
            })
            .collect();
        for posted in posts {
            match posted.await.unwrap() {
                Ok(Ok(_)) => answered += 1,
                _ => break 'load, // it stopped answering
            }
        }
    }
    let pid = child.id().unwrap().to_string();
    assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait()).await;
    assert!(status.is_ok(), "still running 10 s after SIGTERM ({answered} requests answered)");
    assert_eq!(answered, 12_000, "every request was answered");
    drop(lines);
}
