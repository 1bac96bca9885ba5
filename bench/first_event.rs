//! Time to the first SSE event: sends N sequential POSTs over one keep-alive
//! connection and prints, as JSON, the p50 and p99 in microseconds from
//! sending the request to receiving the first body bytes.
//!
//! Usage: first-event URL BODY N

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: first-event URL BODY N";
    let url: hyper::Uri = args.next().ok_or(usage)?.parse()?;
    let body = args.next().ok_or(usage)?;
    let count: usize = args.next().ok_or(usage)?.parse()?;
    let authority = url.authority().ok_or("the URL needs host:port")?.clone();
    let stream = TcpStream::connect(authority.as_str()).await?;
    stream.set_nodelay(true)?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    let mut micros = Vec::with_capacity(count);
    for _ in 0..count {
        let request = Request::post(url.clone())
            .header("host", authority.as_str())
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(Full::new(Bytes::from(body.clone())))?;
        let started = std::time::Instant::now();
        let mut response = sender.send_request(request).await?;
        let first = response.body_mut().frame().await;
        micros.push(started.elapsed().as_secs_f64() * 1e6);
        if first.is_none() {
            return Err("an answer with no body".into());
        }
        while response.body_mut().frame().await.is_some() {}
    }
    micros.sort_by(f64::total_cmp);
    let at = |q: f64| micros[((micros.len() as f64 * q) as usize).min(micros.len() - 1)];
    println!("{}", serde_json::json!({"p50_us": at(0.50), "p99_us": at(0.99), "count": count}));
    Ok(())
}
