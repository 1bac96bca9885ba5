//! `--pseudonymize`: the real binary records an Agent 365-shaped mail
//! server of our own whose answers name six people (in Graph's members,
//! in a tool's text content holding the same JSON, and in free text) and a
//! scripted model that quotes them, driven by an agent made of the official
//! Rust SDK (rmcp) and plain HTTP to the model. No original byte is left
//! in the cassette directory or its export; the live agent still got the
//! originals; the agent run replays offline with both servers gone, its
//! requests built from what replay served matching what was stored; the
//! same key gives the same pseudonyms, another key others.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use mcp_tape::cassette::store::Cassette;
use mcp_tape::model::LlmAnswer;
use mcp_tape::pseudonym::{is_guid_pseudonym, is_phone_pseudonym, is_word_pseudonym};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::binary::Daemon;

const KEY: &str = "the pseudonym key of this test run";
const OTHER_KEY: &str = "another pseudonym key, for other names";
/// The variable's value when a recording is not pseudonymized.
const UNUSED_KEY: &str = "a key the recording does not use";
const TENANT: &str = "5b7e2c1a-9d3f-4e8b-a6c2-1f0e9d8c7b6a";
const DOMAIN: &str = "northwind.io";

/// The six people the mail server names: given name, surname, id, phone.
const PEOPLE: [(&str, &str, &str, &str); 6] = [
    ("Aleksander", "Brightwater", "3f2b8a4e-1c2d-4e5f-8a9b-0c1d2e3f4a5b", "+1 425 555 0101"),
    ("Mia", "Okonkwo", "8d4e1f2a-3b5c-4d6e-9f7a-1b2c3d4e5f6a", "+1 425 555 0102"),
    ("Tobias", "Lindqvist", "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d", "+44 20 7946 0958"),
    ("Priya", "Raghunathan", "f1e2d3c4-b5a6-4978-8695-a4b3c2d1e0f9", "+91 80 4000 1234"),
    ("Hannelore", "Vasquez", "6c5b4a39-2817-4f6e-9d5c-4b3a29180716", "+49 30 901820"),
    ("Desmond", "Achterberg", "9e8d7c6b-5a49-4382-b1a0-f9e8d7c6b5a4", "+31 20 555 0199"),
];

fn address(given: &str, surname: &str) -> String {
    format!("{}.{}@{DOMAIN}", given.to_lowercase(), surname.to_lowercase())
}

/// The mail tool's messages: Graph's members, and a preview naming people
/// in free text.
fn messages() -> Value {
    let person = |i: usize| {
        let (given, surname, _, _) = PEOPLE[i];
        json!({"emailAddress": {"name": format!("{given} {surname}"), "address": address(given, surname)}})
    };
    let items: Vec<Value> = (0..PEOPLE.len())
        .map(|i| {
            let (given, surname, id, phone) = PEOPLE[i];
            let next = PEOPLE[(i + 1) % PEOPLE.len()].0;
            json!({
                "id": format!("AAMkAD{i}"),
                "tenantId": TENANT,
                "from": person(i),
                "toRecipients": [person((i + 1) % PEOPLE.len())],
                "subject": "Budget review",
                "bodyPreview": format!("Hi {next}, {given} here: call me on {phone} about the budget."),
                "sender": {"id": id, "displayName": format!("{given} {surname}"), "givenName": given,
                           "surname": surname, "mobilePhone": phone,
                           "userPrincipalName": address(given, surname)},
            })
        })
        .collect();
    json!({"value": items})
}

/// A JSON answer.
fn reply(body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    response.headers_mut().insert("content-type", "application/json".parse().unwrap());
    response
}

/// The mail server (MCP over Streamable HTTP, JSON answers): `ListMessages`
/// and `SendMail`.
async fn mail(request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let body = request.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let message: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let Some(id) = message.get("id").cloned() else {
        let mut accepted = Response::new(Full::new(Bytes::new()));
        *accepted.status_mut() = hyper::StatusCode::ACCEPTED;
        return Ok(accepted);
    };
    let result = match message["method"].as_str().unwrap_or_default() {
        "initialize" => json!({
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "mail", "version": "1.0.0"},
        }),
        "tools/list" => json!({"tools": [
            {"name": "ListMessages", "description": "Lists the user's mail",
             "inputSchema": {"type": "object", "properties": {}}},
            {"name": "SendMail", "description": "Sends a mail",
             "inputSchema": {"type": "object", "properties": {"to": {"type": "string"}, "body": {"type": "string"}}}},
        ]}),
        "tools/call" if message["params"]["name"] == "ListMessages" => {
            let listed = messages();
            json!({"content": [{"type": "text", "text": listed.to_string()}], "structuredContent": listed})
        }
        "tools/call" => {
            let to = message["params"]["arguments"]["to"].as_str().unwrap_or_default();
            json!({"content": [{"type": "text", "text": format!("Sent to {to}.")}]})
        }
        _ => {
            return Ok(reply(
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "no"}}).to_string(),
            ));
        }
    };
    Ok(reply(json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string()))
}

/// The scripted model: it answers with a reply to the first person, by
/// name and address, and a call of `SendMail` to them.
async fn model(_: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let (given, surname, _, _) = PEOPLE[0];
    let to = address(given, surname);
    let arguments = json!({"to": to, "body": format!("Hi {given}, the budget is fine.")}).to_string();
    let answer = json!({
        "id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-test",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant",
            "content": format!("{given} {surname} ({to}) asked about the budget; I will answer {given}."),
            "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "SendMail", "arguments": arguments}}],
        }}],
    });
    Ok(reply(answer.to_string()))
}

/// Serves `handler` on 127.0.0.1 port 0 until the task is aborted.
async fn serve<F, Fut>(handler: F) -> (SocketAddr, tokio::task::JoinHandle<()>)
where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<Response<Full<Bytes>>, Infallible>> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { return };
            let handler = handler.clone();
            tokio::spawn(async move {
                let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                let _ = builder.serve_connection(TokioIo::new(stream), service_fn(handler)).await;
            });
        }
    });
    (addr, task)
}

/// What the agent saw: the mail tool's result, the model's answer, the
/// send's result.
struct Run {
    listed: Value,
    answered: Value,
    sent: Value,
}

/// The agent: lists the mail, asks the model with the tool's text, and
/// sends what the model asked for, each request built from what came back.
async fn agent(base: &str) -> Run {
    let transport = StreamableHttpClientTransport::from_uri(format!("{base}/agents/servers/mcp_MailTools"));
    let client = ().serve(transport).await.expect("initialize");
    client.list_all_tools().await.unwrap();
    let listed =
        serde_json::to_value(client.call_tool(CallToolRequestParams::new("ListMessages")).await.unwrap())
            .unwrap();
    let text = listed["content"][0]["text"].as_str().unwrap().to_owned();
    let request = json!({"model": "gpt-test", "messages": [
        {"role": "system", "content": "You answer the user's mail."},
        {"role": "user", "content": "Answer the budget mail."},
        {"role": "tool", "tool_call_id": "call_0", "content": text},
    ]});
    let response = reqwest::Client::new()
        .post(format!("{base}/model/openai/chat/completions"))
        .header("authorization", "Bearer sk-test-0123456789abcdefghijklmnopqrstuv")
        .json(&request)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "the model's answer");
    let answered: Value = response.json().await.unwrap();
    let call = &answered["choices"][0]["message"]["tool_calls"][0]["function"];
    let arguments: Value = serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
    let send = CallToolRequestParams::new("SendMail").with_arguments(arguments.as_object().unwrap().clone());
    let sent = serde_json::to_value(client.call_tool(send).await.unwrap()).unwrap();
    client.cancel().await.unwrap();
    Run { listed, answered, sent }
}

/// Records one agent run into `cassettes`, pseudonymized with `key` (or
/// not, for `None`); returns what the live agent saw.
async fn record(cassettes: &Path, key: Option<&str>, config: &Path) -> Run {
    let (mail_addr, mail_task) = serve(mail).await;
    let (model_addr, model_task) = serve(model).await;
    let (upstream, model) = (format!("http://{mail_addr}"), format!("openai=http://{model_addr}/v1"));
    let cassettes = cassettes.to_str().unwrap();
    let mut args =
        vec!["record", "--port", "0", "--upstream", &upstream, "--cassettes", cassettes, "--model", &model];
    args.extend(key.map(|_| "--pseudonymize"));
    let env = [
        ("MCP_TAPE_PSEUDONYM_KEY", key.unwrap_or(UNUSED_KEY)),
        ("XDG_CONFIG_HOME", config.to_str().unwrap()),
    ];
    let daemon = Daemon::run_with(&args, &env).await;
    let run = agent(&daemon.url).await;
    let (status, log) = daemon.stop("TERM").await;
    assert!(status.success(), "{log}");
    let said = log.contains("pseudonymizing what is stored, with the key from MCP_TAPE_PSEUDONYM_KEY");
    assert_eq!(said, key.is_some(), "{log}");
    assert!(!log.contains(key.unwrap_or(UNUSED_KEY)), "the key is never logged");
    mail_task.abort();
    model_task.abort();
    run
}

/// Every original name, address, id, phone number, the tenant's id and
/// domain, in lowercase.
fn originals() -> Vec<String> {
    let mut originals = vec![TENANT.to_owned(), DOMAIN.to_owned(), "northwind".to_owned()];
    for (given, surname, id, phone) in PEOPLE {
        originals.extend([
            given.to_lowercase(),
            surname.to_lowercase(),
            address(given, surname),
            id.to_owned(),
        ]);
        originals.push(phone.to_owned());
        originals.push(phone.chars().filter(char::is_ascii_digit).collect());
    }
    originals
}

/// Every byte of every file in `dir`, lowercased.
fn all_bytes(dir: &Path) -> String {
    let mut text = String::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        text.push_str(&String::from_utf8_lossy(&bytes).to_lowercase());
    }
    text
}

/// The senders' names and addresses and the message ids in the stored
/// `ListMessages` answer, and the stored `SendMail` arguments.
fn stored(cassette: &Path) -> (Vec<Value>, Value, Value) {
    let cassette = Cassette::open_read_only(cassette).unwrap();
    let exchanges = cassette.exchanges().unwrap();
    let call = |tool: &str| {
        exchanges
            .iter()
            .find(|e| e.method == "tools/call" && e.request["params"]["name"] == tool)
            .unwrap_or_else(|| panic!("{tool} is stored"))
    };
    let listed = &call("ListMessages").messages.last().unwrap().body["result"]["structuredContent"]["value"];
    let people = listed.as_array().unwrap().iter().map(|m| json!([m["from"], m["sender"]])).collect();
    let arguments = call("SendMail").request["params"]["arguments"].clone();
    let llms = cassette.llm_exchanges().unwrap();
    let LlmAnswer::Whole(answer) = &llms[0].answer else { panic!("a whole answer") };
    let model: Value = serde_json::from_str(&llms[0].request).unwrap();
    (people, arguments, json!({"request": model, "answer": serde_json::from_str::<Value>(answer).unwrap()}))
}

#[tokio::test]
async fn a_recording_holds_pseudonyms_only_and_replays_offline() {
    let dir = tempfile::tempdir().unwrap();
    let (cassettes, config) = (dir.path().join("cassettes"), dir.path().join("config"));
    let live = record(&cassettes, Some(KEY), &config).await;

    // The live agent got what the servers said.
    let live_text = live.listed.to_string();
    assert!(live_text.contains("Aleksander Brightwater") && live_text.contains(TENANT), "{live_text}");
    assert!(live.sent.to_string().contains(&address("Aleksander", "Brightwater")));

    // No original is in any byte of the directory, the export, or the key.
    let bytes = all_bytes(&cassettes);
    let export = std::process::Command::new(env!("CARGO_BIN_EXE_mcp-tape"))
        .arg("export")
        .arg(cassettes.join("default.sqlite"))
        .output()
        .unwrap();
    assert!(export.status.success(), "{}", String::from_utf8_lossy(&export.stderr));
    let exported = String::from_utf8_lossy(&export.stdout).to_lowercase();
    let first_line: Value = serde_json::from_str(exported.lines().next().unwrap()).unwrap();
    let fingerprint = first_line["pseudonymized"]["key"].as_str().unwrap().to_owned();
    let exported_file = dir.path().join("export.jsonl");
    std::fs::write(&exported_file, &export.stdout).unwrap();
    let imported = dir.path().join("imported.sqlite");
    let import = std::process::Command::new(env!("CARGO_BIN_EXE_mcp-tape"))
        .args(["import", exported_file.to_str().unwrap(), "--cassette", imported.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(import.status.success(), "{}", String::from_utf8_lossy(&import.stderr));
    assert_eq!(
        Cassette::open_read_only(&imported).unwrap().pseudonym_keys().unwrap(),
        std::slice::from_ref(&fingerprint)
    );
    for original in originals() {
        assert!(!bytes.contains(&original), "{original} is in the cassette directory");
        assert!(!exported.contains(&original), "{original} is in the export");
    }
    assert!(!bytes.contains(&KEY.to_lowercase()) && !exported.contains(&KEY.to_lowercase()));
    assert!(!config.exists(), "a key given in the variable is not kept");

    // Six people, six pseudonyms, each in its form, the same in every message.
    let (people, arguments, llm) = stored(&cassettes.join("default.sqlite"));
    let mut names = std::collections::BTreeSet::new();
    for person in &people {
        let name = person[0]["emailAddress"]["name"].as_str().unwrap();
        let address = person[0]["emailAddress"]["address"].as_str().unwrap();
        let words: Vec<&str> = name.split(' ').collect();
        assert_eq!(words.len(), 2, "{name}");
        assert!(
            words.iter().all(|word| is_word_pseudonym(word) && word.starts_with(char::is_uppercase)),
            "{name}"
        );
        assert_eq!(
            address,
            format!(
                "{}.{}@{}",
                words[0].to_lowercase(),
                words[1].to_lowercase(),
                address.split_once('@').unwrap().1
            )
        );
        assert!(address.ends_with(".example"), "{address}");
        assert_eq!(person[1]["displayName"], name);
        assert_eq!(person[1]["userPrincipalName"], address);
        assert!(is_guid_pseudonym(person[1]["id"].as_str().unwrap()), "{}", person[1]["id"]);
        assert!(
            is_phone_pseudonym(person[1]["mobilePhone"].as_str().unwrap()),
            "{}",
            person[1]["mobilePhone"]
        );
        names.insert(name.to_owned());
    }
    assert_eq!(names.len(), 6, "{names:?}");
    let first = people[0][0]["emailAddress"].clone();
    assert_eq!(arguments["to"], first["address"], "the agent's tool arguments name the same pseudonym");
    let model_text = llm.to_string();
    assert!(model_text.contains(first["address"].as_str().unwrap()), "{model_text}");
    assert!(model_text.contains(first["name"].as_str().unwrap()), "{model_text}");
    let keys = Cassette::open_read_only(&cassettes.join("default.sqlite")).unwrap().pseudonym_keys().unwrap();
    assert_eq!(keys, [fingerprint]);
    assert!(keys[0].len() == 8 && keys[0].chars().all(|c| c.is_ascii_hexdigit()), "{keys:?}");

    // The run replays offline, with no key: each request built from what replay served matches.
    let cassettes_arg = cassettes.to_str().unwrap();
    let replay = Daemon::run(&["replay", "--port", "0", "--on-miss", "error", cassettes_arg]).await;
    let replayed = agent(&replay.url).await;
    let (status, log) = replay.stop("TERM").await;
    assert!(status.success(), "{log}");
    assert_eq!(replayed.answered["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "SendMail");
    assert!(replayed.listed.to_string().contains(first["name"].as_str().unwrap()));
    assert_eq!(
        replayed.sent["content"][0]["text"],
        format!("Sent to {}.", first["address"].as_str().unwrap())
    );
    assert_ne!(replayed.listed, live.listed);
}

#[tokio::test]
async fn the_same_key_gives_the_same_pseudonyms_and_another_key_others() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config");
    let mut runs = Vec::new();
    for (name, key) in [("first", KEY), ("again", KEY), ("other", OTHER_KEY)] {
        let cassettes = dir.path().join(name);
        record(&cassettes, Some(key), &config).await;
        runs.push(stored(&cassettes.join("default.sqlite")));
    }
    assert_eq!(runs[0], runs[1]);
    for (first, other) in runs[0].0.iter().zip(&runs[2].0) {
        assert_ne!(first[0]["emailAddress"]["name"], other[0]["emailAddress"]["name"]);
        assert_ne!(first[1]["id"], other[1]["id"]);
        assert_ne!(first[1]["mobilePhone"], other[1]["mobilePhone"]);
    }
}

/// `mcp-tape` run to its end with `args` and the key `KEY`, in `dir`.
fn run(dir: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_mcp-tape"))
        .args(args)
        .current_dir(dir)
        .env("MCP_TAPE_PSEUDONYM_KEY", KEY)
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .output()
        .unwrap()
}

#[tokio::test]
async fn lint_finds_a_recording_in_the_clear_and_pseudonymize_makes_it_what_recording_gives() {
    let dir = tempfile::tempdir().unwrap();
    let (clear, config) = (dir.path().join("clear"), dir.path().join("config"));
    record(&clear, None, &config).await;
    let cassette = clear.join("default.sqlite");
    let cassette_arg = cassette.to_str().unwrap();

    let linted = run(dir.path(), &["lint", cassette_arg]);
    assert_eq!(linted.status.code(), Some(1));
    let out = String::from_utf8_lossy(&linted.stdout);
    for kind in [" email ", " guid ", " name ", " phone "] {
        assert!(out.contains(kind), "lint names {kind}:\n{out}");
    }
    assert!(
        out.contains("/messages/0/body/result/structuredContent/value/0/sender/mobilePhone phone"),
        "{out}"
    );
    assert!(out.contains("/messages/0/body/result/content/0/text /value/0/tenantId guid"), "{out}");
    assert!(out.contains("model openai #1 /request"), "{out}");
    for (given, surname, _, _) in PEOPLE {
        assert!(!out.contains(&address(given, surname)), "no whole address is printed:\n{out}");
        assert!(!out.contains(&format!("{given} {surname}")), "no whole name is printed:\n{out}");
    }
    let json = run(dir.path(), &["lint", "--format", "json", cassette_arg]);
    let report: Value = serde_json::from_slice(&json.stdout).unwrap();
    let kinds: std::collections::BTreeSet<&str> =
        report["findings"].as_array().unwrap().iter().filter_map(|f| f["kind"].as_str()).collect();
    assert!(["email", "guid", "name", "phone"].iter().all(|kind| kinds.contains(kind)), "{kinds:?}");

    let pseudonymized = run(dir.path(), &["pseudonymize", clear.to_str().unwrap()]);
    assert!(pseudonymized.status.success(), "{}", String::from_utf8_lossy(&pseudonymized.stderr));
    let linted = run(dir.path(), &["lint", cassette_arg]);
    assert_eq!(linted.status.code(), Some(0), "{}", String::from_utf8_lossy(&linted.stdout));
    let bytes = all_bytes(&clear);
    for original in originals() {
        assert!(!bytes.contains(&original), "{original} is left in the rewritten cassette");
    }
    let once = String::from_utf8_lossy(&run(dir.path(), &["export", cassette_arg]).stdout).into_owned();
    assert!(run(dir.path(), &["pseudonymize", cassette_arg]).status.success());
    let twice = String::from_utf8_lossy(&run(dir.path(), &["export", cassette_arg]).stdout).into_owned();
    assert_eq!(once, twice, "running it again changes nothing");

    let recorded = dir.path().join("recorded");
    record(&recorded, Some(KEY), &config).await;
    assert_eq!(stored(&cassette), stored(&recorded.join("default.sqlite")), "the pseudonyms recording gives");

    let replay = Daemon::run(&["replay", "--port", "0", clear.to_str().unwrap()]).await;
    let replayed = agent(&replay.url).await;
    let (status, log) = replay.stop("TERM").await;
    assert!(status.success(), "{log}");
    assert!(!replayed.listed.to_string().contains("Brightwater"));
}

/// `SendMail` to the first person by their original address and name, as
/// a test's own code would send it, on the replay at `base`.
async fn send_as_written(base: &str) -> Result<Value, String> {
    let transport = StreamableHttpClientTransport::from_uri(format!("{base}/agents/servers/mcp_MailTools"));
    let client = ().serve(transport).await.expect("initialize");
    let (given, surname, _, _) = PEOPLE[0];
    let arguments =
        json!({"to": address(given, surname), "body": format!("Hi {given}, the budget is fine.")});
    let send = CallToolRequestParams::new("SendMail").with_arguments(arguments.as_object().unwrap().clone());
    let sent = client.call_tool(send).await.map(|result| serde_json::to_value(result).unwrap());
    client.cancel().await.unwrap();
    sent.map_err(|error| error.to_string())
}

#[tokio::test]
async fn with_the_key_replay_pseudonymizes_what_a_request_sends_and_without_it_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let (cassettes, config) = (dir.path().join("cassettes"), dir.path().join("config"));
    record(&cassettes, Some(KEY), &config).await;
    let cassettes_arg = cassettes.to_str().unwrap();
    let args = ["replay", "--port", "0", "--on-miss", "error", cassettes_arg];

    let keyless = Daemon::run_with(&args, &[("XDG_CONFIG_HOME", config.to_str().unwrap())]).await;
    let missed = send_as_written(&keyless.url).await.unwrap_err();
    keyless.stop("TERM").await;
    assert!(missed.contains("the cassettes are pseudonymized"), "{missed}");
    assert!(
        missed.contains("email at /arguments/to") && missed.contains("set MCP_TAPE_PSEUDONYM_KEY"),
        "{missed}"
    );

    let env = [("MCP_TAPE_PSEUDONYM_KEY", KEY), ("XDG_CONFIG_HOME", config.to_str().unwrap())];
    let keyed = Daemon::run_with(&args, &env).await;
    let sent = send_as_written(&keyed.url).await.unwrap();
    let (status, log) = keyed.stop("TERM").await;
    assert!(status.success(), "{log}");
    assert!(log.contains("pseudonymizing what requests send before they are matched"), "{log}");
    let (people, arguments, _) = stored(&cassettes.join("default.sqlite"));
    assert_eq!(arguments["to"], people[0][0]["emailAddress"]["address"]);
    assert_eq!(sent["content"][0]["text"], format!("Sent to {}.", arguments["to"].as_str().unwrap()));

    let wrong = [("MCP_TAPE_PSEUDONYM_KEY", OTHER_KEY), ("XDG_CONFIG_HOME", config.to_str().unwrap())];
    let other = Daemon::run_with(&args, &wrong).await;
    assert!(send_as_written(&other.url).await.is_err());
    let (_, log) = other.stop("TERM").await;
    assert!(log.contains("is not the key the cassettes were pseudonymized with"), "{log}");
}

#[tokio::test]
async fn verify_compares_as_recording_stores_and_leaves_out_calls_that_send_pseudonyms() {
    let dir = tempfile::tempdir().unwrap();
    let (cassettes, config) = (dir.path().join("cassettes"), dir.path().join("config"));
    record(&cassettes, Some(KEY), &config).await;
    let (mail_addr, mail_task) = serve(mail).await;
    let cassette = cassettes.join("default.sqlite");
    let upstream = format!("http://{mail_addr}");
    let verify = async |key: Option<&str>| {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcp-tape"));
        command
            .args(["verify", cassette.to_str().unwrap(), "--include-calls", "--fail-on", "changed"])
            .args(["--upstream", &upstream])
            .env("XDG_CONFIG_HOME", &config)
            .env_remove("MCP_TAPE_PSEUDONYM_KEY");
        if let Some(key) = key {
            command.env("MCP_TAPE_PSEUDONYM_KEY", key);
        }
        let output = command.output().await.unwrap();
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        (output.status.code(), text(&output.stdout), text(&output.stderr))
    };
    let (code, out, err) = verify(Some(KEY)).await;
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(
        err.contains("left out 1 request(s) whose params hold pseudonyms") && err.contains("SendMail"),
        "{err}"
    );
    let (code, out, err) = verify(None).await;
    assert_eq!(code, Some(1), "without the key the live answers differ:\n{out}\n{err}");
    assert!(err.contains("the live answers are compared as they are"), "{err}");
    mail_task.abort();
}
