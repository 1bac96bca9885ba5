//! The proxy floor: the smallest hyper 1 forwarding proxy. It reads a POST
//! body, sends it to the upstream over a connection of its own (one
//! upstream connection per client connection, opened with it: no pool to
//! check out from), reads the answer and returns it: the two HTTP exchanges
//! every recorder makes per request, with no parsing and no storage. Record's throughput is
//! measured against it as well as against the upstream called directly, so
//! the figures show what the second hop costs on its own.
//!
//! Usage: proxy-floor PORT UPSTREAM_HOST:PORT   (prints "listening on http://127.0.0.1:PORT")

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode, header};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Mutex;

async fn forward(
    request: Request<Incoming>,
    upstream: &Mutex<SendRequest<Full<Bytes>>>,
    authority: &str,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (parts, body) = request.into_parts();
    let body = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let mut onward = Request::post(parts.uri.path()).header(header::HOST, authority);
    for name in [header::CONTENT_TYPE, header::ACCEPT] {
        if let Some(value) = parts.headers.get(&name) {
            onward = onward.header(name, value);
        }
    }
    let onward = onward.body(Full::new(body)).expect("a valid request");
    let answer = match upstream.lock().await.send_request(onward).await {
        Ok(answer) => answer,
        Err(_) => return Ok(bad_gateway()),
    };
    let (parts, body) = answer.into_parts();
    let Ok(body) = body.collect().await.map(|b| b.to_bytes()) else {
        return Ok(bad_gateway());
    };
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = parts.status;
    if let Some(value) = parts.headers.get(header::CONTENT_TYPE) {
        response.headers_mut().insert(header::CONTENT_TYPE, value.clone());
    }
    Ok(response)
}

fn bad_gateway() -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = StatusCode::BAD_GATEWAY;
    response
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let port: u16 = args.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let Some(authority) = args.next() else {
        eprintln!("usage: proxy-floor PORT UPSTREAM_HOST:PORT");
        std::process::exit(2);
    };
    let listener = TcpListener::bind(("127.0.0.1", port)).await?;
    eprintln!("listening on http://{}", listener.local_addr()?);
    loop {
        let (stream, _) = listener.accept().await?;
        let _ = stream.set_nodelay(true);
        let onward = TcpStream::connect(&authority).await?;
        onward.set_nodelay(true)?;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(onward))
            .await
            .map_err(std::io::Error::other)?;
        tokio::spawn(connection);
        let (upstream, authority) = (std::sync::Arc::new(Mutex::new(sender)), authority.clone());
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let (upstream, authority) = (upstream.clone(), authority.clone());
                async move { forward(request, &upstream, &authority).await }
            });
            let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
        });
    }
}
