//! `mcp-tape test --tapes-on-stdin`, as the vitest helper runs it: the
//! real binary serving one test's tape after another on one port, told
//! each tape's arguments and then its verdict on stdin, and answering each
//! line with one JSON line on stdout.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::net::TcpStream;
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout};

use crate::ci::{piped_test, text_of};
use crate::support::*;
use crate::upstream;

/// Bound on one answer from the tapes' process.
const PATIENCE: Duration = Duration::from_secs(60);
const MAIL: &str = "/agents/servers/mcp_MailTools";

/// One `mcp-tape test --tapes-on-stdin` and its pipes.
struct Tapes {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Lines<BufReader<ChildStdout>>,
    log: Lines<BufReader<ChildStderr>>,
    url: String,
}

impl Tapes {
    async fn start() -> Tapes {
        let mut child = piped_test(&["--tapes-on-stdin"]).env("MCP_TAPE_LOG", "debug").spawn().unwrap();
        let stdin = child.stdin.take();
        let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        let log = BufReader::new(child.stderr.take().unwrap()).lines();
        let url = tokio::time::timeout(PATIENCE, stdout.next_line()).await.expect("a URL").unwrap().unwrap();
        assert!(url.starts_with("http://127.0.0.1:"), "{url}");
        Tapes { child, stdin, stdout, log, url }
    }

    /// Writes `line`, and reads the answer to it.
    async fn ask(&mut self, line: &str) -> Value {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(format!("{line}\n").as_bytes()).await.unwrap();
        self.answer().await
    }

    async fn answer(&mut self) -> Value {
        let line = tokio::time::timeout(PATIENCE, self.stdout.next_line()).await.expect("an answer").unwrap();
        serde_json::from_str(&line.expect("an answer before the end")).unwrap()
    }

    /// Begins a tape with `args`; asserts that it serves.
    async fn begin(&mut self, args: &[&str]) {
        let told = self.ask(&json!(args).to_string()).await;
        assert_eq!(told, json!({"serving": true}), "{args:?}");
    }

    /// The log so far and the exit code, once stdin is closed.
    async fn end(mut self) -> (Option<i32>, String) {
        drop(self.stdin.take());
        let log = rest_of_log(&mut self.log).await;
        let status = tokio::time::timeout(PATIENCE, self.child.wait()).await.expect("it ended").unwrap();
        (status.code(), log)
    }
}

/// A POST of `body` on `connection` (HTTP/1.1, kept alive), answered in
/// JSON: its status and body.
async fn on(connection: &mut BufReader<TcpStream>, body: &Value) -> (u16, Value) {
    let body = body.to_string();
    let request = format!(
        "POST {MAIL} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\naccept: application/json\r\n\
         mcp-protocol-version: 2025-06-18\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    connection.get_mut().write_all(request.as_bytes()).await.unwrap();
    let mut head = String::new();
    let mut length = None;
    loop {
        let mut line = String::new();
        connection.read_line(&mut line).await.unwrap();
        if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = Some(value.trim().parse::<usize>().unwrap());
        }
        if line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let mut answer = vec![0; length.expect("a content-length")];
    connection.read_exact(&mut answer).await.unwrap();
    (status, serde_json::from_slice(&answer).unwrap())
}

fn get_message(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": "GetMessage", "arguments": {"id": "m1"}}})
}

fn mail(cassettes: &Cassettes, name: &str, text: &str) -> String {
    let exchanges = vec![tool_call("mcp_MailTools", "GetMessage", json!({"id": "m1"}), text)];
    cassettes.write(name, exchanges).to_str().unwrap().to_owned()
}

fn exchanges(cassette: &Path) -> Vec<mcp_tape::model::Exchange> {
    mcp_tape::cassette::store::Cassette::open_read_only(cassette).unwrap().exchanges().unwrap()
}

/// Two tests' tapes on one connection: each answers from its own cassette,
/// with its own verdict and report; between them a request gets 503; a
/// session the first tape opened is unknown to the second (404, not a
/// miss); lines it cannot take are refused, each saying why, and the tape
/// after them serves; a tape running at the end of input fails.
#[tokio::test]
async fn tapes_take_turns_on_one_port_each_with_its_cassette_verdict_and_report() {
    let cassettes = Cassettes::new();
    let first = mail(&cassettes, "first", "Hello from the first");
    let second = mail(&cassettes, "second", "Hello from the second");
    let mut tapes = Tapes::start().await;
    let address = tapes.url.trim_start_matches("http://").to_owned();
    let mut connection = BufReader::new(TcpStream::connect(&address).await.unwrap());

    tapes.begin(&[&first, "--title", "the first test"]).await;
    let (status, answer) = on(&mut connection, &get_message(1)).await;
    assert_eq!((status, text_of(&answer)), (200, "Hello from the first"), "{answer}");
    let session = initialize(&format!("{}{MAIL}", tapes.url)).await;
    let told = tapes.ask("0").await;
    assert_eq!(told["code"], 0, "{told}");
    assert_eq!(told["report"]["title"], "the first test", "{told}");
    assert_eq!(told["report"]["passed"], true, "{told}");
    let said = told["said"].as_array().unwrap();
    assert!(said.iter().any(|line| line == "mcp-tape: verdict 0; exit 0"), "{told}");

    let (status, answer) = on(&mut connection, &get_message(2)).await;
    assert_eq!(status, 503, "{answer}");
    assert!(answer["error"]["message"].as_str().unwrap().contains("No test's tape is running"), "{answer}");

    let refused = tapes.ask("not json").await;
    assert!(refused["error"].as_str().unwrap().contains("a JSON array of strings"), "{refused}");
    let refused = tapes.ask(&json!([&second, "--port", "5309"]).to_string()).await;
    assert!(refused["error"].as_str().unwrap().contains("--port"), "{refused}");
    let refused = tapes.ask(&json!([&second, "--mode", "sideways"]).to_string()).await;
    assert!(refused["error"].as_str().unwrap().contains("sideways"), "{refused}");

    tapes.begin(&[&second]).await;
    let (status, answer) = on(&mut connection, &get_message(3)).await;
    assert_eq!((status, text_of(&answer)), (200, "Hello from the second"), "the same connection: {answer}");
    let headers = [("mcp-session-id", session.as_str())];
    let stale = call(&format!("{}{MAIL}", tapes.url), &headers, "tools/list", json!({})).await;
    assert_eq!(stale.status, 404, "{stale:?}");
    let unrecorded = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                            "params": {"name": "GetMessage", "arguments": {"id": "m2"}}});
    let (status, answer) = on(&mut connection, &unrecorded).await;
    assert_eq!(status, 200, "a miss is a JSON-RPC error: {answer}");
    let told = tapes.ask("0").await;
    assert_eq!(told["code"], 1, "a miss fails a passing test: {told}");
    let cases = told["report"]["cases"].as_array().unwrap();
    let misses: u64 = cases.iter().map(|case| case["misses"].as_u64().unwrap()).sum();
    let hits: u64 = cases.iter().map(|case| case["hits"].as_u64().unwrap()).sum();
    assert_eq!((hits, misses), (1, 1), "only this tape's requests count: {told}");

    tapes.begin(&[&first]).await;
    let (status, answer) = on(&mut connection, &get_message(5)).await;
    assert_eq!((status, text_of(&answer)), (200, "Hello from the first"), "{answer}");
    drop(tapes.stdin.take());
    let told = tapes.answer().await;
    assert_eq!(told["code"], 1, "no verdict fails: {told}");
    let (code, log) = tapes.end().await;
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("no verdict; exit 1"), "{log}");
}

/// A verdict is its line's exit code; anything but a number that fits, or
/// the end of input before the line ends, is 1. The tape serves while it
/// waits for its verdict.
#[tokio::test]
async fn a_verdict_line_is_its_tapes_exit_code() {
    let cassettes = Cassettes::new();
    let cassette = mail(&cassettes, "mail", "Hello");
    let mut tapes = Tapes::start().await;
    for (line, code) in [("0", 0), ("1", 1), (" 3 ", 3), ("passed", 1), ("256", 1)] {
        tapes.begin(&[&cassette]).await;
        let health = reqwest::get(format!("{}/health", tapes.url)).await.unwrap().status();
        assert_eq!(health, 200, "{line:?}");
        let told = tapes.ask(line).await;
        assert_eq!(told["code"], code, "{line:?}: {told}");
    }
    tapes.begin(&[&cassette]).await;
    tapes.stdin.as_mut().unwrap().write_all(b"0").await.unwrap();
    drop(tapes.stdin.take());
    let told = tapes.answer().await;
    assert_eq!(told["code"], 1, "no line end: {told}");
    let (code, log) = tapes.end().await;
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("verdict 3") && log.contains("no verdict"), "{log}");
}

/// Recording tapes one after another: a failing test's recording is
/// thrown away, a passing one's replaces the cassette, a call still in
/// flight when the verdict comes is answered and kept, and a session an
/// earlier tape opened never reaches the upstream for a later one.
#[tokio::test]
async fn each_tape_keeps_its_recording_only_when_its_test_passes() {
    let fixture = upstream::start().await;
    let cassettes = Cassettes::new();
    let path = cassettes.path().join("recorded.sqlite");
    let cassette = path.to_str().unwrap();
    let upstream_url = fixture.url();
    let recording = [cassette, "--mode", "all", "--upstream", &upstream_url];
    let mut tapes = Tapes::start().await;
    let server = format!("{}{MAIL}", tapes.url);
    let auth = format!("Bearer {}", upstream::TOKEN);
    let headers = [("authorization", auth.as_str())];
    let lookup = |n: u64| json!({"name": "lookup", "arguments": {"n": n}});

    tapes.begin(&recording).await;
    assert_eq!(call(&server, &headers, "tools/call", lookup(1)).await.status, 200);
    let told = tapes.ask("1").await;
    assert_eq!(told["code"], 1, "{told}");
    assert!(!path.exists(), "a failing test's recording is not kept");

    tapes.begin(&recording).await;
    let opened = initialize_with(&server, &headers).await;
    assert_eq!(call(&server, &headers, "tools/call", lookup(2)).await.status, 200);
    let gated = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "gated"}});
    let mut stream = open_stream(&server, &headers, &gated).await;
    assert!(next_chunk(&mut stream).await.contains("started"));
    let stdin = tapes.stdin.as_mut().unwrap();
    stdin.write_all(b"0\n").await.unwrap();
    let seen =
        until_logged(&mut tapes.log, "the tape stops once the requests in flight are answered", PATIENCE)
            .await;
    // Only now, with the tape stopping, does the upstream answer the call in flight.
    fixture.state.gate.notify_one();
    let mut rest = String::new();
    while let Some(chunk) = stream.chunk().await.unwrap() {
        rest.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(rest.contains("released"), "the call in flight was answered: {rest}");
    let told = tapes.answer().await;
    assert_eq!(told["code"], 0, "{told}{seen}");
    let kept: Vec<_> = exchanges(&path)
        .iter()
        .map(|exchange| {
            format!("{} {}", exchange.method, exchange.request["params"]["name"].as_str().unwrap_or(""))
        })
        .collect();
    assert_eq!(kept, ["initialize ", "tools/call lookup", "tools/call gated"]);
    let n = &exchanges(&path)[1].request["params"]["arguments"]["n"];
    assert_eq!(n, 2, "the failing test's call is not in it");
    let left: Vec<_> = std::fs::read_dir(cassettes.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, ["recorded.sqlite"], "no partial recording left behind");

    // A session the last tape's upstream opened is refused, not forwarded; opened again (this
    // upstream gives every session the same id), it is the new tape's.
    let third = cassettes.path().join("third.sqlite");
    let third_cassette = third.to_str().unwrap();
    tapes.begin(&[third_cassette, "--mode", "all", "--upstream", &upstream_url]).await;
    let session = [("authorization", auth.as_str()), ("mcp-session-id", opened.as_str())];
    let calls = fixture.state.calls("tools/call");
    let stale = call(&server, &session, "tools/call", lookup(3)).await;
    assert_eq!(stale.status, 404, "{stale:?}");
    assert_eq!(fixture.state.calls("tools/call"), calls, "not forwarded");
    assert_eq!(initialize_with(&server, &headers).await, opened);
    assert_eq!(call(&server, &session, "tools/call", lookup(4)).await.status, 200);
    let told = tapes.ask("0").await;
    assert_eq!(told["code"], 0, "{told}");
    let calls: Vec<_> = exchanges(&third).iter().map(|exchange| exchange.request["params"].clone()).collect();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(calls[1], lookup(4), "the stale session's call is not in it");
    let (code, log) = tapes.end().await;
    assert_eq!(code, Some(0), "{log}");
}

/// An answer the client was given that serde_json does not read (a lone
/// surrogate, nesting past 128, `1e999`; as JSON and as an SSE event)
/// cannot be stored as written: its tape fails naming it, and the cassette
/// is left as it was, so the next replay does not miss what this run saw.
#[tokio::test]
async fn an_answer_the_cassette_cannot_hold_fails_its_tape_and_the_cassette_is_kept() {
    let fixture = upstream::start().await;
    let cassettes = Cassettes::new();
    let path = cassettes.path().join("recorded.sqlite");
    let upstream_url = fixture.url();
    let recording = [path.to_str().unwrap(), "--mode", "all", "--upstream", &upstream_url];
    let mut tapes = Tapes::start().await;
    let server = format!("{}{MAIL}", tapes.url);
    let auth = format!("Bearer {}", upstream::TOKEN);
    let headers = [("authorization", auth.as_str())];
    let lookup = |n: u64| json!({"name": "lookup", "arguments": {"n": n}});
    let stored = || -> Vec<Value> { exchanges(&path).iter().map(|e| e.request["params"].clone()).collect() };

    tapes.begin(&recording).await;
    assert_eq!(call(&server, &headers, "tools/call", lookup(1)).await.status, 200);
    assert_eq!(tapes.ask("0").await["code"], 0);
    assert_eq!(stored(), [lookup(1)]);
    for kind in ["surrogate", "deep", "huge"] {
        for stream in [false, true] {
            tapes.begin(&recording).await;
            assert_eq!(call(&server, &headers, "tools/call", lookup(2)).await.status, 200);
            let arguments = json!({"kind": kind, "stream": stream});
            let reply =
                call(&server, &headers, "tools/call", json!({"name": "unreadable", "arguments": arguments}))
                    .await;
            assert_eq!(reply.status, 200, "{kind} {stream}: relayed");
            assert!(
                reply.text.contains(&upstream::unreadable_answer("1", kind)),
                "{kind} {stream}: {reply:?}"
            );
            let told = tapes.ask("0").await;
            assert_eq!(told["code"], 1, "{kind} {stream}: {told}");
            let said = told["said"].to_string();
            assert!(said.contains("1 answer(s) the client was given are not in the cassette"), "{said}");
            assert!(said.contains("tools/call on mcp_MailTools"), "{said}");
            assert!(said.contains("was left as it was"), "{said}");
            assert_eq!(stored(), [lookup(1)], "{kind} {stream}: the cassette is as it was");
        }
    }
    let (code, log) = tapes.end().await;
    assert_eq!(code, Some(0), "{log}");
}

/// Root cause: a recording tape's end waited for every request in flight,
/// and the session's GET stream, relayed from the upstream, ends only when
/// the upstream or the client ends it: each tape's verdict waited out the
/// whole grace and the stream ran on. The recording's end now ends the
/// streams it relays, as replay's does.
#[tokio::test]
async fn a_recording_tape_ends_the_get_stream_it_relays() {
    let fixture = upstream::start().await;
    let cassettes = Cassettes::new();
    let path = cassettes.path().join("recorded.sqlite");
    let upstream_url = fixture.url();
    let mut tapes = Tapes::start().await;
    let server = format!("{}{MAIL}", tapes.url);
    let auth = format!("Bearer {}", upstream::TOKEN);
    let headers = [("authorization", auth.as_str())];
    tapes.begin(&[path.to_str().unwrap(), "--mode", "all", "--upstream", &upstream_url]).await;
    let session = initialize_with(&server, &headers).await;
    let mut stream = get_stream(&server, &session).await;
    let told = tapes.ask("0").await;
    assert_eq!(told["code"], 0, "{told}");
    let end = tokio::time::timeout(PATIENCE, stream.chunk()).await.expect("the stream ended with its tape");
    assert!(matches!(end, Ok(None)), "{end:?}");
    let (code, log) = tapes.end().await;
    assert_eq!(code, Some(0), "{log}");
    assert!(!log.contains("still in flight"), "{log}");
    assert_eq!(exchanges(&path).len(), 1, "initialize kept");
}

/// Root cause: the answers were written to stdout on the only thread, with
/// a blocking write: a runner that stopped reading stdout filled its pipe,
/// and the process then answered no HTTP and heard no SIGTERM. They are now
/// told by a thread of their own.
#[tokio::test]
async fn a_runner_that_stops_reading_stdout_stops_neither_the_tapes_nor_a_stop() {
    let cassettes = Cassettes::new();
    let cassette = mail(&cassettes, "mail", "Hello");
    let line = format!("{}\n0\n", json!([cassette]));
    let mut tapes = Tapes::start().await;
    // Far more answers than a pipe holds (each tape's report is ~1 KB), none read.
    let tapes_told = 400;
    let stdin = tapes.stdin.as_mut().unwrap();
    for _ in 0..tapes_told {
        stdin.write_all(line.as_bytes()).await.unwrap();
    }
    let mut begun = 0;
    while begun < tapes_told {
        let logged = tokio::time::timeout(PATIENCE, tapes.log.next_line()).await;
        let line = logged.expect("each tape begins").unwrap().expect("the log goes on");
        begun += usize::from(line.contains("test: tape "));
    }
    stdin.write_all(format!("{}\n", json!([cassette])).as_bytes()).await.unwrap();
    until_logged(&mut tapes.log, "test: tape ", PATIENCE).await;
    let answered =
        call(&format!("{}{MAIL}", tapes.url), &[], "tools/call", get_message(1)["params"].clone()).await;
    assert_eq!(answered.status, 200, "{answered:?}");
    let pid = tapes.child.id().unwrap().to_string();
    assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let status = tokio::time::timeout(PATIENCE, tapes.child.wait()).await.expect("SIGTERM heard").unwrap();
    assert_eq!(status.code(), Some(128 + 15));
}

/// Root cause: a tape's own flags given on the `--tapes-on-stdin` line were
/// taken and did nothing (each tape has its own, from its line), and a tape
/// line's `-- COMMAND` was taken as a tape with no verdict. Both are refused,
/// naming what.
#[tokio::test]
async fn what_a_line_cannot_set_is_refused_naming_it() {
    for flag in [
        &["--idle-timeout", "1"][..],
        &["--on-miss", "error"],
        &["--junit", "report.xml"],
        &["--model", "openai=http://127.0.0.1:9"],
        &["--pace", "recorded"],
        &["--ignore-param", "/x"],
    ] {
        let mut args = vec!["--tapes-on-stdin"];
        args.extend(flag);
        let refused = piped_test(&args).stdin(std::process::Stdio::null()).output().await.unwrap();
        let said = String::from_utf8_lossy(&refused.stderr);
        assert_eq!(refused.status.code(), Some(2), "{flag:?}: {said}");
        assert!(said.contains(flag[0]) && said.contains("cannot be used with"), "{flag:?}: {said}");
        assert!(refused.stdout.is_empty(), "{flag:?}: no tapes served");
    }
    let cassettes = Cassettes::new();
    let cassette = mail(&cassettes, "mail", "Hello");
    let mut tapes = Tapes::start().await;
    let told = tapes.ask(&json!([cassette, "--", "pytest"]).to_string()).await;
    assert!(told["error"].as_str().unwrap().contains("no command after `--`"), "{told}");
    tapes.begin(&[&cassette]).await;
    assert_eq!(tapes.ask("0").await["code"], 0);
    let (code, log) = tapes.end().await;
    assert_eq!(code, Some(0), "{log}");
}

/// Initializes a session at `url` with `headers`; its id.
async fn initialize_with(url: &str, headers: &[(&str, &str)]) -> String {
    let params = json!({"protocolVersion": "2025-06-18", "capabilities": {},
                        "clientInfo": {"name": "test", "version": "1"}});
    let reply = call(url, headers, "initialize", params).await;
    assert_eq!(reply.status, 200, "{reply:?}");
    reply.header("mcp-session-id").expect("initialize opens a session").to_owned()
}
