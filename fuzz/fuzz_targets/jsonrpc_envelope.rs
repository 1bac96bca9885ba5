//! The JSON-RPC envelope reader: any bytes are a message or a clear error,
//! and a request's id comes back as it was written.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_tape::jsonrpc::{Message, Unreadable, error, result};

fuzz_target!(|data: &[u8]| {
    match Message::from_slice(data) {
        Ok(Message::Request { id, .. }) => {
            // The id is echoed exactly: the answer holds its text, and the answer is JSON.
            let answer = result(&id, &serde_json::json!({}));
            assert!(answer.contains(id.json_text()));
            assert!(serde_json::from_str::<serde_json::Value>(&answer).is_ok(), "{answer}");
        }
        Ok(_) => {}
        Err(Unreadable::NotJsonRpc(id, object)) => {
            let answer = error(id.as_ref(), &object);
            assert!(serde_json::from_str::<serde_json::Value>(&answer).is_ok(), "{answer}");
        }
        Err(Unreadable::NotJson(_)) => {}
    }
});
