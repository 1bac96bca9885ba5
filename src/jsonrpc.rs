//! The JSON-RPC 2.0 envelope: classifying an incoming value as a request,
//! notification or response, and building answers. It knows nothing of MCP
//! (method names, eras) and does no I/O.

use serde_json::{Map, Value};

/// A JSON-RPC error code. The protocol's own are associated constants;
/// MCP's live in `mcp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ErrorCode(pub i32);

impl ErrorCode {
    /// The body could not be parsed as JSON.
    pub const PARSE_ERROR: ErrorCode = ErrorCode(-32700);
    /// The JSON is not a valid JSON-RPC message.
    pub const INVALID_REQUEST: ErrorCode = ErrorCode(-32600);
    /// The method does not exist or is not offered.
    pub const METHOD_NOT_FOUND: ErrorCode = ErrorCode(-32601);
    /// The params are invalid for the method.
    pub const INVALID_PARAMS: ErrorCode = ErrorCode(-32602);
    /// Something failed inside the server.
    pub const INTERNAL_ERROR: ErrorCode = ErrorCode(-32603);

    /// The code of a JSON value, if it is an integer that fits.
    pub fn of(value: &Value) -> Option<ErrorCode> {
        value.as_i64().and_then(|code| i32::try_from(code).ok()).map(ErrorCode)
    }
}

/// A request id: a JSON string or number, with its JSON text as the caller
/// wrote it, so that it is echoed back exactly (`1e2` stays `1e2`, not
/// `100.0`; a 30-digit number keeps every digit).
#[derive(Clone, Debug, PartialEq)]
pub struct RequestId {
    value: Value,
    text: Box<str>,
}

impl RequestId {
    /// Accepts a string or a number; anything else (null included) is not an id.
    pub fn from_value(value: &Value) -> Option<RequestId> {
        match value {
            Value::String(_) | Value::Number(_) => {
                Some(RequestId { value: value.clone(), text: value.to_string().into() })
            }
            _ => None,
        }
    }

    pub fn as_value(&self) -> &Value {
        &self.value
    }

    /// The id as JSON text, as the caller wrote it.
    pub fn json_text(&self) -> &str {
        &self.text
    }

    /// The same id with the text `body` (the message it came in) gives it.
    /// Only a number parsed as floating point can read back differently
    /// (an integer or a string always prints as it was written), so only
    /// then is the body read again.
    pub fn as_written_in(mut self, body: &[u8]) -> RequestId {
        if !self.value.as_number().is_some_and(serde_json::Number::is_f64) {
            return self;
        }
        #[derive(serde::Deserialize)]
        struct Peek<'a> {
            #[serde(borrow)]
            id: Option<&'a serde_json::value::RawValue>,
        }
        if let Ok(Peek { id: Some(raw) }) = serde_json::from_slice::<Peek>(body) {
            self.text = raw.get().into();
        }
        self
    }
}

/// A JSON-RPC error object. Protocol errors are data, not Rust errors.
#[derive(Clone, Debug, PartialEq)]
pub struct ErrorObject {
    pub code: ErrorCode,
    pub message: String,
    pub data: Option<Value>,
}

impl ErrorObject {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ErrorObject {
        ErrorObject { code, message: message.into(), data: None }
    }

    pub fn with_data(mut self, data: Value) -> ErrorObject {
        self.data = Some(data);
        self
    }

    fn to_value(&self) -> Value {
        let mut error = Map::new();
        error.insert("code".into(), self.code.0.into());
        error.insert("message".into(), self.message.clone().into());
        if let Some(data) = &self.data {
            error.insert("data".into(), data.clone());
        }
        Value::Object(error)
    }
}

/// One JSON-RPC message, classified.
#[derive(Clone, Debug, PartialEq)]
pub enum Message {
    /// Has a method and an id: expects an answer.
    Request { id: RequestId, method: String, params: Option<Value> },
    /// Has a method and no id: gets no answer.
    Notification { method: String, params: Option<Value> },
    /// Has `result` or `error` and no method: an answer to a request the
    /// other side sent.
    Response { id: Option<RequestId>, body: Value },
}

impl Message {
    /// Classifies `value`. On failure returns the error to send back, with the
    /// id when one could be read.
    pub fn parse(value: Value) -> Result<Message, (Option<RequestId>, ErrorObject)> {
        let invalid = |id: Option<RequestId>, why: &str| {
            Err((id, ErrorObject::new(ErrorCode::INVALID_REQUEST, format!("Invalid request: {why}"))))
        };
        let mut object = match value {
            Value::Object(object) => object,
            other => {
                let why = if other.is_array() {
                    "batches are not supported; send one message per POST"
                } else {
                    "a JSON-RPC message must be a JSON object"
                };
                return invalid(None, why);
            }
        };
        let id = object.get("id").and_then(RequestId::from_value);
        if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return invalid(id, "\"jsonrpc\" must be \"2.0\"");
        }
        if object.get("params").is_some_and(|p| !p.is_object() && !p.is_array()) {
            return invalid(id, "\"params\" must be an object or an array");
        }
        let has_id = object.contains_key("id");
        match object.remove("method") {
            Some(Value::String(method)) => {
                let params = object.remove("params");
                match (has_id, id) {
                    (false, _) => Ok(Message::Notification { method, params }),
                    (true, Some(id)) => Ok(Message::Request { id, method, params }),
                    (true, None) => invalid(None, "\"id\" must be a string or a number"),
                }
            }
            Some(_) => invalid(id, "\"method\" must be a string"),
            None if object.contains_key("result") || object.contains_key("error") => {
                Ok(Message::Response { id, body: Value::Object(object) })
            }
            None => invalid(id, "no \"method\", \"result\" or \"error\""),
        }
    }
}

/// A success answer to the request with `id`, as JSON text.
pub fn result(id: &RequestId, result: &Value) -> String {
    format!(r#"{{"id":{},"jsonrpc":"2.0","result":{result}}}"#, id.json_text())
}

/// An error answer as JSON text; `id` is `null` when the request's id could
/// not be read.
pub fn error(id: Option<&RequestId>, error: &ErrorObject) -> String {
    format!(
        r#"{{"error":{},"id":{},"jsonrpc":"2.0"}}"#,
        error.to_value(),
        id.map_or("null", RequestId::json_text)
    )
}

/// The error code of a response message, if it is an error answer.
pub fn error_code(message: &Value) -> Option<ErrorCode> {
    ErrorCode::of(message.get("error")?.get("code")?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(text: &str) -> Result<Message, (Option<RequestId>, ErrorObject)> {
        Message::parse(serde_json::from_str(text).unwrap())
    }

    #[test]
    fn classifies_requests_notifications_and_responses() {
        let request = parse(r#"{"jsonrpc":"2.0","id":"a","method":"ping"}"#).unwrap();
        assert!(matches!(request, Message::Request { ref method, .. } if method == "ping"));
        let note = parse(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).unwrap();
        assert!(matches!(note, Message::Notification { .. }));
        let response = parse(r#"{"jsonrpc":"2.0","id":7,"result":{}}"#).unwrap();
        assert!(matches!(response, Message::Response { id: Some(_), .. }));
    }

    #[test]
    fn keeps_the_id_exactly() {
        for written in ["12.5", "1e2", "-0", "123456789012345678901234567890", "7", r#""r-1""#] {
            let body = format!(r#"{{"jsonrpc":"2.0","id":{written},"method":"x"}}"#);
            let Message::Request { id, .. } = parse(&body).unwrap() else { panic!("not a request") };
            let id = id.as_written_in(body.as_bytes());
            assert_eq!(id.json_text(), written);
            let answer = result(&id, &json!({}));
            assert!(answer.contains(&format!(r#""id":{written},"#)), "{answer}");
            assert_eq!(serde_json::from_str::<Value>(&answer).unwrap()["result"], json!({}));
        }
    }

    #[test]
    fn rejects_what_is_not_a_message_keeping_a_readable_id() {
        let (id, err) = parse(r#"{"jsonrpc":"1.0","id":3,"method":"x"}"#).unwrap_err();
        assert_eq!(id, RequestId::from_value(&json!(3)));
        assert_eq!(err.code, ErrorCode::INVALID_REQUEST);
        let (id, err) = parse(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#).unwrap_err();
        assert_eq!((id, err.code), (None, ErrorCode::INVALID_REQUEST));
        assert!(err.message.contains("batches"));
        let (_, err) = parse(r#"{"jsonrpc":"2.0","id":null,"method":"x"}"#).unwrap_err();
        assert_eq!(err.code, ErrorCode::INVALID_REQUEST);
        let (_, err) = parse(r#"{"jsonrpc":"2.0","id":1,"method":"x","params":3}"#).unwrap_err();
        assert_eq!(err.code, ErrorCode::INVALID_REQUEST);
        assert!(parse(r#""text""#).is_err());
    }

    #[test]
    fn error_answers_carry_null_when_no_id_was_read() {
        let answer: Value =
            serde_json::from_str(&error(None, &ErrorObject::new(ErrorCode::PARSE_ERROR, "Parse error")))
                .unwrap();
        assert_eq!(answer["id"], Value::Null);
        assert_eq!(error_code(&answer), Some(ErrorCode::PARSE_ERROR));
        let with_data = ErrorObject::new(ErrorCode::INVALID_PARAMS, "bad").with_data(json!({"uri": "x"}));
        let id = RequestId::from_value(&json!("r")).unwrap();
        let answer: Value = serde_json::from_str(&error(Some(&id), &with_data)).unwrap();
        assert_eq!(answer["error"]["data"]["uri"], "x");
    }
}
