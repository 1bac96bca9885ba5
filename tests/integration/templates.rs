//! Answer templates: Agent 365 mock files imported with the real binary
//! (`import --a365-mocks`) and served by replay in both eras: the tools
//! listed, any call answered from its template with the caller's
//! arguments, a recorded exchange with the same arguments first, a
//! disabled tool unknown, bad mock files (and names that are no regular
//! file, or too large) refused with nothing written.

use std::path::Path;

use serde_json::{Value, json};

use crate::support::*;

const BIN: &str = env!("CARGO_BIN_EXE_mcp-tape");

/// A calendar mocks file as `a365 develop mts` users keep them: comments,
/// trailing commas, property names in other cases, a disabled tool, a
/// JSON template.
const CALENDAR: &str = r#"// mocks/mcp_CalendarTools.json
[
  {
    "name": "GetRooms",
    "description": "Lists meeting rooms in a city",
    "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    "responseTemplate": "Rooms in {{city}}: Aurora, Borealis",
    "delayMs": 40,
  },
  {
    /* JSON in the text, as the newer mocks write it */
    "Name": "CreateEvent",
    "Description": "Creates an event",
    "InputSchema": {"type": "object", "properties": {"subject": {"type": "string"}, "attendees": {"type": "array"}}},
    "ResponseTemplate": "{\"id\": \"evt-1\", \"subject\": \"{{subject}}\", \"attendees\": {{attendees}}}",
  },
  {"name": "DeleteEvent", "responseTemplate": "deleted", "enabled": false},
]
"#;

fn import_mocks(cassettes: &Cassettes, files: &[(&str, &str)]) -> std::process::Output {
    let dir = cassettes.path().join("mocks");
    std::fs::create_dir_all(&dir).unwrap();
    for (name, text) in files {
        std::fs::write(dir.join(name), text).unwrap();
    }
    std::process::Command::new(BIN)
        .args(["import", "--a365-mocks", dir.to_str().unwrap(), "--cassette"])
        .arg(cassettes.path().join("mocks.sqlite"))
        .output()
        .unwrap()
}

fn text(reply: &Reply) -> String {
    let body = if reply.header("content-type").is_some_and(|t| t.starts_with("text/event-stream")) {
        reply.events().pop().unwrap()
    } else {
        reply.json()
    };
    body["result"]["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn imported_mocks_answer_any_arguments_in_both_eras() {
    let cassettes = Cassettes::new();
    let imported = import_mocks(&cassettes, &[("mcp_CalendarTools.json", CALENDAR)]);
    let said = String::from_utf8_lossy(&imported.stderr);
    assert!(imported.status.success(), "{said}");
    assert!(said.contains("imported 2 tools of 1 servers (1 disabled, left out)"), "{said}");
    let replay = Replayer::start(&[cassettes.path()]).await;
    let url = replay.url("/agents/servers/mcp_CalendarTools");

    let init = call(
        &url,
        &[],
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}),
    )
    .await
    .json();
    assert_eq!(init["result"]["capabilities"], json!({"tools": {}}), "{init}");
    let listed = call(&url, &[], "tools/list", json!({})).await.json();
    let names: Vec<&str> =
        listed["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["CreateEvent", "GetRooms"]);
    let rooms = &listed["result"]["tools"][1];
    assert_eq!(rooms["inputSchema"]["required"], json!(["city"]));
    assert!(rooms.get("responseTemplate").is_none() && rooms.get("placeholders").is_none(), "{rooms}");

    let quoted =
        call(&url, &[], "tools/call", json!({"name": "GetRooms", "arguments": {"city": "Oslo \"Sentrum\""}}))
            .await;
    assert!(
        quoted.header("content-type").unwrap().starts_with("text/event-stream"),
        "answered as the real servers do"
    );
    assert_eq!(text(&quoted), "Rooms in Oslo \"Sentrum\": Aurora, Borealis");
    let json_only = post(&url, &[("accept", "application/json")],
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "CreateEvent", "arguments": {"subject": "Q3 \"plan\" \\ review", "attendees": ["a@x", "b@x"]}}}).to_string()).await;
    assert!(json_only.header("content-type").unwrap().starts_with("application/json"));
    let event: Value = serde_json::from_str(&text(&json_only)).expect("a JSON template stays JSON");
    assert_eq!(event["subject"], "Q3 \"plan\" \\ review");
    assert_eq!(event["attendees"], json!(["a@x", "b@x"]));
    let unfilled = call(&url, &[], "tools/call", json!({"name": "GetRooms", "arguments": {}})).await;
    assert_eq!(text(&unfilled), "Rooms in {{city}}: Aurora, Borealis");

    for tool in ["DeleteEvent", "NoSuchTool"] {
        let refused = call(&url, &[], "tools/call", json!({"name": tool, "arguments": {}})).await.json();
        assert_eq!(refused["error"]["code"], -32602, "{tool}: {refused}");
    }

    let discovered = stateless(&url, "server/discover", json!({})).await.json();
    assert_eq!(discovered["result"]["capabilities"], json!({"tools": {}}), "{discovered}");
    let stateless_list = stateless(&url, "tools/list", json!({})).await.json();
    assert_eq!(stateless_list["result"]["tools"].as_array().map(Vec::len), Some(2), "{stateless_list}");
    let stateless_call =
        stateless(&url, "tools/call", json!({"name": "GetRooms", "arguments": {"city": "Bergen"}})).await;
    assert_eq!(text(&stateless_call), "Rooms in Bergen: Aurora, Borealis");
}

#[tokio::test]
async fn a_recording_with_the_same_arguments_wins_over_the_template() {
    let cassettes = Cassettes::new();
    assert!(import_mocks(&cassettes, &[("mcp_CalendarTools.json", CALENDAR)]).status.success());
    cassettes.write(
        "recorded",
        vec![tool_call("mcp_CalendarTools", "GetRooms", json!({"city": "Paris"}), "Recorded rooms")],
    );
    let replay = Replayer::start(&[cassettes.path()]).await;
    let url = replay.url("/agents/servers/mcp_CalendarTools");
    let recorded =
        call(&url, &[], "tools/call", json!({"name": "GetRooms", "arguments": {"city": "Paris"}})).await;
    assert_eq!(text(&recorded), "Recorded rooms");
    let templated =
        call(&url, &[], "tools/call", json!({"name": "GetRooms", "arguments": {"city": "Rome"}})).await;
    assert_eq!(text(&templated), "Rooms in Rome: Aurora, Borealis");
}

#[tokio::test]
async fn a_mocks_name_that_is_no_regular_file_or_too_large_is_refused_unread() {
    /// A name, how the test makes it, and what the refusal says.
    type Case = (&'static str, fn(&Path), &'static str);
    let cases: [Case; 3] = [
        // Before, a FIFO blocked the import for ever and /dev/zero was read until memory ran out.
        (
            "fifo.json",
            |path| assert!(std::process::Command::new("mkfifo").arg(path).status().unwrap().success()),
            "not a regular file",
        ),
        (
            "big.json",
            |path| std::fs::File::create(path).unwrap().set_len(17 << 20).unwrap(),
            "larger than 16777216 bytes",
        ),
        ("zero.json", |path| std::os::unix::fs::symlink("/dev/zero", path).unwrap(), "not a regular file"),
    ];
    for (name, make, why) in cases {
        let cassettes = Cassettes::new();
        let dir = cassettes.path().join("mocks");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("a_good.json"), r#"[{"name": "Fine"}]"#).unwrap();
        make(&dir.join(name));
        let import = tokio::process::Command::new(BIN)
            .args(["import", "--a365-mocks", dir.to_str().unwrap(), "--cassette"])
            .arg(cassettes.path().join("mocks.sqlite"))
            .kill_on_drop(true)
            .output();
        let output = tokio::time::timeout(std::time::Duration::from_secs(20), import)
            .await
            .unwrap_or_else(|_| panic!("{name}: the import did not end"))
            .unwrap();
        let said = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{name}: {said}");
        assert!(said.contains(name) && said.contains(why), "{name}: {said}");
        assert!(!cassettes.path().join("mocks.sqlite").exists(), "{name}: nothing written");
    }
}

#[tokio::test]
async fn bad_mock_files_are_named_and_nothing_is_written() {
    for (file, why) in [
        (r#"[{"name": "A"}, {"name": "B",]"#, "not valid JSON"),
        (r#"[{"description": "nameless"}]"#, "tool #1 has no name"),
        (r#"[{"name": "Twice"}, {"name": "twice"}]"#, "used twice"),
    ] {
        let cassettes = Cassettes::new();
        let output =
            import_mocks(&cassettes, &[("a_good.json", r#"[{"name": "Fine"}]"#), ("mcp_Bad.json", file)]);
        let said = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{said}");
        assert!(said.contains("mcp_Bad.json") && said.contains(why), "{said}");
        assert!(!cassettes.path().join("mocks.sqlite").exists(), "nothing written: {said}");
    }
}
