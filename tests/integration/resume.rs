//! Resumable streams (SEP-1699): record keeps an answer whose SSE stream the
//! server closed before the answer, across the client's `GET` with
//! `Last-Event-ID`, and stores where it closed; replay numbers its events,
//! opens with the recorded priming event, closes at the same point, and
//! continues from any event id it sent, the standalone GET stream's too.

use mcp_tape::config::Pace;
use mcp_tape::model::StreamShape;
use reqwest::Method;
use serde_json::{Value, json};

use crate::support::*;
use crate::upstream::{self, TOKEN};

const MAIL: &str = "/agents/servers/mcp_MailTools";

/// One SSE event as a client reads it: id, retry, data.
#[derive(Debug, PartialEq)]
struct Event {
    id: Option<String>,
    retry: Option<u64>,
    data: String,
}

impl Event {
    fn message(&self) -> Value {
        serde_json::from_str(&self.data).unwrap_or_else(|e| panic!("{self:?}: {e}"))
    }
}

/// Every event of an SSE body (keep-alive comments skipped).
fn events(reply: &Reply) -> Vec<Event> {
    assert_eq!(reply.header("content-type"), Some("text/event-stream"), "{reply:?}");
    reply
        .text
        .split("\n\n")
        .filter(|block| block.lines().any(|line| !line.starts_with(':')))
        .map(|block| {
            let field = |name: &str| {
                let values: Vec<&str> = block.lines().filter_map(|l| l.strip_prefix(name)).collect();
                (!values.is_empty()).then(|| values.join("\n"))
            };
            Event {
                id: field("id: "),
                retry: field("retry: ").map(|r| r.parse().unwrap()),
                data: field("data: ").or_else(|| field("data:")).unwrap_or_default(),
            }
        })
        .collect()
}

/// A `GET` that resumes the stream of `session` after `last`.
async fn resume(url: &str, session: &[(&str, &str)], last: &str) -> Reply {
    let mut headers = session.to_vec();
    headers.extend([("accept", "text/event-stream"), ("last-event-id", last)]);
    raw(Method::GET, url, &headers, String::new()).await
}

fn text_of(message: &Value) -> &str {
    message["result"]["content"][0]["text"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn a_stream_closed_before_its_answer_is_recorded_whole_and_replayed_resumable() {
    let upstream = upstream::start().await;
    let dir = Cassettes::new();
    let recorder = Recorder::start(&upstream.url(), dir.path(), RecordOptions::default()).await;
    let url = recorder.url(MAIL);
    let auth = format!("Bearer {TOKEN}");
    let init = json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}});
    call(&url, &[("authorization", &auth)], "initialize", init.clone()).await;
    let session = [("authorization", auth.as_str()), ("mcp-session-id", "upstream-session-1")];

    let closed = events(&call(&url, &session, "tools/call", json!({"name": "polled"})).await);
    assert_eq!(closed.len(), 2, "the priming event and a notification, then the stream closed: {closed:?}");
    assert_eq!(
        (closed[0].id.as_deref(), closed[0].retry, closed[0].data.as_str()),
        (Some("polled-0"), Some(300), "")
    );
    assert_eq!(closed[1].id.as_deref(), Some("polled-1"));
    let resumed = events(&resume(&url, &session, "polled-1").await);
    assert_eq!(resumed.len(), 1, "{resumed:?}");
    assert_eq!(text_of(&resumed[0].message()), "polled answer");
    let exchanges = recorder.stop().await;

    let polled = exchanges.iter().find(|e| e.method == "tools/call").expect("the call is stored");
    assert_eq!(polled.stream, StreamShape { primed: true, retry_ms: Some(300), closed_after: Some(1) });
    let stored: Vec<&Value> = polled.messages.iter().map(|m| &m.body).collect();
    assert_eq!(stored.len(), 2, "the notification and the answer that came on the resumed stream");
    assert_eq!(stored[0]["method"], "notifications/message");
    assert_eq!(text_of(stored[1]), "polled answer");

    for pace in [Pace::Instant, Pace::Recorded] {
        let cassette = dir.path().join("recorded.sqlite");
        let replayer = Replayer::start_with(&[&cassette], Options { pace, ..Options::default() }).await;
        let url = replayer.url(MAIL);
        let opened = call(&url, &[], "initialize", init.clone()).await;
        let id = opened.header("mcp-session-id").unwrap().to_owned();
        let session = [("mcp-session-id", id.as_str()), ("mcp-protocol-version", "2025-11-25")];

        let closed = events(&call(&url, &session, "tools/call", json!({"name": "polled"})).await);
        assert_eq!(closed.len(), 2, "{pace:?}: closed where the recording closed: {closed:?}");
        let (priming, note) = (&closed[0], &closed[1]);
        assert_eq!((priming.retry, priming.data.as_str()), (Some(300), ""), "{pace:?}");
        assert_eq!(note.message()["method"], "notifications/message");
        let (first, second) = (priming.id.clone().unwrap(), note.id.clone().unwrap());
        let stream = first.strip_suffix("-0").expect("ids name their stream");
        assert_eq!(second, format!("{stream}-1"));

        let rest = events(&resume(&url, &session, &second).await);
        assert_eq!(rest.len(), 1, "{pace:?}: {rest:?}");
        assert_eq!(
            (rest[0].id.clone(), rest[0].message()["id"].clone()),
            (Some(format!("{stream}-2")), json!(1))
        );
        assert_eq!(text_of(&rest[0].message()), "polled answer");
        // From any event replay sent, as after a dropped connection.
        let again = events(&resume(&url, &session, &first).await);
        let ids: Vec<Option<String>> = again.iter().map(|e| e.id.clone()).collect();
        assert_eq!(ids, [Some(format!("{stream}-1")), Some(format!("{stream}-2"))], "{pace:?}");
        assert_eq!(text_of(&again[1].message()), "polled answer");

        // A client older than 2025-11-25 takes no priming event: it gets the answer on the one stream.
        let older = [("mcp-session-id", id.as_str()), ("mcp-protocol-version", "2025-06-18")];
        let whole = events(&call(&url, &older, "tools/call", json!({"name": "polled"})).await);
        assert_eq!(whole.len(), 2, "{pace:?}: {whole:?}");
        assert!(whole.iter().all(|e| e.id.is_some() && !e.data.is_empty()), "{whole:?}");
        assert_eq!(text_of(&whole[1].message()), "polled answer");

        // A session that has ended resumes nothing: 404, as for any request in it.
        let ended = raw(Method::DELETE, &url, &session, String::new()).await;
        assert_eq!(ended.status, 200, "{ended:?}");
        let after_end = resume(&url, &session, &first).await;
        assert_eq!(after_end.status, 404, "{pace:?}: {after_end:?}");
        replayer.stop().await.unwrap();
    }
}

/// Reads a GET stream until `count` events with data have come; returns
/// their ids and data.
async fn read_events(stream: &mut reqwest::Response, count: usize) -> Vec<(String, Value)> {
    let mut text = String::new();
    let mut found = Vec::new();
    while found.len() < count {
        let chunk = tokio::time::timeout(std::time::Duration::from_secs(30), stream.chunk()).await;
        let chunk = chunk.expect("an event in time").unwrap().expect("the stream goes on");
        text.push_str(std::str::from_utf8(&chunk).unwrap());
        while let Some(end) = text.find("\n\n") {
            let block: String = text.drain(..end + 2).collect();
            let field = |name: &str| block.lines().find_map(|l| l.strip_prefix(name)).map(str::to_owned);
            if let (Some(id), Some(data)) = (field("id: "), field("data: ")) {
                found.push((id, serde_json::from_str(&data).unwrap()));
            }
        }
    }
    found
}

async fn get_stream(url: &str, session: &str, last_event_id: Option<&str>) -> reqwest::Response {
    let mut request = reqwest::Client::new()
        .get(url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", session);
    if let Some(last) = last_event_id {
        request = request.header("last-event-id", last);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 200);
    response
}

#[tokio::test]
async fn the_standalone_stream_resumes_after_any_event_it_sent() {
    let into = tempfile::tempdir().unwrap();
    crate::asides::record_chatty(into.path()).await;
    let replay = Replayer::start(&[into.path()]).await;
    let url = replay.url("/agents/servers/mcp_Chatty");
    let session = initialize_session(&url).await;
    let mut first = get_stream(&url, &session, None).await;
    let said = read_events(&mut first, 2).await;
    assert_eq!(said[0].1["method"], "notifications/tools/list_changed", "{said:?}");
    assert_eq!(said[1].1["method"], "roots/list", "{said:?}");
    let stream = said[0].0.strip_suffix("-1").expect("ids name their stream").to_owned();
    assert_eq!(said[1].0, format!("{stream}-2"));
    drop(first); // the connection drops

    let mut resumed = get_stream(&url, &session, Some(&said[0].0)).await;
    let again = read_events(&mut resumed, 1).await;
    assert_eq!(again, said[1..], "what followed the event resumed from, with its id");
    drop(resumed);
    let other = initialize_session(&url).await;
    let mut elsewhere = get_stream(&url, &other, Some(&said[0].0)).await;
    let theirs = read_events(&mut elsewhere, 2).await;
    assert!(
        theirs.iter().all(|(id, _)| !id.starts_with(&format!("{stream}-"))),
        "another session's id opens a new stream: {theirs:?}"
    );
    replay.stop().await.unwrap();
}

/// Opens a second session of the chatty recording: `initialize`, `initialized`.
async fn initialize_session(url: &str) -> String {
    let init = post(url, &[], &crate::asides::initialize().to_string()).await;
    let session = init.header("mcp-session-id").expect("a session").to_owned();
    let headers = [("mcp-session-id", session.as_str())];
    assert_eq!(post(url, &headers, &crate::asides::initialized().to_string()).await.status, 202);
    session
}
