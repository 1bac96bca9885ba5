//! What the door keeps of a request while it serves it: the server its
//! path names, its log line (written once, whatever becomes of it), and
//! its body, read within bounds.

use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::Method;

use crate::agent365;
use crate::engine::Outcome;
use crate::error::{RequestError, Unanswered};
use crate::jsonrpc::{self, Params, RequestId};
use crate::limits::{HEADER_READ_TIMEOUT, MAX_REQUEST_BODY_BYTES, MIN_BODY_RATE};
use crate::logging;
use crate::mcp;
use crate::transport::RequestLine;

/// The server a request's path names ([`agent365::server_name`]), kept
/// as where it lies in the path: the path's buffer is shared, not copied.
pub(super) struct ServerName {
    pub(super) uri: hyper::Uri,
    /// Where in the path; `None` for the root's name, which is no part of it.
    pub(super) at: Option<std::ops::Range<usize>>,
}

impl ServerName {
    pub(super) fn of(uri: &hyper::Uri) -> ServerName {
        let path = uri.path();
        let name = agent365::server_name(path);
        // Where the name starts in the path, checked: the range kept always reads the name.
        let start = name.as_ptr().addr().wrapping_sub(path.as_ptr().addr());
        let at = start.checked_add(name.len()).map(|end| start..end);
        let at = at.filter(|at| path.get(at.clone()) == Some(name));
        ServerName { uri: uri.clone(), at }
    }

    pub(super) fn as_str(&self) -> &str {
        self.at.clone().map_or("/", |at| &self.uri.path()[at])
    }
}

/// What the log line says about a request besides its status.
pub(super) struct Logged {
    pub(super) server: ServerName,
    pub(super) mcp_method: jsonrpc::Method,
    /// The request's params, once read: the line names the tool, prompt or
    /// resource in them.
    pub(super) params: Option<Params>,
    pub(super) outcome: Outcome,
    /// The JSON-RPC request's id, once read.
    pub(super) id: Option<RequestId>,
}

/// A request body the front door reads: hyper's, from a connection, or any
/// other (a test's or a fuzzer's, with no socket at all).
pub trait RequestBody: hyper::body::Body<Data = Bytes, Error: std::fmt::Display> + Send + Unpin {}

impl<B> RequestBody for B
where
    B: hyper::body::Body<Data = Bytes> + Send + Unpin,
    B::Error: std::fmt::Display,
{
}

/// The target of the request lines (info level): the line a filter such as
/// `MCP_TAPE_LOG=info,mcp_tape::transport::http=warn` leaves out.
pub const REQUEST_LINES: &str = "mcp_tape::transport::http";

/// A request's log line, written once: when its answer is ready, or, when
/// the client goes away first (hyper then drops the handler), at that moment.
pub(super) struct RequestLog {
    pub(super) http_method: Method,
    pub(super) started: SystemTime,
    pub(super) logged: Logged,
    pub(super) written: bool,
}

impl RequestLog {
    pub(super) fn write(&mut self, status: &str, note: &str) {
        self.written = true;
        let logged = &self.logged;
        let line = RequestLine {
            door: self.http_method.as_str(),
            server: logged.server.as_str(),
            method: &logged.mcp_method,
            subject: mcp::subject_of(&logged.mcp_method, logged.params.as_ref().map(Params::value)),
            outcome: logged.outcome,
            status: Some(status),
            started: self.started,
            note,
        };
        if !logging::write_direct(tracing::Level::INFO, |out, now| line.write(out, now)) {
            tracing::info!(target: REQUEST_LINES, "{line}");
        }
    }
}

impl Drop for RequestLog {
    fn drop(&mut self) {
        if !self.written {
            self.write("-", " (the client went away before the answer)");
        }
    }
}

/// Reads a request body, refusing one over [`MAX_REQUEST_BODY_BYTES`], one
/// that stalls (`idle` at most between two pieces of it) and one that
/// trickles in ([`MIN_BODY_RATE`] over all, after [`HEADER_READ_TIMEOUT`]).
///
/// # Errors
///
/// 413 over the limit, 408 for a stalled or too slow body, 400 when it
/// cannot be read.
pub(super) async fn read_body(mut body: impl RequestBody, idle: Duration) -> Result<Bytes, RequestError> {
    let too_large = || RequestError::from(Unanswered::BodyTooLarge { limit: MAX_REQUEST_BODY_BYTES });
    // A body announced (Content-Length) over the limit is refused before any of it is read.
    if body.size_hint().lower() > MAX_REQUEST_BODY_BYTES as u64 {
        return Err(too_large());
    }
    // The usual body came with its head: its piece is taken at a first look, and the clock is
    // read (for the deadlines) only when the body must be waited for.
    let mut there = Some(std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut body).poll_frame(cx))).await);
    let mut started = None;
    // The usual body comes in one piece, kept as it is; only a body in
    // several pieces is copied into one.
    let mut whole = Bytes::new();
    let mut pieces: Option<bytes::BytesMut> = None;
    let done = |whole: Bytes, pieces: Option<bytes::BytesMut>| pieces.map_or(whole, bytes::BytesMut::freeze);
    loop {
        let piece = match there.take() {
            Some(Poll::Ready(piece)) => Ok(piece),
            _ => {
                let now = tokio::time::Instant::now();
                let started = *started.get_or_insert(now);
                let read = pieces.as_ref().map_or(whole.len(), bytes::BytesMut::len);
                let deadline =
                    started + HEADER_READ_TIMEOUT + Duration::from_secs((read / MIN_BODY_RATE) as u64);
                let wait = idle.min(deadline.saturating_duration_since(now));
                // A piece that is already there is taken before the timer is armed (the timeout polls first).
                // Boxed: the timer would otherwise make every request's state larger.
                match Box::pin(tokio::time::timeout(wait, body.frame())).await {
                    Err(_) if wait < idle => {
                        return Err(Unanswered::BodyTooSlow { rate: MIN_BODY_RATE }.into());
                    }
                    piece => piece,
                }
            }
        };
        match piece {
            Err(_) => return Err(Unanswered::BodyStalled { idle }.into()),
            Ok(None) => return Ok(done(whole, pieces)),
            Ok(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    let read = pieces.as_ref().map_or(whole.len(), bytes::BytesMut::len);
                    if read + data.len() > MAX_REQUEST_BODY_BYTES {
                        return Err(too_large());
                    }
                    match &mut pieces {
                        Some(buffer) => buffer.extend_from_slice(&data),
                        None if whole.is_empty() => whole = data,
                        None => {
                            let mut buffer = bytes::BytesMut::with_capacity(read + data.len());
                            buffer.extend_from_slice(&whole);
                            buffer.extend_from_slice(&data);
                            pieces = Some(buffer);
                        }
                    }
                }
                if body.is_end_stream() {
                    return Ok(done(whole, pieces));
                }
            }
            Ok(Some(Err(e))) => return Err(Unanswered::BodyUnreadable(e.to_string()).into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The name kept as a part of the path reads as the name the path gives.
    #[test]
    fn server_names_are_read_from_the_path() {
        for target in [
            "/agents/servers/mcp_MailTools",
            "/agents/servers/mcp_MailTools/?x=1",
            "/agents/tenants/t/servers/mcp_Me/",
            "/mcp",
            "/",
            "//",
            "*",
            "127.0.0.1:80",
        ] {
            let uri: hyper::Uri = target.parse().unwrap();
            assert_eq!(ServerName::of(&uri).as_str(), agent365::server_name(uri.path()), "{target}");
        }
    }
}
