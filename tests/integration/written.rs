//! As the server wrote it, on every path. Root cause: a message was parsed
//! into a value and written out again — by record before storing it (a
//! string's `\u00e9` came back `é`), and by replay for every answer it
//! converted between eras (`1.50` came back `1.5`, and a 30-digit integer
//! a float: another value, not another spelling). A message is now kept as
//! its text, and what record or replay changes is written into that text.
//! Here a server spells its answer the way serde_json would not, over HTTP
//! and over stdio, recorded in each era and replayed to a client of each.

use std::path::Path;

use serde_json::{Value, json};

use crate::stdio::Peer;
use crate::support::*;
use crate::upstream::{self, RAW_CONTENT, TOKEN};

const MAIL: &str = "/agents/servers/mcp_MailTools";
const BIN: &str = env!("CARGO_BIN_EXE_mcp-tape");

#[derive(Clone, Copy, Debug)]
enum Era {
    Handshake,
    Stateless,
}

const ERAS: [Era; 2] = [Era::Handshake, Era::Stateless];

/// The server's structured content, as it wrote it.
fn content() -> String {
    format!(r#""structuredContent":{RAW_CONTENT}"#)
}

/// The `raw` tool called over HTTP in `era`; the answer's text.
async fn call_raw(url: &str, era: Era) -> String {
    let bearer = format!("Bearer {TOKEN}");
    let mut headers = vec![("authorization", bearer.as_str())];
    let params = match era {
        Era::Handshake => json!({"name": "raw", "arguments": {}}),
        Era::Stateless => {
            headers.extend([
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "tools/call"),
                ("mcp-name", "raw"),
            ]);
            enveloped(json!({"name": "raw", "arguments": {}}))
        }
    };
    let reply = call(url, &headers, "tools/call", params).await;
    assert_eq!(reply.status, 200, "{reply:?}");
    match reply.header("content-type") {
        Some("text/event-stream") => {
            reply.text.lines().filter_map(|l| l.strip_prefix("data: ")).filter(|d| !d.is_empty()).collect()
        }
        _ => reply.text,
    }
}

/// What every answer must show: the server's text, the caller's id (1),
/// and the caller's era's fields.
fn assert_as_written(answer: &str, era: Era, what: &str) {
    assert!(answer.contains(&content()), "{what}: the server's words changed: {answer}");
    let parsed: Value =
        serde_json::from_str(answer).unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {answer}"));
    assert_eq!(parsed["id"], 1, "{what}: {answer}");
    let result_type = parsed["result"].get("resultType");
    match era {
        Era::Handshake => assert_eq!(result_type, None, "{what}: {answer}"),
        Era::Stateless => assert_eq!(result_type, Some(&json!("complete")), "{what}: {answer}"),
    }
}

#[tokio::test]
async fn over_http_an_answer_keeps_its_words_through_record_and_replay_in_each_era() {
    let upstream = upstream::start().await;
    let direct = call_raw(&format!("{}{MAIL}", upstream.url()), Era::Handshake).await;
    assert_eq!(direct, upstream::raw_answer("1"), "the upstream writes it so");
    let recorded = [Cassettes::new(), Cassettes::new()];
    for (era, dir) in ERAS.into_iter().zip(&recorded) {
        let recorder = Recorder::start(&upstream.url(), dir.path(), RecordOptions::default()).await;
        let through = call_raw(&recorder.url(MAIL), era).await;
        assert_eq!(through, upstream::raw_answer("1"), "record relays it byte for byte ({era:?})");
        assert_eq!(recorder.stop().await.len(), 1);
    }
    for (recorded_in, dir) in ERAS.into_iter().zip(&recorded) {
        let replay = Replayer::start(&[dir.path()]).await;
        for era in ERAS {
            let answer = call_raw(&replay.url(MAIL), era).await;
            assert_as_written(&answer, era, &format!("HTTP, recorded {recorded_in:?}, replayed {era:?}"));
        }
        replay.stop().await.unwrap();
    }
}

/// Sends a `raw` tool call over stdio in `era` and returns the next line.
async fn ask_raw(peer: &mut Peer, era: Era) -> String {
    let params = match era {
        Era::Handshake => json!({"name": "raw", "arguments": {}}),
        Era::Stateless => enveloped(json!({"name": "raw", "arguments": {}})),
    };
    peer.send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})).await;
    peer.next_line().await
}

async fn initialize(peer: &mut Peer) {
    let params = json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}});
    peer.send(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})).await;
    let answer = peer.next().await;
    assert!(answer.get("result").is_some(), "{answer}");
    peer.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
}

fn raw_server() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/integration/scripts/raw_server.py")
        .display()
        .to_string()
}

#[tokio::test]
async fn over_stdio_an_answer_keeps_its_words_through_record_and_replay_in_each_era() {
    let recorded = [Cassettes::new(), Cassettes::new()];
    let script = raw_server();
    for (era, dir) in ERAS.into_iter().zip(&recorded) {
        let into = dir.path().to_str().unwrap();
        let args = [
            "record",
            "--stdio",
            "--cassettes",
            into,
            "--name",
            "raw",
            "--server",
            "mcp_Raw",
            "--",
            "python3",
            &script,
        ];
        let mut record = Peer::spawn(&args, &[]);
        if let Era::Handshake = era {
            initialize(&mut record).await;
        }
        let through = ask_raw(&mut record, era).await;
        assert_eq!(through, upstream::raw_answer("1"), "record relays it byte for byte ({era:?})");
        let (status, log) = record.close().await;
        assert!(status.success(), "{status}: {log}");
    }
    for (recorded_in, dir) in ERAS.into_iter().zip(&recorded) {
        for era in ERAS {
            let mut replay = Peer::spawn(&["replay", "--stdio", dir.path().to_str().unwrap()], &[]);
            if let Era::Handshake = era {
                initialize(&mut replay).await;
            }
            let answer = ask_raw(&mut replay, era).await;
            assert_as_written(&answer, era, &format!("stdio, recorded {recorded_in:?}, replayed {era:?}"));
            let (status, log) = replay.close().await;
            assert!(status.success(), "{status}: {log}");
        }
    }
}

/// Export and import keep the words too, and a HAR round trip keeps them.
#[tokio::test]
async fn export_and_import_keep_the_words_in_json_lines_and_har() {
    let upstream = upstream::start().await;
    let dir = Cassettes::new();
    let recorder = Recorder::start(&upstream.url(), dir.path(), RecordOptions::default()).await;
    call_raw(&recorder.url(MAIL), Era::Stateless).await;
    recorder.stop().await;
    let cassette = dir.path().join("recorded.sqlite");
    let run = |args: &[&str]| {
        let out = std::process::Command::new(BIN).args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let line = run(&["export", cassette.to_str().unwrap()]);
    assert!(line.contains(&content()), "{line}");
    for (format, from) in [("jsonl", None), ("har", Some("har"))] {
        let exported = dir.path().join(format!("out.{format}"));
        run(&["export", cassette.to_str().unwrap(), "--to", format, "-o", exported.to_str().unwrap()]);
        let again = dir.path().join(format!("again-{format}.sqlite"));
        let mut args = vec!["import", exported.to_str().unwrap(), "--cassette", again.to_str().unwrap()];
        if let Some(from) = from {
            args.extend(["--from", from]);
        }
        run(&args);
        let line = run(&["export", again.to_str().unwrap()]);
        assert!(line.contains(&content()), "after {format}: {line}");
    }
}

/// Recording a test again against the same server changes the cassette
/// file (when it was recorded, how long each answer took), but not what a
/// review shows of it: `git diff` through the documented textconv is
/// empty. Root cause: the export wrote `recordedAt` and every `offsetMs`,
/// so every exchange showed as removed and added.
#[tokio::test]
async fn recording_the_same_answers_again_leaves_the_review_diff_empty() {
    let upstream = upstream::start().await;
    let repo = Cassettes::new();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git").args(args).current_dir(repo.path()).output().unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    git(&["init", "-q"]);
    std::fs::write(repo.path().join(".gitattributes"), "*.sqlite diff=mcp-tape\n").unwrap();
    git(&["config", "diff.mcp-tape.textconv", &format!("{BIN} export")]);
    let record = || async {
        let cassette = repo.path().join("recorded.sqlite");
        let _ = std::fs::remove_file(&cassette);
        let recorder = Recorder::start(&upstream.url(), repo.path(), RecordOptions::default()).await;
        for era in ERAS {
            call_raw(&recorder.url(MAIL), era).await;
        }
        assert_eq!(recorder.stop().await.len(), 2);
        std::fs::read(cassette).unwrap()
    };
    let first = record().await;
    git(&["add", "."]);
    git(&["-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "first"]);
    // A second apart, so that the two recordings' times differ.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let second = record().await;
    assert_ne!(first, second, "the file changed");
    assert_eq!(git(&["diff", "--", "recorded.sqlite"]), "", "nothing a reviewer reads changed");
    let timed = std::process::Command::new(BIN)
        .args(["export", "--timings", repo.path().join("recorded.sqlite").to_str().unwrap()])
        .output()
        .unwrap();
    let timed = String::from_utf8(timed.stdout).unwrap();
    assert!(timed.contains("\"recordedAt\":") && timed.contains("\"offsetMs\":"), "{timed}");
}
