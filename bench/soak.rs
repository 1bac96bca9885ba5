//! Soak: CLIENTS clients for SECONDS against one mcp-tape, each going round
//! a session after another: `initialize`, a `tools/call lookup` with a JSON
//! answer, a `tools/call progress` with an SSE answer (three progress
//! notifications), and `DELETE` of the session when there is one. Every
//! 30 s (and at the end) it reads the server's resident memory from
//! /proc/PID/status. Prints, as JSON: requests, errors (the first few
//! described), the requests answered with an exchange (what record must
//! have stored), and the RSS series in MiB. Every request has id 1 (one at
//! a time per connection): the floor, record's upstream here, answers id 1.
//!
//! Usage: soak BASE_URL SERVER_PID SECONDS CLIENTS JSON_PATH SSE_PATH

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio::sync::Mutex;

/// How often resident memory is sampled.
const SAMPLE_EVERY: Duration = Duration::from_secs(30);
/// Errors described in the output at most.
const ERRORS_SHOWN: usize = 5;

#[derive(Default)]
struct Tally {
    requests: AtomicU64,
    answered: AtomicU64,
    errors: AtomicU64,
    described: Mutex<Vec<String>>,
}

impl Tally {
    async fn error(&self, what: String) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        let mut described = self.described.lock().await;
        if described.len() < ERRORS_SHOWN {
            described.push(what);
        }
    }
}

struct Target {
    authority: String,
    json_url: hyper::Uri,
    sse_url: hyper::Uri,
}

fn resident_mib(pid: &str) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// One POST on `sender`: the status, the session header and the body.
async fn post(
    sender: &mut hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    target: &Target,
    url: &hyper::Uri,
    session: Option<&str>,
    body: &Value,
) -> Result<(u16, Option<String>, Bytes), String> {
    let mut request = Request::post(url.clone())
        .header("host", target.authority.as_str())
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    let request = request.body(Full::new(Bytes::from(body.to_string()))).map_err(|e| e.to_string())?;
    let response = sender.send_request(request).await.map_err(|e| e.to_string())?;
    let status = response.status().as_u16();
    let session = response.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let body = response.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
    Ok((status, session, body))
}

async fn client(target: Arc<Target>, tally: Arc<Tally>, until: Instant, seed: u64) {
    let mut n = seed;
    while Instant::now() < until {
        let stream = match TcpStream::connect(target.authority.as_str()).await {
            Ok(stream) => stream,
            Err(e) => return tally.error(format!("connect: {e}")).await,
        };
        let Ok((mut sender, connection)) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await
        else {
            return tally.error("handshake failed".into()).await;
        };
        tokio::spawn(connection);
        n = (n * 7919 + 13) % 1000;
        let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "soak", "version": "1"}}});
        let lookup = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "lookup", "arguments": {"n": n}}});
        let progress = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "progress", "arguments": {}, "_meta": {"progressToken": 7}}});
        let mut session = None;
        for (step, url, body) in [
            ("initialize", &target.json_url, &initialize),
            ("lookup", &target.json_url, &lookup),
            ("progress", &target.sse_url, &progress),
        ] {
            tally.requests.fetch_add(1, Ordering::Relaxed);
            match post(&mut sender, &target, url, session.as_deref(), body).await {
                Ok((200, new_session, answer)) => {
                    let text = String::from_utf8_lossy(&answer);
                    if text.contains("\"error\"") || !text.contains("\"result\"") {
                        tally.error(format!("{step}: {}", text.chars().take(300).collect::<String>())).await;
                    } else {
                        tally.answered.fetch_add(1, Ordering::Relaxed);
                    }
                    session = session.or(new_session);
                }
                Ok((status, _, answer)) => {
                    let text = String::from_utf8_lossy(&answer).chars().take(300).collect::<String>();
                    tally.error(format!("{step}: HTTP {status}: {text}")).await;
                }
                Err(e) => tally.error(format!("{step}: {e}")).await,
            }
        }
        if let Some(session) = session {
            tally.requests.fetch_add(1, Ordering::Relaxed);
            let request = Request::delete(target.json_url.clone())
                .header("host", target.authority.as_str())
                .header("mcp-session-id", session)
                .body(Full::new(Bytes::new()));
            let ended = match request {
                Ok(request) => sender.send_request(request).await.map(|r| r.status().as_u16()),
                Err(_) => Ok(0),
            };
            if !matches!(ended, Ok(200 | 202 | 204 | 405)) {
                tally.error(format!("DELETE: {ended:?}")).await;
            }
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [base, pid, seconds, clients, json_path, sse_path] = args.as_slice() else {
        return Err("usage: soak BASE_URL SERVER_PID SECONDS CLIENTS JSON_PATH SSE_PATH".into());
    };
    let base: hyper::Uri = base.parse()?;
    let authority = base.authority().ok_or("the URL needs host:port")?.to_string();
    let target = Arc::new(Target {
        json_url: format!("http://{authority}{json_path}").parse()?,
        sse_url: format!("http://{authority}{sse_path}").parse()?,
        authority,
    });
    let until = Instant::now() + Duration::from_secs(seconds.parse()?);
    let tally = Arc::new(Tally::default());
    let mut rss = vec![resident_mib(pid).unwrap_or(0.0)];
    let workers: Vec<_> = (0..clients.parse::<u64>()?)
        .map(|i| tokio::spawn(client(Arc::clone(&target), Arc::clone(&tally), until, i)))
        .collect();
    while Instant::now() + SAMPLE_EVERY <= until {
        tokio::time::sleep(SAMPLE_EVERY).await;
        rss.push(resident_mib(pid).unwrap_or(0.0));
    }
    for worker in workers {
        worker.await?;
    }
    rss.push(resident_mib(pid).unwrap_or(0.0));
    let described = tally.described.lock().await.clone();
    println!(
        "{}",
        json!({
            "requests": tally.requests.load(Ordering::Relaxed),
            "answered": tally.answered.load(Ordering::Relaxed),
            "errors": tally.errors.load(Ordering::Relaxed),
            "first_errors": described,
            "rss_mib": rss.iter().map(|m| (m * 10.0).round() / 10.0).collect::<Vec<_>>(),
        })
    );
    Ok(())
}
