//! Errors. Start-up and store failures are [`Error`] (printed with their
//! cause chain by `main`). A request that cannot be answered as MCP is a
//! [`RequestError`]: an [`Unanswered`], with the JSON-RPC error a client gets
//! ([`Unanswered::error`]). The HTTP door maps each fault to its status, in one
//! place (`transport/http/status.rs`); front doors without HTTP status
//! codes (stdio) send the JSON-RPC error alone.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;

use crate::jsonrpc::{self, ErrorCode, ErrorObject, RequestId};

/// Failures that stop a command: bad configuration, unusable cassettes,
/// a port that cannot be bound.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Config(String),
    /// Bad use found after start (e.g. an ambiguous `--server`): exit 2.
    #[error("{0}")]
    Usage(String),
    /// A match rules file that cannot be used: exit 2.
    #[error("{}:{line}: {reason}", file.display())]
    Rules { file: PathBuf, line: usize, reason: String },
    #[error("cannot start {command:?}")]
    Spawn {
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cassette {}: {kind}", path.display())]
    Cassette { path: PathBuf, kind: CassetteError },
    #[error("cannot read {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0} requests missed the recordings (--fail-on-miss)")]
    Misses(u64),
    #[error("{0} exchanges could not be stored (see the log); the cassette lacks them")]
    NotStored(u64),
    #[error(
        "{count} answer(s) the client was given are not in the cassette, which replay would then miss: {}{}",
        named.join("; "),
        if *count > named.len() as u64 { "; …" } else { "" }
    )]
    Lost { count: u64, named: Vec<String> },
    #[error("{0} recordings older than --max-age answered (--expired error)")]
    Expired(usize),
    #[error("cannot listen on {addr}")]
    Bind {
        addr: String,
        #[source]
        source: std::io::Error,
    },
}

/// Why a cassette file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CassetteError {
    #[error("not an mcp-tape cassette ({0}); the file was left untouched")]
    Foreign(String),
    #[error(
        "written by a newer mcp-tape (schema {found}, this binary knows up to {supported}); \
         upgrade mcp-tape to use it; the file was left untouched"
    )]
    TooNew { found: i64, supported: i64 },
    #[error("exchange {id} is damaged: {why}")]
    Damaged { id: i64, why: String },
    #[error("SQLite: {0}")]
    Sqlite(#[from] rusqlite::Error),
}

/// How the upstream failed a forwarded request.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum UpstreamFailure {
    /// No connection or no HTTP exchange: refused, unreachable, TLS, not HTTP.
    #[error("upstream {upstream} failed: {why}")]
    Failed { upstream: String, why: String },
    /// No answer head within the response timeout.
    #[error("upstream {upstream} did not answer within {after:?}")]
    Silent { upstream: String, after: Duration },
    /// The answer broke off, stalled or grew past its bound while read whole.
    #[error("upstream {upstream}: {why}")]
    Answer { upstream: String, why: String },
    /// The upstream answered with a redirect, which is not followed (nor
    /// passed back: the client would leave the tape for the upstream).
    #[error(
        "upstream {upstream} redirected {from} to {to}: mcp-tape does not follow redirects; give \
         --upstream {instead} and point the client at the same path on the tape"
    )]
    Redirected { upstream: String, from: String, to: String, instead: String },
    /// The request's path does not make an upstream URL.
    #[error("cannot build the upstream URL: {0}")]
    Address(String),
}

/// The JSON-RPC code of an upstream failure (in the implementation range).
pub const UPSTREAM_ERROR: ErrorCode = ErrorCode(-32000);

/// Why a request got no MCP answer.
#[derive(Clone, Debug, PartialEq)]
pub enum Unanswered {
    /// A `Host` or `Origin` that is not loopback or allowed.
    Forbidden {
        header: &'static str,
        value: String,
    },
    /// An HTTP method this endpoint does not serve.
    MethodNotAllowed {
        allow: &'static str,
        why: &'static str,
    },
    /// An HTTP/1.1 request without `Host`.
    MissingHost,
    /// A DELETE without the session it ends.
    MissingSessionHeader,
    UnsupportedMediaType,
    NotAcceptable,
    /// A body over the front door's limit (bytes).
    BodyTooLarge {
        limit: usize,
    },
    /// A request-target (path and query) over the front door's limit (bytes).
    UriTooLong {
        limit: usize,
    },
    /// A request-target that is no path (`*`, or an authority alone).
    NotAPath,
    /// A body that stopped arriving for this long.
    BodyStalled {
        idle: Duration,
    },
    /// A body that came slower, over all, than this many bytes a second
    /// (after a first allowance of time).
    BodyTooSlow {
        rate: usize,
    },
    BodyUnreadable(String),
    /// A header value that is not visible ASCII.
    HeaderNotAscii(&'static str),
    /// Not JSON (`-32700`).
    NotJson(String),
    /// JSON, but not one JSON-RPC message (`-32600`, the parser's error).
    NotJsonRpc(ErrorObject),
    /// A session id never issued, or ended.
    UnknownSession,
    /// A stateless-era request whose version, envelope or headers do not
    /// hold together (`-32022`, `-32602`, `-32020`).
    Stateless(ErrorObject),
    /// A line over the front door's limit (bytes).
    LineTooLong {
        limit: usize,
    },
    /// The upstream failed.
    Upstream(UpstreamFailure),
    /// The upstream answered but the exchange could not be committed.
    NotStored,
    /// Holding the answer would pass the recorder's bound on answers in
    /// flight (bytes).
    Busy {
        limit: usize,
    },
    /// The recording holds events but no final answer, and the client
    /// accepts only a single JSON answer.
    NoFinalAnswer,
    /// The daemon is stopping, and this request was still waiting for its
    /// answer when the shutdown grace ran out.
    Stopping {
        grace: Duration,
    },
    /// A test runner's tapes (`--tapes-on-stdin`): the request came
    /// between one test's tape and the next.
    NoTape,
}

impl Unanswered {
    /// The JSON-RPC error a client gets for this fault.
    pub fn error(&self) -> ErrorObject {
        let invalid = |message: String| ErrorObject::new(ErrorCode::INVALID_REQUEST, message);
        match self {
            Unanswered::Forbidden { header, value } => invalid(format!(
                "Forbidden {header} {value:?}: only loopback hosts are served (see --allow-host)"
            )),
            Unanswered::MethodNotAllowed { allow, why } => {
                invalid(format!("Method not allowed: {why}")).with_data(json!({"allow": allow}))
            }
            Unanswered::MissingSessionHeader => invalid("DELETE needs an Mcp-Session-Id header".into()),
            Unanswered::MissingHost => invalid("An HTTP/1.1 request needs a Host header".into()),
            Unanswered::UnsupportedMediaType => invalid("Content-Type must be application/json".into()),
            Unanswered::NotAcceptable => {
                invalid("Accept must allow application/json or text/event-stream".into())
            }
            Unanswered::BodyTooLarge { limit } => invalid(format!("Request body larger than {limit} bytes")),
            Unanswered::BodyStalled { idle } => invalid(format!("The request body stalled for {idle:?}")),
            Unanswered::BodyTooSlow { rate } => {
                invalid(format!("The request body came slower than {rate} bytes a second"))
            }
            Unanswered::UriTooLong { limit } => invalid(format!("Request-target longer than {limit} bytes")),
            Unanswered::NotAPath => invalid("The request-target must be a path beginning with /".into()),
            Unanswered::BodyUnreadable(why) => invalid(format!("Could not read the request body: {why}")),
            Unanswered::HeaderNotAscii(name) => invalid(format!("Header {name} is not visible ASCII")),
            Unanswered::NotJson(why) => {
                ErrorObject::new(ErrorCode::PARSE_ERROR, format!("Parse error: {why}"))
            }
            Unanswered::NotJsonRpc(error) | Unanswered::Stateless(error) => error.clone(),
            Unanswered::UnknownSession => invalid(
                "Session not found: it was never issued or has ended; initialize a new session".into(),
            ),
            Unanswered::LineTooLong { limit } => invalid(format!("Message line longer than {limit} bytes")),
            Unanswered::Upstream(failure) => {
                ErrorObject::new(UPSTREAM_ERROR, format!("mcp-tape record: {failure}"))
            }
            Unanswered::NotStored => ErrorObject::new(
                ErrorCode::INTERNAL_ERROR,
                "mcp-tape record: the upstream answered, but the exchange could not be stored (see the \
                 recorder's log, e.g. a full disk); the answer is withheld so that every exchange a client \
                 saw finish is in the cassette",
            ),
            Unanswered::NoFinalAnswer => ErrorObject::new(
                ErrorCode::INTERNAL_ERROR,
                "The recording of this exchange holds no final answer; ask for text/event-stream to get its events",
            ),
            Unanswered::Busy { limit } => ErrorObject::new(
                UPSTREAM_ERROR,
                format!(
                    "mcp-tape record: the answers held in memory at once would pass {limit} bytes; \
                     try again when fewer are in flight"
                ),
            ),
            Unanswered::Stopping { grace } => ErrorObject::new(
                UPSTREAM_ERROR,
                format!(
                    "mcp-tape is stopping: this request had no answer within the {grace:?} shutdown grace"
                ),
            ),
            Unanswered::NoTape => ErrorObject::new(
                UPSTREAM_ERROR,
                "No test's tape is running: this request came after its test's tape ended and before the \
                 next test's began",
            ),
        }
    }
}

/// A request that gets an error instead of an MCP answer: the fault, and
/// the request's id when it was read (the answer echoes it; `null` if not).
#[derive(Clone, Debug, PartialEq)]
pub struct RequestError {
    /// Boxed: the error path is rare, and a `Result` carrying it stays small.
    pub fault: Box<Unanswered>,
    pub id: Option<RequestId>,
}

impl RequestError {
    pub fn with_id(mut self, id: Option<RequestId>) -> RequestError {
        self.id = id;
        self
    }

    /// The JSON-RPC error answer, as JSON text.
    pub fn body(&self) -> String {
        jsonrpc::error(self.id.as_ref(), &self.fault.error())
    }
}

impl From<Unanswered> for RequestError {
    fn from(fault: Unanswered) -> RequestError {
        RequestError { fault: Box::new(fault), id: None }
    }
}

/// One fault of each kind, for tests that must hold for every fault.
#[cfg(test)]
pub(crate) fn one_of_each_fault() -> Vec<Unanswered> {
    vec![
        Unanswered::Forbidden { header: "Host", value: "evil".into() },
        Unanswered::MethodNotAllowed { allow: "POST", why: "no" },
        Unanswered::MissingSessionHeader,
        Unanswered::MissingHost,
        Unanswered::UnsupportedMediaType,
        Unanswered::NotAcceptable,
        Unanswered::BodyTooLarge { limit: 1 },
        Unanswered::BodyStalled { idle: Duration::from_secs(1) },
        Unanswered::BodyTooSlow { rate: 1 },
        Unanswered::UriTooLong { limit: 1 },
        Unanswered::NotAPath,
        Unanswered::BodyUnreadable("reset".into()),
        Unanswered::HeaderNotAscii("mcp-session-id"),
        Unanswered::NotJson("eof".into()),
        Unanswered::NotJsonRpc(ErrorObject::new(ErrorCode::INVALID_REQUEST, "x")),
        Unanswered::UnknownSession,
        Unanswered::Stateless(ErrorObject::new(ErrorCode(-32020), "x")),
        Unanswered::LineTooLong { limit: 1 },
        Unanswered::Upstream(UpstreamFailure::Address("x".into())),
        Unanswered::NotStored,
        Unanswered::Busy { limit: 1 },
        Unanswered::NoFinalAnswer,
        Unanswered::Stopping { grace: Duration::from_secs(1) },
        Unanswered::NoTape,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every fault maps to an error in JSON-RPC's reserved or
    /// implementation range.
    #[test]
    fn each_fault_maps_to_a_json_rpc_error() {
        for fault in one_of_each_fault() {
            let code = fault.error().code.0;
            assert!((-32768..=-32000).contains(&code), "{fault:?} → {code}");
        }
        let answer = RequestError::from(Unanswered::NotJson("eof".into())).body();
        assert_eq!(
            answer,
            r#"{"error":{"code":-32700,"message":"Parse error: eof"},"id":null,"jsonrpc":"2.0"}"#
        );
    }
}
