//! The stateless era's checks of a live request (envelope, routing headers,
//! `Mcp-Param-*` headers against a tool's schema): any input is accepted or
//! refused with an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_tape::mcp::{RoutingHeaders, check_param_headers, check_stateless};
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(Value::Array(parts)) = serde_json::from_slice::<Value>(data) else { return };
    let text = |i: usize| parts.get(i).and_then(Value::as_str);
    let method = text(0).unwrap_or_default();
    let params = parts.get(1);
    let headers = RoutingHeaders { protocol_version: text(2), method: text(3), name: text(4) };
    let _ = check_stateless(method, params, Some(&headers));
    let _ = check_stateless(method, params, None);
    let sent: Vec<(String, String)> = parts
        .get(6)
        .and_then(Value::as_object)
        .map(|o| {
            o.iter().map(|(k, v)| (k.to_lowercase(), v.as_str().unwrap_or_default().to_owned())).collect()
        })
        .unwrap_or_default();
    if let Some(schema) = parts.get(5) {
        let _ = check_param_headers(schema, params.and_then(|p| p.get("arguments")), &sent);
    }
});
