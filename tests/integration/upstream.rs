//! Upstreams for record tests, on 127.0.0.1 port 0: a small MCP-shaped
//! server whose behaviour is chosen by tool name (echoing the bearer token,
//! SSE with progress, a stream held at a gate, a stream that breaks, a
//! stream closed before its answer and resumed, silence, a server→client
//! request, a log line on the standalone GET stream while a call is in
//! flight), and raw TCP peers that are not HTTP at all.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::{Notify, mpsc};

/// The bearer token the fixture requires on every POST.
pub const TOKEN: &str = "eyJ0eXAiOiJKV1QiLCJhbGciOiJIUzI1NiJ9.c2VjcmV0LXBheWxvYWQ.ZmFrZS1zaWduYXR1cmU";

type Body = BoxBody<Bytes, std::io::Error>;

/// One request the upstream saw.
#[derive(Clone, Debug)]
pub struct Seen {
    pub version: hyper::Version,
    pub method: hyper::Method,
    pub path: String,
    pub headers: hyper::HeaderMap,
    pub body: Value,
}

/// Shared state of a running fixture upstream.
#[derive(Default)]
pub struct State {
    pub seen: Mutex<Vec<Seen>>,
    /// Each request's method as its head was read (before its body), with
    /// when the kernel received the bytes that completed the head: the
    /// order in which requests reached the server, whatever order this
    /// runtime then read its connections in.
    pub heads: Mutex<Vec<(u64, hyper::Method)>>,
    /// Told each time a request is seen.
    arrived: Notify,
    /// Released by a test to let the `gated` tool finish (or `break` break).
    pub gate: Notify,
    /// The client's reply to the `elicit` tool's server request.
    replies: Mutex<Option<mpsc::UnboundedSender<Value>>>,
    /// Bodies kept open (`announced_huge`, `sized` with `hold`): their senders, held.
    open_bodies: Mutex<Vec<mpsc::UnboundedSender<Result<Bytes, std::io::Error>>>>,
    /// The `polled` tool's answer, for the GET that resumes its stream.
    polled: Mutex<Option<Value>>,
    /// The open standalone (GET) stream, which the `tells_first` tool speaks on.
    standalone: Mutex<Option<mpsc::UnboundedSender<Result<Bytes, std::io::Error>>>>,
}

impl State {
    pub fn calls(&self, method: &str) -> usize {
        self.seen.lock().unwrap().iter().filter(|s| s.body["method"] == method).count()
    }

    /// Returns once a request of `method` has been seen.
    pub async fn until_called(&self, method: &str) {
        self.until(|state| state.calls(method) > 0).await;
    }

    /// Returns once `count` requests have been seen.
    pub async fn until_seen(&self, count: usize) {
        self.until(|state| state.seen.lock().unwrap().len() >= count).await;
    }

    /// Returns once `done` holds, looked at each time a request is seen.
    async fn until(&self, done: impl Fn(&State) -> bool) {
        loop {
            let arrived = self.arrived.notified();
            tokio::pin!(arrived);
            arrived.as_mut().enable();
            if done(self) {
                return;
            }
            arrived.await;
        }
    }

    /// Ends the bodies kept open (cut short of what they announced).
    pub fn close_open_bodies(&self) {
        self.open_bodies.lock().unwrap().clear();
    }
}

pub struct Upstream {
    pub addr: SocketAddr,
    pub state: Arc<State>,
}

impl Upstream {
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

/// Starts the MCP-shaped fixture over plain HTTP.
pub async fn start() -> Upstream {
    serve(None).await
}

/// Starts the fixture over TLS with `certified` (HTTP/2 or HTTP/1.1 by ALPN).
pub async fn start_tls(certified: &rcgen::CertifiedKey<rcgen::KeyPair>) -> Upstream {
    let key = rustls::pki_types::PrivateKeyDer::try_from(certified.signing_key.serialize_der()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![certified.cert.der().clone()], key)
        .unwrap();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    serve(Some(tokio_rustls::TlsAcceptor::from(Arc::new(config)))).await
}

async fn serve(tls: Option<tokio_rustls::TlsAcceptor>) -> Upstream {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let state = Arc::new(State::default());
    let shared = Arc::clone(&state);
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { return };
            let stream = Stamped::new(stream);
            let received = Arc::clone(&stream.latest);
            let state = Arc::clone(&shared);
            let tls = tls.clone();
            tokio::spawn(async move {
                let service = service_fn(move |request| {
                    let at = received.load(Ordering::Relaxed);
                    state.heads.lock().unwrap().push((at, hyper::Method::clone(Request::method(&request))));
                    answer(request, Arc::clone(&state))
                });
                let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                let _ = match tls {
                    None => builder.serve_connection(TokioIo::new(stream), service).await,
                    Some(tls) => match tls.accept(stream).await {
                        Ok(stream) => builder.serve_connection(TokioIo::new(stream), service).await,
                        Err(_) => return, // a client that does not trust us
                    },
                };
            });
        }
    });
    Upstream { addr, state }
}

/// A fixture connection whose reads keep when the kernel received their
/// bytes (`SO_TIMESTAMPNS`).
struct Stamped {
    stream: tokio::net::TcpStream,
    receipts: mcp_tape::os::Receipts,
    /// The system clock's nanoseconds at which the latest read's bytes arrived.
    latest: Arc<AtomicU64>,
}

impl Stamped {
    fn new(stream: tokio::net::TcpStream) -> Stamped {
        let receipts = mcp_tape::os::Receipts::ask(&stream);
        assert!(receipts.by_kernel(), "the kernel does not stamp receipts");
        Stamped { stream, receipts, latest: Arc::default() }
    }
}

impl AsyncRead for Stamped {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let Stamped { stream, receipts, latest } = self.get_mut();
        if let Some(at) = ready!(receipts.poll_read(Pin::new(stream), cx, buf))? {
            latest.store(at, Ordering::Relaxed);
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Stamped {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, data)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

/// `data` as a gzip member holding one stored (uncompressed) deflate
/// block (RFC 1952, RFC 1951 §3.2.4): what any gzip decoder reads.
pub(crate) fn gzip(data: &[u8]) -> Vec<u8> {
    let length = u16::try_from(data.len()).expect("a stored block holds at most 64 KiB");
    let mut out = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff, 1];
    out.extend(length.to_le_bytes());
    out.extend((!length).to_le_bytes());
    out.extend(data);
    let mut crc = !0u32;
    for byte in data {
        crc ^= u32::from(*byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    out.extend((!crc).to_le_bytes());
    out.extend(u32::from(length).to_le_bytes());
    out
}

fn full(status: u16, content_type: Option<&str>, body: impl Into<Bytes>) -> Response<Body> {
    let mut response = Response::new(Full::new(body.into()).map_err(|never| match never {}).boxed());
    *response.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
    if let Some(content_type) = content_type {
        response.headers_mut().insert("content-type", content_type.parse().unwrap());
    }
    response
}

/// What the `raw` tool's answer holds, as a server wrote it that spells
/// numbers and strings the way serde_json would not: a trailing zero, an
/// exponent in either case, a negative zero, an integer past 64 bits, an
/// escaped character.
pub const RAW_CONTENT: &str = r#"{"zeta":"w","price":1.50,"total":1e2,"tiny":1E-7,"neg0":-0,"big":123456789012345678901234567890,"esc":"caf\u00e9"}"#;

/// The `raw` tool's whole answer to the request `id` (its JSON text).
pub fn raw_answer(id: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[],"structuredContent":{RAW_CONTENT}}}}}"#)
}

/// The `unreadable` tool's answer to the request `id`: valid JSON to
/// Python's and JavaScript's parsers that serde_json refuses, of `kind`
/// `surrogate` (a lone `\ud83d`, as `JSON.stringify` writes text cut inside
/// an emoji), `deep` (arrays 200 deep) or `huge` (`1e999`).
pub fn unreadable_answer(id: &str, kind: &str) -> String {
    let value = match kind {
        "surrogate" => r#""cut \ud83d""#.to_owned(),
        "deep" => format!("{}{}", "[".repeat(200), "]".repeat(200)),
        _ => "1e999".to_owned(),
    };
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[],"structuredContent":{{"value":{value}}}}}}}"#
    )
}

/// The `zeros_mib` tool's answer to the request `id`: `[0,0,…]` of `mib`
/// MiB, the shape whose tree takes the most for its text (16 times).
pub fn zeros_mib(id: &str, mib: usize) -> String {
    let zeros = "0,".repeat(mib << 19);
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"result":{{"structuredContent":{{"zeros":[{zeros}0]}},"content":[]}}}}"#
    )
}

/// The `zeros` tool's answer to the request `id`: one 8 KiB key over
/// 60,000 numbers spelled `-0` (188 KB), the shape whose spellings a
/// side table once kept each with its whole path.
pub fn zeros_answer(id: &str) -> String {
    let key = "k".repeat(8192);
    let zeros = vec!["-0"; 60_000].join(",");
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"result":{{"structuredContent":{{"{key}":[{zeros}]}},"content":[]}}}}"#
    )
}

/// The `as_written` tool's events, as text, for the request `id` and
/// progress `token` (JSON values).
pub fn as_written(id: &Value, token: &Value) -> Vec<String> {
    vec![
        format!(
            r#"{{"params":{{"total":2,"progress":1,"progressToken":{token},"message":"reading"}},"method":"notifications/progress","jsonrpc":"2.0"}}"#
        ),
        format!(
            r#"{{"result":{{"structuredContent":{{"id":"m1","from":"ada@example.com","subject":"Lunch","isRead":false,"score":1.0,"rank":2,"weight":1e2,"ratio":1.50,"big":123456789012345678901234567890,"zero":-0,"far":1E+21}},"content":[{{"type":"text","text":"{{\"id\":\"m1\",\"from\":\"ada@example.com\"}}"}}],"isError":false}},"jsonrpc":"2.0","id":{id}}}"#
        ),
    ]
}

fn json_answer(message: Value) -> Response<Body> {
    full(200, Some("application/json"), message.to_string())
}

fn event(message: &Value) -> Bytes {
    Bytes::from(format!("event: message\ndata: {message}\n\n"))
}

/// An SSE answer whose events come from `events` as they are sent.
fn stream(events: mpsc::UnboundedReceiver<Result<Bytes, std::io::Error>>) -> Response<Body> {
    let mut response = Response::new(BodyExt::boxed(Channel(events)));
    response.headers_mut().insert("content-type", "text/event-stream".parse().unwrap());
    response
}

/// A body fed through a channel; an `Err` breaks it, a closed channel ends it.
struct Channel(mpsc::UnboundedReceiver<Result<Bytes, std::io::Error>>);

impl hyper::body::Body for Channel {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        self.0.poll_recv(cx).map(|item| item.map(|chunk| chunk.map(Frame::data)))
    }
}

/// A JSON answer after which the server says something on the standalone
/// stream: once the answer's body has ended and its connection's task has
/// flushed it (the saying task runs after that task yields).
struct Then {
    answer: Option<Bytes>,
    says: Option<(Value, Arc<State>)>,
}

impl hyper::body::Body for Then {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        if let Some(answer) = self.answer.take() {
            return std::task::Poll::Ready(Some(Ok(Frame::data(answer))));
        }
        if let Some((said, state)) = self.says.take() {
            tokio::spawn(async move {
                tokio::task::yield_now().await;
                if let Some(standalone) = state.standalone.lock().unwrap().as_ref() {
                    let _ = standalone.send(Ok(event(&said)));
                }
            });
        }
        std::task::Poll::Ready(None)
    }
}

/// The Agent 365 gateway listings (one server here, one elsewhere) and
/// chat history, whose answer echoes the caller's credentials.
fn agent365_service(parts: &hyper::http::request::Parts, body: &Value, auth: &str) -> Option<Response<Body>> {
    let path = parts.uri.path();
    if parts.method == hyper::Method::POST && path == "/agents/real-time-threat-protection/chat-message" {
        let answer = json!({"received": body["messageId"], "caller": auth});
        return Some(full(200, Some("application/json"), answer.to_string()));
    }
    if parts.method != hyper::Method::GET || !path.ends_with("/mcpServers") {
        return None;
    }
    let host = parts.headers.get("host").and_then(|v| v.to_str().ok()).unwrap_or_default();
    let entries = json!([
        {"mcpServerName": "mcp_MailTools", "url": format!("http://{host}/agents/servers/mcp_MailTools"),
         "scope": "McpServers.Mail.All", "audience": "ea9ffc3e-8a23-4a7d-836d-234d7c7565c1", "publisher": "Microsoft"},
        {"mcpServerName": "mcp_Partner", "url": "https://tools.partner.example/mcp"},
    ]);
    let listing = if path.starts_with("/agents/v2/") { entries } else { json!({"mcpServers": entries}) };
    Some(full(200, Some("application/json"), listing.to_string()))
}

async fn answer(request: Request<Incoming>, state: Arc<State>) -> Result<Response<Body>, Infallible> {
    let (parts, body) = request.into_parts();
    let bytes = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    state.seen.lock().unwrap().push(Seen {
        version: parts.version,
        method: parts.method.clone(),
        path: parts.uri.path().to_owned(),
        headers: parts.headers.clone(),
        body: body.clone(),
    });
    state.arrived.notify_waiters();
    let auth =
        parts.headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    if let Some(answer) = agent365_service(&parts, &body, &auth) {
        return Ok(answer);
    }
    // As Starlette answers a mounted app's path with a trailing slash.
    if parts.uri.path() == "/mcp/" {
        let mut moved = full(307, None, "");
        moved.headers_mut().insert("location", "/mcp".parse().unwrap());
        return Ok(moved);
    }
    let resumes = parts.headers.get("last-event-id").and_then(|v| v.to_str().ok());
    if parts.method == hyper::Method::GET && resumes.is_none() && parts.headers.contains_key("mcp-session-id")
    {
        let (tx, rx) = mpsc::unbounded_channel();
        *state.standalone.lock().unwrap() = Some(tx);
        return Ok(stream(rx));
    }
    if parts.method == hyper::Method::GET && resumes == Some("polled-1") {
        let answer = state.polled.lock().unwrap().take();
        let events = answer.map(|answer| format!("id: polled-2\nevent: message\ndata: {answer}\n\n"));
        return Ok(full(200, Some("text/event-stream"), events.unwrap_or_default()));
    }
    if parts.method != hyper::Method::POST {
        return Ok(full(405, None, ""));
    }
    if auth != format!("Bearer {TOKEN}") {
        return Ok(full(401, Some("application/json"), r#"{"error":"invalid_token"}"#));
    }
    let id = body["id"].clone();
    if body.get("method").is_none() {
        // A client's reply to a server request.
        if let Some(sender) = state.replies.lock().unwrap().as_ref() {
            let _ = sender.send(body.clone());
        }
        return Ok(full(202, None, ""));
    }
    if id.is_null() {
        return Ok(full(202, None, ""));
    }
    let answered = id.clone();
    let result = move |result: Value| json!({"jsonrpc": "2.0", "id": answered.clone(), "result": result});
    let text = |t: String| json!({"content": [{"type": "text", "text": t}]});
    let method = body["method"].as_str().unwrap_or_default();
    let tool = body["params"]["name"].as_str().unwrap_or_default();
    let token = body["params"]["_meta"]["progressToken"].clone();
    Ok(match (method, tool) {
        ("initialize", _) => {
            let mut response = json_answer(result(json!({"protocolVersion": "2025-06-18",
                "capabilities": {"tools": {}}, "serverInfo": {"name": "fixture", "version": "1"}})));
            response.headers_mut().insert("mcp-session-id", "upstream-session-1".parse().unwrap());
            response
        }
        ("server/discover", _) => full(
            400,
            Some("application/json"),
            json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32000, "message": "Bad Request: Server not initialized"}})
                .to_string(),
        ),
        ("tools/call", "echo_auth") => {
            let mut response = json_answer(result(text(format!("you are {auth}"))));
            response.headers_mut().insert("x-echo-authorization", auth.parse().unwrap());
            response
        }
        ("tools/call", "echo_forms") => {
            // The caller's credentials back in the forms servers echo them in.
            use base64::Engine;
            let subscription = parts.headers.get("ocp-apim-subscription-key").and_then(|v| v.to_str().ok());
            let echoed = json!({
                "upper": TOKEN.to_uppercase(),
                "encoded": auth.replace(' ', "%20"),
                "base64": base64::engine::general_purpose::STANDARD.encode(TOKEN),
                "subscription": subscription,
                "apiKey": body["params"]["arguments"]["apiKey"],
            });
            json_answer(result(text(echoed.to_string())))
        }
        ("tools/call", "announced_huge") => {
            // Announces 10 GiB, sends a few bytes, and keeps the body open.
            let (tx, rx) = mpsc::unbounded_channel();
            tx.send(Ok(Bytes::from_static(b"{\"jsonrpc\":"))).unwrap();
            state.open_bodies.lock().unwrap().push(tx);
            let mut response = stream(rx);
            response.headers_mut().insert("content-type", "application/json".parse().unwrap());
            response.headers_mut().insert("content-length", "10737418240".parse().unwrap());
            response
        }
        ("tools/call", "sized") => {
            // An answer of about `mib` MiB; with `hold`, only its head and first bytes, the body kept open.
            let mib = body["params"]["arguments"]["mib"].as_u64().unwrap_or(1) as usize;
            if body["params"]["arguments"]["hold"] == true {
                let (tx, rx) = mpsc::unbounded_channel();
                tx.send(Ok(Bytes::from_static(b"{\"jsonrpc\":"))).unwrap();
                state.open_bodies.lock().unwrap().push(tx);
                let mut response = stream(rx);
                response.headers_mut().insert("content-type", "application/json".parse().unwrap());
                response.headers_mut().insert("content-length", (mib << 20).to_string().parse().unwrap());
                response
            } else {
                json_answer(result(text("x".repeat((mib << 20) - 200))))
            }
        }
        ("tools/call", "compressed") => {
            // As servers behind gateways answer: gzip for a client that accepts it.
            let accepts = parts.headers.get("accept-encoding").and_then(|v| v.to_str().ok()).unwrap_or_default();
            let answer = result(text("zipped".into())).to_string();
            if accepts.contains("gzip") {
                let mut response = full(200, Some("application/json"), gzip(answer.as_bytes()));
                response.headers_mut().insert("content-encoding", "gzip".parse().unwrap());
                response
            } else {
                full(200, Some("application/json"), answer)
            }
        }
        ("tools/call", "progress") => {
            let (tx, rx) = mpsc::unbounded_channel();
            for step in 1..=3 {
                if !token.is_null() {
                    let note = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                        "params": {"progressToken": token, "progress": step, "total": 3}});
                    tx.send(Ok(event(&note))).unwrap();
                }
            }
            tx.send(Ok(event(&result(text(format!("progress echoed {auth}")))))).unwrap();
            stream(rx)
        }
        ("tools/call", "retyped") => {
            // Answers with the id in the other JSON type, the same digits: 7 for "7", "7" for 7.
            let retyped = match &id {
                Value::String(digits) => json!(digits.parse::<u64>().unwrap()),
                number => json!(number.to_string()),
            };
            let answer = json!({"jsonrpc": "2.0", "id": retyped, "result": text("retyped".into())});
            match body["params"]["arguments"]["framing"].as_str() {
                Some("sse") => full(200, Some("text/event-stream"), event(&answer)),
                _ => json_answer(answer),
            }
        }
        ("tools/call", "raw") => full(200, Some("application/json"), raw_answer(&id.to_string())),
        ("tools/call", "zeros_mib") => {
            // `[0,0,…]` of `mib` MiB, as JSON or as one SSE event.
            let mib = body["params"]["arguments"]["mib"].as_u64().unwrap_or(1) as usize;
            let answer = zeros_mib(&id.to_string(), mib);
            match body["params"]["arguments"]["stream"] == true {
                true => full(200, Some("text/event-stream"), format!("event: message\ndata: {answer}\n\n")),
                false => full(200, Some("application/json"), answer),
            }
        }
        ("tools/call", "zeros") => full(200, Some("application/json"), zeros_answer(&id.to_string())),
        ("tools/call", "as_written") => {
            // Members in no sorted order, numbers as a Python server spells
            // them: the text a client's framework reads, which replay must keep.
            let (tx, rx) = mpsc::unbounded_channel();
            for event in as_written(&id, &token) {
                tx.send(Ok(Bytes::from(format!("event: message\ndata: {event}\n\n")))).unwrap();
            }
            stream(rx)
        }
        ("tools/call", "flood") => {
            // `kib` KiB of log notifications, then the answer.
            let kib = body["params"]["arguments"]["kib"].as_u64().unwrap_or(1);
            let (tx, rx) = mpsc::unbounded_channel();
            let line = json!({"jsonrpc": "2.0", "method": "notifications/message",
                "params": {"level": "info", "data": "x".repeat(960)}});
            for _ in 0..kib {
                tx.send(Ok(event(&line))).unwrap();
            }
            tx.send(Ok(event(&result(text("flooded".into()))))).unwrap();
            stream(rx)
        }
        ("tools/call", "tells_first") => {
            // Says a log line on the standalone stream while the call is in flight, then answers
            // once the test releases the gate.
            let said = json!({"jsonrpc": "2.0", "method": "notifications/message",
                "params": {"level": "info", "data": "while you wait"}});
            if let Some(standalone) = state.standalone.lock().unwrap().as_ref() {
                let _ = standalone.send(Ok(event(&said)));
            }
            state.gate.notified().await;
            json_answer(result(text("told".into())))
        }
        ("tools/call", "answers_then_tells") => {
            // Answers, and once the answer's last byte is written says a log line on the standalone stream.
            let said = json!({"jsonrpc": "2.0", "method": "notifications/message",
                "params": {"level": "info", "data": "after the answer"}});
            let answer = Bytes::from(result(text("answered".into())).to_string());
            let then = Then { answer: Some(answer), says: Some((said, Arc::clone(&state))) };
            let mut response = Response::new(BodyExt::boxed(then));
            response.headers_mut().insert("content-type", "application/json".parse().unwrap());
            response
        }
        ("tools/call", "gated") => {
            let (tx, rx) = mpsc::unbounded_channel();
            let first = json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "started"}});
            tx.send(Ok(event(&first))).unwrap();
            let final_answer = result(text("released".into()));
            tokio::spawn(async move {
                state.gate.notified().await;
                let _ = tx.send(Ok(event(&final_answer)));
            });
            stream(rx)
        }
        ("tools/call", "break") => {
            let (tx, rx) = mpsc::unbounded_channel();
            let first = json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "about to break"}});
            tx.send(Ok(event(&first))).unwrap();
            tokio::spawn(async move {
                state.gate.notified().await;
                let _ = tx.send(Err(std::io::Error::other("upstream fell over")));
            });
            stream(rx)
        }
        ("tools/call", "silent") => {
            std::future::pending::<()>().await;
            unreachable!()
        }
        ("tools/call", "silent_stream") => {
            let (tx, rx) = mpsc::unbounded_channel();
            let first = json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "thinking"}});
            tx.send(Ok(event(&first))).unwrap();
            tokio::spawn(async move {
                tx.closed().await; // keep the stream open, silent, until the reader goes
            });
            stream(rx)
        }
        ("tools/call", "elicit") => {
            let (tx, rx) = mpsc::unbounded_channel();
            let (reply_tx, mut reply_rx) = mpsc::unbounded_channel();
            *state.replies.lock().unwrap() = Some(reply_tx);
            let ask = json!({"jsonrpc": "2.0", "id": "srv-1", "method": "elicitation/create",
                "params": {"message": "Your name?", "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}}});
            tx.send(Ok(event(&ask))).unwrap();
            tokio::spawn(async move {
                if let Some(reply) = reply_rx.recv().await {
                    let name = reply["result"]["content"]["name"].as_str().unwrap_or_default().to_owned();
                    let _ = tx.send(Ok(event(&result(text(format!("Hello, {name}"))))));
                }
            });
            stream(rx)
        }
        ("tools/call", "elicit_unwaited") => {
            // Asks the client, then answers at once: the client's reply comes after the answer.
            let ask = json!({"jsonrpc": "2.0", "id": "srv-2", "method": "elicitation/create",
                "params": {"message": "Rate us?", "requestedSchema": {"type": "object", "properties": {}}}});
            full(200, Some("text/event-stream"), [event(&ask), event(&result(text("done".into())))].concat())
        }
        ("tools/call", "polled") => {
            // SEP-1699 polling: a priming event with a retry and a notification, then the
            // stream closes; the answer comes on the GET that resumes it from `polled-1`.
            let note = json!({"jsonrpc": "2.0", "method": "notifications/message",
                "params": {"level": "info", "data": "working"}});
            *state.polled.lock().unwrap() = Some(result(text("polled answer".into())));
            let events = format!("id: polled-0\nretry: 300\ndata: \n\nid: polled-1\nevent: message\ndata: {note}\n\n");
            full(200, Some("text/event-stream"), events)
        }
        ("tools/call", "echo_forwarded") => {
            let forwarded = parts.headers.get("x-forwarded-auth").and_then(|v| v.to_str().ok()).unwrap_or_default();
            json_answer(result(text(format!("forwarded {forwarded}; note {}", body["params"]["arguments"]["note"]))))
        }
        ("tools/call", "not_json") => full(200, Some("application/json"), "this is not JSON"),
        ("tools/call", "unreadable") => {
            // JSON that Python and JavaScript read and serde_json does not, as JSON or as an SSE event.
            let arguments = &body["params"]["arguments"];
            let answer = unreadable_answer(&id.to_string(), arguments["kind"].as_str().unwrap_or_default());
            match arguments["stream"] == true {
                true => full(200, Some("text/event-stream"), format!("event: message\ndata: {answer}\n\n")),
                false => full(200, Some("application/json"), answer),
            }
        }
        _ => json_answer(result(json!({"echo": body["params"]}))),
    })
}

/// A peer that answers any connection with bytes that are not HTTP.
pub async fn garbage() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut buffer = [0u8; 4096];
            let _ = stream.read(&mut buffer).await;
            let _ = stream.write_all(b"SSH-2.0-OpenSSH_9.6 this is not HTTP\r\n\r\n").await;
        }
    });
    addr
}

/// A plain HTTP/1.1 peer that keeps connections alive without saying so
/// and then lets them go: on every connection it answers the first
/// `answered` requests (a JSON-RPC result echoing the request's id) and
/// closes the connection on the next one after writing `then` (nothing, or
/// the start of an answer). Counts the requests it read.
pub async fn closes_kept_connections(
    answered: usize,
    then: &'static [u8],
) -> (SocketAddr, Arc<std::sync::atomic::AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let read = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = Arc::clone(&read);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let counted = Arc::clone(&counted);
            tokio::spawn(async move {
                let mut stream = tokio::io::BufReader::new(stream);
                for served in 0.. {
                    let Some(body) = read_request(&mut stream).await else { return };
                    counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    if served == answered {
                        let _ = stream.get_mut().write_all(then).await;
                        return;
                    }
                    let request: Value = serde_json::from_slice(&body).unwrap();
                    let answer = json!({"jsonrpc": "2.0", "id": request["id"], "result": {"served": served}});
                    let answer = answer.to_string();
                    let head = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                        answer.len()
                    );
                    let stream = stream.get_mut();
                    if stream.write_all(head.as_bytes()).await.is_err()
                        || stream.write_all(answer.as_bytes()).await.is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    (addr, read)
}

/// One HTTP/1.1 request's body (by its `content-length`), or `None` at the
/// end of the connection.
async fn read_request(stream: &mut tokio::io::BufReader<tokio::net::TcpStream>) -> Option<Vec<u8>> {
    use tokio::io::AsyncBufReadExt;
    let mut length = 0;
    loop {
        let mut line = String::new();
        if stream.read_line(&mut line).await.ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().ok()?;
        }
    }
    let mut body = vec![0; length];
    stream.read_exact(&mut body).await.ok()?;
    Some(body)
}

/// An address where nothing listens.
pub async fn refused() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap()
}

/// How long a test lets the recorder wait on a silent upstream.
pub const SHORT_TIMEOUT: Duration = Duration::from_millis(300);
