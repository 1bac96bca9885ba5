//! The mock: what a small spec-compliant MCP server with nothing in it
//! answers. Replay falls back to it where no recording answers (DESIGN.md,
//! replay contract); the capabilities advertised by the synthesized
//! `initialize` and `server/discover` are exactly the methods answered here.

use serde_json::{Value, json};

use super::{RESOURCE_NOT_FOUND, STATELESS_VERSIONS, is_removed, negotiate, server_info};
use crate::jsonrpc::{ErrorCode, ErrorObject};
use crate::model::Era;

/// The handshake era mock answers lists, tool/prompt lookups, resource reads
/// and subscriptions, `logging/setLevel` and completions.
fn handshake_capabilities() -> Value {
    json!({
        "tools": {},
        "prompts": {},
        "resources": {"subscribe": true},
        "logging": {},
        "completions": {},
    })
}

/// The stateless era removed subscribe and setLevel; logging is per request.
fn stateless_capabilities() -> Value {
    json!({"tools": {}, "prompts": {}, "resources": {}, "completions": {}})
}

/// The synthesized `initialize` result for a client that asked for `requested`.
pub fn initialize(requested: Option<&str>) -> Value {
    json!({
        "protocolVersion": negotiate(requested),
        "capabilities": handshake_capabilities(),
        "serverInfo": server_info(),
    })
}

/// The synthesized `server/discover` result.
pub fn discover() -> Value {
    json!({
        "resultType": "complete",
        "supportedVersions": STATELESS_VERSIONS,
        "capabilities": stateless_capabilities(),
        "ttlMs": 0,
        "cacheScope": "private",
        "_meta": {super::META_SERVER_INFO: server_info()},
    })
}

/// The mock's answer to a request of `method` in `era`.
pub fn answer(era: Era, method: &str, params: Option<&Value>) -> Result<Value, ErrorObject> {
    let param = |key: &str| params.and_then(|p| p.get(key)).and_then(Value::as_str).unwrap_or_default();
    if is_removed(era, method) {
        return Err(method_not_found(method));
    }
    match (era, method) {
        (Era::Handshake, "initialize") => {
            Ok(initialize(params.and_then(|p| p.get("protocolVersion")).and_then(Value::as_str)))
        }
        (Era::Stateless, "server/discover") => Ok(discover()),
        (Era::Handshake, "ping" | "logging/setLevel" | "resources/subscribe" | "resources/unsubscribe") => {
            Ok(json!({}))
        }
        (_, "tools/list") => Ok(json!({"tools": []})),
        (_, "prompts/list") => Ok(json!({"prompts": []})),
        (_, "resources/list") => Ok(json!({"resources": []})),
        (_, "resources/templates/list") => Ok(json!({"resourceTemplates": []})),
        (_, "completion/complete") => Ok(json!({"completion": {"values": [], "total": 0, "hasMore": false}})),
        (_, "tools/call") => Err(unknown_tool(param("name"))),
        (_, "prompts/get") => {
            Err(ErrorObject::new(ErrorCode::INVALID_PARAMS, format!("Unknown prompt: {}", param("name"))))
        }
        (_, "resources/read") => Err(resource_not_found(era, param("uri"))),
        _ => Err(method_not_found(method)),
    }
}

fn unknown_tool(name: &str) -> ErrorObject {
    ErrorObject::new(ErrorCode::INVALID_PARAMS, format!("Unknown tool: {name}"))
}

fn method_not_found(method: &str) -> ErrorObject {
    ErrorObject::new(ErrorCode::METHOD_NOT_FOUND, format!("Method not found: {method}"))
}

/// `-32002` in the handshake era, `-32602` in the stateless era; both carry the uri.
fn resource_not_found(era: Era, uri: &str) -> ErrorObject {
    let code = match era {
        Era::Handshake => RESOURCE_NOT_FOUND,
        Era::Stateless => ErrorCode::INVALID_PARAMS,
    };
    ErrorObject::new(code, format!("Resource not found: {uri}")).with_data(json!({"uri": uri}))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every capability the mock advertises is backed by a method it answers
    /// with a result, not `-32601`.
    #[test]
    fn advertised_capabilities_are_answered() {
        let methods = |capability: &str| match capability {
            "tools" => vec!["tools/list"],
            "prompts" => vec!["prompts/list"],
            "resources" => vec!["resources/list", "resources/templates/list"],
            "logging" => vec!["logging/setLevel"],
            "completions" => vec!["completion/complete"],
            other => panic!("capability {other} has no method listed"),
        };
        for (era, capabilities) in [
            (Era::Handshake, initialize(None)["capabilities"].clone()),
            (Era::Stateless, discover()["capabilities"].clone()),
        ] {
            for capability in capabilities.as_object().unwrap().keys() {
                for method in methods(capability) {
                    assert!(answer(era, method, None).is_ok(), "{era:?} {method}");
                }
            }
        }
        assert!(answer(Era::Handshake, "resources/subscribe", Some(&json!({"uri": "a"}))).is_ok());
    }

    #[test]
    fn errors_follow_the_table() {
        let code = |era, method, params: Value| answer(era, method, Some(&params)).unwrap_err().code.0;
        assert_eq!(code(Era::Handshake, "tools/call", json!({"name": "x"})), -32602);
        assert_eq!(code(Era::Handshake, "resources/read", json!({"uri": "a:b"})), -32002);
        assert_eq!(code(Era::Stateless, "resources/read", json!({"uri": "a:b"})), -32602);
        assert_eq!(code(Era::Stateless, "ping", json!({})), -32601);
        assert_eq!(code(Era::Stateless, "initialize", json!({})), -32601);
        assert_eq!(code(Era::Handshake, "server/discover", json!({})), -32601);
        assert_eq!(code(Era::Handshake, "sampling/whatever", json!({})), -32601);
    }
}
