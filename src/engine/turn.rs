//! A model's turn told in one line, for the run report's timeline: what
//! the model was asked last (the last message of the request) and what it
//! answered (text, or the tools it called). Read from the shapes of
//! OpenAI's Chat Completions and Responses and Anthropic's Messages, whole
//! or streamed, as far as they go; anything else is told as "(not read)".
//! Only the report reads these lines: replay never parses a model's answer.

use serde_json::Value;

use crate::model::LlmAnswer;
use crate::util::clip;

/// Bytes of a side of a turn the line shows at most.
const SHOWN: usize = 160;

/// `asked: ROLE: TEXT; answered: TEXT | tool calls NAME, NAME`.
pub fn told(request: &str, answer: Option<&LlmAnswer>) -> String {
    let asked = serde_json::from_str::<Value>(request).ok().and_then(|body| last_message(&body));
    let asked = asked.unwrap_or_else(|| "(not read)".into());
    let answered = match answer {
        None => "(nothing: a miss)".to_owned(),
        Some(answer) => answered(answer).unwrap_or_else(|| "(not read)".into()),
    };
    format!("asked {}; answered {}", clip(&asked, SHOWN), clip(&answered, SHOWN))
}

/// The last message of a request: Chat Completions' and Messages'
/// `messages`, the Responses API's `input`.
fn last_message(body: &Value) -> Option<String> {
    let last = match body.get("messages").or_else(|| body.get("input"))? {
        Value::Array(items) => items.last()?,
        Value::String(text) => return Some(format!("user: {text}")),
        _ => return None,
    };
    let role = last.get("role").or_else(|| last.get("type")).and_then(Value::as_str).unwrap_or("?");
    let content = last.get("content").or_else(|| last.get("output")).map(text_of).unwrap_or_default();
    Some(format!("{role}: {content}"))
}

/// The text of a content value: a string, or the text parts (and tool
/// results) of a list.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .map(|part| match part.get("text").or_else(|| part.get("content")) {
                Some(inner) => text_of(inner),
                None => part.get("type").and_then(Value::as_str).unwrap_or("").to_owned(),
            })
            .collect::<Vec<_>>()
            .join(" "),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// What an answer said: its text, or the tools it called.
fn answered(answer: &LlmAnswer) -> Option<String> {
    let mut said = Said::default();
    match answer {
        LlmAnswer::Whole(body) => said.whole(&serde_json::from_str(body).ok()?),
        LlmAnswer::Events(events) => {
            for event in events {
                for data in event.text.lines().filter_map(|line| line.strip_prefix("data:")) {
                    if let Ok(chunk) = serde_json::from_str::<Value>(data.trim_start()) {
                        said.chunk(&chunk);
                    }
                }
            }
        }
    }
    said.line()
}

/// What an answer said so far.
#[derive(Default)]
struct Said {
    text: String,
    tools: Vec<String>,
}

impl Said {
    /// A whole answer: Chat Completions' `choices`, Messages' `content`,
    /// the Responses API's `output`.
    fn whole(&mut self, body: &Value) {
        if let Some(message) = body.pointer("/choices/0/message") {
            self.text.push_str(message.get("content").and_then(Value::as_str).unwrap_or_default());
            self.tools_of(message.get("tool_calls"), "/function/name");
        }
        for block in
            body.get("content").or_else(|| body.get("output")).and_then(Value::as_array).into_iter().flatten()
        {
            match block.get("type").and_then(Value::as_str) {
                Some("tool_use" | "function_call") => self.tool(block.get("name")),
                _ => self.text.push_str(&text_of(
                    block.get("text").or_else(|| block.get("content")).unwrap_or(&Value::Null),
                )),
            }
        }
    }

    /// One chunk of a stream: Chat Completions' deltas, Messages' and the
    /// Responses API's events.
    fn chunk(&mut self, chunk: &Value) {
        if let Some(delta) = chunk.pointer("/choices/0/delta") {
            self.text.push_str(delta.get("content").and_then(Value::as_str).unwrap_or_default());
            self.tools_of(delta.get("tool_calls"), "/function/name");
        }
        match chunk.get("type").and_then(Value::as_str) {
            Some("content_block_delta") => {
                self.text.push_str(chunk.pointer("/delta/text").and_then(Value::as_str).unwrap_or_default());
            }
            Some("content_block_start")
                if chunk.pointer("/content_block/type").and_then(Value::as_str) == Some("tool_use") =>
            {
                self.tool(chunk.pointer("/content_block/name"));
            }
            Some("response.output_text.delta") => {
                self.text.push_str(chunk.get("delta").and_then(Value::as_str).unwrap_or_default());
            }
            Some("response.output_item.added")
                if chunk.pointer("/item/type").and_then(Value::as_str) == Some("function_call") =>
            {
                self.tool(chunk.pointer("/item/name"));
            }
            _ => {}
        }
    }

    fn tools_of(&mut self, calls: Option<&Value>, name_at: &str) {
        for call in calls.and_then(Value::as_array).into_iter().flatten() {
            self.tool(call.pointer(name_at));
        }
    }

    fn tool(&mut self, name: Option<&Value>) {
        if let Some(name) = name.and_then(Value::as_str) {
            self.tools.push(name.to_owned());
        }
    }

    fn line(self) -> Option<String> {
        match (self.tools.is_empty(), self.text.is_empty()) {
            (false, _) => Some(format!("tool calls {}", self.tools.join(", "))),
            (true, false) => Some(self.text),
            (true, true) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::LlmEvent;

    #[test]
    fn a_turn_tells_the_last_message_and_the_answer() {
        let request =
            r#"{"messages":[{"role":"system","content":"Be brief."},{"role":"tool","content":"[1,2]"}]}"#;
        let called = LlmAnswer::Whole(
            r#"{"choices":[{"message":{"content":null,"tool_calls":[{"function":{"name":"send_invite"}}]}}]}"#.into(),
        );
        assert_eq!(told(request, Some(&called)), "asked tool: [1,2]; answered tool calls send_invite");
        let streamed = LlmAnswer::Events(
            [
                r#"data: {"choices":[{"delta":{"content":"Invited "}}]}"#,
                r#"data: {"choices":[{"delta":{"content":"Bob."}}]}"#,
                "data: [DONE]",
            ]
            .map(|text| LlmEvent { offset_ms: 0, text: text.into() })
            .to_vec(),
        );
        assert_eq!(told(request, Some(&streamed)), "asked tool: [1,2]; answered Invited Bob.");
        let anthropic = LlmAnswer::Whole(r#"{"content":[{"type":"text","text":"Hi."}]}"#.into());
        let asked = r#"{"messages":[{"role":"user","content":[{"type":"text","text":"hello"}]}]}"#;
        assert_eq!(told(asked, Some(&anthropic)), "asked user: hello; answered Hi.");
        assert_eq!(told("not json", None), "asked (not read); answered (nothing: a miss)");
    }
}
