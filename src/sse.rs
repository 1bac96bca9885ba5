//! The `text/event-stream` codec (WHATWG server-sent events), pure: no I/O.
//! MCP sends each JSON-RPC message as one `message` event. [`message_event`]
//! encodes one; [`Parser`] splits a byte stream into events, keeping each
//! event's raw bytes so a proxy can relay exactly what it received.

use bytes::{Bytes, BytesMut};

use crate::limits::MAX_SSE_EVENT_BYTES;

/// One `event: message` event carrying `data`. Multi-line data becomes one
/// `data:` line per line, as the format requires.
pub fn message_event(data: &str) -> String {
    let mut event = String::with_capacity(data.len() + 32);
    push_message_event(&mut event, None, data);
    event
}

/// [`message_event`] appended to `out`, with an `id:` when given (ids are
/// ours: no line break in them).
pub fn push_message_event(out: &mut String, id: Option<&str>, data: &str) {
    out.push_str("event: message\n");
    if let Some(id) = id {
        out.push_str("id: ");
        out.push_str(id);
        out.push('\n');
    }
    // One `data:` line per line of `data` (memchr: a recorded answer is read through once).
    let mut start = 0;
    for end in memchr::memchr_iter(b'\n', data.as_bytes()).chain([data.len()]) {
        let line = &data[start..end];
        out.push_str("data: ");
        out.push_str(line.strip_suffix('\r').unwrap_or(line));
        out.push('\n');
        start = end + 1;
    }
    out.push('\n');
}

/// A priming event (SEP-1699): an id and empty data, so the client has an
/// event id to resume from; with `retry`, how long (ms) a client waits
/// before it reconnects.
pub fn priming_event(id: &str, retry_ms: Option<u64>) -> String {
    match retry_ms {
        Some(retry) => format!("id: {id}\nretry: {retry}\ndata: \n\n"),
        None => format!("id: {id}\ndata: \n\n"),
    }
}

/// One parsed event.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Event {
    /// The `event:` field, if any.
    pub name: Option<String>,
    /// The `data:` lines joined with `\n`; empty for priming and keep-alive events.
    pub data: String,
    /// The `id:` field, if any.
    pub id: Option<String>,
    /// The `retry:` field (milliseconds), if any and a number.
    pub retry: Option<u64>,
}

/// An event grew past [`MAX_SSE_EVENT_BYTES`] without ending.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Overflow;

/// Splits a stream of bytes into events as they complete.
#[derive(Debug, Default)]
pub struct Parser {
    buffer: BytesMut,
    /// How far `buffer` was scanned without finding an event's end.
    scanned: usize,
    /// Where the line being scanned began.
    line_start: usize,
}

impl Parser {
    pub fn push(&mut self, chunk: &[u8]) {
        self.buffer.extend_from_slice(chunk);
    }

    /// The next complete event and the raw bytes it spanned (its blank line
    /// included), or `None` until more bytes arrive.
    ///
    /// # Errors
    ///
    /// [`Overflow`] when the unfinished event is larger than allowed.
    pub fn next_event(&mut self) -> Result<Option<(Bytes, Event)>, Overflow> {
        let Some(end) = self.find_event_end() else {
            return if self.buffer.len() > MAX_SSE_EVENT_BYTES { Err(Overflow) } else { Ok(None) };
        };
        (self.scanned, self.line_start) = (0, 0);
        let raw = self.buffer.split_to(end).freeze();
        Ok(Some((raw.clone(), parse_event(&raw))))
    }

    /// Whatever bytes are left over (an unfinished event), leaving the parser empty.
    pub fn take_rest(&mut self) -> Bytes {
        (self.scanned, self.line_start) = (0, 0);
        self.buffer.split().freeze()
    }

    /// The offset just past the blank line that ends the first event.
    fn find_event_end(&mut self) -> Option<usize> {
        let bytes = &self.buffer[..];
        let (mut at, mut line_start) = (self.scanned, self.line_start);
        while at < bytes.len() {
            let end = match bytes[at] {
                b'\n' => at + 1,
                b'\r' if at + 1 < bytes.len() => at + 1 + usize::from(bytes[at + 1] == b'\n'),
                b'\r' => break, // need the next byte to know the line ending
                _ => {
                    at += 1;
                    continue;
                }
            };
            if at == line_start {
                return Some(end);
            }
            line_start = end;
            at = end;
        }
        (self.scanned, self.line_start) = (at, line_start);
        None
    }
}

fn parse_event(raw: &[u8]) -> Event {
    let text = String::from_utf8_lossy(raw);
    let mut event = Event::default();
    let mut data: Option<String> = None;
    for line in text.split(['\n', '\r']).filter(|l| !l.is_empty() && !l.starts_with(':')) {
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "data" => {
                let data = data.get_or_insert_with(String::new);
                data.push_str(value);
                data.push('\n');
            }
            "event" => event.name = Some(value.to_owned()),
            "id" => event.id = Some(value.to_owned()),
            "retry" => event.retry = value.parse().ok().or(event.retry),
            _ => {}
        }
    }
    // Each data line added a newline; the last one is not part of the data.
    event.data = data
        .map(|mut d| {
            d.pop();
            d
        })
        .unwrap_or_default();
    event
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The lines found with memchr are those a plain split finds.
        #[test]
        fn data_lines_are_those_a_split_finds(data in "[a-z\r\n{}\"é]{0,40}", id in proptest::option::of("[0-9-]{1,8}")) {
            let mut plain = String::from("event: message\n");
            if let Some(id) = &id {
                plain.push_str(&format!("id: {id}\n"));
            }
            for line in data.split('\n') {
                plain.push_str(&format!("data: {}\n", line.strip_suffix('\r').unwrap_or(line)));
            }
            plain.push('\n');
            let mut found = String::new();
            push_message_event(&mut found, id.as_deref(), &data);
            proptest::prop_assert_eq!(found, plain);
        }
    }

    #[test]
    fn one_data_line_per_line() {
        assert_eq!(message_event("{}"), "event: message\ndata: {}\n\n");
        assert_eq!(message_event("a\r\nb"), "event: message\ndata: a\ndata: b\n\n");
    }

    fn events(chunks: &[&[u8]]) -> Vec<(Bytes, Event)> {
        let mut parser = Parser::default();
        let mut found = Vec::new();
        for chunk in chunks {
            parser.push(chunk);
            while let Some(event) = parser.next_event().unwrap() {
                found.push(event);
            }
        }
        found
    }

    #[test]
    fn parses_fields_and_keeps_raw_bytes() {
        let stream = b"id: 7\nevent: message\ndata: {\"a\":\ndata: 1}\n\n: keep-alive\n\ndata:x\n\n";
        let found = events(&[stream]);
        assert_eq!(found.len(), 3);
        assert_eq!(
            found[0].1,
            Event {
                name: Some("message".into()),
                data: "{\"a\":\n1}".into(),
                id: Some("7".into()),
                retry: None
            }
        );
        assert_eq!(&found[0].0[..], b"id: 7\nevent: message\ndata: {\"a\":\ndata: 1}\n\n");
        assert_eq!(found[1].1.data, "");
        assert_eq!(found[2].1.data, "x");
        let raw: Vec<u8> = found.iter().flat_map(|(raw, _)| raw.to_vec()).collect();
        assert_eq!(raw, stream, "the raw bytes add up to the stream");
    }

    #[test]
    fn priming_events_and_ids_round_trip() {
        let mut stream = priming_event("3-0", Some(500));
        push_message_event(&mut stream, Some("3-1"), "{}");
        let found = events(&[stream.as_bytes()]);
        assert_eq!(found.len(), 2);
        assert_eq!(
            (found[0].1.id.as_deref(), found[0].1.retry, found[0].1.data.as_str()),
            (Some("3-0"), Some(500), "")
        );
        assert_eq!((found[1].1.id.as_deref(), found[1].1.data.as_str()), (Some("3-1"), "{}"));
        assert_eq!(
            events(&[b"retry: soon\ndata: x\n\n"])[0].1.retry,
            None,
            "a retry that is no number is ignored"
        );
    }

    #[test]
    fn any_line_ending_and_any_split_point() {
        let stream: &[u8] = b"data: one\r\n\r\ndata: two\r\rdata: three\n\r\n";
        for split in 0..stream.len() {
            let found = events(&[&stream[..split], &stream[split..]]);
            let data: Vec<&str> = found.iter().map(|(_, e)| e.data.as_str()).collect();
            assert_eq!(data, ["one", "two", "three"], "split at {split}");
        }
        let bytewise: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(events(&bytewise).len(), 3);
    }

    #[test]
    fn unfinished_events_wait_and_oversized_ones_overflow() {
        let mut parser = Parser::default();
        parser.push(b"data: partial");
        assert_eq!(parser.next_event(), Ok(None));
        assert_eq!(&parser.take_rest()[..], b"data: partial");
        parser.push(&vec![b'x'; MAX_SSE_EVENT_BYTES + 1]);
        assert_eq!(parser.next_event(), Err(Overflow));
    }
}
