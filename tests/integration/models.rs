//! The agent's model on the tape (`--model NAME=URL`): the real binary
//! records a scripted model server of our own (OpenAI's chat completions,
//! whole and streamed; Anthropic's Messages; Azure OpenAI's deployment
//! path) beside an MCP upstream, then replays it with the server gone:
//! each answer byte for byte, a request made again answered in recorded
//! order, a changed request a 400 in the API's own shape naming the
//! pointer, and no key anywhere in the cassette.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use mcp_tape::cassette::store::Cassette;
use mcp_tape::model::LlmAnswer;
use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::binary::Daemon;
use crate::upstream;

const OPENAI_KEY: &str = "sk-test-0123456789abcdefghijklmnopqrstuv";
const ANTHROPIC_KEY: &str = "sk-ant-test-9876543210zyxwvutsrqponmlk";
const AZURE_KEY: &str = "azure0123456789abcdef0123456789ab";

/// One request the model server saw: path with query, headers, body.
struct Seen {
    target: String,
    headers: hyper::HeaderMap,
    body: Bytes,
}

/// A scripted model server: answers by path, counting its answers so that
/// the same request asked twice is answered differently.
struct ModelServer {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    /// Released by a test to let a stream whose user says `gated` go on
    /// past its first event.
    gate: Arc<tokio::sync::Notify>,
    task: tokio::task::JoinHandle<()>,
}

impl ModelServer {
    async fn start() -> ModelServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let gate: Arc<tokio::sync::Notify> = Arc::default();
        let (shared, gate_shared) = (Arc::clone(&seen), Arc::clone(&gate));
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { return };
                let (seen, gate) = (Arc::clone(&shared), Arc::clone(&gate_shared));
                tokio::spawn(async move {
                    let service =
                        service_fn(move |request| answer(request, Arc::clone(&seen), Arc::clone(&gate)));
                    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                    let _ = builder.serve_connection(TokioIo::new(stream), service).await;
                });
            }
        });
        ModelServer { addr, seen, gate, task }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

type Body = http_body_util::combinators::BoxBody<Bytes, std::io::Error>;

fn full(body: impl Into<Bytes>) -> Body {
    Full::new(body.into()).map_err(|never| match never {}).boxed()
}

fn reply(status: u16, content_type: &str, body: String) -> Response<Body> {
    let mut response = Response::new(full(body));
    *response.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
    response.headers_mut().insert("content-type", content_type.parse().unwrap());
    response
}

async fn answer(
    request: Request<Incoming>,
    seen: Arc<Mutex<Vec<Seen>>>,
    gate: Arc<tokio::sync::Notify>,
) -> Result<Response<Body>, Infallible> {
    let (parts, body) = request.into_parts();
    let body = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let target = parts.uri.path_and_query().map_or("/", |p| p.as_str()).to_owned();
    let header =
        |name: &str| parts.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let count = {
        let mut seen = seen.lock().unwrap();
        seen.push(Seen { target: target.clone(), headers: parts.headers.clone(), body: body.clone() });
        seen.len()
    };
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let messages = request["messages"].as_array().map_or(0, Vec::len);
    let path = parts.uri.path();
    let authorized = match path {
        "/v1/chat/completions" => header("authorization") == format!("Bearer {OPENAI_KEY}"),
        "/v1/messages" => header("x-api-key") == ANTHROPIC_KEY,
        "/openai/deployments/gpt/chat/completions" => header("api-key") == AZURE_KEY,
        _ => return Ok(reply(404, "application/json", r#"{"error":{"message":"no such path"}}"#.into())),
    };
    if !authorized {
        return Ok(reply(401, "application/json", r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}"#.into()));
    }
    if path == "/v1/messages" {
        // Written as a server writes it: members in its order, a wide integer.
        let text = format!(
            r#"{{"type":"message","id":"msg_{count}","content":[{{"type":"text","text":"{messages} message(s), answer {count}"}}],"usage":{{"input_tokens":123456789012345678901234567890}}}}"#
        );
        return Ok(reply(200, "application/json", text));
    }
    if header("x-test-answer") == "gzip" {
        // Compressed though asked for none, as some servers do.
        let mut response = reply(200, "application/json", String::new());
        let text = format!(r#"{{"id":"chatcmpl-{count}","compressed":true}}"#);
        *response.body_mut() = full(upstream::gzip(text.as_bytes()));
        response.headers_mut().insert("content-encoding", "gzip".parse().unwrap());
        return Ok(response);
    }
    if let Some(response) = unstorable(&header("x-test-answer"), &gate) {
        return Ok(response);
    }
    if header("x-test-answer") == "echo" {
        // A model that repeats what it was given: the request's key and its user's message.
        let echoed = json!({"key": request["api_key"], "said": request["messages"][1]["content"]});
        if request["stream"] == true {
            let events = format!(
                "data: {}\n\ndata: {}\n\ndata: [DONE]\n\n",
                json!({"delta": echoed["said"]}),
                json!({"delta": echoed["key"]})
            );
            return Ok(reply(200, "text/event-stream", events));
        }
        return Ok(reply(200, "application/json", echoed.to_string()));
    }
    if request["stream"] == true {
        let events = [
            format!(
                r#"data: {{"id":"chatcmpl-{count}","choices":[{{"index":0,"delta":{{"role":"assistant","content":"Hel"}}}}]}}"#
            ),
            format!(
                r#"data: {{"id":"chatcmpl-{count}","choices":[{{"index":0,"delta":{{"content":"lo {count}"}},"finish_reason":"stop"}}]}}"#
            ),
            "data: [DONE]".to_owned(),
        ];
        let events = events.map(|e| Bytes::from(format!("{e}\n\n")));
        if request["messages"][1]["content"] == "gated" {
            // The first event now, the rest once the test opens the gate.
            let (sender, receiver) = tokio::sync::mpsc::channel(4);
            tokio::spawn(async move {
                let [first, second, done] = events;
                let _ = sender.send(first).await;
                gate.notified().await;
                let _ = sender.send(second).await;
                let _ = sender.send(done).await;
            });
            let mut response = Response::new(Receiving(receiver).map_err(|never| match never {}).boxed());
            response.headers_mut().insert("content-type", "text/event-stream".parse().unwrap());
            return Ok(response);
        }
        return Ok(reply(200, "text/event-stream", String::from_utf8(events.concat()).unwrap()));
    }
    let text = format!(
        r#"{{"id":"chatcmpl-{count}","object":"chat.completion","choices":[{{"index":0,"message":{{"role":"assistant","content":"{messages} message(s), answer {count}"}},"finish_reason":"stop"}}],"usage":{{"prompt_tokens":1.50E+1,"total_tokens":123456789012345678901234567890}}}}"#
    );
    Ok(reply(200, "application/json; charset=utf-8", text))
}

/// An answer the client gets that cannot be stored as it got it, as
/// `x-test-answer` asks: `br` (an encoding mcp-tape does not decode),
/// `latin1` (a body that is not UTF-8), `cut` (a stream the server breaks
/// off after its first event, once the test opens `gate`).
fn unstorable(asked: &str, gate: &Arc<tokio::sync::Notify>) -> Option<Response<Body>> {
    let (content_type, body) = match asked {
        "br" => ("application/json", full(&b"\x0b\x02\x80{}\x03"[..])),
        "latin1" => ("application/json", full(&b"{\"text\":\"caf\xe9\"}"[..])),
        "cut" => {
            let (sender, receiver) = tokio::sync::mpsc::channel(2);
            let gate = Arc::clone(gate);
            tokio::spawn(async move {
                let _ =
                    sender.send(Ok(Frame::data(Bytes::from_static(b"data: {\"delta\":\"Hel\"}\n\n")))).await;
                gate.notified().await;
                let _ = sender.send(Err(std::io::Error::other("the model server broke off"))).await;
            });
            let pieces = tokio_stream_of(receiver);
            ("text/event-stream", http_body_util::StreamBody::new(pieces).boxed())
        }
        _ => return None,
    };
    let mut response = Response::new(body);
    response.headers_mut().insert("content-type", content_type.parse().unwrap());
    if asked == "br" {
        response.headers_mut().insert("content-encoding", "br".parse().unwrap());
    }
    Some(response)
}

/// What `receiver` is given, as a stream.
fn tokio_stream_of<T>(receiver: tokio::sync::mpsc::Receiver<T>) -> impl futures_util::Stream<Item = T> {
    futures_util::stream::unfold(
        receiver,
        |mut receiver| async move { Some((receiver.recv().await?, receiver)) },
    )
}

/// A body sent piece by piece, as a channel gives them.
struct Receiving(tokio::sync::mpsc::Receiver<Bytes>);

impl hyper::body::Body for Receiving {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0.poll_recv(cx).map(|piece| piece.map(|bytes| Ok(Frame::data(bytes))))
    }
}

/// The binary recording the MCP upstream at `mcp` into `cassettes`, with a
/// `--model` for each of `models` (`NAME=URL`) and `extra` arguments.
async fn recording(mcp: &str, cassettes: &str, models: &[String], extra: &[&str]) -> Daemon {
    let mut args = vec!["record", "--port", "0", "--upstream", mcp, "--cassettes", cassettes];
    args.extend(extra);
    for model in models {
        args.extend(["--model", model.as_str()]);
    }
    Daemon::run(&args).await
}

async fn post(url: &str, headers: &[(&str, &str)], body: &str) -> (u16, String, String) {
    let mut request =
        reqwest::Client::new().post(url).body(body.to_owned()).header("content-type", "application/json");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let content_type =
        response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    (status, content_type, response.text().await.unwrap())
}

fn chat(system: &str, stream: bool) -> String {
    // Spaced and ordered as a client wrote it.
    format!(
        r#"{{ "model": "gpt-test", "messages": [{{"role": "system", "content": "{system}"}}, {{"role": "user", "content": "hi"}}]{} }}"#,
        if stream { r#", "stream": true"# } else { "" }
    )
}

const ANTHROPIC_BODY: &str = r#"{"model":"claude-test","max_tokens":64,"system":"Be brief.","messages":[{"role":"user","content":"hi"}]}"#;

#[tokio::test]
async fn the_model_is_recorded_beside_mcp_and_replayed_with_nothing_upstream() {
    let mcp = upstream::start().await;
    let models = ModelServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let cassettes = dir.path().to_str().unwrap();
    let named = [
        format!("openai={}", models.url("/v1")),
        format!("anthropic={}", models.url("")),
        format!("azure={}", models.url("/openai/")),
    ];
    let record = recording(&mcp.url(), cassettes, &named, &["--name", "agent"]).await;
    let url = |path: &str| format!("{}{path}", record.url);
    let openai = [("authorization", &*format!("Bearer {OPENAI_KEY}"))].map(|(n, v)| (n, v.to_owned()));
    let openai: Vec<(&str, &str)> = openai.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let anthropic = [("x-api-key", ANTHROPIC_KEY), ("anthropic-version", "2023-06-01")];
    let azure = [("api-key", AZURE_KEY)];
    let azure_path =
        format!("/model/azure/deployments/gpt/chat/completions?api-version=2024-10-21&api-key={AZURE_KEY}");

    let first = post(&url("/model/openai/chat/completions"), &openai, &chat("Be brief.", false)).await;
    let again = post(&url("/model/openai/chat/completions"), &openai, &chat("Be brief.", false)).await;
    let streamed = post(&url("/model/openai/chat/completions"), &openai, &chat("Be brief.", true)).await;
    let messages = post(&url("/model/anthropic/v1/messages"), &anthropic, ANTHROPIC_BODY).await;
    let deployed = post(&url(&azure_path), &azure, &chat("Be brief.", false)).await;
    let refused = post(&url("/model/openai/chat/completions"), &[], &chat("Be brief.", false)).await;
    let unknown = post(&url("/model/mistral/chat/completions"), &[], "{}").await;
    assert_eq!(first.0, 200, "{first:?}");
    assert!(first.2.contains("answer 1") && again.2.contains("answer 2"), "{first:?} {again:?}");
    assert!(
        streamed.1.starts_with("text/event-stream") && streamed.2.ends_with("data: [DONE]\n\n"),
        "{streamed:?}"
    );
    assert!(messages.2.contains("123456789012345678901234567890"), "{messages:?}");
    assert_eq!(deployed.0, 200, "{deployed:?}");
    assert_eq!(refused.0, 401, "the model server's own refusal is relayed: {refused:?}");
    assert_eq!(unknown.0, 404, "{unknown:?}");
    assert!(unknown.2.contains("--model mistral=URL"), "{unknown:?}");

    // The server got each request as the client wrote it, credentials included.
    {
        let seen = models.seen.lock().unwrap();
        assert_eq!(seen.len(), 6, "the unknown model reached nothing");
        assert_eq!(seen[0].target, "/v1/chat/completions");
        assert_eq!(seen[0].body, chat("Be brief.", false).as_bytes());
        assert_eq!(seen[0].headers["authorization"], format!("Bearer {OPENAI_KEY}").as_str());
        assert_eq!(seen[3].target, "/v1/messages");
        assert_eq!(seen[3].headers["anthropic-version"], "2023-06-01");
        assert_eq!(
            seen[4].target,
            format!("/openai/deployments/gpt/chat/completions?api-version=2024-10-21&api-key={AZURE_KEY}")
        );
    }

    let (status, log) = record.stop("INT").await;
    assert!(status.success(), "{log}");
    models.task.abort();
    let cassette = dir.path().join("agent.sqlite");
    let bytes = std::fs::read(&cassette).unwrap();
    for key in [OPENAI_KEY, ANTHROPIC_KEY, AZURE_KEY] {
        assert!(!bytes.windows(key.len()).any(|w| w == key.as_bytes()), "{key} is in the cassette");
    }
    let stored = Cassette::open_read_only(&cassette).unwrap().llm_exchanges().unwrap();
    let targets: Vec<(&str, &str)> = stored.iter().map(|e| (e.model.as_str(), e.target.as_str())).collect();
    assert_eq!(
        targets,
        [
            ("openai", "/chat/completions"),
            ("openai", "/chat/completions"),
            ("openai", "/chat/completions"),
            ("anthropic", "/v1/messages"),
            ("azure", "/deployments/gpt/chat/completions?api-version=2024-10-21"),
        ],
        "the 401 is not stored; the query's key is left out"
    );
    assert_eq!(stored[0].request, chat("Be brief.", false), "the request as the client wrote it");
    let LlmAnswer::Events(events) = &stored[2].answer else { panic!("a stream: {:?}", stored[2]) };
    assert_eq!(events.len(), 3);
    assert_eq!(events[2].text, "data: [DONE]");

    // Replay, the model server gone: headers do not take part (no key is sent now).
    let replay = Daemon::start(&[cassettes]).await;
    let url = |path: &str| format!("{}{path}", replay.url);
    let replayed = post(&url("/model/openai/chat/completions"), &[], &chat("Be brief.", false)).await;
    let replayed_again = post(&url("/model/openai/chat/completions"), &[], &chat("Be brief.", false)).await;
    assert_eq!(replayed, first, "byte for byte, content type included");
    assert_eq!(replayed_again, again, "a request made again gets the next recording");
    // Reordered keys and other spacing are the same JSON.
    let reordered = r#"{"stream":true,"messages":[{"content":"Be brief.","role":"system"},{"content":"hi","role":"user"}],"model":"gpt-test"}"#;
    assert_eq!(post(&url("/model/openai/chat/completions"), &[], reordered).await, streamed);
    assert_eq!(post(&url("/model/anthropic/v1/messages"), &[], ANTHROPIC_BODY).await, messages);
    let azure_replayed = "/model/azure/deployments/gpt/chat/completions?api-version=2024-10-21&api-key=other";
    assert_eq!(post(&url(azure_replayed), &[], &chat("Be brief.", false)).await, deployed);

    let changed = post(&url("/model/openai/chat/completions"), &openai, &chat("Be thorough.", false)).await;
    assert_eq!(changed.0, 400, "{changed:?}");
    let error: Value = serde_json::from_str(&changed.2).unwrap();
    let message = error["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(r#"/messages/0/content (recorded "Be brief.", requested "Be thorough.")"#),
        "{message}"
    );
    let changed = post(&url("/model/anthropic/v1/messages"), &[], &ANTHROPIC_BODY.replace("64", "65")).await;
    let error: Value = serde_json::from_str(&changed.2).unwrap();
    assert_eq!((changed.0, &error["type"]), (400, &json!("error")), "{changed:?}");
    assert!(
        error["error"]["message"].as_str().unwrap().contains("/max_tokens (recorded 64, requested 65)"),
        "{error}"
    );
    let (status, log) = replay.stop("TERM").await;
    assert!(status.success(), "{log}");
}

/// Recording, a stream reaches the client event by event as the server
/// sends it: the first event is read while the server still holds the rest.
#[tokio::test]
async fn a_streamed_answer_is_relayed_as_it_arrives_while_recording() {
    let mcp = upstream::start().await;
    let models = ModelServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let model = format!("openai={}", models.url("/v1"));
    let record = recording(&mcp.url(), dir.path().to_str().unwrap(), &[model], &[]).await;
    let body = chat("Be brief.", true).replace(r#""content": "hi""#, r#""content": "gated""#);
    let mut response = reqwest::Client::new()
        .post(format!("{}/model/openai/chat/completions", record.url))
        .header("authorization", format!("Bearer {OPENAI_KEY}"))
        .body(body)
        .send()
        .await
        .unwrap();
    let first = tokio::time::timeout(std::time::Duration::from_secs(30), response.chunk())
        .await
        .expect("the first event did not come while the server held the rest")
        .unwrap()
        .unwrap();
    assert!(std::str::from_utf8(&first).unwrap().contains(r#""content":"Hel""#), "{first:?}");
    models.gate.notify_one();
    let mut rest = Vec::new();
    while let Some(chunk) = response.chunk().await.unwrap() {
        rest.extend_from_slice(&chunk);
    }
    assert!(String::from_utf8(rest).unwrap().ends_with("data: [DONE]\n\n"));
    let (status, log) = record.stop("INT").await;
    assert!(status.success(), "{log}");
    let stored =
        Cassette::open_read_only(&dir.path().join("default.sqlite")).unwrap().llm_exchanges().unwrap();
    let LlmAnswer::Events(events) = &stored[0].answer else { panic!("{stored:?}") };
    assert_eq!(events.len(), 3, "{events:?}");
    assert!(events[0].offset_ms <= events[1].offset_ms && events[1].offset_ms <= events[2].offset_ms);
}

/// Under `mcp-tape test`, a request to the model the cassette does not
/// answer fails the run even when the command passes, and the miss is
/// counted in the usage report.
#[tokio::test]
async fn a_model_miss_fails_the_test_run() {
    let dir = tempfile::tempdir().unwrap();
    let cassette = dir.path().join("agent.sqlite");
    let line = json!({
        "model": "openai", "method": "POST", "target": "/chat/completions",
        "request": chat("Be brief.", false), "status": 200, "contentType": "application/json",
        "body": r#"{"choices":[{"message":{"role":"assistant","content":"hi"}}]}"#,
    });
    let mut file = Cassette::open(&cassette).unwrap();
    mcp_tape::interchange::jsonl::import(format!("{line}\n").as_bytes(), &mut file).unwrap();
    drop(file);
    let asking = |system: &str| {
        format!(
            "import json, os, urllib.request\n\
             request = urllib.request.Request(os.environ['MCP_TAPE_URL'] + '/model/openai/chat/completions', \
             data={body:?}.encode(), headers={{'content-type': 'application/json'}})\n\
             try:\n    print(urllib.request.urlopen(request).read().decode())\n\
             except urllib.error.HTTPError as error:\n    print(error.code, error.read().decode())\n",
            body = chat(system, false)
        )
    };
    let report = dir.path().join("usage.json");
    let page = dir.path().join("run.html");
    let junit = dir.path().join("junit.xml");
    let run = |system: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_mcp-tape"))
            .arg("test")
            .arg(&cassette)
            .arg("--report")
            .arg(&report)
            .arg("--html")
            .arg(&page)
            .arg("--junit")
            .arg(&junit)
            .args(["--", "python3", "-c", &asking(system)])
            .env_remove("MCP_TAPE_MODE")
            .output()
            .unwrap()
    };
    let passed = run("Be brief.");
    let out = String::from_utf8_lossy(&passed.stdout);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("model openai POST /chat/completions") && html.contains("asked user: hi; answered hi"),
        "{html}"
    );
    assert!(
        passed.status.success() && out.contains(r#""content":"hi""#),
        "{out}\n{}",
        String::from_utf8_lossy(&passed.stderr)
    );
    let missed = run("Be thorough.");
    let (out, err) = (String::from_utf8_lossy(&missed.stdout), String::from_utf8_lossy(&missed.stderr));
    assert_eq!(missed.status.code(), Some(1), "{out}\n{err}");
    assert!(out.starts_with("400 ") && out.contains("/messages/0/content"), "{out}");
    let usage: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert!(usage.to_string().contains("model openai"), "{usage}");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("asked user: hi; answered (nothing: a miss)") && html.contains("/messages/0/content"),
        "{html}"
    );
    let junit = std::fs::read_to_string(&junit).unwrap();
    assert!(junit.contains("<testsuite name=\"model openai\"") && junit.contains("<failure"), "{junit}");
}

/// `--pace recorded` spaces a replayed stream's events as they came: the
/// second event, recorded 400 ms after the first, follows it by as much.
#[tokio::test]
async fn a_replayed_stream_keeps_its_pace_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let line = json!({
        "model": "openai", "method": "POST", "target": "/chat/completions", "request": "{}", "status": 200,
        "contentType": "text/event-stream", "events": ["data: {\"n\":1}", "data: [DONE]"], "offsetsMs": [0, 400],
    });
    let mut file = Cassette::open(&dir.path().join("paced.sqlite")).unwrap();
    mcp_tape::interchange::jsonl::import(format!("{line}\n").as_bytes(), &mut file).unwrap();
    drop(file);
    let replay = Daemon::start(&[dir.path().to_str().unwrap(), "--pace", "recorded"]).await;
    let mut response = reqwest::Client::new()
        .post(format!("{}/model/openai/chat/completions", replay.url))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let first = response.chunk().await.unwrap().unwrap();
    let after_first = std::time::Instant::now();
    assert_eq!(first, "data: {\"n\":1}\n\n");
    let mut rest = Vec::new();
    while let Some(chunk) = response.chunk().await.unwrap() {
        rest.extend_from_slice(&chunk);
    }
    assert_eq!(rest, b"data: [DONE]\n\n");
    assert!(
        after_first.elapsed() >= std::time::Duration::from_millis(300),
        "the 400 ms gap was kept: {:?}",
        after_first.elapsed()
    );
    let (status, log) = replay.stop("TERM").await;
    assert!(status.success(), "{log}");
}

/// A passing run's usage report lists the model exchanges it never used,
/// and `prune` removes them (a row that holds another exchange now stays).
#[tokio::test]
async fn prune_removes_the_model_exchanges_a_passing_run_never_used() {
    let dir = tempfile::tempdir().unwrap();
    let cassette = dir.path().join("agent.sqlite");
    let line = |system: &str, body: &str| {
        json!({"model": "openai", "method": "POST", "target": "/chat/completions", "request": chat(system, false),
               "status": 200, "contentType": "application/json", "body": body})
    };
    let lines = format!("{}\n{}\n", line("Be brief.", "{\"used\":1}"), line("Be thorough.", "{\"used\":0}"));
    let mut file = Cassette::open(&cassette).unwrap();
    mcp_tape::interchange::jsonl::import(lines.as_bytes(), &mut file).unwrap();
    drop(file);
    let report = dir.path().join("usage.json");
    let asking = format!(
        "import os, urllib.request\n\
         request = urllib.request.Request(os.environ['MCP_TAPE_URL'] + '/model/openai/chat/completions', \
         data={body:?}.encode())\n\
         print(urllib.request.urlopen(request).read().decode())\n",
        body = chat("Be brief.", false)
    );
    let bin = env!("CARGO_BIN_EXE_mcp-tape");
    let ran = std::process::Command::new(bin)
        .arg("test")
        .arg(&cassette)
        .arg("--report")
        .arg(&report)
        .args(["--allow-misses", "--", "python3", "-c", &asking])
        .env_remove("MCP_TAPE_MODE")
        .output()
        .unwrap();
    assert!(ran.status.success(), "{}", String::from_utf8_lossy(&ran.stderr));
    let usage: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let unused = usage["unusedModels"].as_array().unwrap();
    assert_eq!((unused.len(), &unused[0]["row"]), (1, &json!(2)), "{usage}");
    let pruned = std::process::Command::new(bin)
        .arg("prune")
        .arg(&cassette)
        .arg("--unused-from")
        .arg(&report)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&pruned.stdout);
    assert!(
        pruned.status.success() && out.contains("removed #2: model openai POST /chat/completions"),
        "{out}"
    );
    let said = String::from_utf8_lossy(&pruned.stderr);
    assert!(said.ends_with("; 1 recording left in it\n"), "the LLM exchange left is counted: {said}");
    let left = Cassette::open_read_only(&cassette).unwrap().llm_exchanges().unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].request, chat("Be brief.", false));
}

/// A server that compresses its answer though asked for none: the client
/// gets it decompressed, and so does the cassette.
#[tokio::test]
async fn a_compressed_answer_is_stored_decompressed() {
    let mcp = upstream::start().await;
    let models = ModelServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let model = format!("openai={}", models.url("/v1"));
    let cassettes = dir.path().to_str().unwrap();
    let record = recording(&mcp.url(), cassettes, &[model], &[]).await;
    let key = format!("Bearer {OPENAI_KEY}");
    let headers = [("authorization", key.as_str()), ("x-test-answer", "gzip")];
    let (status, _, text) =
        post(&format!("{}/model/openai/chat/completions", record.url), &headers, &chat("Be brief.", false))
            .await;
    assert_eq!((status, text.as_str()), (200, r#"{"id":"chatcmpl-1","compressed":true}"#));
    assert_eq!(models.seen.lock().unwrap()[0].headers["accept-encoding"], "identity");
    let (status, log) = record.stop("INT").await;
    assert!(status.success(), "{log}");
    let stored =
        Cassette::open_read_only(&dir.path().join("default.sqlite")).unwrap().llm_exchanges().unwrap();
    assert_eq!(stored[0].answer, LlmAnswer::Whole(r#"{"id":"chatcmpl-1","compressed":true}"#.into()));
}

/// A model answer the client was given that cannot be stored as it saw
/// it (in an encoding mcp-tape does not decode, not UTF-8, a stream broken
/// off) fails the recording, naming it; nothing of it is stored.
#[tokio::test]
async fn a_model_answer_that_cannot_be_stored_fails_the_recording_naming_it() {
    let mcp = upstream::start().await;
    let models = ModelServer::start().await;
    let key = format!("Bearer {OPENAI_KEY}");
    for (asked, stream, why) in [
        ("br", false, "Content-Encoding br, which mcp-tape does not decode"),
        ("latin1", false, "the answer is not UTF-8 text"),
        ("cut", true, "the stream broke off"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let model = format!("openai={}", models.url("/v1"));
        let record = recording(&mcp.url(), dir.path().to_str().unwrap(), &[model], &[]).await;
        let headers = [("authorization", key.as_str()), ("x-test-answer", asked)];
        let url = format!("{}/model/openai/chat/completions", record.url);
        let mut request = reqwest::Client::new()
            .post(&url)
            .body(chat("Be brief.", stream))
            .header("content-type", "application/json");
        for (name, value) in headers {
            request = request.header(name, value);
        }
        let mut response = request.send().await.unwrap();
        assert_eq!(response.status(), 200, "{asked}: relayed");
        if stream {
            let first = response.chunk().await.unwrap().unwrap();
            assert!(String::from_utf8_lossy(&first).contains("Hel"), "{asked}: the first event is relayed");
            models.gate.notify_one();
        }
        let _ = response.bytes().await;
        let (status, log) = record.stop("INT").await;
        assert!(!status.success(), "{asked}: {log}");
        assert!(
            log.contains("1 answer(s) the client was given are not in the cassette")
                && log.contains("model openai POST /chat/completions")
                && log.contains(why),
            "{asked}: {log}"
        );
        let stored =
            Cassette::open_read_only(&dir.path().join("default.sqlite")).unwrap().llm_exchanges().unwrap();
        assert!(stored.is_empty(), "{asked}: {stored:?}");
    }
}

/// What a model repeats of its request is scrubbed as the request is: a
/// value under a credential key (`api_key`) and a `--redact-pattern`
/// shape (a GitHub token the user pasted), in a whole answer and in each
/// event of a streamed one.
#[tokio::test]
async fn a_model_answer_repeating_a_credential_or_a_secret_shape_stores_neither() {
    let mcp = upstream::start().await;
    let models = ModelServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let model = format!("openai={}", models.url("/v1"));
    let extra = ["--redact-pattern", "builtin"];
    let record = recording(&mcp.url(), dir.path().to_str().unwrap(), &[model], &extra).await;
    let token = format!("ghp_{}", "q7W8e9R0t1".repeat(4));
    let api_key = "body-key-0123456789abcdef";
    let key = format!("Bearer {OPENAI_KEY}");
    let headers = [("authorization", key.as_str()), ("x-test-answer", "echo")];
    for stream in [false, true] {
        let body = json!({"model": "gpt-test", "api_key": api_key, "stream": stream,
            "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": format!("use {token}")}]});
        let (status, _, text) =
            post(&format!("{}/model/openai/chat/completions", record.url), &headers, &body.to_string()).await;
        assert_eq!(status, 200);
        assert!(
            text.contains(&token) && text.contains(api_key),
            "the client gets what the server said: {text}"
        );
    }
    let (status, log) = record.stop("INT").await;
    assert!(status.success(), "{log}");
    let stored =
        Cassette::open_read_only(&dir.path().join("default.sqlite")).unwrap().llm_exchanges().unwrap();
    assert_eq!(stored.len(), 2);
    let answers: Vec<String> = stored
        .iter()
        .map(|exchange| match &exchange.answer {
            LlmAnswer::Whole(body) => body.clone(),
            LlmAnswer::Events(events) => {
                events.iter().map(|e| e.text.as_str()).collect::<Vec<_>>().join("\n")
            }
        })
        .collect();
    for (exchange, answer) in stored.iter().zip(&answers) {
        for text in [&exchange.request, answer] {
            assert!(!text.contains(&token) && !text.contains(api_key), "{text}");
        }
        assert!(answer.contains("[REDACTED]"), "{answer}");
    }
    assert!(answers[1].starts_with("data: {\"delta\":\"use [REDACTED]\"}"), "{}", answers[1]);
}

/// `--model` is refused, with the reason, where it cannot mean what was
/// meant: with `--stdio`, without `NAME=`, or with a name a path cannot hold
/// (dots alone: clients resolve `/model/..` to another path).
#[test]
fn a_model_that_cannot_be_recorded_is_refused_at_start() {
    let bin = env!("CARGO_BIN_EXE_mcp-tape");
    let refused = |args: &[&str], env: Option<&str>| {
        let mut command = std::process::Command::new(bin);
        command.args(args).env_remove("MCP_TAPE_MODEL");
        if let Some(value) = env {
            command.env("MCP_TAPE_MODEL", value);
        }
        let output = command.output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    let upstream = ["record", "--port", "0", "--upstream", "http://127.0.0.1:9/mcp"];
    let told =
        refused(&["record", "--stdio", "--model", "openai=https://api.openai.com/v1", "--", "cat"], None);
    assert!(told.contains("--model with --stdio: a model client reaches the tape over HTTP"), "{told}");
    let told = refused(&upstream, Some("openai"));
    assert!(told.contains("MCP_TAPE_MODEL: \"openai\": expected NAME=URL"), "{told}");
    let told = refused(&[&upstream[..], &["--model", "bad name=http://x"]].concat(), None);
    assert!(told.contains("the NAME takes letters, digits"), "{told}");
    for dots in ["..=http://x", ".=http://x"] {
        let told = refused(&[&upstream[..], &["--model", dots]].concat(), None);
        assert!(told.contains("the NAME must hold more than dots"), "{told}");
    }
    let twice = ["--model", "a=http://x", "--model", "a=http://y"];
    let told = refused(&[&upstream[..], &twice[..]].concat(), None);
    assert!(told.contains("a model of that name is given already"), "{told}");
}
