//! Faults on demand (`[[fault]]` tables, `--fault`, Agent 365 mocks'
//! `errorRate`), over the real binary: each `when` fires on exactly the
//! calls it names, each `what` gives what a real server gives, a bad rule is
//! refused at start with its place, record injects in front of the upstream
//! and stores nothing of a faulted call, and the reports count each fault.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::binary::Daemon;
use crate::stdio::Peer;
use crate::support::*;
use crate::upstream;
use mcp_tape::limits::MAX_HANGING_REQUESTS;

const BIN: &str = env!("CARGO_BIN_EXE_mcp-tape");

/// A cassette of server `mail` with tools `A` to `F` recorded (any of them
/// answering `ok A` ...) and `Stream`, whose answer is a stream of two
/// progress notifications and its result.
fn mail(cassettes: &Cassettes) -> std::path::PathBuf {
    let mut exchanges: Vec<_> = ["A", "B", "C", "D", "E", "F"]
        .iter()
        .map(|t| tool_call("mail", t, json!({}), &format!("ok {t}")))
        .collect();
    let progress = |n: u64| {
        json!({"jsonrpc": "2.0", "method": "notifications/progress",
               "params": {"progressToken": "p", "progress": n, "total": 2}})
    };
    exchanges.push(exchange(
        "mail",
        mcp_tape::model::Era::Handshake,
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
               "params": {"name": "Stream", "arguments": {}, "_meta": {"progressToken": "p"}}}),
        "text/event-stream",
        vec![
            progress(1),
            progress(2),
            json!({"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": "streamed"}]}}),
        ],
    ));
    cassettes.write("mail", exchanges)
}

fn rules_file(cassettes: &Cassettes, text: &str) -> String {
    let path = cassettes.path().join("mcp-tape.toml");
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

/// Calls `tool` on server `mail` with id `id`.
async fn call_tool(url: &str, tool: &str, id: u64, headers: &[(&str, &str)]) -> Reply {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": {}}});
    post(&format!("{url}/agents/servers/mail"), headers, &body.to_string()).await
}

/// Which of `count` calls of `tool` (numbered from 1) did not get their
/// recorded answer.
async fn failed_calls(url: &str, tool: &str, count: u64) -> Vec<u64> {
    let mut failed = Vec::new();
    for n in 1..=count {
        let reply = call_tool(url, tool, n, &[]).await;
        assert_eq!(reply.status, 200, "a handshake-era JSON-RPC error comes with 200: {reply:?}");
        let answer = reply.json();
        assert_eq!(answer["id"], json!(n), "every answer carries the caller's id: {answer}");
        if answer["result"]["content"][0]["text"] != json!(format!("ok {tool}")) {
            failed.push(n);
        }
    }
    failed
}

#[tokio::test]
async fn each_when_fires_on_exactly_the_calls_it_names_and_the_reports_count_them() {
    let cassettes = Cassettes::new();
    let cassette = mail(&cassettes);
    let rules = rules_file(
        &cassettes,
        r#"
[[fault]]
tool = "A"
nth = [2, 5]
error = { code = -32050, message = "A is down" }

[[fault]]
tool = "B"
every = 3
error = { code = -32050, message = "B is down" }

[[fault]]
tool = "C"
after = 4
error = { code = -32050, message = "C is down" }

[[fault]]
tool = "D"
once = true
error = { code = -32050, message = "D is down" }

[[fault]]
server = "ma?l"
tool = "[E]"
error = { code = -32050, message = "E is always down" }
"#,
    );
    let report = cassettes.path().join("run.json");
    let junit = cassettes.path().join("run.xml");
    let daemon = Daemon::start(&[
        cassette.to_str().unwrap(),
        "--rules",
        &rules,
        "--report",
        report.to_str().unwrap(),
        "--junit",
        junit.to_str().unwrap(),
    ])
    .await;
    assert_eq!(failed_calls(&daemon.url, "A", 6).await, [2, 5]);
    assert_eq!(failed_calls(&daemon.url, "B", 7).await, [3, 6]);
    assert_eq!(failed_calls(&daemon.url, "C", 6).await, [5, 6]);
    assert_eq!(failed_calls(&daemon.url, "D", 3).await, [1]);
    assert_eq!(failed_calls(&daemon.url, "E", 2).await, [1, 2]);
    assert!(failed_calls(&daemon.url, "F", 4).await.is_empty(), "no rule is about F");
    let (status, log) = daemon.stop("TERM").await;
    assert!(status.success(), "a fault is not a miss: {log}");
    assert!(log.contains("faults injected"), "{log}");

    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(report["passed"], json!(true), "faults fail nothing by themselves");
    let case = |tool: &str| {
        report["cases"].as_array().unwrap().iter().find(|c| c["subject"] == json!(tool)).unwrap().clone()
    };
    let a = case("A");
    assert_eq!(
        (a["hits"].as_u64(), a["faulted"].as_u64(), a["misses"].as_u64()),
        (Some(4), Some(2), Some(0))
    );
    let label = a["faults"][0]["fault"].as_str().unwrap();
    assert!(label.ends_with("mcp-tape.toml:2 (error -32050)"), "{label}");
    assert_eq!(a["faults"][0]["injected"], json!(2));
    assert_eq!(case("F")["faults"], json!([]));
    let junit = std::fs::read_to_string(&junit).unwrap();
    assert!(junit.contains("failures=\"0\""), "{junit}");
    assert!(junit.contains("2 answered by a fault instead"), "{junit}");
}

/// The calls of 24 that a seeded rate fails in one run of the binary.
async fn drawn(cassette: &Path, fault: &str) -> Vec<u64> {
    let daemon = Daemon::start(&[cassette.to_str().unwrap(), "--fault", fault]).await;
    let failed = failed_calls(&daemon.url, "A", 24).await;
    daemon.stop("TERM").await;
    failed
}

#[tokio::test]
async fn a_seeded_rate_fails_the_same_calls_every_run_and_other_calls_with_another_seed() {
    let cassettes = Cassettes::new();
    let cassette = mail(&cassettes);
    let one = r#"tool = "A", rate = 0.5, seed = 1, tool_error = "flaky""#;
    let first = drawn(&cassette, one).await;
    let second = drawn(&cassette, one).await;
    assert_eq!(first, second, "the same seed fails the same calls");
    assert!(!first.is_empty() && first.len() < 24, "a rate of 0.5 fails some calls, not all: {first:?}");
    let other = drawn(&cassette, r#"tool = "A", rate = 0.5, seed = 2, tool_error = "flaky""#).await;
    assert_ne!(first, other, "another seed fails other calls");
}

#[tokio::test]
async fn each_what_gives_what_a_real_server_gives() {
    let cassettes = Cassettes::new();
    let cassette = mail(&cassettes);
    let rules = rules_file(
        &cassettes,
        r#"
[[fault]]
tool = "A"
error = { code = -32050, message = "A is down", data = { region = "eu" } }

[[fault]]
tool = "B"
tool_error = "mailbox full"

[[fault]]
tool = "C"
http = 429
retry_after = 2

[[fault]]
tool = "D"
http = 503

[[fault]]
tool = "E"
delay_ms = 300

[[fault]]
tool = "Stream"
cut_stream_after = 1

[[fault]]
tool = "F"
nth = [1]
hang = true

[[fault]]
method = "tools/list"
lose_session = true
"#,
    );
    let daemon = Daemon::start(&[cassette.to_str().unwrap(), "--rules", &rules]).await;
    let url = &daemon.url;

    let error = call_tool(url, "A", 11, &[]).await.json();
    assert_eq!(error["id"], json!(11));
    assert_eq!(error["error"], json!({"code": -32050, "message": "A is down", "data": {"region": "eu"}}));

    let tool_error = call_tool(url, "B", 12, &[]).await.json();
    assert_eq!(
        tool_error["result"],
        json!({"content": [{"type": "text", "text": "mailbox full"}], "isError": true})
    );

    let limited = call_tool(url, "C", 13, &[]).await;
    assert_eq!((limited.status, limited.header("retry-after")), (429, Some("2")));
    assert_eq!(limited.header("content-type"), Some("text/plain; charset=utf-8"));
    assert_eq!(limited.text, "Too Many Requests\n", "a gateway's answer, no JSON-RPC, no word of mcp-tape");
    let unavailable = call_tool(url, "D", 14, &[]).await;
    assert_eq!((unavailable.status, unavailable.header("retry-after")), (503, None));

    let started = Instant::now();
    let late = call_tool(url, "E", 15, &[]).await.json();
    assert!(started.elapsed() >= Duration::from_millis(300), "answered after {:?}", started.elapsed());
    assert_eq!(late["result"]["content"][0]["text"], json!("ok E"), "the usual answer, later");

    let body = json!({"jsonrpc": "2.0", "id": 16, "method": "tools/call",
                      "params": {"name": "Stream", "arguments": {}, "_meta": {"progressToken": 99}}});
    let cut = post(&format!("{url}/agents/servers/mail"), &[], &body.to_string()).await;
    assert_eq!(cut.status, 200);
    let events = cut.events();
    assert_eq!(events.len(), 1, "one event, then the stream ends: {events:?}");
    assert_eq!(events[0]["method"], json!("notifications/progress"));
    assert_eq!(events[0]["params"]["progressToken"], json!(99));

    // A hang: no answer until the client gives up; the daemon serves on.
    let hung = reqwest::Client::new()
        .post(format!("{url}/agents/servers/mail"))
        .header("content-type", "application/json")
        .header("accept", BOTH)
        .timeout(Duration::from_millis(500))
        .body(json!({"jsonrpc": "2.0", "id": 17, "method": "tools/call", "params": {"name": "F", "arguments": {}}}).to_string())
        .send()
        .await;
    assert!(hung.as_ref().is_err_and(reqwest::Error::is_timeout), "{hung:?}");
    assert_eq!(call_tool(url, "F", 18, &[]).await.json()["result"]["content"][0]["text"], json!("ok F"));

    // A lost session: 404 for the faulted call and every later use of it.
    let session = initialize(&format!("{url}/agents/servers/mail")).await;
    let in_session = [("mcp-session-id", session.as_str())];
    assert_eq!(call_tool(url, "F", 19, &in_session).await.status, 200, "the session works before");
    let lost = call(&format!("{url}/agents/servers/mail"), &in_session, "tools/list", json!({})).await;
    assert_eq!(lost.status, 404, "{lost:?}");
    assert_eq!(lost.json()["id"], json!(1));
    assert_eq!(call_tool(url, "F", 20, &in_session).await.status, 404, "the session stays lost");
    let resumed = raw(
        reqwest::Method::GET,
        &format!("{url}/agents/servers/mail"),
        &[("mcp-session-id", session.as_str()), ("last-event-id", "0-1"), ("accept", "text/event-stream")],
        String::new(),
    )
    .await;
    assert_eq!(resumed.status, 404, "a lost session's streams do not resume: {resumed:?}");
    let ended =
        raw(reqwest::Method::DELETE, &format!("{url}/agents/servers/mail"), &in_session, String::new()).await;
    assert_eq!(ended.status, 404);
    let listed = call(&format!("{url}/agents/servers/mail"), &[], "tools/list", json!({})).await;
    assert_eq!(listed.status, 200, "a call in no session is no session to lose");

    let (status, log) = daemon.stop("TERM").await;
    assert!(status.success(), "{log}");
    assert!(log.contains("the client went away before the answer"), "the hung request is logged: {log}");
}

/// 1030 hung calls once held every connection slot: another client got no
/// answer. Hangs are bounded; past the bound a hang is a busy gateway's 503.
#[tokio::test]
async fn hangs_are_bounded_and_other_clients_are_served() {
    let cassettes = Cassettes::new();
    let cassette = mail(&cassettes);
    let rules = rules_file(&cassettes, "[[fault]]\ntool = \"F\"\nhang = true\n");
    let daemon = Daemon::start(&[cassette.to_str().unwrap(), "--rules", &rules]).await;
    let url = format!("{}/agents/servers/mail", daemon.url);
    let send = |id: usize, timeout: Duration| {
        reqwest::Client::new()
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", BOTH)
            .timeout(timeout)
            .body(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "F", "arguments": {}}}).to_string())
            .send()
    };
    // More hangs than are held: those past the bound, and only those, are answered, with 503.
    const PAST: usize = 8;
    let (answered, mut answers) = tokio::sync::mpsc::unbounded_channel();
    let hanging: Vec<_> = (0..MAX_HANGING_REQUESTS + PAST)
        .map(|id| {
            let (call, answered) = (send(id, Duration::from_secs(300)), answered.clone());
            tokio::spawn(async move {
                let status = match call.await {
                    Ok(answer) => (answer.status().as_u16(), answer.text().await.unwrap_or_default()),
                    Err(error) => (0, error.to_string()),
                };
                let _ = answered.send(status);
            })
        })
        .collect();
    for _ in 0..PAST {
        let refused =
            tokio::time::timeout(Duration::from_secs(60), answers.recv()).await.expect("refused in time");
        assert_eq!(
            refused,
            Some((503, "Service Unavailable\n".to_owned())),
            "past {MAX_HANGING_REQUESTS} hangs"
        );
    }
    let other = call_tool(&daemon.url, "A", 1, &[]).await.json();
    assert_eq!(other["result"]["content"][0]["text"], json!("ok A"), "another client is served");
    hanging.iter().for_each(tokio::task::JoinHandle::abort);
    let (status, log) = daemon.stop("TERM").await;
    assert!(status.success(), "{log}");
    let warned = format!("a hang fault found {MAX_HANGING_REQUESTS} requests hanging already");
    assert_eq!(log.matches(&warned).count(), PAST, "{log}");
}

fn binary_output(args: &[&str], cwd: &Path) -> std::process::Output {
    std::process::Command::new(BIN).args(args).current_dir(cwd).output().unwrap()
}

#[test]
fn a_bad_fault_rule_is_refused_at_start_with_its_place_and_reason() {
    let cassettes = Cassettes::new();
    let cassette = mail(&cassettes);
    std::fs::write(
        cassettes.path().join("mcp-tape.toml"),
        "[[fault]]\ntool = \"A\"\nhttp = 429\n\n[[fault]]\ntool = \"B\"\nnth = [2]\nevery = 3\nhang = true\n",
    )
    .unwrap();
    let refused = binary_output(&["replay", "--port", "0", cassette.to_str().unwrap()], cassettes.path());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "mcp-tape.toml:8: a fault fires by one of nth, every, after, once and rate, not nth and every"
        ),
        "{stderr}"
    );

    std::fs::remove_file(cassettes.path().join("mcp-tape.toml")).unwrap();
    let spec = r#"tool = "A", http = 200"#;
    let refused = binary_output(
        &["replay", "--port", "0", "--fault", spec, cassette.to_str().unwrap()],
        cassettes.path(),
    );
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(r#"--fault "tool = \"A\", http = 200": http 200: a failure status, from 400 to 599"#),
        "{stderr}"
    );
}

#[tokio::test]
async fn record_injects_in_front_of_the_upstream_and_stores_nothing_of_a_faulted_call() {
    let upstream = upstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let options = RecordOptions {
        faults: vec![r#"tool = "echo_auth", nth = [2], http = 503"#.into()],
        ..RecordOptions::default()
    };
    let recorder = Recorder::start(&upstream.url(), dir.path(), options).await;
    let auth = format!("Bearer {}", upstream::TOKEN);
    let headers = [("authorization", auth.as_str())];
    let url = recorder.url("/agents/servers/mail");
    let body = |id: u64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "echo_auth", "arguments": {}}}).to_string()
    };
    let first = post(&url, &headers, &body(1)).await;
    let second = post(&url, &headers, &body(2)).await;
    let third = post(&url, &headers, &body(3)).await;
    assert_eq!((first.status, second.status, third.status), (200, 503, 200));
    assert_eq!(second.text, "Service Unavailable\n", "{second:?}");
    assert_eq!(upstream.state.calls("tools/call"), 2, "the faulted call never reached the upstream");
    let stored = recorder.stop().await;
    assert_eq!(stored.len(), 2, "nothing of the faulted call is stored: {stored:?}");
}

#[tokio::test]
async fn over_stdio_a_cut_stream_ends_the_output_and_statuses_are_left_out() {
    let cassettes = Cassettes::new();
    let cassette = mail(&cassettes);
    let mut peer = Peer::spawn(
        &[
            "replay",
            "--stdio",
            cassette.to_str().unwrap(),
            "--fault",
            r#"tool = "A", http = 503"#,
            "--fault",
            r#"tool = "B", tool_error = "no""#,
            "--fault",
            r#"tool = "Stream", nth = [2], cut_stream_after = 1"#,
        ],
        &[],
    );
    let call = |id: u64, tool: &str| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": tool, "arguments": {}, "_meta": {"progressToken": id}}})
    };
    peer.send(call(1, "A")).await;
    assert_eq!(peer.next().await["result"]["content"][0]["text"], json!("ok A"), "no status fault on stdio");
    peer.send(call(2, "B")).await;
    assert_eq!(peer.next().await["result"]["isError"], json!(true));
    peer.send(call(3, "Stream")).await;
    let mut whole = Vec::new();
    for _ in 0..3 {
        whole.push(peer.next().await.get("method").cloned().unwrap_or(json!("result")));
    }
    assert_eq!(whole, [json!("notifications/progress"), json!("notifications/progress"), json!("result")]);
    peer.send(call(4, "Stream")).await;
    let cut = peer.next().await;
    assert_eq!(
        (cut["method"].as_str(), &cut["params"]["progressToken"]),
        (Some("notifications/progress"), &json!(4))
    );
    let mut rest = peer.stdout.take().unwrap();
    let after = tokio::time::timeout(Duration::from_secs(30), rest.next_line()).await.unwrap().unwrap();
    assert_eq!(after, None, "one event, then the output ends");
    let (status, log) = peer.wait().await;
    assert_eq!(status.code(), Some(0), "{log}");
    assert!(log.contains("is left out: stdio has no HTTP statuses or sessions"), "{log}");
}

#[test]
fn imported_mocks_fail_the_same_calls_with_the_same_seed() {
    let dir = tempfile::tempdir().unwrap();
    let mocks = dir.path().join("mocks");
    std::fs::create_dir(&mocks).unwrap();
    std::fs::write(
        mocks.join("mcp_MailTools.json"),
        r#"[{"name": "SendEmail", "responseTemplate": "sent to {{to}}", "errorRate": 0.5},
            {"name": "Down", "errorRate": 1, "statusCode": 503}]"#,
    )
    .unwrap();
    let import = |seed: &str, name: &str| {
        let cassette = dir.path().join(name);
        let output = binary_output(
            &[
                "import",
                "--a365-mocks",
                mocks.to_str().unwrap(),
                "--seed",
                seed,
                "--cassette",
                cassette.to_str().unwrap(),
            ],
            dir.path(),
        );
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        cassette
    };
    let seeded = import("5", "five.sqlite");
    let reseeded = import("6", "six.sqlite");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let failing = |cassette: &Path| {
        runtime.block_on(async {
            let daemon = Daemon::start(&[cassette.to_str().unwrap()]).await;
            let url = format!("{}/agents/servers/mcp_MailTools", daemon.url);
            let mut failed = Vec::new();
            for n in 1..=20u64 {
                let body = json!({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                                  "params": {"name": "SendEmail", "arguments": {"to": "ann"}}});
                let reply = post(&url, &[], &body.to_string()).await;
                // A template answers as the real servers do: a stream, when the client takes one.
                let answer = match reply.header("content-type") {
                    Some("text/event-stream") => reply.events().pop().unwrap(),
                    _ => reply.json(),
                };
                match &answer["error"] {
                    Value::Null => assert_eq!(answer["result"]["content"][0]["text"], json!("sent to ann")),
                    error => {
                        assert_eq!(error["code"], json!(500), "the mock server's own failure: {error}");
                        assert_eq!(error["message"], json!("Simulated error for mock tool 'SendEmail'"));
                        failed.push(n);
                    }
                }
            }
            let down = post(
                &url,
                &[],
                &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                               "params": {"name": "Down", "arguments": {}}})
                .to_string(),
            )
            .await;
            assert_eq!(down.status, 503, "statusCode is the failed call's status");
            daemon.stop("TERM").await;
            failed
        })
    };
    let first = failing(&seeded);
    assert_eq!(first, failing(&seeded), "the same seed fails the same calls on two runs");
    assert!(!first.is_empty() && first.len() < 20, "{first:?}");
    assert_ne!(first, failing(&reseeded), "another seed, other calls");
}
