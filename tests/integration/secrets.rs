//! Secrets a user did not mean to commit: `mcp-tape lint` finds each kind
//! planted in a cassette and nothing in the shipped ones; `record
//! --redact-pattern builtin` and `--redact-header` keep them out of what is
//! stored, and replay with the same pattern still matches.

use std::collections::BTreeSet;

use mcp_tape::normalize::Normalization;
use serde_json::{Value, json};

use crate::support::*;
use crate::upstream::{self, TOKEN};

const BIN: &str = env!("CARGO_BIN_EXE_mcp-tape");
const MAIL: &str = "/agents/servers/mcp_MailTools";
/// A made-up GitHub token (the shape only).
const GITHUB_TOKEN: &str = "ghp_Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBa98";
const FORWARDED: &str = "forwarded-credential-0123456789";

/// One made-up value of each kind lint knows by its shape.
fn planted() -> Vec<(&'static str, String)> {
    let key86 = "A".repeat(40) + &"b".repeat(40) + "012345";
    vec![
        ("aws-access-key-id", "AKIAIOSFODNN7EXAMPLE".into()),
        ("github-token", GITHUB_TOKEN.into()),
        ("slack-token", "xoxb-123456789012-abcdefABCDEF".into()),
        ("slack-webhook", "https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXXXXXXXXXX".into()),
        ("jwt", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTYifQ.c2lnbmF0dXJl".into()),
        (
            "private-key",
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaA==\n-----END OPENSSH PRIVATE KEY-----".into(),
        ),
        (
            "azure-storage-connection-string",
            format!(
                "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={key86}==;EndpointSuffix=core.windows.net"
            ),
        ),
        (
            "azure-sas-signature",
            format!("https://a.blob.core.windows.net/c?sv=2024-01-01&sp=r&sig={}", "Z".repeat(44)),
        ),
    ]
}

fn lint(args: &[&str]) -> (i32, String, String) {
    let output = std::process::Command::new(BIN).arg("lint").args(args).output().unwrap();
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    (output.status.code().unwrap_or(-1), text(&output.stdout), text(&output.stderr))
}

#[test]
fn lint_finds_each_planted_kind_and_nothing_in_the_shipped_cassettes() {
    let cassettes = Cassettes::new();
    let mut exchanges: Vec<_> = planted()
        .into_iter()
        .map(|(kind, value)| tool_call("mcp_Leaky", kind, json!({}), &format!("here it is: {value}")))
        .collect();
    let mut generated = tool_call("mcp_Leaky", "signing", json!({}), "");
    let last = generated.messages.len() - 1;
    generated.messages[last].body["result"]["structuredContent"] =
        json!({"signingKey": "9fQ2x7LmZpR4tV8wK1sB"});
    exchanges.push(generated);
    let written = cassettes.write("leaky", exchanges);

    let (code, stdout, stderr) = lint(&["--format", "json", cassettes.path().to_str().unwrap()]);
    assert_eq!(code, 1, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    let findings = report["findings"].as_array().unwrap();
    let kinds: BTreeSet<&str> = findings.iter().map(|f| f["kind"].as_str().unwrap()).collect();
    for (kind, value) in planted() {
        assert!(kinds.contains(kind), "{kind} not found: {kinds:?}");
        assert!(!stdout.contains(&value), "the report holds no whole secret ({kind})");
    }
    assert!(kinds.contains("high-entropy-secret"), "{kinds:?}");
    let signing = findings.iter().find(|f| f["kind"] == "high-entropy-secret").unwrap();
    assert_eq!(signing["pointer"], "/messages/0/body/result/structuredContent/signingKey");
    assert_eq!(signing["preview"], "9fQ2… (20 chars)");
    assert!(signing["exchange"].as_i64().is_some() && signing["cassette"] == written.to_str().unwrap());

    let (code, stdout, _) = lint(&[written.to_str().unwrap()]);
    assert_eq!(code, 1);
    let line = stdout.lines().find(|l| l.contains("github-token")).expect("a text line per finding");
    assert!(
        line.starts_with(&format!("{}#", written.display()))
            && line.contains(&format!(
                " /messages/0/body/result/content/0/text github-token ghp_… ({} chars)",
                GITHUB_TOKEN.len()
            )),
        "{line}"
    );

    let shipped = concat!(env!("CARGO_MANIFEST_DIR"), "/cassettes");
    let (code, stdout, stderr) = lint(&[shipped]);
    assert_eq!((code, stdout.as_str()), (0, ""), "{stderr}");
    assert!(stderr.contains("nothing found"), "{stderr}");
    let (code, _, stderr) = lint(&["/nonexistent/cassette.sqlite"]);
    assert!(code == 1 && stderr.contains("/nonexistent/cassette.sqlite"), "{code}: {stderr}");
}

/// Records one echoing call with a GitHub token in its arguments and a
/// credential in `X-Forwarded-Auth`; returns the client's answer and the
/// cassette's bytes.
async fn record_echo(options: RecordOptions) -> (Value, Vec<u8>, tempfile::TempDir) {
    let upstream = upstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let recorder = Recorder::start(&upstream.url(), dir.path(), options).await;
    let auth = format!("Bearer {TOKEN}");
    let headers = [("authorization", auth.as_str()), ("x-forwarded-auth", FORWARDED)];
    let params = json!({"name": "echo_forwarded", "arguments": {"note": GITHUB_TOKEN}});
    let answer = call(&recorder.url(MAIL), &headers, "tools/call", params).await.json();
    let cassette = recorder.cassette.clone();
    recorder.stop().await;
    (answer, std::fs::read(cassette).unwrap(), dir)
}

fn holds(bytes: &[u8], text: &str) -> bool {
    bytes.windows(text.len()).any(|w| w == text.as_bytes())
}

#[tokio::test]
async fn record_scrubs_secret_shapes_and_named_headers_and_replay_still_matches() {
    let (answer, stored, _kept) = record_echo(RecordOptions::default()).await;
    let text = answer["result"]["content"][0]["text"].as_str().unwrap().to_owned();
    assert!(text.contains(FORWARDED) && text.contains(GITHUB_TOKEN), "{text}");
    assert!(holds(&stored, GITHUB_TOKEN) && holds(&stored, FORWARDED), "without the flags both are stored");

    let scrubbing = || Normalization { redact_patterns: vec!["builtin".into()], ..Normalization::default() };
    let options = RecordOptions {
        redact_headers: vec!["x-forwarded-auth".into()],
        normalization: scrubbing(),
        ..RecordOptions::default()
    };
    let (answer, stored, dir) = record_echo(options).await;
    assert_eq!(
        answer["result"]["content"][0]["text"], text,
        "the client gets the answer as the upstream gave it"
    );
    assert!(!holds(&stored, GITHUB_TOKEN), "the token's shape is scrubbed");
    assert!(!holds(&stored, FORWARDED), "the named header's echo is scrubbed");

    let replay =
        Replayer::start_with(&[dir.path()], Options { normalization: scrubbing(), ..Options::default() })
            .await;
    let params = json!({"name": "echo_forwarded", "arguments": {"note": GITHUB_TOKEN}});
    let replayed = call(&replay.url(MAIL), &[], "tools/call", params).await.json();
    let text = replayed["result"]["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.starts_with("forwarded [REDACTED]; note") && !text.contains(GITHUB_TOKEN), "{replayed}");
    replay.stop().await.unwrap();
}
