//! Match rules chosen at replay time (`mcp-tape.toml`, `--rules`), through
//! the real binary under `mcp-tape test` with the stand-in agent: each rule
//! kind answers the request it must and refuses the one it must not; an
//! exact recording still wins; a bad file is refused at start with its
//! line; no file changes nothing; the reports say which rule answered; and
//! `rules suggest` turns a run's misses into rules that answer them.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::ci::{Run, command, tape_test, text_of};
use crate::support::*;

const BIN: &str = env!("CARGO_BIN_EXE_mcp-tape");
const MAIL: &str = "/agents/servers/mcp_MailTools";
/// Bound on one `mcp-tape test` run started here.
const PATIENCE: Duration = Duration::from_secs(60);

/// One rule of each kind, each for its own tool; none for `Find`.
const RULES: &str = r#"# rules for the tests
[[match]]
server = "mcp_Mail*"
tool = "Send"
ignore = ["/arguments/requestId"]
normalize = { "/arguments/subject" = ["case", "space"], "/arguments/count" = ["number"] }

[[match]]
tool = "List"
by = "sequence"

[[match]]
tool = "Near*"
by = "nearest"
"#;

/// A cassette of `mcp_MailTools` recordings for [`RULES`], and the rules
/// file beside it.
fn recorded() -> (Cassettes, PathBuf, PathBuf) {
    let cassettes = Cassettes::new();
    let path = cassettes.write(
        "mail",
        vec![
            tool_call(
                "mcp_MailTools",
                "Send",
                json!({"subject": "Team sync", "count": 2, "requestId": "r-1"}),
                "sent sync",
            ),
            tool_call(
                "mcp_MailTools",
                "Send",
                json!({"subject": "Budget review", "count": 1, "requestId": "r-2"}),
                "sent budget",
            ),
            tool_call("mcp_MailTools", "List", json!({"top": 5}), "five"),
            tool_call("mcp_MailTools", "List", json!({"top": 10}), "ten"),
            tool_call("mcp_MailTools", "Nearby", json!({"subject": "Team sync", "top": 5}), "near sync"),
            tool_call(
                "mcp_MailTools",
                "Nearby",
                json!({"subject": "Budget review", "top": 5}),
                "near budget",
            ),
            tool_call("mcp_MailTools", "Find", json!({"query": "vpn"}), "found vpn"),
        ],
    );
    let rules = cassettes.path().join("rules.toml");
    std::fs::write(&rules, RULES).unwrap();
    (cassettes, path, rules)
}

/// Runs the stand-in agent making `calls` under `mcp-tape test ARGS`.
async fn agent(args: &[&str], calls: Value) -> Run {
    tape_test(args, &[], calls, "0").await
}

/// The text of a tool call's miss (a failed call, `isError`), or a panic
/// saying what came instead.
fn miss(answer: &Value) -> &str {
    assert_eq!(answer["result"]["isError"], true, "expected a miss: {answer}");
    let text = answer["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("mcp-tape: no recorded answer for "), "expected a miss: {answer}");
    text
}

#[tokio::test]
async fn ignore_and_normalize_decide_their_tool_only() {
    let (_dir, cassette, rules) = recorded();
    let calls = json!([
        [MAIL, "Send", {"subject": "  team   SYNC ", "count": "2", "requestId": "r-77"}],
        [MAIL, "Send", {"subject": "Team sync tomorrow", "count": 2, "requestId": "r-78"}],
        [MAIL, "Find", {"query": "VPN"}],
    ]);
    let run = agent(&[cassette.to_str().unwrap(), "--rules", rules.to_str().unwrap()], calls).await;
    let answers = run.answers();
    assert_eq!(text_of(&answers[0]), "sent sync", "{}", run.stderr);
    let refused = miss(&answers[1]);
    assert!(refused.contains(&format!("rule {}:2 (exact)", rules.display())), "{refused}");
    assert!(
        refused.contains("no recording is the same once the rule's ignore and normalize apply"),
        "{refused}"
    );
    miss(&answers[2]);
    assert_eq!(run.status.code(), Some(1), "the misses fail the run: {}", run.stderr);
}

#[tokio::test]
async fn sequence_gives_the_nth_recording_and_misses_past_the_last() {
    let (_dir, cassette, rules) = recorded();
    let calls = json!([
        [MAIL, "List", {"top": 99}],
        [MAIL, "List", {"top": 10}],
        [MAIL, "List", {"top": 1, "filter": "unread"}],
        [MAIL, "List", {"top": 2}],
        [MAIL, "Find", {"query": "other"}],
    ]);
    let run = agent(&[cassette.to_str().unwrap(), "--rules", rules.to_str().unwrap()], calls).await;
    let answers = run.answers();
    let texts: Vec<&str> = answers.as_array().unwrap()[..3].iter().map(text_of).collect();
    assert_eq!(texts, ["five", "ten", "ten"], "the exact recording wins over the sequence: {}", run.stderr);
    let past = miss(&answers[3]);
    assert!(past.contains("call 3 of this kind, past the last of its 2 recordings"), "{past}");
    miss(&answers[4]);
}

#[tokio::test]
async fn nearest_picks_the_least_different_recording_and_says_where_it_differs() {
    let (dir, cassette, rules) = recorded();
    let report = dir.path().join("report.json");
    let junit = dir.path().join("junit.xml");
    let calls = json!([
        [MAIL, "Nearby", {"subject": "Team sync tomorrow", "top": 5}],
        [MAIL, "Nearby", {"subject": "Budget", "top": 7}],
        [MAIL, "Nearly", {"subject": "Team sync"}],
        [MAIL, "Send", {"subject": "team sync", "count": 2, "requestId": "r-9"}],
        [MAIL, "Find", {"query": "vpn"}],
    ]);
    let args = [
        cassette.to_str().unwrap(),
        "--rules",
        rules.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
        "--junit",
        junit.to_str().unwrap(),
    ];
    let run = agent(&args, calls).await;
    assert_eq!(run.status.code(), Some(1), "the call of a tool nothing recorded misses: {}", run.stderr);
    let answers = run.answers();
    assert_eq!(text_of(&answers[0]), "near sync");
    assert_eq!(text_of(&answers[1]), "near budget");
    assert!(
        text_of(&answers[2]).contains(r#"no tool "Nearly" is recorded"#),
        "a rule never answers for a tool nothing recorded: {}",
        answers[2]
    );
    assert_eq!(text_of(&answers[3]), "sent sync");
    assert_eq!(text_of(&answers[4]), "found vpn");
    assert!(
        run.stderr.contains(
            r#"differs at /arguments/subject (recorded "Team sync", requested "Team sync tomorrow")"#
        ),
        "the nearest answer is logged with its differences: {}",
        run.stderr
    );
    let nearest = format!("{}:12 (nearest)", rules.display());
    assert!(
        run.stderr.contains(&format!("rule {nearest} ×2: mcp_MailTools tools/call Nearby")),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("1 exactly, 3 by match rules"), "{}", run.stderr);

    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let case = |tool: &str| {
        report["cases"].as_array().unwrap().iter().find(|c| c["subject"] == tool).unwrap().clone()
    };
    assert_eq!(case("Find")["hits"], 1);
    let send = case("Send");
    assert_eq!(
        (send["hits"].clone(), send["rules"][0].clone()),
        (
            json!(0),
            json!({
                "rule": format!("{}:2 (exact)", rules.display()), "answered": 1, "nearestDifferences": [],
            })
        )
    );
    let nearby = &case("Nearby")["rules"][0];
    assert_eq!(nearby["rule"], nearest);
    assert_eq!(nearby["answered"], 2);
    assert_eq!(
        nearby["nearestDifferences"][1],
        json!([
            {"pointer": "/arguments/subject", "recorded": "Budget review", "requested": "Budget"},
            {"pointer": "/arguments/top", "recorded": 5, "requested": 7},
        ])
    );
    let junit = std::fs::read_to_string(&junit).unwrap();
    assert!(junit.contains(&format!("2 requests: 2 answered by rule {nearest}")), "{junit}");
    assert!(junit.contains("nearest differed at /arguments/subject"), "{junit}");
}

#[tokio::test]
async fn without_a_rules_file_nothing_changes_and_mcp_tape_toml_is_the_default() {
    let (dir, cassette, _rules) = recorded();
    let calls = json!([[MAIL, "Send", {"subject": "Team sync", "count": 2, "requestId": "r-5"}]]);
    let elsewhere = tempfile::tempdir().unwrap();
    let run = run_in(elsewhere.path(), &[cassette.to_str().unwrap()], &calls).await;
    miss(&run.answers()[0]);
    assert!(!run.stderr.contains("match rules:"), "{}", run.stderr);

    std::fs::write(dir.path().join("mcp-tape.toml"), RULES).unwrap();
    let run = run_in(dir.path(), &[cassette.to_str().unwrap()], &calls).await;
    assert_eq!(text_of(&run.answers()[0]), "sent sync", "{}", run.stderr);
    assert!(run.stderr.contains("match rules: 3 from mcp-tape.toml"), "{}", run.stderr);
}

/// `mcp-tape test ARGS` making `calls` with `dir` as its working directory.
async fn run_in(dir: &Path, args: &[&str], calls: &Value) -> Run {
    let mut command = command(args, &[], calls, "0", "-");
    command.current_dir(dir);
    let output = tokio::time::timeout(PATIENCE, command.output()).await.expect("no end in time").unwrap();
    Run {
        status: output.status,
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

#[test]
fn a_bad_rules_file_is_refused_at_start_with_its_line_and_reason() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "[[match]]\ntool = \"Send\"\nby = \"exact\"\nmatch_on = [\"body\"]\n",
            4,
            "unknown field `match_on`",
        ),
        (
            "[[match]]\ntool = \"Send\"\n\n[[match]]\nignore = [\"arguments/requestId\"]\n",
            5,
            "starts with `/`",
        ),
        ("[[match]]\nserver = \"mcp_[Mail\"\n", 2, "not closed"),
    ];
    for (text, line, reason) in cases {
        let file = dir.path().join("rules.toml");
        std::fs::write(&file, text).unwrap();
        for command in ["replay", "test"] {
            let mut args = vec![command, "--rules", file.to_str().unwrap(), "--port", "0"];
            if command == "test" {
                args.extend(["--", "true"]);
            }
            let output = std::process::Command::new(BIN).args(&args).output().unwrap();
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert_eq!(output.status.code(), Some(2), "{command} with {text:?}: {stderr}");
            let expected = format!("{}:{line}: ", file.display());
            assert!(
                stderr.contains(&expected) && stderr.contains(reason),
                "{command} with {text:?}: {stderr}"
            );
        }
    }
    let missing = std::process::Command::new(BIN)
        .args(["replay", "--rules", "/nonexistent/mcp-tape.toml", "--port", "0"])
        .output()
        .unwrap();
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("/nonexistent/mcp-tape.toml"));
}

#[tokio::test]
async fn a_rules_file_that_is_no_regular_file_or_too_large_is_refused_without_being_read() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("rules.fifo");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let large = dir.path().join("large.toml");
    let table = "[[match]]\nserver = \"s\"\ntool = \"t\"\nby = \"exact\"\n\n";
    std::fs::write(&large, table.repeat(1024 * 1024 / table.len() + 1)).unwrap();
    for (file, why) in [
        (fifo.as_path(), "not a regular file"),
        (Path::new("/dev/zero"), "not a regular file"),
        (large.as_path(), "larger than 1048576 bytes"),
    ] {
        let run = tokio::process::Command::new(BIN)
            .args(["replay", "--rules", file.to_str().unwrap(), "--port", "0"])
            .kill_on_drop(true)
            .output();
        // A FIFO nobody writes to would block open(2) for ever.
        let output =
            tokio::time::timeout(std::time::Duration::from_secs(20), run).await.expect("refused in time");
        let output = output.unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{}: {stderr}", file.display());
        assert!(stderr.contains(why), "{}: {stderr}", file.display());
    }
}

#[tokio::test]
async fn rules_suggest_turns_a_runs_misses_into_rules_that_answer_them() {
    let (dir, cassette, _rules) = recorded();
    // Two tests' reports, as the pytest plugin writes them: one directory, one report each.
    let reports = dir.path().join("reports");
    std::fs::create_dir_all(reports.join("test_module")).unwrap();
    let report = reports.join("test_module").join("test_one.json");
    let calls = json!([
        [MAIL, "Send", {"subject": "TEAM SYNC", "count": "2", "requestId": "r-40"}],
        [MAIL, "Find", {"query": "wifi"}],
    ]);
    let run = agent(&[cassette.to_str().unwrap(), "--report", report.to_str().unwrap()], calls.clone()).await;
    assert_eq!(run.status.code(), Some(1), "both miss: {}", run.stderr);
    let other = reports.join("test_two.json");
    let run = agent(
        &[cassette.to_str().unwrap(), "--report", other.to_str().unwrap()],
        json!([[MAIL, "Find", {"query": "printer"}]]),
    )
    .await;
    assert_eq!(run.status.code(), Some(1), "{}", run.stderr);

    let suggested = std::process::Command::new(BIN)
        .args(["rules", "suggest", cassette.to_str().unwrap(), "--from", reports.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(suggested.status.success(), "{}", String::from_utf8_lossy(&suggested.stderr));
    let text = String::from_utf8(suggested.stdout).unwrap();
    assert!(
        text.contains("# mcp_MailTools tools/call Find: missed 2 times"),
        "one table for both tests' misses: {text}"
    );
    assert!(text.contains("tool = \"Send\"\nignore = [\"/arguments/requestId\"]\nnormalize = { \"/arguments/count\" = [\"number\"], \"/arguments/subject\" = [\"case\"] }"), "{text}");
    assert!(text.contains("tool = \"Find\"\nignore = [\"/arguments/query\"]"), "{text}");
    assert_eq!(text.matches("# checked: answers the miss with the recording at").count(), 2, "{text}");

    let rules = dir.path().join("suggested.toml");
    std::fs::write(&rules, &text).unwrap();
    let run = agent(&[cassette.to_str().unwrap(), "--rules", rules.to_str().unwrap()], calls).await;
    assert_eq!(run.status.code(), Some(0), "{}", run.stderr);
    let answers = run.answers();
    assert_eq!((text_of(&answers[0]), text_of(&answers[1])), ("sent sync", "found vpn"));
}

#[tokio::test]
async fn listed_prompts_and_resources_with_unrecorded_arguments_are_misses_not_unknown() {
    let cassettes = Cassettes::new();
    let request =
        |method: &str, params: Value| json!({"jsonrpc": "2.0", "id": 3, "method": method, "params": params});
    let answer = |result: Value| vec![json!({"jsonrpc": "2.0", "id": 3, "result": result})];
    let server = "mcp_Docs";
    let recorded = |method: &str, params: Value, result: Value| {
        exchange(
            server,
            mcp_tape::model::Era::Handshake,
            request(method, params),
            "application/json",
            answer(result),
        )
    };
    cassettes.write(
        "docs",
        vec![
            recorded(
                "prompts/list",
                json!({}),
                json!({"prompts": [{"name": "summarize", "arguments": [{"name": "topic"}]}]}),
            ),
            recorded(
                "prompts/get",
                json!({"name": "summarize", "arguments": {"topic": "vpn"}}),
                json!({"messages": [{"role": "user", "content": {"type": "text", "text": "Summarize vpn"}}]}),
            ),
            recorded(
                "resources/list",
                json!({}),
                json!({"resources": [{"uri": "file:///a.txt", "name": "a"}]}),
            ),
        ],
    );
    let options = Options { on_miss: mcp_tape::config::OnMiss::Mock, ..Options::default() };
    let replay = Replayer::start_with(&[cassettes.path()], options).await;
    let url = replay.url(&format!("/agents/servers/{server}"));
    let prompt =
        call(&url, &[], "prompts/get", json!({"name": "summarize", "arguments": {"topic": "wifi"}})).await;
    let text =
        prompt.json()["result"]["messages"][0]["content"]["text"].as_str().unwrap_or_default().to_owned();
    assert!(text.contains(r#"/arguments/topic (recorded "vpn", requested "wifi")"#), "{}", prompt.text);
    let unknown = call(&url, &[], "prompts/get", json!({"name": "translate"})).await;
    assert!(
        unknown.json()["error"]["code"].is_i64(),
        "a prompt never listed stays an error: {}",
        unknown.text
    );
    let read = call(&url, &[], "resources/read", json!({"uri": "file:///a.txt"})).await;
    let contents = &read.json()["result"]["contents"][0];
    assert_eq!(contents["uri"], "file:///a.txt", "{}", read.text);
    assert!(
        contents["text"]
            .as_str()
            .unwrap()
            .contains("no recorded answer for mcp_Docs resources/read file:///a.txt"),
        "{}",
        read.text
    );
    let absent = call(&url, &[], "resources/read", json!({"uri": "file:///b.txt"})).await;
    assert_eq!(
        absent.json()["error"]["code"],
        -32002,
        "a resource never listed is not found: {}",
        absent.text
    );
    replay.stop().await.unwrap();
}
