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
use std::time::SystemTime;

use crate::engine::Outcome;
use crate::error::{RequestError, Unanswered};
use crate::jsonrpc::{Message, ParamsCache, Unreadable};
use crate::limits::MAX_SHOWN_BYTES;
use crate::logging::Direct;
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
        Unreadable::NotJson(why) => RequestError::from(Unanswered::NotJson(why)),
        Unreadable::NotJsonRpc(id, error) => {
            RequestError { fault: Box::new(Unanswered::NotJsonRpc(*error)), id }
        }
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
    /// When the request arrived, by the clock the line's own time is read
    /// from: the line is stamped and timed with one read, taken only when it
    /// is written (a line below the log level costs none). Shown as 0 ms
    /// should the clock be set back meanwhile.
    started: SystemTime,
    note: &'a str,
}

impl RequestLine<'_> {
    /// The line, written at `now`, piece by piece: what a client or a
    /// cassette named (server, method, subject) escaped, cut to
    /// [`MAX_SHOWN_BYTES`].
    fn write(&self, out: &mut Direct<'_>, now: SystemTime) {
        let method = if self.method.is_empty() { "-" } else { self.method };
        out.push(self.door);
        out.push(" server=");
        out.push_outside(&clip(self.server, MAX_SHOWN_BYTES));
        out.push(" method=");
        out.push_outside(&clip(method, MAX_SHOWN_BYTES));
        if let Some(subject) = self.subject {
            out.push(match method {
                "tools/call" => " tool=",
                "prompts/get" => " prompt=",
                _ => " resource=",
            });
            out.push_outside(&clip(subject, MAX_SHOWN_BYTES));
        }
        out.push_char(' ');
        out.push(self.outcome.as_str());
        if let Some(status) = self.status {
            out.push(" status=");
            out.push(status);
        }
        // Milliseconds to a tenth, rounded half up.
        let taken = now.duration_since(self.started).unwrap_or_default();
        let micros = u64::try_from(taken.as_micros()).unwrap_or(u64::MAX);
        let tenths = micros.saturating_add(50) / 100;
        out.push_char(' ');
        for digit in util::digits(tenths / 10, &mut [0; 20]) {
            out.push_char(char::from(*digit));
        }
        out.push_char('.');
        out.push_char(char::from(b'0' + (tenths % 10) as u8));
        out.push("ms");
        out.push(self.note);
    }
}

impl fmt::Display for RequestLine<'_> {
    /// The same line, for a door that logs it as an event.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut line = String::with_capacity(128);
        self.write(&mut Direct::new(&mut line), SystemTime::now());
        f.write_str(&line)
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;

    /// What a client or a cassette named is escaped; the rest is the line's own.
    #[test]
    fn request_lines_escape_what_came_from_outside() {
        let line = RequestLine {
            door: "POST",
            server: "mcp_A\nINFO forged",
            method: "tools/call",
            subject: Some("Get\u{1b}[2J"),
            outcome: Outcome::Hit,
            status: Some("200"),
            started: SystemTime::now() - Duration::from_micros(1_250),
            note: " (a note)",
        };
        let mut text = String::new();
        line.write(&mut Direct::new(&mut text), SystemTime::now());
        let (head, tail) = text.split_once(" status=200 ").unwrap();
        assert_eq!(head, "POST server=mcp_A\\nINFO forged method=tools/call tool=Get\\u{1b}[2J hit");
        let shown: f64 = tail.strip_suffix("ms (a note)").unwrap().parse().unwrap();
        assert!(shown >= 1.3, "1.25 ms rounds half up to a tenth: {tail}");
        let event = line.to_string();
        assert!(
            event.starts_with(head) && event.ends_with("ms (a note)"),
            "as an event, the same line: {event}"
        );
        let mut bare = String::new();
        RequestLine { method: "", subject: None, status: None, note: "", ..line }
            .write(&mut Direct::new(&mut bare), SystemTime::now());
        assert!(bare.starts_with("POST server=mcp_A\\nINFO forged method=- hit "), "{bare}");
    }
}
