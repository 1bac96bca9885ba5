//! `mcp-tape test -- CMD` as CI runs it: the real binary wrapping a stand-in
//! agent suite (`scripts/ci_agent.py`, Python's standard library only) that
//! finds the tape through its environment. Exit codes, the environment,
//! each mode's effect on the cassette, `MCP_TAPE_MODE`, JUnit and usage
//! reports, `--max-age` and `prune`.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::Command;

use crate::support::*;
use crate::upstream;

const BIN: &str = env!("CARGO_BIN_EXE_mcp-tape");
const AGENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/integration/scripts/ci_agent.py");
/// Bound on one `mcp-tape test` run.
const PATIENCE: Duration = Duration::from_secs(60);
/// A loopback port nothing listens on: an upstream that must never be asked.
const NOWHERE: &str = "http://127.0.0.1:9";

pub(crate) struct Run {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// The answers the agent printed (its first stdout line).
    pub fn answers(&self) -> Value {
        serde_json::from_str(self.stdout.lines().next().unwrap_or("null")).unwrap_or(Value::Null)
    }
}

pub(crate) fn command(
    args: &[&str],
    env: &[(&str, &str)],
    calls: &Value,
    end: &str,
    env_file: &str,
) -> Command {
    let mut command = Command::new(BIN);
    command
        .arg("test")
        .args(args)
        .args(["--", "python3", AGENT, env_file, &calls.to_string(), end])
        .env_remove("MCP_TAPE_MODE")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command
}

pub(crate) async fn tape_test(args: &[&str], env: &[(&str, &str)], calls: Value, end: &str) -> Run {
    tape_test_noting_env(args, env, calls, end, "-").await
}

async fn tape_test_noting_env(
    args: &[&str],
    env: &[(&str, &str)],
    calls: Value,
    end: &str,
    env_file: &str,
) -> Run {
    let output = tokio::time::timeout(PATIENCE, command(args, env, &calls, end, env_file).output())
        .await
        .expect("mcp-tape test did not end in time")
        .unwrap();
    Run {
        status: output.status,
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// A cassette `mail.sqlite` holding `GetMessage {"id": "m1"}` on `mcp_MailTools`.
fn mail_cassette() -> (Cassettes, PathBuf) {
    let cassettes = Cassettes::new();
    let path = cassettes
        .write("mail", vec![tool_call("mcp_MailTools", "GetMessage", json!({"id": "m1"}), "Hello from m1")]);
    (cassettes, path)
}

const MAIL: &str = "/agents/servers/mcp_MailTools";

pub(crate) fn text_of(answer: &Value) -> &str {
    answer["result"]["content"][0]["text"].as_str().unwrap_or_default()
}

fn exchanges(cassette: &Path) -> Vec<mcp_tape::model::Exchange> {
    mcp_tape::cassette::store::Cassette::open_read_only(cassette).unwrap().exchanges().unwrap()
}

#[tokio::test]
async fn replay_serves_the_command_through_its_environment_and_passes() {
    let (cassettes, path) = mail_cassette();
    let env_file = cassettes.path().join("env.json");
    let calls = json!([[MAIL, "GetMessage", {"id": "m1"}]]);
    let run =
        tape_test_noting_env(&[path.to_str().unwrap()], &[], calls, "0", env_file.to_str().unwrap()).await;
    assert_eq!(run.status.code(), Some(0), "{}", run.stderr);
    assert_eq!(text_of(&run.answers()[0]), "Hello from m1");
    let seen: Value = serde_json::from_str(&std::fs::read_to_string(&env_file).unwrap()).unwrap();
    let url = seen["MCP_TAPE_URL"].as_str().unwrap();
    assert!(url.starts_with("http://127.0.0.1:") && !url.ends_with(":0"), "{seen}");
    assert_eq!(seen["MCP_PLATFORM_ENDPOINT"], seen["MCP_TAPE_URL"]);
    assert!(
        run.stderr.contains("1 requests: 1 answered from recordings, 0 by the mock, 0 missed"),
        "{}",
        run.stderr
    );
}

#[tokio::test]
async fn a_miss_fails_a_passing_command_and_the_junit_file_names_it() {
    let (cassettes, path) = mail_cassette();
    let junit = cassettes.path().join("junit.xml");
    let calls = json!([[MAIL, "GetMessage", {"id": "m1"}], [MAIL, "GetMessage", {"id": "m2"}]]);
    let args = [path.to_str().unwrap(), "--junit", junit.to_str().unwrap()];
    let run = tape_test(&args, &[], calls.clone(), "0").await;
    assert_eq!(run.status.code(), Some(1), "{}", run.stderr);
    assert!(run.stderr.contains("miss ×1: mcp_MailTools tools/call GetMessage"), "{}", run.stderr);
    assert!(run.stderr.contains("/arguments/id: recorded \"m1\", requested \"m2\""), "{}", run.stderr);
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains(r#"<testsuite name="mcp_MailTools" tests="1" failures="1""#), "{xml}");
    assert!(xml.contains(r#"<testcase classname="mcp_MailTools" name="tools/call GetMessage""#), "{xml}");
    assert!(xml.contains(r#"<failure type="miss" message="mcp-tape: no recorded answer for mcp_MailTools tools/call GetMessage"#), "{xml}");

    let allowed = tape_test(&[path.to_str().unwrap(), "--allow-misses"], &[], calls, "0").await;
    assert_eq!(allowed.status.code(), Some(0), "{}", allowed.stderr);
}

#[tokio::test]
async fn under_github_actions_a_miss_is_an_annotation_and_the_step_summary_tells_misses_and_faults() {
    let (cassettes, path) = mail_cassette();
    let summary = cassettes.path().join("step-summary.md");
    std::fs::write(&summary, "what an earlier step wrote\n").unwrap();
    let calls = json!([[MAIL, "GetMessage", {"id": "m1"}], [MAIL, "GetMessage", {"id": "m2"}]]);
    let args = [
        path.to_str().unwrap(),
        "--title",
        "agent suite, run 1",
        "--fault",
        r#"tool = "GetMessage", nth = [1], http = 503"#,
    ];
    let github = [("GITHUB_STEP_SUMMARY", summary.to_str().unwrap()), ("GITHUB_ACTIONS", "true")];
    let run = tape_test(&args, &github, calls.clone(), "0").await;
    assert_eq!(run.status.code(), Some(1), "{}", run.stderr);
    let annotations: Vec<&str> = run.stdout.lines().filter(|line| line.starts_with("::")).collect();
    assert_eq!(
        annotations,
        [
            "::error title=mcp-tape miss in agent suite%2C run 1::mcp_MailTools tools/call GetMessage missed ×1: \
             mcp-tape: no recorded answer for mcp_MailTools tools/call GetMessage: the nearest recording differs \
             at /arguments/id (recorded \"m1\", requested \"m2\"); 1 recorded request(s) of this kind differ"
        ],
        "{}",
        run.stdout
    );
    let written = std::fs::read_to_string(&summary).unwrap();
    let (earlier, section) = written.split_once('\n').unwrap();
    assert_eq!(earlier, "what an earlier step wrote", "appended, not replaced");
    assert!(section.starts_with("### mcp-tape: agent suite, run 1: failed\n\n2 requests: "), "{section}");
    let rows: Vec<&str> = section.lines().filter(|line| line.starts_with("| ")).collect();
    assert_eq!(rows[0], "| | case | requests | what |", "{section}");
    assert!(
        rows[1]
            .starts_with("| miss | mcp\\_MailTools tools/call GetMessage | 1 | mcp-tape: no recorded answer"),
        "{section}"
    );
    assert_eq!(
        rows[2], "| fault | mcp\\_MailTools tools/call GetMessage | 1 | fault --fault 1 (http 503) |",
        "{section}"
    );
    assert_eq!(rows.len(), 3, "{section}");

    // Outside GitHub Actions: no workflow command, no summary.
    std::fs::remove_file(&summary).unwrap();
    let elsewhere = [("GITHUB_STEP_SUMMARY", ""), ("GITHUB_ACTIONS", "")];
    let run = tape_test(&args, &elsewhere, calls, "0").await;
    assert_eq!(run.status.code(), Some(1), "{}", run.stderr);
    assert!(!run.stdout.contains("::error"), "{}", run.stdout);
    assert!(!summary.exists());
}

#[tokio::test]
async fn the_html_report_shows_a_miss_beside_its_nearest_recording_and_fetches_nothing() {
    let (cassettes, path) = mail_cassette();
    let html = cassettes.path().join("run.html");
    let calls = json!([[MAIL, "GetMessage", {"id": "m1"}], [MAIL, "GetMessage", {"id": "m<2>"}]]);
    let title = "test_agent.py::test_reads <m1> (cassettes/mail.sqlite)";
    let args = [path.to_str().unwrap(), "--html", html.to_str().unwrap(), "--title", title];
    let run = tape_test(&args, &[], calls, "0").await;
    assert_eq!(run.status.code(), Some(1), "{}", run.stderr);
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains(r#"<span class="verdict failed" id="verdict">failed</span>"#), "{page}");
    let escaped = "test_agent.py::test_reads &lt;m1&gt; (cassettes/mail.sqlite)";
    assert!(page.contains(&format!(r#"<p id="title">{escaped}</p>"#)), "{page}");
    assert!(page.contains(&format!("<title>mcp-tape run report of {escaped}: failed</title>")), "{page}");
    assert!(
        page.contains(r#"<section class="miss" data-case="mcp_MailTools tools/call GetMessage">"#),
        "{page}"
    );
    // The differing field, marked on both sides, the request's text escaped.
    assert!(page.contains(r#"<mark data-pointer="/arguments/id">&quot;m&lt;2&gt;&quot;</mark>"#), "{page}");
    assert!(page.contains(r#"<mark data-pointer="/arguments/id">&quot;m1&quot;</mark>"#), "{page}");
    assert!(
        page.contains(r#"<circle class="answer-miss""#)
            && page.contains(r#"<circle class="answer-recording""#),
        "{page}"
    );
    for fetching in ["<script", "<link", " src=", "url(", "@import"] {
        assert!(!page.contains(fetching), "the page must stand alone: {fetching}");
    }
}

#[tokio::test]
async fn the_commands_own_status_comes_back() {
    let (_cassettes, path) = mail_cassette();
    let failing = tape_test(&[path.to_str().unwrap()], &[], json!([]), "3").await;
    assert_eq!(failing.status.code(), Some(3), "{}", failing.stderr);
    let killed = tape_test(&[path.to_str().unwrap()], &[], json!([]), "signal").await;
    assert_eq!(killed.status.code(), Some(128 + 15), "{}", killed.stderr);
    // A failing command with misses still ends with its own status.
    let both =
        tape_test(&[path.to_str().unwrap()], &[], json!([[MAIL, "GetMessage", {"id": "x"}]]), "4").await;
    assert_eq!(both.status.code(), Some(4), "{}", both.stderr);
}

/// `mcp-tape test ARGS` with no `MCP_TAPE_MODE` and its three streams piped, as a test plugin
/// runs it.
pub(crate) fn piped_test(args: &[&str]) -> Command {
    let mut command = Command::new(BIN);
    command
        .arg("test")
        .args(args)
        .env_remove("MCP_TAPE_MODE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command
}

#[tokio::test]
async fn the_command_starts_with_the_huge_pages_the_tape_keeps_from_itself() {
    let (_cassettes, path) = mail_cassette();
    // Linux's own word for the process: THP_enabled is 0 under PR_SET_THP_DISABLE.
    let said = Command::new(BIN)
        .args(["test", path.to_str().unwrap(), "--", "sh", "-c"])
        .arg(r#"grep THP_enabled /proc/self/status; grep THP_enabled "/proc/$PPID/status""#)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&said.stdout);
    let flags: Vec<&str> = stdout.lines().filter_map(|line| line.split_whitespace().nth(1)).collect();
    assert_eq!(flags, ["1", "0"], "the command's, then the tape's: {stdout}");
}

#[tokio::test]
async fn sigterm_is_passed_on_to_the_command() {
    let (_cassettes, path) = mail_cassette();
    let mut child = command(&[path.to_str().unwrap()], &[], &json!([]), "wait", "-").spawn().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let ready = tokio::time::timeout(PATIENCE, async {
        while let Some(line) = stdout.next_line().await.unwrap() {
            if line == "ready" {
                return true;
            }
        }
        false
    })
    .await
    .expect("the command never got ready");
    assert!(ready, "the command ended before it was ready");
    let pid = child.id().unwrap().to_string();
    assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let status = tokio::time::timeout(PATIENCE, child.wait()).await.expect("no exit in time").unwrap();
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).await.unwrap();
    // The command's handler exits 7 on SIGTERM: that it did is the proof it got the signal.
    assert!(stderr.contains("exit status: 7; interrupted by signal 15"), "{stderr}");
    // The run was interrupted: it did not pass, whatever the command made of it.
    assert_eq!(status.code(), Some(128 + 15), "{stderr}");
}

#[tokio::test]
async fn usage_errors_exit_2() {
    let (cassettes, path) = mail_cassette();
    let file = path.to_str().unwrap();
    let no_upstream = tape_test(&[file, "--mode", "missing"], &[], json!([]), "0").await;
    assert_eq!(no_upstream.status.code(), Some(2), "{}", no_upstream.stderr);
    assert!(no_upstream.stderr.contains("--upstream"), "{}", no_upstream.stderr);
    let bad_mode = tape_test(&[file], &[("MCP_TAPE_MODE", "sometimes")], json!([]), "0").await;
    assert_eq!(bad_mode.status.code(), Some(2), "{}", bad_mode.stderr);
    assert!(bad_mode.stderr.contains("MCP_TAPE_MODE"), "{}", bad_mode.stderr);
    let dir = cassettes.path().to_str().unwrap();
    let a_directory = tape_test(&[dir, "--mode", "all", "--upstream", NOWHERE], &[], json!([]), "0").await;
    assert_eq!(a_directory.status.code(), Some(2), "{}", a_directory.stderr);
}

#[tokio::test]
async fn the_command_lines_mode_wins_over_mcp_tape_mode_and_vcrpys_names_are_taken() {
    let (_cassettes, path) = mail_cassette();
    let before = exchanges(&path);
    let calls = json!([[MAIL, "GetMessage", {"id": "m1"}]]);
    // MCP_TAPE_MODE=all would record from an upstream that is not there and replace the cassette.
    let file = path.to_str().unwrap();
    let args = [file, "--mode", "replay", "--upstream", NOWHERE];
    let run = tape_test(&args, &[("MCP_TAPE_MODE", "all")], calls.clone(), "0").await;
    assert_eq!(run.status.code(), Some(0), "{}", run.stderr);
    assert_eq!(text_of(&run.answers()[0]), "Hello from m1");
    assert_eq!(exchanges(&path), before);
    // With no --mode, the environment's (vcrpy's name for replay).
    let none =
        tape_test(&[file, "--upstream", NOWHERE], &[("MCP_TAPE_MODE", "none")], calls.clone(), "0").await;
    assert_eq!(none.status.code(), Some(0), "{}", none.stderr);
    assert_eq!(text_of(&none.answers()[0]), "Hello from m1");
    let recording =
        tape_test(&[file, "--upstream", NOWHERE], &[("MCP_TAPE_MODE", "all")], calls.clone(), "1").await;
    assert!(recording.stderr.contains("recording from http://127.0.0.1:9"), "{}", recording.stderr);
    assert_eq!(exchanges(&path), before);
    // A command that passes while the upstream failed it: the recording lacks those exchanges.
    let unreachable = tape_test(&[file, "--mode", "all", "--upstream", NOWHERE], &[], calls, "0").await;
    assert_eq!(unreachable.status.code(), Some(1), "{}", unreachable.stderr);
    let said = "the upstream failed 1 request(s), the first: upstream http://127.0.0.1:9";
    assert!(unreachable.stderr.contains(said), "{}", unreachable.stderr);
    assert_eq!(exchanges(&path), before, "the cassette is not replaced by an incomplete recording");
    let new_episodes = tape_test(&[file, "--mode", "new_episodes"], &[], json!([]), "0").await;
    assert!(
        new_episodes.stderr.contains("--mode missing: records, so it needs --upstream URL"),
        "{}",
        new_episodes.stderr
    );
}

#[tokio::test]
async fn a_missing_cassette_fails_every_request_and_names_the_cassette() {
    let cassettes = Cassettes::new();
    let path = cassettes.path().join("agent").join("never_recorded.sqlite");
    let file = path.to_str().unwrap();
    // Listing tools only: the mock would answer an empty list, and a test would pass against nothing.
    let listing = tape_test(&[file], &[], json!([[MAIL, "tools/list", {}]]), "0").await;
    assert_eq!(listing.status.code(), Some(1), "{}", listing.stderr);
    let error = &listing.answers()[0]["error"];
    assert_eq!(error["code"], -32001, "{error}");
    let message = error["message"].as_str().unwrap();
    assert!(message.contains(&format!("no cassette at {file}: record it first")), "{message}");
    assert!(listing.stderr.contains("no recordings under"), "{}", listing.stderr);
    assert!(listing.stderr.contains("miss ×1: mcp_MailTools tools/list"), "{}", listing.stderr);
    // A tool call is a failed tool result the agent sees, and a miss.
    let calling = tape_test(&[file], &[], json!([[MAIL, "GetMessage", {"id": "m1"}]]), "0").await;
    assert_eq!(calling.status.code(), Some(1), "{}", calling.stderr);
    assert_eq!(calling.answers()[0]["result"]["isError"], true, "{}", calling.stdout);
    assert!(text_of(&calling.answers()[0]).contains("no cassette at"), "{}", calling.stdout);
    // A command that asks nothing has nothing to miss.
    let quiet = tape_test(&[file], &[], json!([]), "0").await;
    assert_eq!(quiet.status.code(), Some(0), "{}", quiet.stderr);
    assert!(!path.exists(), "replay writes no cassette");
}

#[tokio::test]
async fn what_no_recording_holds_is_a_miss_but_housekeeping_on_a_recorded_server_is_not() {
    let (_cassettes, path) = mail_cassette();
    let file = path.to_str().unwrap();
    let housekeeping =
        json!([[MAIL, "ping", {}], [MAIL, "tools/list", {}], [MAIL, "GetMessage", {"id": "m1"}]]);
    let run = tape_test(&[file], &[], housekeeping, "0").await;
    assert_eq!(run.status.code(), Some(0), "{}", run.stderr);
    assert!(
        run.stderr.contains("3 requests: 1 answered from recordings, 2 by the mock, 0 missed"),
        "{}",
        run.stderr
    );

    let unheld = json!([[MAIL, "SendMail", {"to": "a"}], ["/agents/servers/mcp_Other", "tools/list", {}]]);
    let run = tape_test(&[file, "--on-miss", "error"], &[], unheld, "0").await;
    assert_eq!(run.status.code(), Some(1), "{}", run.stderr);
    let tool = run.answers()[0]["error"]["message"].as_str().unwrap().to_owned();
    assert!(tool.contains(r#"no tool "SendMail" is recorded (recorded tools: "GetMessage")"#), "{tool}");
    let server = run.answers()[1]["error"]["message"].as_str().unwrap().to_owned();
    assert!(server.contains("the cassettes hold nothing for server mcp_Other"), "{server}");
    assert!(run.stderr.contains("2 missed"), "{}", run.stderr);

    // `replay` keeps the mock for both.
    let replayer = Replayer::start(&[&path]).await;
    let unknown =
        call(&replayer.url(MAIL), &[], "tools/call", json!({"name": "SendMail", "arguments": {}})).await;
    assert!(unknown.text.contains("Unknown tool: SendMail"), "{}", unknown.text);
    let other = call(&replayer.url("/agents/servers/mcp_Other"), &[], "tools/list", json!({})).await;
    assert!(other.text.contains(r#""tools":[]"#), "{}", other.text);
    replayer.stop().await.unwrap();
}

#[tokio::test]
async fn a_directory_stands_for_the_cassettes_in_its_subdirectories() {
    let cassettes = Cassettes::new();
    let nested = cassettes.path().join("test_agent");
    std::fs::create_dir_all(&nested).unwrap();
    let (_mail, path) = mail_cassette();
    std::fs::copy(&path, nested.join("test_reads_mail.sqlite")).unwrap();
    let calls = json!([[MAIL, "GetMessage", {"id": "m1"}]]);
    let run = tape_test(&[cassettes.path().to_str().unwrap()], &[], calls, "0").await;
    assert_eq!(run.status.code(), Some(0), "{}", run.stderr);
    assert_eq!(text_of(&run.answers()[0]), "Hello from m1");
}

#[tokio::test]
async fn mode_all_replaces_the_cassette_only_when_the_command_passes() {
    let fixture = upstream::start().await;
    let (cassettes, path) = mail_cassette();
    let before = exchanges(&path);
    let url = fixture.url();
    let args = [path.to_str().unwrap(), "--mode", "all", "--upstream", &url];
    let token = [("AGENT_TOKEN", upstream::TOKEN)];
    let calls = json!([["/agents/servers/mcp_Fresh", "lookup", {"n": 1}]]);

    let failed = tape_test(&args, &token, calls.clone(), "1").await;
    assert_eq!(failed.status.code(), Some(1), "{}", failed.stderr);
    assert_eq!(fixture.state.calls("tools/call"), 1, "it did record through the upstream");
    assert_eq!(exchanges(&path), before, "the old cassette is intact");
    let left: Vec<_> = std::fs::read_dir(cassettes.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, ["mail.sqlite"], "no partial recording left behind");

    let junit = cassettes.path().join("junit.xml");
    let with_junit = [&args[..], &["--junit", junit.to_str().unwrap()]].concat();
    let passed = tape_test(&with_junit, &token, calls, "0").await;
    assert_eq!(passed.status.code(), Some(0), "{}", passed.stderr);
    assert!(passed.stderr.contains("1 forwarded to record"), "{}", passed.stderr);
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains(r#"<testsuite name="mcp_Fresh" tests="1" failures="0""#), "{xml}");
    assert!(xml.contains("1 requests: 1 forwarded to record"), "{xml}");
    std::fs::remove_file(&junit).unwrap();
    let now = exchanges(&path);
    assert_eq!(now.len(), 1, "{now:?}");
    assert_eq!((now[0].server.as_str(), now[0].method.as_str()), ("mcp_Fresh", "tools/call"));
    let provenance = &now[0].provenance;
    assert_eq!(provenance.upstream.as_deref(), Some(fixture.addr.to_string().as_str()));
    assert_eq!(provenance.recorder.as_deref(), Some(env!("CARGO_PKG_VERSION")));
    assert!(provenance.recorded_at.is_some());
}

#[tokio::test]
async fn mode_once_records_a_missing_cassette_then_replays_it() {
    let fixture = upstream::start().await;
    let cassettes = Cassettes::new();
    let path = cassettes.path().join("once.sqlite");
    let url = fixture.url();
    let calls = json!([["/agents/servers/mcp_Once", "lookup", {"n": 2}]]);
    let token = [("AGENT_TOKEN", upstream::TOKEN)];
    let first = tape_test(
        &[path.to_str().unwrap(), "--mode", "once", "--upstream", &url],
        &token,
        calls.clone(),
        "0",
    )
    .await;
    assert_eq!(first.status.code(), Some(0), "{}", first.stderr);
    assert_eq!(exchanges(&path).len(), 1);
    // Now the cassette exists: replayed, the upstream (now nowhere) never asked, or not given.
    let second = tape_test(
        &[path.to_str().unwrap(), "--mode", "once", "--upstream", NOWHERE],
        &token,
        calls.clone(),
        "0",
    )
    .await;
    assert_eq!(second.status.code(), Some(0), "{}", second.stderr);
    assert_eq!(second.answers()[0]["result"], first.answers()[0]["result"]);
    let third = tape_test(&[path.to_str().unwrap(), "--mode", "once"], &token, calls.clone(), "0").await;
    assert_eq!(third.status.code(), Some(0), "{}", third.stderr);
    assert_eq!(third.answers()[0]["result"], first.answers()[0]["result"]);
    assert_eq!(fixture.state.calls("tools/call"), 1);
    // A missing cassette and no upstream: nothing to record from, so each request misses, naming it.
    let absent = cassettes.path().join("absent.sqlite");
    let fourth = tape_test(&[absent.to_str().unwrap(), "--mode", "once"], &token, calls, "0").await;
    assert_eq!(fourth.status.code(), Some(1), "{}", fourth.stderr);
    assert!(text_of(&fourth.answers()[0]).contains("no cassette at"), "{}", fourth.stdout);
    assert!(!absent.exists());
    // Recorded and replayed, the cassette is one file: no WAL files left beside it in a checkout.
    let left: Vec<_> = std::fs::read_dir(cassettes.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, ["once.sqlite"]);
}

#[tokio::test]
async fn mode_missing_records_only_what_the_cassette_lacks() {
    let fixture = upstream::start().await;
    let (_cassettes, path) = mail_cassette();
    let url = fixture.url();
    let calls = json!([[MAIL, "GetMessage", {"id": "m1"}], [MAIL, "GetMessage", {"id": "m2"}]]);
    let token = [("AGENT_TOKEN", upstream::TOKEN)];
    let run =
        tape_test(&[path.to_str().unwrap(), "--mode", "missing", "--upstream", &url], &token, calls, "0")
            .await;
    assert_eq!(run.status.code(), Some(0), "{}", run.stderr);
    assert_eq!(text_of(&run.answers()[0]), "Hello from m1");
    assert_eq!(fixture.state.calls("tools/call"), 1, "only m2 went upstream");
    assert_eq!(exchanges(&path).len(), 2);
}

#[tokio::test]
async fn mode_missing_keeps_what_it_recorded_only_when_the_command_passes() {
    let fixture = upstream::start().await;
    let (cassettes, path) = mail_cassette();
    let before = exchanges(&path);
    let url = fixture.url();
    let args = [path.to_str().unwrap(), "--mode", "missing", "--upstream", &url];
    let calls = json!([[MAIL, "GetMessage", {"id": "m1"}], [MAIL, "GetMessage", {"id": "m3"}]]);
    let token = [("AGENT_TOKEN", upstream::TOKEN)];

    let failed = tape_test(&args, &token, calls.clone(), "1").await;
    assert_eq!(failed.status.code(), Some(1), "{}", failed.stderr);
    assert_eq!(fixture.state.calls("tools/call"), 1, "m3 went upstream");
    assert_eq!(exchanges(&path), before, "a failing command leaves the cassette as it was");
    let left: Vec<_> = std::fs::read_dir(cassettes.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, ["mail.sqlite"], "no partial recording left behind");

    let passed = tape_test(&args, &token, calls, "0").await;
    assert_eq!(passed.status.code(), Some(0), "{}", passed.stderr);
    let now = exchanges(&path);
    assert_eq!(now.len(), 2, "{now:?}");
    assert_eq!(now[0], before[0], "what the cassette held is kept");
}

#[tokio::test]
async fn max_age_warns_or_fails_on_old_recordings() {
    let cassettes = Cassettes::new();
    let path = cassettes.path().join("old.sqlite");
    let day = 86_400;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    let line = |tool: &str, age_days: i64| {
        json!({"server": "mcp_Old", "era": "handshake", "protocolVersion": "2025-06-18", "status": 200,
            "contentType": "application/json", "recordedAt": now - age_days * day, "recordedFrom": "old.example",
            "request": {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": {}}},
            "messages": [{"direction": "server", "offsetMs": 1,
                "body": {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": tool}]}}}]})
    };
    let jsonl = cassettes.path().join("old.jsonl");
    std::fs::write(&jsonl, format!("{}\n{}\n", line("stale", 40), line("recent", 2))).unwrap();
    let imported = std::process::Command::new(BIN)
        .args(["import", jsonl.to_str().unwrap(), "--cassette", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(imported.status.success(), "{}", String::from_utf8_lossy(&imported.stderr));
    let file = path.to_str().unwrap();
    let server = "/agents/servers/mcp_Old";

    let recent_only = tape_test(
        &[file, "--max-age", "30", "--expired", "error"],
        &[],
        json!([[server, "recent", {}]]),
        "0",
    )
    .await;
    assert_eq!(recent_only.status.code(), Some(0), "{}", recent_only.stderr);
    let warned = tape_test(&[file, "--max-age", "30"], &[], json!([[server, "stale", {}]]), "0").await;
    assert_eq!(warned.status.code(), Some(0), "{}", warned.stderr);
    assert!(
        warned.stderr.contains(
            "mcp_Old tools/call stale: the recording answering it is 40 days old, older than --max-age 30"
        ),
        "{}",
        warned.stderr
    );
    let failed =
        tape_test(&[file, "--max-age", "30", "--expired", "error"], &[], json!([[server, "stale", {}]]), "0")
            .await;
    assert_eq!(failed.status.code(), Some(1), "{}", failed.stderr);
    assert_eq!(text_of(&failed.answers()[0]), "stale", "the stale answer is still served");
}

#[tokio::test]
async fn prune_removes_what_a_passing_run_never_used() {
    let cassettes = Cassettes::new();
    let path = cassettes.write(
        "mail",
        vec![
            tool_call("mcp_MailTools", "GetMessage", json!({"id": "m1"}), "used"),
            tool_call("mcp_MailTools", "GetMessage", json!({"id": "m9"}), "never used"),
        ],
    );
    let report = cassettes.path().join("usage.json");
    let file = path.to_str().unwrap();
    let args = [file, "--report", report.to_str().unwrap()];
    let calls = json!([[MAIL, "GetMessage", {"id": "m1"}]]);
    let run = tape_test(&args, &[], calls, "0").await;
    assert_eq!(run.status.code(), Some(0), "{}", run.stderr);
    assert!(run.stderr.contains("1 recordings never used"), "{}", run.stderr);

    let pruned = std::process::Command::new(BIN)
        .args(["prune", file, "--unused-from", report.to_str().unwrap()])
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&pruned.stdout);
    assert!(pruned.status.success(), "{}", String::from_utf8_lossy(&pruned.stderr));
    assert!(printed.contains("removed #2: mcp_MailTools tools/call") && printed.contains("m9"), "{printed}");
    let said = String::from_utf8_lossy(&pruned.stderr);
    assert!(
        said.contains("removed 1 recording from") && said.ends_with("; 1 recording left in it\n"),
        "{said}"
    );
    let left = exchanges(&path);
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].request["params"]["arguments"]["id"], "m1");

    // The report of a failing run is refused: what it never used may be what it failed to reach.
    let failing = tape_test(&args, &[], json!([]), "1").await;
    assert_eq!(failing.status.code(), Some(1));
    let refused = std::process::Command::new(BIN)
        .args(["prune", file, "--unused-from", report.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("did not pass"));
    assert_eq!(exchanges(&path).len(), 1);
}

/// Once, prune deleted by row number alone: after the cassette was
/// re-recorded, the report's row held the recording the run had used, and
/// prune removed it.
#[tokio::test]
async fn prune_keeps_a_row_that_no_longer_holds_what_the_report_says() {
    let cassettes = Cassettes::new();
    let unused = tool_call("mcp_MailTools", "GetMessage", json!({"id": "m9"}), "never used");
    let used = tool_call("mcp_MailTools", "GetMessage", json!({"id": "m1"}), "used");
    let path = cassettes.write("mail", vec![used.clone(), unused.clone()]);
    let report = cassettes.path().join("usage.json");
    let file = path.to_str().unwrap();
    let run = tape_test(
        &[file, "--report", report.to_str().unwrap()],
        &[],
        json!([[MAIL, "GetMessage", {"id": "m1"}]]),
        "0",
    )
    .await;
    assert_eq!(run.status.code(), Some(0), "{}", run.stderr);

    // Re-recorded in the other order: row 2 now holds the recording the run used.
    std::fs::remove_file(&path).unwrap();
    let path = cassettes.write("mail", vec![unused, used]);
    let pruned = std::process::Command::new(BIN)
        .args(["prune", file, "--unused-from", report.to_str().unwrap()])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&pruned.stderr);
    assert!(pruned.status.success(), "{said}");
    assert!(said.contains("kept #2: it now holds another recording") && said.contains("m1"), "{said}");
    assert!(said.contains("removed 0 recordings"), "{said}");
    assert_eq!(exchanges(&path).len(), 2, "nothing removed");

    // A report from before reports said what each row held is refused.
    let mut old: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    for entry in old["unused"].as_array_mut().unwrap() {
        entry.as_object_mut().unwrap().retain(|k, _| k != "matchKey" && k != "occurrence");
    }
    std::fs::write(&report, old.to_string()).unwrap();
    let refused = std::process::Command::new(BIN)
        .args(["prune", file, "--unused-from", report.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("older mcp-tape"));
    assert_eq!(exchanges(&path).len(), 2);
}

#[tokio::test]
async fn faults_under_test_fail_the_calls_they_name_and_pass_the_run() {
    let (cassettes, path) = mail_cassette();
    let report = cassettes.path().join("run.json");
    let calls = json!([
        [MAIL, "GetMessage", {"id": "m1"}],
        [MAIL, "GetMessage", {"id": "m1"}],
        [MAIL, "GetMessage", {"id": "m1"}]
    ]);
    let args = [
        path.to_str().unwrap(),
        "--fault",
        r#"tool = "GetMessage", nth = [2], http = 503, retry_after = 4"#,
        "--report",
        report.to_str().unwrap(),
    ];
    let run = tape_test(&args, &[], calls, "0").await;
    assert_eq!(run.status.code(), Some(0), "a fault fails nothing by itself: {}", run.stderr);
    let answers = run.answers();
    assert_eq!(text_of(&answers[0]), "Hello from m1");
    assert_eq!(answers[1]["httpStatus"], json!(503), "{answers}");
    assert_eq!(text_of(&answers[2]), "Hello from m1");
    assert!(run.stderr.contains("3 requests: 2 answered from recordings"), "{}", run.stderr);
    assert!(run.stderr.contains("1 faults injected (1 instead of an answer)"), "{}", run.stderr);
    assert!(
        run.stderr.contains("fault --fault 1 (http 503) ×1: mcp_MailTools tools/call GetMessage"),
        "{}",
        run.stderr
    );
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(report["passed"], json!(true));
    assert_eq!(report["cases"][0]["faults"], json!([{"fault": "--fault 1 (http 503)", "injected": 1}]));
}

#[tokio::test]
async fn the_upstream_is_the_url_the_user_has_for_the_server() {
    let fixture = upstream::start().await;
    let cassettes = Cassettes::new();
    let path = cassettes.path().join("mcp.sqlite");
    let url = format!("{}/mcp", fixture.url());
    let args = [path.to_str().unwrap(), "--mode", "all", "--upstream", &url];
    let token = [("AGENT_TOKEN", upstream::TOKEN)];
    let calls =
        json!([["/mcp", "lookup", {"n": 1}], ["/", "lookup", {"n": 2}], ["/mcp/", "lookup", {"n": 3}]]);
    let run = tape_test(&args, &token, calls, "1").await;
    let paths: Vec<String> =
        fixture.state.seen.lock().unwrap().iter().map(|seen| seen.path.clone()).collect();
    assert_eq!(paths, ["/mcp", "/mcp", "/mcp/"], "never /mcp/mcp");
    for (answer, n) in run.answers().as_array().unwrap().iter().zip([1, 2]) {
        assert_eq!(answer["result"]["echo"]["arguments"]["n"], n, "{}", run.stdout);
    }
    // The upstream's redirect is not passed back: the client would leave the tape.
    let redirected = &run.answers()[2];
    assert_eq!(redirected["httpStatus"], 502, "{redirected}");
    let body = redirected["body"].as_str().unwrap();
    assert!(body.contains("redirected /mcp/ to /mcp"), "{body}");
    assert!(body.contains(&format!("give --upstream {url}")), "{body}");
}
