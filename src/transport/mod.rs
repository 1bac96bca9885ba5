//! Front doors: how MCP messages arrive and how answers leave. A front door
//! turns bytes into one parsed JSON-RPC message plus the facts its framing
//! carries (server identity, era, session, routing headers, credentials),
//! hands them to the [`Engine`](crate::engine::Engine) as a
//! [`Call`](crate::engine::Call), and frames the [`Step`](crate::engine::Step)
//! that comes back; in record modes it also carries a forwarded message to
//! the upstream and shows the answer to the engine's capture. Nothing about
//! matching, recording or mock answers lives here.
//!
//! - [`http`]: Streamable HTTP (hyper): Host/Origin, path → server, headers
//!   → facts, bounded body reads, JSON or SSE framing, status mapping, the
//!   Agent 365 service routes, and the HTTP upstream for record.
//! - [`stdio`]: newline-delimited JSON-RPC on a byte stream (mcp-tape's
//!   stdin/stdout), and for record a child process as the upstream.

pub mod http;
pub mod stdio;

use std::fmt;
use std::time::Instant;

use crate::engine::Outcome;
use crate::error::{Fault, RequestError};
use crate::jsonrpc::{Message, ParamsCache, Unreadable};
use crate::limits::MAX_SHOWN_BYTES;
use crate::util::{self, clip};

/// One framed message (an HTTP body, a stdio line) as JSON-RPC, a
/// request's id as the client wrote it; params read before from the same
/// text come from the door's `params` memo.
///
/// # Errors
///
/// `-32700` (not JSON) or `-32600` (not one JSON-RPC message).
fn parse_message(bytes: &[u8], params: &ParamsCache) -> Result<Message, RequestError> {
    Message::from_slice_cached(bytes, params).map_err(|unreadable| match unreadable {
        Unreadable::NotJson(why) => RequestError::from(Fault::NotJson(why)),
        Unreadable::NotJsonRpc(id, error) => RequestError { fault: Box::new(Fault::NotJsonRpc(*error)), id },
    })
}

/// One request's log line, the same for both front doors:
/// `DOOR server=NAME method=METHOD[ tool|prompt|resource=NAME] OUTCOME[ status=N] T.Tms[NOTE]`,
/// where DOOR is the HTTP method or `stdio`; names are cut to
/// [`MAX_SHOWN_BYTES`] (the log format escapes control characters).
struct RequestLine<'a> {
    door: &'a str,
    server: &'a str,
    /// The JSON-RPC method; empty when none was read.
    method: &'a str,
    /// The tool, prompt or resource the request names ([`crate::mcp::subject_of`]).
    subject: Option<&'a str>,
    outcome: Outcome,
    /// The HTTP status, on a front door that has one.
    status: Option<&'a str>,
    /// When the request arrived (the time taken is read only when the
    /// line is written: a line below the log level costs no clock read).
    started: Instant,
    note: &'a str,
}

impl fmt::Display for RequestLine<'_> {
    /// Written as one piece: the log format escapes what it is given piece
    /// by piece, and a line is written for every request.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let method = if self.method.is_empty() { "-" } else { self.method };
        let mut line = String::with_capacity(96 + self.server.len() + method.len() + self.note.len());
        line.push_str(self.door);
        line.push_str(" server=");
        line.push_str(&clip(self.server, MAX_SHOWN_BYTES));
        line.push_str(" method=");
        line.push_str(&clip(method, MAX_SHOWN_BYTES));
        if let Some(subject) = self.subject {
            line.push_str(match method {
                "tools/call" => " tool=",
                "prompts/get" => " prompt=",
                _ => " resource=",
            });
            line.push_str(&clip(subject, MAX_SHOWN_BYTES));
        }
        line.push(' ');
        line.push_str(self.outcome.as_str());
        if let Some(status) = self.status {
            line.push_str(" status=");
            line.push_str(status);
        }
        // Milliseconds to a tenth, rounded half up.
        let micros = u64::try_from(self.started.elapsed().as_micros()).unwrap_or(u64::MAX);
        let tenths = micros.saturating_add(50) / 100;
        line.push(' ');
        line.push_str(util::decimal(tenths / 10, &mut [0; 20]));
        line.push('.');
        line.push_str(util::decimal(tenths % 10, &mut [0; 20]));
        line.push_str("ms");
        line.push_str(self.note);
        f.write_str(&line)
    }
}
