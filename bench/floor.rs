//! The floor: the smallest hyper 1 server that reads a POST body and answers
//! a fixed JSON-RPC result, the physical limit for any HTTP replay server on
//! this machine. `POST /sse` answers the same with three progress
//! notifications first, as an SSE stream, so it also serves as the fast
//! upstream for measuring record's overhead.
//!
//! Usage: floor [PORT [BODY_FILE [CONTENT_TYPE [NAME:VALUE]...]]]   (prints "listening on http://127.0.0.1:PORT")
//!
//! With `BODY_FILE`, a plain POST is answered with that file's bytes (the
//! bench passes the very answer replay gives, so both write the same bytes),
//! as `CONTENT_TYPE` (default `application/json`), with the headers named
//! after it besides (the bench passes replay's own, so that the answer's head
//! is the same too).

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderName, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

const RESULT: &str = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"floor"}]}}"#;

fn sse() -> String {
    let mut body = String::new();
    for step in 1..=3 {
        body.push_str(&format!(
            "event: message\ndata: {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{{\"progressToken\":1,\"progress\":{step},\"total\":3}}}}\n\n"
        ));
    }
    body.push_str(&format!("event: message\ndata: {RESULT}\n\n"));
    body
}

/// The answer to a plain POST: its bytes, content type and other headers.
#[derive(Clone)]
struct Fixed {
    body: Bytes,
    content_type: HeaderValue,
    headers: Arc<[(HeaderName, HeaderValue)]>,
}

async fn answer(request: Request<Incoming>, fixed: Fixed) -> Result<Response<Full<Bytes>>, Infallible> {
    let streamed = request.uri().path() == "/sse";
    let _ = request.into_body().collect().await;
    let (content_type, body, headers) = if streamed {
        (HeaderValue::from_static("text/event-stream"), Bytes::from(sse()), Arc::from([]))
    } else {
        (fixed.content_type, fixed.body, fixed.headers)
    };
    let mut response = Response::new(Full::new(body));
    response.headers_mut().insert("content-type", content_type);
    response.headers_mut().extend(headers.iter().map(|(name, value)| (Some(name.clone()), value.clone())));
    Ok(response)
}

/// `NAME:VALUE` as a header.
fn header_of(text: &str) -> std::io::Result<(HeaderName, HeaderValue)> {
    let invalid =
        |why: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("{text:?}: {why}"));
    let (name, value) = text.split_once(':').ok_or_else(|| invalid("not NAME:VALUE".into()))?;
    let name = HeaderName::from_bytes(name.trim().as_bytes()).map_err(|e| invalid(e.to_string()))?;
    let value = HeaderValue::from_str(value.trim()).map_err(|e| invalid(e.to_string()))?;
    Ok((name, value))
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let port: u16 = args.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let body = match args.next() {
        Some(path) => Bytes::from(std::fs::read(path)?),
        None => Bytes::from_static(RESULT.as_bytes()),
    };
    let content_type = args.next().unwrap_or_else(|| "application/json".to_owned());
    let content_type = HeaderValue::from_str(&content_type).map_err(|e| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("{content_type:?}: {e}"))
    })?;
    let headers = args.map(|header| header_of(&header)).collect::<std::io::Result<_>>()?;
    let fixed = Fixed { body, content_type, headers };
    let listener = TcpListener::bind(("127.0.0.1", port)).await?;
    eprintln!("listening on http://{}", listener.local_addr()?);
    loop {
        let (stream, _) = listener.accept().await?;
        let _ = stream.set_nodelay(true);
        let fixed = fixed.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| answer(request, fixed.clone()));
            let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
        });
    }
}
