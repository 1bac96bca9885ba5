//! Converting answers between the eras (the 2026-07-28 specification's rules
//! for serving both generations): a recorded `initialize` result serves a stateless client's
//! `server/discover` and the reverse, and every result handed to a stateless
//! client carries the fields that era requires.

use serde_json::{Map, Value, json};

use super::{META_SERVER_INFO, RESOURCE_NOT_FOUND, STATELESS_VERSIONS, is_cacheable, negotiate, server_info};
use crate::jsonrpc::ErrorCode;
use crate::model::Era;

/// Capabilities with change notifications and subscriptions switched off:
/// replay never sends either unprompted.
fn quiet_capabilities(capabilities: Option<&Value>, drop: &str) -> Value {
    let mut capabilities = capabilities.and_then(Value::as_object).cloned().unwrap_or_default();
    capabilities.shift_remove(drop);
    for value in capabilities.values_mut() {
        if let Some(feature) = value.as_object_mut() {
            feature.shift_remove("listChanged");
            feature.shift_remove("subscribe");
        }
    }
    Value::Object(capabilities)
}

/// A `server/discover` result made from a recorded `initialize` result.
pub fn discover_from_initialize(initialize: &Value) -> Value {
    let mut capabilities = quiet_capabilities(initialize.get("capabilities"), "tasks");
    if let Some(map) = capabilities.as_object_mut() {
        map.shift_remove("logging");
    }
    let mut discover = json!({
        "resultType": "complete",
        "supportedVersions": STATELESS_VERSIONS,
        "capabilities": capabilities,
        "ttlMs": 0,
        "cacheScope": "private",
        "_meta": {META_SERVER_INFO: initialize.get("serverInfo").cloned().unwrap_or_else(server_info)},
    });
    if let Some(instructions) = initialize.get("instructions") {
        discover["instructions"] = instructions.clone();
    }
    discover
}

/// An `initialize` result made from a recorded `server/discover` result.
pub fn initialize_from_discover(discover: &Value, requested: Option<&str>) -> Value {
    let server_info =
        discover.get("_meta").and_then(|m| m.get(META_SERVER_INFO)).cloned().unwrap_or_else(server_info);
    let mut initialize = json!({
        "protocolVersion": negotiate(requested),
        "capabilities": quiet_capabilities(discover.get("capabilities"), "extensions"),
        "serverInfo": server_info,
    });
    if let Some(instructions) = discover.get("instructions") {
        initialize["instructions"] = instructions.clone();
    }
    initialize
}

/// Fills in what a stateless-era result must carry and the recording may
/// lack: `resultType`, the cache fields for cacheable methods, and
/// `_meta.serverInfo` (`server_info`: the recorded server's own where a
/// recording shows it). Fields already present are kept as recorded.
pub fn stateless_result(method: &str, result: &mut Value, server_info: &Value) {
    let Some(map) = result.as_object_mut() else {
        return;
    };
    map.entry("resultType").or_insert_with(|| "complete".into());
    if is_cacheable(method) && map.get("resultType").and_then(Value::as_str) == Some("complete") {
        map.entry("ttlMs").or_insert_with(|| 0.into());
        map.entry("cacheScope").or_insert_with(|| "private".into());
    }
    let meta = map.entry("_meta").or_insert_with(|| Value::Object(Map::new()));
    if let Some(meta) = meta.as_object_mut() {
        meta.entry(META_SERVER_INFO).or_insert_with(|| server_info.clone());
    }
}

/// The error code `era` uses for a recorded error code: resource-not-found
/// became `-32602` in the stateless era.
pub fn error_code_for(era: Era, code: ErrorCode) -> ErrorCode {
    match era {
        Era::Stateless if code == RESOURCE_NOT_FOUND => ErrorCode::INVALID_PARAMS,
        _ => code,
    }
}

/// Brings a recorded message (an answer or an error) into the stateless
/// era's shape, `identity` being the server's `serverInfo`.
pub fn message_to_stateless(method: &str, body: &mut Value, identity: &Value) {
    if let Some(result) = body.get_mut("result") {
        stateless_result(method, result, identity);
    } else if let Some(code) = body.pointer_mut("/error/code")
        && let Some(recorded) = ErrorCode::of(code)
    {
        *code = error_code_for(Era::Stateless, recorded).0.into();
    }
}

/// Takes the stateless era's own fields out of a recorded result for a
/// handshake-era client.
pub fn message_to_handshake(body: &mut Value) {
    if let Some(result) = body.get_mut("result").and_then(Value::as_object_mut) {
        for field in ["resultType", "ttlMs", "cacheScope"] {
            result.shift_remove(field);
        }
        if let Some(meta) = result.get_mut("_meta").and_then(Value::as_object_mut) {
            meta.shift_remove(META_SERVER_INFO);
            if meta.is_empty() {
                result.shift_remove("_meta");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recorded_initialize() -> Value {
        json!({
            "protocolVersion": "2025-06-18",
            "capabilities": {"tools": {"listChanged": true}, "logging": {}, "tasks": {"list": {}}},
            "serverInfo": {"name": "upstream", "version": "2.0"},
            "instructions": "Be brief.",
        })
    }

    #[test]
    fn discover_from_initialize_maps_each_field() {
        let discover = discover_from_initialize(&recorded_initialize());
        assert_eq!(discover["supportedVersions"], json!(["2026-07-28"]));
        assert_eq!(discover["capabilities"], json!({"tools": {}}));
        assert_eq!(discover["_meta"][META_SERVER_INFO]["name"], "upstream");
        assert_eq!(discover["instructions"], "Be brief.");
        assert_eq!(discover["cacheScope"], "private");
    }

    #[test]
    fn initialize_from_discover_negotiates_and_keeps_identity() {
        let discover = discover_from_initialize(&recorded_initialize());
        let initialize = initialize_from_discover(&discover, Some("2025-03-26"));
        assert_eq!(initialize["protocolVersion"], "2025-03-26");
        assert_eq!(initialize["serverInfo"]["version"], "2.0");
        assert!(initialize.get("resultType").is_none());
    }

    #[test]
    fn stateless_result_fills_only_what_is_missing() {
        let mut listed = json!({"tools": [], "ttlMs": 5000});
        stateless_result("tools/list", &mut listed, &super::server_info());
        assert_eq!(listed["ttlMs"], 5000);
        assert_eq!(listed["cacheScope"], "private");
        assert_eq!(listed["resultType"], "complete");
        let mut called = json!({"content": []});
        let upstream = json!({"name": "upstream", "version": "2.0"});
        stateless_result("tools/call", &mut called, &upstream);
        assert!(called.get("ttlMs").is_none());
        assert_eq!(called["_meta"][META_SERVER_INFO], upstream);
    }
}
