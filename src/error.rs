//! Errors, classified by side. Start-up and store failures are [`Error`]
//! (printed with their cause chain by `main`); a request the front door
//! refuses as the client's fault is a [`Rejection`], which carries its HTTP
//! status and JSON-RPC error so that the mapping happens in one place.

use std::path::PathBuf;

use crate::jsonrpc::{self, ErrorObject, RequestId};

/// Failures that stop a command: bad configuration, unusable cassettes,
/// a port that cannot be bound.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Config(String),
    #[error("cassette {}: {kind}", path.display())]
    Cassette { path: PathBuf, kind: CassetteError },
    #[error("cannot read {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0} requests missed the recordings (--fail-on-miss)")]
    Misses(u64),
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

/// A request refused at the HTTP level, before or instead of an MCP answer.
#[derive(Clone, Debug)]
pub struct Rejection {
    /// Always 4xx: the client sent something we will not serve.
    pub status: u16,
    pub error: ErrorObject,
    /// The request's id, when it was read before the refusal.
    pub id: Option<RequestId>,
}

impl Rejection {
    /// A client-side refusal with `status` and a JSON-RPC error of `code`.
    pub fn client(status: u16, code: i32, message: impl Into<String>) -> Rejection {
        debug_assert!((400..500).contains(&status));
        Rejection { status, error: ErrorObject::new(code, message), id: None }
    }

    pub fn with_id(mut self, id: Option<RequestId>) -> Rejection {
        self.id = id;
        self
    }

    /// The JSON-RPC error body sent with the status, as JSON text.
    pub fn body(&self) -> String {
        jsonrpc::error(self.id.as_ref(), &self.error)
    }
}
