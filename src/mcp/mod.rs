//! Protocol knowledge, kept in one place so that routing, replay and
//! normalization stay era-agnostic: the two protocol eras and their versions,
//! version negotiation, header names, the stateless era's request checks and
//! error → HTTP status table. The mock answers live in [`fallback`], the
//! conversions between `initialize` and `server/discover` in [`convert`].
//!
//! The facts come from the MCP specification: versions 2024-11-05 to
//! 2025-11-25 (handshake era) and 2026-07-28 (stateless era). The era enum
//! itself is a domain type ([`Era`]); which era a request speaks is decided
//! here ([`era_of`]).

pub mod convert;
pub mod fallback;

use serde_json::{Value, json};

use crate::jsonrpc::{ErrorCode, ErrorObject};
use crate::model::{Era, Status};

/// Handshake-era versions we serve, oldest first.
pub const HANDSHAKE_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
/// Stateless-era versions we serve, oldest first.
pub const STATELESS_VERSIONS: [&str; 1] = ["2026-07-28"];
/// The version a handshake request with no other word on it speaks: the
/// spec's default for a request without the `MCP-Protocol-Version` header.
pub const DEFAULT_HANDSHAKE_VERSION: &str = "2025-03-26";

pub const HEADER_SESSION_ID: &str = "mcp-session-id";
pub const HEADER_PROTOCOL_VERSION: &str = "mcp-protocol-version";
pub const HEADER_METHOD: &str = "mcp-method";
pub const HEADER_NAME: &str = "mcp-name";

/// `_meta` keys of the stateless era's per-request envelope.
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
pub const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
pub const META_SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// MCP's resource-not-found code (handshake era only).
pub const RESOURCE_NOT_FOUND: ErrorCode = ErrorCode(-32002);
/// A replay miss: in the implementation-defined range.
pub const REPLAY_MISS: ErrorCode = ErrorCode(-32001);
/// Stateless era: routing headers disagree with the body.
pub const HEADER_MISMATCH: ErrorCode = ErrorCode(-32020);
/// Stateless era: the client lacks a capability the request needs.
pub const MISSING_CLIENT_CAPABILITY: ErrorCode = ErrorCode(-32021);
/// Stateless era: the requested protocol version is not served.
pub const UNSUPPORTED_VERSION: ErrorCode = ErrorCode(-32022);

/// HTTP statuses that refuse a request before it is read as MCP: a foreign
/// Host/Origin, a method, Accept, size or content type not served.
const TRANSPORT_REFUSALS: [u16; 5] = [
    403, // Forbidden
    405, // Method Not Allowed
    406, // Not Acceptable
    413, // Content Too Large
    415, // Unsupported Media Type
];

/// Routes a request the way the reference SDK does: by the
/// `MCP-Protocol-Version` header alone. Absent or a handshake version →
/// handshake; anything else → stateless (whose checks then reject versions
/// it does not serve).
pub fn era_of(version: Option<&str>) -> Era {
    match version {
        Some(v) if !HANDSHAKE_VERSIONS.contains(&v) => Era::Stateless,
        _ => Era::Handshake,
    }
}

/// Whether a client of handshake version `version` takes SSE priming
/// events (an id and empty data, SEP-1699): 2025-11-25 and later, which
/// resume a stream the server closes before its answer.
pub fn takes_priming_events(version: &str) -> bool {
    HANDSHAKE_VERSIONS.contains(&version) && version >= "2025-11-25"
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

/// Whether `method` is housekeeping: connecting, staying connected and
/// listing, which a client does whatever its test is about. `test` lets
/// the mock answer these on a recorded server without counting a miss;
/// every other request (a call, a read, a prompt, a completion) must be
/// recorded.
pub fn is_housekeeping(method: &str) -> bool {
    matches!(
        method,
        "initialize"
            | "ping"
            | "server/discover"
            | "subscriptions/listen"
            | "logging/setLevel"
            | "tools/list"
            | "prompts/list"
            | "resources/list"
            | "resources/templates/list"
            | "resources/subscribe"
            | "resources/unsubscribe"
    ) || method.starts_with("notifications/")
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
pub struct RoutingHeaders<'h> {
    pub protocol_version: Option<&'h str>,
    pub method: Option<&'h str>,
    pub name: Option<&'h str>,
}

/// The prefix of the headers that mirror tool arguments (SEP-2243).
pub const HEADER_PARAM_PREFIX: &str = "mcp-param-";

/// The tool argument header checks (SEP-2243): every argument whose schema
/// property names an `x-mcp-header` and that the body sets must be mirrored
/// in `Mcp-Param-{header}`, literally or as `=?base64?…?=` (strictly
/// decoded), with the argument's text (strings as they are, other values as
/// JSON).
///
/// # Errors
///
/// `-32020` naming the argument whose header is missing, malformed or different.
pub fn check_param_headers(
    input_schema: &Value,
    arguments: Option<&Value>,
    sent: &[(String, String)],
) -> Result<(), ErrorObject> {
    let Some(properties) = input_schema.get("properties").and_then(Value::as_object) else {
        return Ok(());
    };
    for (argument, property) in properties {
        let Some(header) = property.get("x-mcp-header").and_then(Value::as_str) else { continue };
        let Some(value) = arguments.and_then(|a| a.get(argument)).filter(|v| !v.is_null()) else { continue };
        let expected = match value {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        let wanted = header.to_ascii_lowercase();
        let Some((_, raw)) = sent.iter().find(|(name, _)| *name == wanted) else {
            return Err(mismatch(format!(
                "argument {argument:?} is set but the Mcp-Param-{header} header is missing"
            )));
        };
        let decoded = match raw.strip_prefix("=?base64?").and_then(|rest| rest.strip_suffix("?=")) {
            Some(encoded) => {
                use base64::Engine;
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(encoded)
                    .map_err(|e| mismatch(format!("Mcp-Param-{header} is not valid Base64: {e}")))?;
                String::from_utf8(bytes)
                    .map_err(|_| mismatch(format!("Mcp-Param-{header} does not decode to UTF-8")))?
            }
            None => raw.clone(),
        };
        if decoded != expected {
            return Err(mismatch(format!(
                "Mcp-Param-{header} header {decoded:?} differs from argument {argument:?} = {expected:?}"
            )));
        }
    }
    Ok(())
}

/// The stateless era's checks on one request, in the order the spec's
/// validation section reads: served version, envelope, then headers against
/// the body. `headers` is `None` on a transport without them (stdio), where
/// the envelope's version is the one checked. Each failure is the exact
/// error to send (HTTP 400).
pub fn check_stateless(
    method: &str,
    params: Option<&Value>,
    headers: Option<&RoutingHeaders>,
) -> Result<(), ErrorObject> {
    let meta = params.and_then(|p| p.get("_meta"));
    let meta_str = |key: &str| meta.and_then(|m| m.get(key)).and_then(Value::as_str);
    let Some(headers) = headers else {
        let Some(version) = meta_str(META_PROTOCOL_VERSION) else {
            return Err(missing_envelope(META_PROTOCOL_VERSION));
        };
        if !STATELESS_VERSIONS.contains(&version) {
            return Err(unsupported_version(version));
        }
        if !meta.and_then(|m| m.get(META_CLIENT_CAPABILITIES)).is_some_and(Value::is_object) {
            return Err(missing_envelope(META_CLIENT_CAPABILITIES));
        }
        return Ok(());
    };
    let header_version = headers.protocol_version.unwrap_or_default();
    if !STATELESS_VERSIONS.contains(&header_version) {
        return Err(unsupported_version(header_version));
    }
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
    if headers.method != Some(method) {
        return Err(mismatch(format!(
            "Mcp-Method header {:?} differs from method {method:?}",
            headers.method.unwrap_or("(missing)")
        )));
    }
    if let Some(expected) = name_of(method, params) {
        let sent = headers.name.map(decode_header_value);
        if sent.as_deref() != Some(expected) {
            return Err(mismatch(format!(
                "Mcp-Name header {:?} differs from {expected:?}",
                sent.as_deref().unwrap_or("(missing)")
            )));
        }
    }
    Ok(())
}

/// Whether a recorded answer was the upstream refusing a request for what
/// its headers, session or envelope said rather than for its body: a
/// transport-level refusal status, a header/body mismatch (`-32020`), an
/// unsupported version (`-32022`), an error that names no request (`id`
/// null: the session was unknown, or the request was not read as one), or
/// a stateless-era request recorded without its envelope. Replay decides
/// all of these on the live request, so such a recording never answers
/// another. A `server/discover` probe failure is the exception to the `id`
/// rule: it is the upstream telling a client its era is not served.
///
/// `error` is the final answer's `error`, if it was one; `answered_id` its `id`.
pub fn is_transport_rejection(
    era: Era,
    request: &Value,
    status: Status,
    error: Option<&Value>,
    answered_id: Option<&Value>,
) -> bool {
    if TRANSPORT_REFUSALS.contains(&status.as_u16()) {
        return true;
    }
    let code = error.and_then(|e| e.get("code")).and_then(ErrorCode::of);
    if code.is_some_and(|c| c == HEADER_MISMATCH || c == UNSUPPORTED_VERSION) {
        return true;
    }
    let method = request.get("method").and_then(Value::as_str).unwrap_or_default();
    let unattributed = error.is_some() && answered_id.is_none_or(Value::is_null);
    if unattributed && method != "server/discover" {
        return true;
    }
    let meta = request.pointer("/params/_meta");
    let enveloped = meta.and_then(|m| m.get(META_PROTOCOL_VERSION)).is_some_and(Value::is_string)
        && meta.and_then(|m| m.get(META_CLIENT_CAPABILITIES)).is_some_and(Value::is_object);
    era == Era::Stateless && !enveloped
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
        ErrorCode::INVALID_PARAMS,
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

/// The tool or prompt name, or the resource URI, a request of `method` names.
pub fn subject_of<'a>(method: &str, params: Option<&'a Value>) -> Option<&'a str> {
    let field = match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" | "resources/subscribe" | "resources/unsubscribe" => "uri",
        _ => return None,
    };
    member(params?, field)?.as_str()
}

/// The progress token a request asked for, if any.
pub fn progress_token(params: Option<&Value>) -> Option<&Value> {
    member(member(params?, "_meta")?, "progressToken")
}

/// Member `key` of `value`, when it is an object that has one: what
/// `value.get(key)` finds. The objects a request's params hold have a few
/// members, and comparing their keys in order is cheaper than hashing
/// `key` (the map hashes with SipHash); a larger object is looked up.
pub fn member<'a>(value: &'a Value, key: &str) -> Option<&'a Value> {
    const SEARCHED_IN_ORDER: usize = 8;
    let object = value.as_object()?;
    if object.len() > SEARCHED_IN_ORDER {
        return object.get(key);
    }
    object.iter().find_map(|(name, member)| (name == key).then_some(member))
}

/// This daemon's own identity, for synthesized answers.
pub fn server_info() -> Value {
    json!({"name": "mcp-tape", "version": env!("CARGO_PKG_VERSION")})
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The member search finds what the map's lookup finds, in objects
        /// under and over the size it searches in order.
        #[test]
        fn member_is_get(
            keys in prop::collection::vec("[a-c_]{0,3}", 0..20),
            key in "[a-c_]{0,3}",
        ) {
            let object: serde_json::Map<String, Value> =
                keys.iter().enumerate().map(|(at, k)| (k.clone(), json!(at))).collect();
            let value = Value::Object(object);
            prop_assert_eq!(member(&value, &key), value.get(&key));
            let array = json!([key.clone()]);
            prop_assert_eq!(member(&array, &key), None);
        }
    }

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
        assert_eq!(era_of(None), Era::Handshake);
        assert_eq!(era_of(Some("2025-03-26")), Era::Handshake);
        assert_eq!(era_of(Some("2026-07-28")), Era::Stateless);
        assert_eq!(era_of(Some("garbage")), Era::Stateless);
    }

    fn headers<'h>(version: &'h str, method: &'h str, name: Option<&'h str>) -> RoutingHeaders<'h> {
        RoutingHeaders { protocol_version: Some(version), method: Some(method), name }
    }

    #[test]
    fn argument_headers_mirror_annotated_arguments() {
        let schema = json!({"properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "priority": {"type": "integer", "x-mcp-header": "Priority"},
            "query": {"type": "string"},
        }});
        let sent = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())).collect()
        };
        let check = |arguments: Value, headers: &[(&str, &str)]| {
            check_param_headers(&schema, Some(&arguments), &sent(headers)).map_err(|e| e.code)
        };
        let hello = json!({"region": "Hello", "query": "x"});
        assert_eq!(check(hello.clone(), &[("region", "Hello")]), Ok(()));
        assert_eq!(check(hello.clone(), &[("region", "=?base64?SGVsbG8=?=")]), Ok(()));
        assert_eq!(check(json!({"region": "=?base64?SGVsbG8"}), &[("region", "=?base64?SGVsbG8")]), Ok(()));
        assert_eq!(
            check(json!({"region": "a", "priority": 3}), &[("region", "a"), ("priority", "3")]),
            Ok(())
        );
        assert_eq!(check(json!({"query": "no header needed"}), &[]), Ok(()));
        for bad in [
            &[("region", "=?base64?SGVsbG8?=")][..],
            &[("region", "=?base64?SGVs!!!bG8=?=")],
            &[],
            &[("region", "Bye")],
        ] {
            assert_eq!(check(hello.clone(), bad), Err(HEADER_MISMATCH), "{bad:?}");
        }
    }

    #[test]
    fn recorded_rejections_are_told_apart_from_answers() {
        let request =
            |method: &str, meta: Value| json!({"id": 1, "method": method, "params": {"_meta": meta}});
        let envelope = json!({META_PROTOCOL_VERSION: "2026-07-28", META_CLIENT_CAPABILITIES: {}});
        let error = |id: Value, code: ErrorCode| json!({"jsonrpc": "2.0", "id": id, "error": {"code": code.0, "message": "m"}});
        let rejects = |era, request: Value, status: u16, answer: Value| {
            let status = Status::new(status).unwrap();
            is_transport_rejection(era, &request, status, answer.get("error"), answer.get("id"))
        };
        let stateless =
            |method, meta, status, answer| rejects(Era::Stateless, request(method, meta), status, answer);
        assert!(
            stateless("tools/list", json!({}), 400, error(json!(1), ErrorCode::INVALID_PARAMS)),
            "recorded without its envelope"
        );
        assert!(stateless("tools/list", envelope.clone(), 400, error(json!(1), HEADER_MISMATCH)));
        assert!(stateless("tools/list", envelope.clone(), 400, error(json!(1), UNSUPPORTED_VERSION)));
        assert!(stateless("tools/list", envelope.clone(), 403, json!({"error": "forbidden"})));
        assert!(
            !stateless("tools/call", envelope.clone(), 400, error(json!(1), ErrorCode::INVALID_PARAMS)),
            "an unknown tool is an answer"
        );
        assert!(!stateless("tools/list", envelope, 404, error(json!(1), ErrorCode::METHOD_NOT_FOUND)));
        let handshake =
            |method, status, answer| rejects(Era::Handshake, request(method, json!({})), status, answer);
        assert!(handshake("tools/list", 404, error(Value::Null, REPLAY_MISS)), "session not found");
        assert!(
            !handshake("server/discover", 400, error(Value::Null, ErrorCode(-32000))),
            "a probe failure is replayed"
        );
        assert!(!handshake("tools/call", 200, json!({"jsonrpc": "2.0", "id": 1, "result": {}})));
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
        let ok = check_stateless(
            "tools/call",
            Some(&params),
            Some(&headers("2026-07-28", "tools/call", Some(name))),
        );
        assert_eq!(ok, Ok(()));
    }

    #[test]
    fn stateless_checks_reject_each_inconsistency() {
        let params = enveloped(json!({"name": "echo"}));
        let code = |m: &str, p: Option<&Value>, h: RoutingHeaders| {
            check_stateless(m, p, Some(&h)).unwrap_err().code.0
        };
        assert_eq!(code("tools/list", None, headers("2026-07-28", "tools/list", None)), -32602);
        assert_eq!(code("tools/call", Some(&params), headers("2026-07-28", "tools/list", None)), -32020);
        assert_eq!(code("tools/call", Some(&params), headers("2026-07-28", "tools/call", Some("x"))), -32020);
        assert_eq!(code("tools/call", Some(&params), headers("2026-07-28", "tools/call", None)), -32020);
        let err =
            check_stateless("tools/call", Some(&params), Some(&headers("2099-01-01", "tools/call", None)))
                .unwrap_err();
        assert_eq!(err.code, UNSUPPORTED_VERSION);
        assert_eq!(err.data.unwrap()["requested"], "2099-01-01");
    }

    #[test]
    fn without_headers_the_envelope_alone_is_checked() {
        let code = |p: Option<&Value>| check_stateless("tools/call", p, None).map_err(|e| e.code);
        assert_eq!(code(Some(&enveloped(json!({"name": "echo"})))), Ok(()));
        assert_eq!(code(None), Err(ErrorCode::INVALID_PARAMS));
        let mut future = enveloped(json!({}));
        future["_meta"][META_PROTOCOL_VERSION] = "2099-01-01".into();
        assert_eq!(code(Some(&future)), Err(UNSUPPORTED_VERSION));
        let mut bare = enveloped(json!({}));
        bare["_meta"].as_object_mut().unwrap().remove(META_CLIENT_CAPABILITIES);
        assert_eq!(code(Some(&bare)), Err(ErrorCode::INVALID_PARAMS));
    }
}
