//! Protocol knowledge, kept in one place so that routing, replay and
//! normalization stay era-agnostic: the two protocol eras and their versions,
//! version negotiation, header names, the stateless era's request checks and
//! error → HTTP status table. The mock answers live in [`fallback`], the
//! conversions between `initialize` and `server/discover` in [`convert`].
//!
//! The facts come from `shared/reference/MCP-2024-2025.md` (handshake era)
//! and `MCP-2026-07-28.md` (stateless era).

pub mod convert;
pub mod fallback;

use serde_json::{Value, json};

use crate::jsonrpc::{self, ErrorObject};

/// Handshake-era versions we serve, oldest first.
pub const HANDSHAKE_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
/// Stateless-era versions we serve, oldest first.
pub const STATELESS_VERSIONS: [&str; 1] = ["2026-07-28"];

pub const HEADER_SESSION_ID: &str = "mcp-session-id";
pub const HEADER_PROTOCOL_VERSION: &str = "mcp-protocol-version";
pub const HEADER_METHOD: &str = "mcp-method";
pub const HEADER_NAME: &str = "mcp-name";

/// `_meta` keys of the stateless era's per-request envelope.
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
pub const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// MCP's resource-not-found code (handshake era only).
pub const RESOURCE_NOT_FOUND: i32 = -32002;
/// A replay miss: in the implementation-defined range.
pub const REPLAY_MISS: i32 = -32001;
/// Stateless era: routing headers disagree with the body.
pub const HEADER_MISMATCH: i32 = -32020;
/// Stateless era: the requested protocol version is not served.
pub const UNSUPPORTED_VERSION: i32 = -32022;

/// The two protocol generations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Era {
    /// `initialize`, sessions, versions up to 2025-11-25.
    Handshake,
    /// `server/discover`, per-request `_meta` envelope, 2026-07-28.
    Stateless,
}

impl Era {
    /// Routes a request the way the reference SDK does: by the
    /// `MCP-Protocol-Version` header alone. Absent or a handshake version →
    /// handshake; anything else → stateless (whose checks then reject
    /// versions it does not serve).
    pub fn of_header(version: Option<&str>) -> Era {
        match version {
            Some(v) if !HANDSHAKE_VERSIONS.contains(&v) => Era::Stateless,
            _ => Era::Handshake,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Era::Handshake => "handshake",
            Era::Stateless => "stateless",
        }
    }

    pub fn parse(text: &str) -> Option<Era> {
        match text {
            "handshake" => Some(Era::Handshake),
            "stateless" => Some(Era::Stateless),
            _ => None,
        }
    }
}

/// Handshake-era version negotiation: the client's version if we serve it,
/// else the newest we serve that is older than it, else our newest.
pub fn negotiate(requested: Option<&str>) -> &'static str {
    let newest = HANDSHAKE_VERSIONS[HANDSHAKE_VERSIONS.len() - 1];
    let Some(requested) = requested else {
        return newest;
    };
    // Versions are ISO dates, so string order is date order.
    HANDSHAKE_VERSIONS.iter().rev().find(|v| **v <= requested).copied().unwrap_or(newest)
}

/// The HTTP status that carries a JSON-RPC error code in `era`.
pub fn error_status(era: Era, code: i64) -> u16 {
    const BAD_REQUEST_CODES: [i64; 2] = [jsonrpc::PARSE_ERROR as i64, jsonrpc::INVALID_REQUEST as i64];
    const STATELESS_BAD_REQUEST_CODES: [i64; 4] =
        [jsonrpc::INVALID_PARAMS as i64, HEADER_MISMATCH as i64, -32021, UNSUPPORTED_VERSION as i64];
    match era {
        _ if BAD_REQUEST_CODES.contains(&code) => 400,
        Era::Stateless if STATELESS_BAD_REQUEST_CODES.contains(&code) => 400,
        Era::Stateless if code == jsonrpc::METHOD_NOT_FOUND as i64 => 404,
        _ => 200,
    }
}

/// Whether `method` does not exist in `era`: replay answers these with
/// "method not found" whatever a cassette holds, as a server of that era would.
pub fn is_removed(era: Era, method: &str) -> bool {
    match era {
        Era::Handshake => matches!(method, "server/discover" | "subscriptions/listen"),
        Era::Stateless => matches!(
            method,
            "initialize" | "ping" | "logging/setLevel" | "resources/subscribe" | "resources/unsubscribe"
        ),
    }
}

/// Whether a stateless-era result of `method` must carry `ttlMs`/`cacheScope`.
pub fn is_cacheable(method: &str) -> bool {
    matches!(
        method,
        "server/discover"
            | "tools/list"
            | "prompts/list"
            | "resources/list"
            | "resources/templates/list"
            | "resources/read"
    )
}

/// The routing headers of a stateless-era POST, as received.
#[derive(Clone, Debug, Default)]
pub struct RoutingHeaders {
    pub protocol_version: Option<String>,
    pub method: Option<String>,
    pub name: Option<String>,
}

/// The stateless era's checks on one request, in the order the spec's
/// validation section reads: served version, envelope, then headers against
/// the body. Each failure is the exact error to send (HTTP 400).
pub fn check_stateless(
    method: &str,
    params: Option<&Value>,
    headers: &RoutingHeaders,
) -> Result<(), ErrorObject> {
    let header_version = headers.protocol_version.as_deref().unwrap_or_default();
    if !STATELESS_VERSIONS.contains(&header_version) {
        return Err(unsupported_version(header_version));
    }
    let meta = params.and_then(|p| p.get("_meta"));
    let meta_str = |key: &str| meta.and_then(|m| m.get(key)).and_then(Value::as_str);
    let Some(version) = meta_str(META_PROTOCOL_VERSION) else {
        return Err(missing_envelope(META_PROTOCOL_VERSION));
    };
    if !meta.and_then(|m| m.get(META_CLIENT_CAPABILITIES)).is_some_and(Value::is_object) {
        return Err(missing_envelope(META_CLIENT_CAPABILITIES));
    }
    if version != header_version {
        return Err(mismatch(format!(
            "MCP-Protocol-Version header {header_version:?} differs from _meta version {version:?}"
        )));
    }
    if headers.method.as_deref() != Some(method) {
        return Err(mismatch(format!(
            "Mcp-Method header {:?} differs from method {method:?}",
            headers.method.as_deref().unwrap_or("(missing)")
        )));
    }
    if let Some(expected) = name_of(method, params) {
        let sent = headers.name.as_deref().map(decode_header_value);
        if sent.as_deref() != Some(expected) {
            return Err(mismatch(format!(
                "Mcp-Name header {:?} differs from {expected:?}",
                sent.as_deref().unwrap_or("(missing)")
            )));
        }
    }
    Ok(())
}

/// The value `Mcp-Name` must carry for `method`, if it needs one.
fn name_of<'a>(method: &str, params: Option<&'a Value>) -> Option<&'a str> {
    let field = match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" => "uri",
        _ => return None,
    };
    Some(params.and_then(|p| p.get(field)).and_then(Value::as_str).unwrap_or_default())
}

/// Decodes the `=?base64?…?=` form clients use for non-ASCII header values.
fn decode_header_value(raw: &str) -> String {
    use base64::Engine;
    raw.strip_prefix("=?base64?")
        .and_then(|rest| rest.strip_suffix("?="))
        .and_then(|b64| base64::engine::general_purpose::STANDARD.decode(b64).ok())
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .unwrap_or_else(|| raw.to_owned())
}

fn missing_envelope(key: &str) -> ErrorObject {
    ErrorObject::new(
        jsonrpc::INVALID_PARAMS,
        format!("Missing required _meta field {key:?} in the request envelope"),
    )
}

fn mismatch(message: String) -> ErrorObject {
    ErrorObject::new(HEADER_MISMATCH, message)
}

/// The stateless era's answer to a version it does not serve.
pub fn unsupported_version(requested: &str) -> ErrorObject {
    ErrorObject::new(UNSUPPORTED_VERSION, format!("Unsupported protocol version {requested:?}"))
        .with_data(json!({"supported": STATELESS_VERSIONS, "requested": requested}))
}

/// RFC 5424 severity order of MCP log levels: higher is more severe;
/// unknown levels rank lowest.
pub fn log_severity(level: &str) -> usize {
    const LEVELS: [&str; 8] =
        ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"];
    LEVELS.iter().position(|l| *l == level).map_or(0, |at| at + 1)
}

/// The progress token a request asked for, if any.
pub fn progress_token(params: Option<&Value>) -> Option<&Value> {
    params?.get("_meta")?.get("progressToken")
}

/// This daemon's own identity, for synthesized answers.
pub fn server_info() -> Value {
    json!({"name": "mcp-tape", "version": env!("CARGO_PKG_VERSION")})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_follows_the_rule() {
        assert_eq!(negotiate(Some("2025-06-18")), "2025-06-18");
        assert_eq!(negotiate(Some("2025-07-01")), "2025-06-18");
        assert_eq!(negotiate(Some("2099-01-01")), "2025-11-25");
        assert_eq!(negotiate(Some("1999-01-01")), "2025-11-25");
        assert_eq!(negotiate(None), "2025-11-25");
    }

    #[test]
    fn era_comes_from_the_header() {
        assert_eq!(Era::of_header(None), Era::Handshake);
        assert_eq!(Era::of_header(Some("2025-03-26")), Era::Handshake);
        assert_eq!(Era::of_header(Some("2026-07-28")), Era::Stateless);
        assert_eq!(Era::of_header(Some("garbage")), Era::Stateless);
    }

    fn headers(version: &str, method: &str, name: Option<&str>) -> RoutingHeaders {
        RoutingHeaders {
            protocol_version: Some(version.into()),
            method: Some(method.into()),
            name: name.map(str::to_owned),
        }
    }

    fn enveloped(extra: Value) -> Value {
        let mut params = json!({"_meta": {
            META_PROTOCOL_VERSION: "2026-07-28",
            META_CLIENT_CAPABILITIES: {},
            META_LOG_LEVEL: "info",
        }});
        params.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        params
    }

    #[test]
    fn stateless_checks_accept_a_consistent_request() {
        let params = enveloped(json!({"name": "café"}));
        let name = "=?base64?Y2Fmw6k=?=";
        let ok =
            check_stateless("tools/call", Some(&params), &headers("2026-07-28", "tools/call", Some(name)));
        assert_eq!(ok, Ok(()));
    }

    #[test]
    fn stateless_checks_reject_each_inconsistency() {
        let params = enveloped(json!({"name": "echo"}));
        let code =
            |m: &str, p: Option<&Value>, h: RoutingHeaders| check_stateless(m, p, &h).unwrap_err().code;
        assert_eq!(code("tools/list", None, headers("2026-07-28", "tools/list", None)), -32602);
        assert_eq!(code("tools/call", Some(&params), headers("2026-07-28", "tools/list", None)), -32020);
        assert_eq!(code("tools/call", Some(&params), headers("2026-07-28", "tools/call", Some("x"))), -32020);
        assert_eq!(code("tools/call", Some(&params), headers("2026-07-28", "tools/call", None)), -32020);
        let err = check_stateless("tools/call", Some(&params), &headers("2099-01-01", "tools/call", None))
            .unwrap_err();
        assert_eq!(err.code, -32022);
        assert_eq!(err.data.unwrap()["requested"], "2099-01-01");
    }

    #[test]
    fn error_statuses_per_era() {
        assert_eq!(error_status(Era::Stateless, -32601), 404);
        assert_eq!(error_status(Era::Stateless, -32602), 400);
        assert_eq!(error_status(Era::Stateless, -32603), 200);
        assert_eq!(error_status(Era::Handshake, -32602), 200);
        assert_eq!(error_status(Era::Handshake, -32700), 400);
    }
}
