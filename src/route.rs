//! The HTTP front door, done once for every request in both modes:
//! Host/Origin check, path → server identity, the Agent 365 service
//! endpoints that are not MCP (to [`Replay::service`] or
//! [`Record::service`]), and for a POST the content type, Accept, a bounded
//! body read and JSON-RPC parsing ([`read_post`]).
//! Replay's own HTTP rules (sessions, versions, the stateless era's header
//! checks) follow here too; what survives is handed to replay as a [`Call`]
//! and its [`Answer`] framed as JSON, SSE or an empty 202. Record gets the
//! checked request and forwards it. Every request leaves one log line.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body as _, Incoming};
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::http::request::Parts;
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::agent365::ServiceRoute;
use crate::config::{FrontDoor, Pace};
use crate::error::Rejection;
use crate::jsonrpc::{self, Message};
use crate::mcp::{self, Era, RoutingHeaders};
use crate::printable;
use crate::record::Record;
use crate::replay::{Answer, Call, Outgoing, Replay, Replies};
use crate::sse;

/// Largest POST body accepted; larger ones get 413.
pub const MAX_REQUEST_BODY_BYTES: usize = 4 * 1024 * 1024;

/// The response body type of every answer: whole or streamed.
pub type Body = BoxBody<Bytes, Infallible>;

/// What the daemon does with requests that pass the front door.
pub enum Mode {
    /// Shared with the caller, which reads the misses after shutdown.
    Replay(Arc<Replay>),
    Record(Box<Record>),
}

/// What every request handler shares.
pub struct App {
    pub mode: Mode,
    pub front_door: FrontDoor,
}

/// What the log line says about a request besides its status.
pub struct Logged {
    pub server: String,
    pub mcp_method: String,
    pub outcome: &'static str,
}

/// A POST that passed the front door.
pub struct Post {
    pub parts: Parts,
    pub message: Message,
    pub accepts: Accepts,
}

/// Handles one HTTP request. Never fails: every refusal is an HTTP answer.
pub async fn handle(request: Request<Incoming>, app: &App) -> Response<Body> {
    let started = Instant::now();
    let http_method = request.method().clone();
    let mut logged =
        Logged { server: server_name(request.uri().path()), mcp_method: String::new(), outcome: "rejected" };
    let response = match dispatch(request, app, &mut logged).await {
        Ok(response) => response,
        Err(rejection) => json_text_response(
            StatusCode::from_u16(rejection.status).unwrap_or(StatusCode::BAD_REQUEST),
            rejection.body(),
        ),
    };
    tracing::info!(
        "{http_method} server={} method={} {} status={} {:.1}ms",
        printable(&logged.server),
        if logged.mcp_method.is_empty() { "-".into() } else { printable(&logged.mcp_method) },
        logged.outcome,
        response.status().as_u16(),
        started.elapsed().as_secs_f64() * 1e3,
    );
    response
}

async fn dispatch(
    request: Request<Incoming>,
    app: &App,
    logged: &mut Logged,
) -> Result<Response<Body>, Rejection> {
    check_host_and_origin(request.headers(), request.uri(), &app.front_door.allowed_hosts)?;
    let service = ServiceRoute::of(request.method().as_str(), request.uri().path());
    match (&app.mode, service) {
        (Mode::Replay(replay), Some(route)) => {
            replay_service(request, route, replay, app.front_door.idle_timeout, logged).await
        }
        (Mode::Replay(replay), None) => {
            replay_dispatch(request, replay, app.front_door.idle_timeout, logged).await
        }
        (Mode::Record(record), Some(route)) => record.service(request, route, logged).await,
        (Mode::Record(record), None) if request.method() == Method::POST => {
            record.post(request, logged).await
        }
        (Mode::Record(record), None) => record.pass_through(request, logged).await,
    }
}

/// An Agent 365 service endpoint: answered by replay, whatever the body
/// (a chat-message body, the user's conversation, is logged at debug level
/// and dropped).
async fn replay_service(
    request: Request<Incoming>,
    route: ServiceRoute,
    replay: &Replay,
    body_idle: Duration,
    logged: &mut Logged,
) -> Result<Response<Body>, Rejection> {
    let origin = origin(request.headers(), request.uri());
    let body = read_body(request.into_body(), body_idle, logged).await?;
    if route == ServiceRoute::ChatMessage {
        tracing::debug!("chat-message: {:?}", String::from_utf8_lossy(&body));
    }
    let reply = replay.service(route, &origin);
    logged.outcome = reply.outcome.as_str();
    let mut response = Response::new(full(Bytes::from(reply.body)));
    *response.status_mut() = StatusCode::from_u16(reply.status).unwrap_or(StatusCode::OK);
    if let Ok(content_type) = HeaderValue::from_str(&reply.content_type)
        && !reply.content_type.is_empty()
    {
        response.headers_mut().insert(header::CONTENT_TYPE, content_type);
    }
    Ok(response)
}

async fn replay_dispatch(
    request: Request<Incoming>,
    replay: &Replay,
    body_idle: Duration,
    logged: &mut Logged,
) -> Result<Response<Body>, Rejection> {
    if request.method() == Method::GET && request.uri().path().trim_end_matches('/') == "/health" {
        logged.outcome = "health";
        return Ok(health(replay));
    }
    let era = Era::of_header(header_str(request.headers(), mcp::HEADER_PROTOCOL_VERSION)?);
    let session = header_str(request.headers(), mcp::HEADER_SESSION_ID)?.map(str::to_owned);
    match *request.method() {
        Method::POST => {
            let post = read_post(request, body_idle, logged).await?;
            replay_post(post, replay, era, session.as_deref(), logged)
        }
        Method::GET if era == Era::Handshake => {
            replay.check_session(session.as_deref())?;
            Err(method_not_allowed("POST, DELETE", "this server offers no standalone SSE stream"))
        }
        Method::DELETE if era == Era::Handshake => {
            let Some(session) = session else {
                return Err(Rejection::client(
                    400,
                    jsonrpc::INVALID_REQUEST,
                    "DELETE needs an Mcp-Session-Id header",
                ));
            };
            replay.end_session(&session)?;
            logged.outcome = "ended";
            Ok(empty_response(StatusCode::OK))
        }
        Method::GET | Method::DELETE => {
            Err(method_not_allowed("POST", "the stateless protocol era uses POST only"))
        }
        _ => Err(method_not_allowed("GET, POST, DELETE", "MCP endpoints take POST, GET and DELETE")),
    }
}

/// The front door's checks on a POST: JSON content type, an acceptable
/// `Accept`, a body under the size limit that parses as one JSON-RPC message.
///
/// # Errors
///
/// 415, 406, 413 or 400 (`-32700`/`-32600`) with a JSON-RPC error.
pub async fn read_post(
    request: Request<Incoming>,
    body_idle: Duration,
    logged: &mut Logged,
) -> Result<Post, Rejection> {
    let (parts, body) = request.into_parts();
    let accepts = check_post_headers(&parts.headers)?;
    let body = read_body(body, body_idle, logged).await?;
    let message = parse_message(&body, logged)?;
    Ok(Post { parts, message, accepts })
}

/// A POST's `Content-Type` (JSON) and `Accept` (JSON or SSE); returns the
/// framings the client accepts.
///
/// # Errors
///
/// 415 or 406 with a JSON-RPC error.
pub fn check_post_headers(headers: &HeaderMap) -> Result<Accepts, Rejection> {
    if !is_json_content_type(headers) {
        return Err(Rejection::client(
            415,
            jsonrpc::INVALID_REQUEST,
            "Content-Type must be application/json",
        ));
    }
    let accepts = Accepts::of(headers);
    if !accepts.json && !accepts.sse {
        return Err(Rejection::client(
            406,
            jsonrpc::INVALID_REQUEST,
            "Accept must allow application/json or text/event-stream",
        ));
    }
    Ok(accepts)
}

/// A POST body as one JSON-RPC message; notes its method for the log line.
///
/// # Errors
///
/// 400 with `-32700` (not JSON) or `-32600` (not one JSON-RPC message).
pub fn parse_message(body: &[u8], logged: &mut Logged) -> Result<Message, Rejection> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| Rejection::client(400, jsonrpc::PARSE_ERROR, format!("Parse error: {e}")))?;
    let message = Message::parse(value).map_err(|(id, error)| Rejection {
        status: 400,
        error,
        id: id.map(|id| id.as_written_in(body)),
    })?;
    let message = match message {
        Message::Request { id, method, params } => {
            Message::Request { id: id.as_written_in(body), method, params }
        }
        other => other,
    };
    logged.mcp_method = match &message {
        Message::Request { method, .. } | Message::Notification { method, .. } => method.clone(),
        Message::Response { .. } => "(response)".into(),
    };
    Ok(message)
}

fn replay_post(
    post: Post,
    replay: &Replay,
    era: Era,
    session: Option<&str>,
    logged: &mut Logged,
) -> Result<Response<Body>, Rejection> {
    let headers = &post.parts.headers;
    let routing = RoutingHeaders {
        protocol_version: header_str(headers, mcp::HEADER_PROTOCOL_VERSION)?.map(str::to_owned),
        method: header_str(headers, mcp::HEADER_METHOD)?.map(str::to_owned),
        name: header_str(headers, mcp::HEADER_NAME)?.map(str::to_owned),
    };
    let (id, method, params) = match post.message {
        Message::Request { id, method, params } => (id, method, params),
        other => {
            // Notifications and client responses: 202, no body; a reply to a
            // re-enacted server request lets its stream go on.
            if era == Era::Handshake {
                replay.check_session(session)?;
            }
            if let Message::Response { id: Some(id), .. } = &other {
                replay.replies().arrived(session, id.as_value());
            }
            logged.outcome = "accepted";
            return Ok(empty_response(StatusCode::ACCEPTED));
        }
    };
    if era == Era::Stateless {
        // `Mcp-Param-{Name}` headers: (name lowercased, value trimmed).
        let argument_headers: Vec<(String, String)> = headers
            .iter()
            .filter_map(|(name, value)| {
                let suffix = name.as_str().strip_prefix(mcp::HEADER_PARAM_PREFIX)?;
                Some((suffix.to_owned(), value.to_str().ok()?.trim().to_owned()))
            })
            .collect();
        mcp::check_stateless(&method, params.as_ref(), &routing)
            .and_then(|()| {
                replay.check_param_headers(&logged.server, &method, params.as_ref(), &argument_headers)
            })
            .map_err(|error| Rejection { status: 400, error, id: Some(id.clone()) })?;
    }
    let call =
        Call { server: &logged.server, era, session, id: &id, method: &method, params: params.as_ref() };
    let answer = replay.answer(&call).map_err(|r| r.with_id(Some(id.clone())))?;
    logged.outcome = answer.outcome.as_str();
    let live = Reenact {
        replies: Arc::clone(replay.replies()),
        session: session.map(str::to_owned),
        pace: replay.pace(),
    };
    Ok(frame(answer, post.accepts, Some(live)))
}

/// How long a replayed stream waits for the client's reply to a re-enacted
/// server→client request before it gives up and ends.
pub const REPLY_WAIT: Duration = Duration::from_secs(60);

/// How often a stream held open (`subscriptions/listen`) sends an SSE
/// comment, which is also how soon it notices that the client has gone.
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(15);

/// What a replayed stream needs to re-enact its recording as it happened.
pub struct Reenact {
    pub replies: Arc<Replies>,
    pub session: Option<String>,
    pub pace: Pace,
}

/// Sends an answer's events one by one: at their recorded offsets if asked,
/// pausing after each re-enacted server request until the client replies;
/// then, if `hold_open`, keep-alive comments until the client goes away.
fn reenact(messages: Vec<Outgoing>, live: Reenact, hold_open: bool) -> Body {
    let (events, body) = mpsc::channel::<Bytes>(1);
    tokio::spawn(async move {
        let started = tokio::time::Instant::now();
        for message in messages {
            if live.pace == Pace::Recorded {
                tokio::time::sleep_until(started + Duration::from_millis(message.offset_ms)).await;
            }
            let reply = message
                .awaits_reply
                .as_ref()
                .map(|id| (id, live.replies.expect(live.session.as_deref(), id)));
            if events.send(Bytes::from(sse::message_event(&message.json))).await.is_err() {
                return; // the client went away
            }
            if let Some((id, reply)) = reply
                && !matches!(tokio::time::timeout(REPLY_WAIT, reply).await, Ok(Ok(())))
            {
                tracing::warn!(
                    "no reply to the replayed server request {id} within {REPLY_WAIT:?}; stream ended"
                );
                return;
            }
        }
        if !hold_open {
            return;
        }
        loop {
            tokio::time::sleep(KEEPALIVE_INTERVAL).await;
            if events.send(Bytes::from_static(b": keep-alive\n\n")).await.is_err() {
                return; // the client went away
            }
        }
    });
    Channel(body).boxed()
}

/// A body fed by a channel; ends when the sender is dropped.
struct Channel(mpsc::Receiver<Bytes>);

impl hyper::body::Body for Channel {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Infallible>>> {
        self.0.poll_recv(cx).map(|event| event.map(|bytes| Ok(hyper::body::Frame::data(bytes))))
    }
}

/// Reads a request body, refusing one over [`MAX_REQUEST_BODY_BYTES`] and
/// one that stalls: `idle` at most between two pieces of it.
///
/// # Errors
///
/// 413 over the limit, 408 for a stalled body, 400 when it cannot be read.
pub async fn read_body(mut body: Incoming, idle: Duration, logged: &mut Logged) -> Result<Bytes, Rejection> {
    let too_large = || {
        Rejection::client(
            413,
            jsonrpc::INVALID_REQUEST,
            format!("Request body larger than {MAX_REQUEST_BODY_BYTES} bytes"),
        )
    };
    // A body announced (Content-Length) over the limit is refused before any of it is read.
    if body.size_hint().lower() > MAX_REQUEST_BODY_BYTES as u64 {
        return Err(too_large());
    }
    let mut bytes = bytes::BytesMut::new();
    loop {
        match tokio::time::timeout(idle, body.frame()).await {
            Err(_) => {
                logged.outcome = "stalled";
                return Err(Rejection::client(
                    408,
                    jsonrpc::INVALID_REQUEST,
                    format!("The request body stalled for {idle:?}"),
                ));
            }
            Ok(None) => return Ok(bytes.freeze()),
            Ok(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    if bytes.len() + data.len() > MAX_REQUEST_BODY_BYTES {
                        return Err(too_large());
                    }
                    bytes.extend_from_slice(&data);
                }
            }
            Ok(Some(Err(e))) => {
                logged.outcome = "unreadable";
                return Err(Rejection::client(
                    400,
                    jsonrpc::INVALID_REQUEST,
                    format!("Could not read the request body: {e}"),
                ));
            }
        }
    }
}

/// Turns an answer into JSON (one message) or SSE (every message). With
/// `live`, an SSE answer that must pace or wait for client replies is
/// streamed as it is re-enacted; otherwise it is sent whole.
pub fn frame(answer: Answer, accepts: Accepts, live: Option<Reenact>) -> Response<Body> {
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::OK);
    let stream = (answer.recorded_as_stream && accepts.sse) || !accepts.json || answer.hold_open;
    let mut response = if stream {
        let needs_time = |live: &Reenact| {
            live.pace == Pace::Recorded
                || answer.hold_open
                || answer.messages.iter().any(|m| m.awaits_reply.is_some())
        };
        let body = match live.filter(needs_time) {
            Some(live) => reenact(answer.messages, live, answer.hold_open),
            None => {
                let mut body = String::new();
                for message in &answer.messages {
                    body.push_str(&sse::message_event(&message.json));
                }
                full(Bytes::from(body))
            }
        };
        let mut response = Response::new(body);
        *response.status_mut() = status;
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
        response
    } else {
        match answer.messages.into_iter().last().filter(|m| m.is_answer) {
            Some(last) => json_text_response(status, last.json),
            None => json_text_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                jsonrpc::error(
                    None,
                    &jsonrpc::ErrorObject::new(
                        jsonrpc::INTERNAL_ERROR,
                        "The recording of this exchange holds no final answer; ask for text/event-stream to get its events",
                    ),
                ),
            ),
        }
    };
    if let Some(session) = answer.session_id.and_then(|s| HeaderValue::from_str(&s).ok()) {
        response.headers_mut().insert(mcp::HEADER_SESSION_ID, session);
    }
    response
}

/// The server identity of a path: `{name}` for the Agent 365 forms
/// (`/agents/servers/{name}`, `/agents/tenants/{tid}/servers/{name}`,
/// `/mcp/environments/{env}/servers/{name}`), else the path itself. A
/// trailing slash does not matter.
pub fn server_name(path: &str) -> String {
    let trimmed = path.trim_end_matches('/');
    let segments: Vec<&str> = trimmed.split('/').skip(1).collect();
    match segments.as_slice() {
        ["agents", "servers", name]
        | ["agents", "tenants", _, "servers", name]
        | ["mcp", "environments", _, "servers", name] => (*name).to_owned(),
        _ if trimmed.is_empty() => "/".to_owned(),
        _ => trimmed.to_owned(),
    }
}

/// DNS-rebinding defence: `Host` and `Origin`, when present, must name a
/// loopback host or one the user allowed.
fn check_host_and_origin(headers: &HeaderMap, uri: &hyper::Uri, allowed: &[String]) -> Result<(), Rejection> {
    let forbidden = |what: &str, value: &str| {
        Rejection::client(
            403,
            jsonrpc::INVALID_REQUEST,
            format!("Forbidden {what} {value:?}: only loopback hosts are served (see --allow-host)"),
        )
    };
    let host = match headers.get(header::HOST) {
        Some(value) => Some(value.to_str().map_err(|_| forbidden("Host", "(not ASCII)"))?),
        None => uri.authority().map(|a| a.as_str()),
    };
    if let Some(host) = host
        && !is_allowed_host(strip_port(host), allowed)
    {
        return Err(forbidden("Host", host));
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().map_err(|_| forbidden("Origin", "(not ASCII)"))?;
        let authority = origin.split_once("://").map(|(_, rest)| rest.split('/').next().unwrap_or_default());
        if !authority.is_some_and(|a| is_allowed_host(strip_port(a), allowed)) {
            return Err(forbidden("Origin", origin));
        }
    }
    Ok(())
}

fn strip_port(authority: &str) -> &str {
    let authority = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    if let Some(rest) = authority.strip_prefix('[') {
        return rest.split(']').next().unwrap_or_default();
    }
    authority.split(':').next().unwrap_or_default()
}

fn is_allowed_host(host: &str, allowed: &[String]) -> bool {
    let host = host.to_ascii_lowercase();
    host == "localhost"
        || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
        || allowed.contains(&host)
}

/// A header's value as text; `None` when absent.
pub fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Result<Option<&'a str>, Rejection> {
    match headers.get(name) {
        None => Ok(None),
        Some(value) => value.to_str().map(Some).map_err(|_| {
            Rejection::client(400, jsonrpc::INVALID_REQUEST, format!("Header {name} is not visible ASCII"))
        }),
    }
}

fn is_json_content_type(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json"))
}

/// Which answer framings the client's `Accept` allows.
#[derive(Clone, Copy, Debug)]
pub struct Accepts {
    pub json: bool,
    pub sse: bool,
}

impl Accepts {
    fn of(headers: &HeaderMap) -> Accepts {
        let values: Vec<&str> =
            headers.get_all(header::ACCEPT).iter().filter_map(|v| v.to_str().ok()).collect();
        if values.is_empty() {
            return Accepts { json: true, sse: true };
        }
        let mut accepts = Accepts { json: false, sse: false };
        for range in values.iter().flat_map(|v| v.split(',')) {
            let media = range.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
            match media.as_str() {
                "*/*" => accepts = Accepts { json: true, sse: true },
                "application/*" | "application/json" => accepts.json = true,
                "text/*" | "text/event-stream" => accepts.sse = true,
                _ => {}
            }
        }
        accepts
    }
}

fn method_not_allowed(allow: &'static str, why: &str) -> Rejection {
    let mut rejection =
        Rejection::client(405, jsonrpc::INVALID_REQUEST, format!("Method not allowed: {why}"));
    rejection.error = rejection.error.with_data(json!({"allow": allow}));
    rejection
}

fn health(replay: &Replay) -> Response<Body> {
    let tape = replay.tape();
    json_response(
        StatusCode::OK,
        &json!({
            "status": "ok",
            "mode": "replay",
            "exchanges": tape.len(),
            "servers": tape.servers().collect::<Vec<_>>(),
        }),
    )
}

/// Where the client reached us, as an origin (`http://host:port`): from
/// `Host`, else the request target, else loopback.
pub fn origin(headers: &HeaderMap, uri: &hyper::Uri) -> String {
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    format!("http://{}", host.or(uri.authority().map(|a| a.as_str())).unwrap_or("127.0.0.1"))
}

/// A whole body.
pub fn full(bytes: Bytes) -> Body {
    Full::new(bytes).boxed()
}

pub fn json_response(status: StatusCode, body: &Value) -> Response<Body> {
    json_text_response(status, body.to_string())
}

pub fn json_text_response(status: StatusCode, json: String) -> Response<Body> {
    let mut response = Response::new(full(Bytes::from(json)));
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

fn empty_response(status: StatusCode) -> Response<Body> {
    let mut response = Response::new(full(Bytes::new()));
    *response.status_mut() = status;
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_names_from_paths() {
        assert_eq!(server_name("/agents/servers/mcp_MailTools"), "mcp_MailTools");
        assert_eq!(server_name("/agents/servers/mcp_MailTools/"), "mcp_MailTools");
        assert_eq!(server_name("/agents/tenants/t-1/servers/mcp_MeServer"), "mcp_MeServer");
        assert_eq!(server_name("/mcp/environments/e/servers/mcp_X"), "mcp_X");
        assert_eq!(server_name("/mcp"), "/mcp");
        assert_eq!(server_name("/mcp/"), "/mcp");
        assert_eq!(server_name("/"), "/");
    }

    #[test]
    fn loopback_hosts_only_unless_allowed() {
        let ok = |h: &str| is_allowed_host(strip_port(h), &["tape.test".into()]);
        assert!(
            ok("127.0.0.1:5309")
                && ok("localhost")
                && ok("[::1]:80")
                && ok("LOCALHOST:1")
                && ok("tape.test:9")
        );
        assert!(ok("127.8.9.10"));
        assert!(!ok("evil.example.com") && !ok("10.0.0.1:5309") && !ok("localhost.evil.com"));
    }

    #[test]
    fn accept_header_decides_framing() {
        let of = |v: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::ACCEPT, HeaderValue::from_str(v).unwrap());
            let a = Accepts::of(&headers);
            (a.json, a.sse)
        };
        assert_eq!(of("application/json, text/event-stream"), (true, true));
        assert_eq!(of("text/event-stream"), (false, true));
        assert_eq!(of("application/json;q=0.9"), (true, false));
        assert_eq!(of("*/*"), (true, true));
        assert_eq!(of("image/png"), (false, false));
        assert_eq!((Accepts::of(&HeaderMap::new()).json, Accepts::of(&HeaderMap::new()).sse), (true, true));
    }
}
