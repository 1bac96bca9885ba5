//! The `text/event-stream` codec (WHATWG server-sent events), pure: no I/O.
//! MCP sends each JSON-RPC message as one `message` event.

/// One `event: message` event carrying `data`. Multi-line data becomes one
/// `data:` line per line, as the format requires.
pub fn message_event(data: &str) -> String {
    let mut event = String::with_capacity(data.len() + 32);
    event.push_str("event: message\n");
    for line in data.split('\n') {
        event.push_str("data: ");
        event.push_str(line.strip_suffix('\r').unwrap_or(line));
        event.push('\n');
    }
    event.push('\n');
    event
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_data_line_per_line() {
        assert_eq!(message_event("{}"), "event: message\ndata: {}\n\n");
        assert_eq!(message_event("a\r\nb"), "event: message\ndata: a\ndata: b\n\n");
    }
}
