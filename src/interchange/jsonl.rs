//! Cassettes as canonical JSON Lines, for review in a pull request: first
//! a line for each key the recordings were pseudonymized with
//! (`"pseudonymized": {"key": FINGERPRINT}`), then one exchange per line, keys sorted (but each message's `body`, which is its
//! sender's text, as replay sends it), in recorded order, then one line per
//! Agent 365 service answer (`"service": ROUTE`), then one per exchange
//! with the agent's model (`"model": NAME`, its bodies as the text they
//! were written as), then one per answer template (`"toolTemplate": TOOL`,
//! written by hand or imported from Agent 365 mocks). Import reads the same form
//! back (normalizing exchanges again, which changes nothing for exported
//! lines). When an exchange was recorded and each message's offset are
//! written only when asked for ([`Timings::Kept`]): two recordings of the
//! same answers then export alike, and a review diff shows only what the
//! server said differently.

use std::borrow::Cow;
use std::io::{BufRead, Read, Write};

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::cassette::store::Cassette;
use crate::error::Error;
use crate::limits::MAX_IMPORT_LINE_BYTES;
use crate::model::{
    AnswerTemplate, Aside, Channel, Direction, Era, Exchange, LlmAnswer, LlmEvent, LlmExchange, Provenance,
    RawExchange, RecordedMessage, ServiceAnswer, ServiceRoute, Status, StreamShape, TemplateFailure,
    canonical_json,
};
use crate::normalize::Rules;

/// Whether an export writes when each exchange was recorded and when each
/// message came (`recordedAt`, `offsetMs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timings {
    /// Left out: a line says only what was said (the default, for review).
    Left,
    /// Written, for an import that keeps them (`--pace` replays by them).
    Kept,
}

/// Writes every exchange, service answer and template of `cassette` as one
/// line each, reading one exchange at a time ([`Cassette::each_exchange`]).
///
/// # Errors
///
/// Write failures of `out`; a cassette that cannot be read (the error's
/// inner error is the [`Error`] naming it).
pub fn export(cassette: &Cassette, timings: Timings, out: &mut (impl Write + ?Sized)) -> std::io::Result<()> {
    for key in cassette.pseudonym_keys().map_err(std::io::Error::other)? {
        writeln!(out, "{}", canonical_json(&json!({"pseudonymized": {"key": key}})))?;
    }
    cassette.each_exchange(|exchange| write_exchange(exchange, timings, out))?;
    for answer in &cassette.service_answers().map_err(std::io::Error::other)? {
        let mut line = json!({
            "service": answer.route.as_str(),
            "upstream": answer.upstream,
            "status": answer.status.as_u16(),
            "contentType": answer.content_type,
        });
        match serde_json::from_str::<Value>(&answer.body) {
            Ok(body) => line["body"] = body,
            Err(_) => line["bodyText"] = answer.body.clone().into(),
        }
        writeln!(out, "{}", canonical_json(&line))?;
    }
    for exchange in &cassette.llm_exchanges().map_err(std::io::Error::other)? {
        writeln!(out, "{}", canonical_json(&llm_line(exchange, timings)))?;
    }
    for template in &cassette.templates().map_err(std::io::Error::other)? {
        let mut line = json!({
            "toolTemplate": template.tool,
            "server": template.server,
            "description": template.description,
            "inputSchema": template.input_schema,
            "text": template.text,
            "delayMs": template.delay_ms,
        });
        if let Some(failure) = &template.failure {
            line["errorRate"] = failure.rate.into();
            line["errorSeed"] = failure.seed.into();
            if let Some(status) = failure.status {
                line["errorStatus"] = status.into();
            }
        }
        writeln!(out, "{}", canonical_json(&line))?;
    }
    Ok(())
}

/// An exchange with the agent's model as one line: its bodies as the text
/// they were written as (`body`, or a stream's `events`), with
/// `recordedAt` and each event's `offsetsMs` when timings are kept.
fn llm_line(exchange: &LlmExchange, timings: Timings) -> Value {
    let mut line = json!({
        "model": exchange.model,
        "method": exchange.method,
        "target": exchange.target,
        "request": exchange.request,
        "status": exchange.status.as_u16(),
        "contentType": exchange.content_type,
    });
    match &exchange.answer {
        LlmAnswer::Whole(body) => line["body"] = body.as_str().into(),
        LlmAnswer::Events(events) => {
            line["events"] = events.iter().map(|event| Value::from(event.text.as_str())).collect();
            if timings == Timings::Kept {
                line["offsetsMs"] = events.iter().map(|event| Value::from(event.offset_ms)).collect();
            }
        }
    }
    if let (Timings::Kept, Some(at)) = (timings, exchange.recorded_at) {
        line["recordedAt"] = at.into();
    }
    line
}

/// A `"model"` line, as [`llm_line`] writes it.
fn parse_llm_line(value: &Value) -> Result<LlmExchange, String> {
    let text = |key: &str| value.get(key).and_then(Value::as_str).ok_or(format!("{key:?} must be a string"));
    let answer = match (value.get("body"), value.get("events")) {
        (Some(Value::String(body)), None) => LlmAnswer::Whole(body.clone()),
        (None, Some(Value::Array(events))) => {
            let offsets = value.get("offsetsMs").and_then(Value::as_array);
            let events = events
                .iter()
                .enumerate()
                .map(|(n, event)| {
                    let text = event.as_str().ok_or("each of \"events\" must be a string")?.to_owned();
                    let offset_ms = match offsets {
                        None => 0,
                        Some(offsets) => offsets
                            .get(n)
                            .and_then(Value::as_u64)
                            .ok_or("\"offsetsMs\" must hold a count of milliseconds for each event")?,
                    };
                    Ok(LlmEvent { offset_ms, text })
                })
                .collect::<Result<_, String>>()?;
            LlmAnswer::Events(events)
        }
        _ => return Err("a model exchange needs either \"body\" (text) or \"events\" (texts)".into()),
    };
    let recorded_at = match value.get("recordedAt") {
        None => None,
        Some(at) => Some(at.as_i64().ok_or("\"recordedAt\" must be whole seconds since 1970")?),
    };
    Ok(LlmExchange {
        model: text("model")?.to_owned(),
        method: text("method")?.to_owned(),
        target: text("target")?.to_owned(),
        request: text("request")?.to_owned(),
        status: status(value)?,
        content_type: text("contentType")?.to_owned(),
        answer,
        recorded_at,
        source: None,
    })
}

/// One member of an exchange's line.
enum Member<'a> {
    Value(Cow<'a, Value>),
    /// Written message by message, so that a long stream is never held
    /// twice (as a line's value, then as its text).
    Messages(&'a [RecordedMessage]),
    Asides(&'a [Aside]),
}

/// `exchange` as one line: members in key order (as canonical JSON puts
/// them), each message's body as its sender wrote it.
fn write_exchange(
    exchange: &Exchange,
    timings: Timings,
    out: &mut (impl Write + ?Sized),
) -> std::io::Result<()> {
    let value = |v: Value| Member::Value(Cow::Owned(v));
    let mut members = vec![
        ("server", value(exchange.server.as_str().into())),
        ("era", value(exchange.era.as_str().into())),
        ("protocolVersion", value(exchange.protocol_version.as_str().into())),
        ("request", Member::Value(Cow::Borrowed(&exchange.request))),
        ("status", value(exchange.status.as_u16().into())),
        ("contentType", value(exchange.content_type.as_str().into())),
        ("messages", Member::Messages(&exchange.messages)),
    ];
    if !exchange.asides.is_empty() {
        members.push(("asides", Member::Asides(&exchange.asides)));
    }
    if exchange.stream != StreamShape::default() {
        members.push(("stream", value(stream_shape(&exchange.stream))));
    }
    let known = &exchange.provenance;
    if let Some(at) = known.recorded_at.filter(|_| timings == Timings::Kept) {
        members.push(("recordedAt", value(at.into())));
    }
    if let Some(upstream) = &known.upstream {
        members.push(("recordedFrom", value(upstream.as_str().into())));
    }
    if let Some(recorder) = &known.recorder {
        members.push(("recordedBy", value(recorder.as_str().into())));
    }
    if known.keys_sorted {
        members.push(("keysSorted", value(true.into())));
    }
    members.sort_unstable_by_key(|(key, _)| *key);
    out.write_all(b"{")?;
    for (i, (key, member)) in members.into_iter().enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        write!(out, "\"{key}\":")?;
        match member {
            Member::Value(value) => out.write_all(canonical_json(&value).as_bytes())?,
            Member::Messages(messages) => {
                out.write_all(b"[")?;
                for (i, message) in messages.iter().enumerate() {
                    if i > 0 {
                        out.write_all(b",")?;
                    }
                    // {"body":…,"direction":…,"offsetMs":…}: the keys in order.
                    out.write_all(b"{\"body\":")?;
                    out.write_all(message.as_sent().as_bytes())?;
                    write!(out, ",\"direction\":\"{}\"", message.direction.as_str())?;
                    write_offset(message, timings, out)?;
                    out.write_all(b"}")?;
                }
                out.write_all(b"]")?;
            }
            Member::Asides(asides) => {
                out.write_all(b"[")?;
                for (i, aside) in asides.iter().enumerate() {
                    if i > 0 {
                        out.write_all(b",")?;
                    }
                    // {"after":…,"body":…,"channel":…,"direction":…,"inFlight":…,"offsetMs":…}: the keys in order.
                    out.write_all(b"{")?;
                    if let Some(after) = &aside.after {
                        write!(out, "\"after\":{},", Value::from(after.as_str()))?;
                    }
                    out.write_all(b"\"body\":")?;
                    out.write_all(aside.message.as_sent().as_bytes())?;
                    write!(
                        out,
                        ",\"channel\":\"{}\",\"direction\":\"{}\"",
                        aside.channel.as_str(),
                        aside.message.direction.as_str()
                    )?;
                    if aside.in_flight {
                        out.write_all(b",\"inFlight\":true")?;
                    }
                    write_offset(&aside.message, timings, out)?;
                    out.write_all(b"}")?;
                }
                out.write_all(b"]")?;
            }
        }
    }
    out.write_all(b"}\n")
}

/// A message's `,"offsetMs":N`, when timings are kept.
fn write_offset(
    message: &RecordedMessage,
    timings: Timings,
    out: &mut (impl Write + ?Sized),
) -> std::io::Result<()> {
    match timings {
        Timings::Kept => write!(out, ",\"offsetMs\":{}", message.offset_ms),
        Timings::Left => Ok(()),
    }
}

/// An exchange's asides as a line's `"asides"`.
pub(crate) fn asides_line(asides: &[Aside]) -> Value {
    let asides: Vec<Value> = asides
        .iter()
        .map(|a| {
            let mut aside = json!({
                "channel": a.channel.as_str(),
                "offsetMs": a.message.offset_ms,
                "direction": a.message.direction.as_str(),
                "body": a.message.body,
            });
            if let Some(after) = &a.after {
                aside["after"] = after.as_str().into();
            }
            if a.in_flight {
                aside["inFlight"] = true.into();
            }
            aside
        })
        .collect();
    asides.into()
}

/// An exchange's [`StreamShape`] as a line's `"stream"`: `primed`, and
/// `retryMs` and `closedAfter` when known.
pub(crate) fn stream_shape(shape: &StreamShape) -> Value {
    let mut stream = json!({"primed": shape.primed});
    if let Some(retry) = shape.retry_ms {
        stream["retryMs"] = retry.into();
    }
    if let Some(closed) = shape.closed_after {
        stream["closedAfter"] = closed.into();
    }
    stream
}

/// A line's optional `"stream"` (see [`stream_shape`]).
pub(crate) fn read_stream_shape(value: &Value) -> Result<StreamShape, String> {
    let Some(stream) = value.get("stream") else { return Ok(StreamShape::default()) };
    let primed = match stream.get("primed") {
        None => false,
        Some(primed) => primed.as_bool().ok_or("\"stream\".\"primed\" must be true or false")?,
    };
    let retry_ms = match stream.get("retryMs") {
        None => None,
        Some(retry) => Some(retry.as_u64().ok_or("\"stream\".\"retryMs\" must be whole milliseconds")?),
    };
    let closed_after = match stream.get("closedAfter") {
        None => None,
        Some(closed) => Some(
            closed
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or("\"stream\".\"closedAfter\" must be a count of messages")?,
        ),
    };
    Ok(StreamShape { primed, retry_ms, closed_after })
}

/// Reads JSON Lines and writes each exchange into `cassette`, line by line
/// inside one transaction that commits only after the last line: bad input
/// writes nothing, and the file is never held whole.
///
/// # Errors
///
/// The first bad line (by number and reason; one over [`MAX_IMPORT_LINE_BYTES`]
/// among them), or a store failure.
pub fn import(mut input: impl BufRead, cassette: &mut Cassette) -> Result<usize, Error> {
    let rules = Rules::default();
    cassette.import(|importing| {
        let mut imported = 0;
        let mut buffer = Vec::new();
        for number in 1.. {
            let bad = |why: String| Error::Config(format!("line {number}: {why}"));
            buffer.clear();
            // One byte past the bound tells a line over it from one that ends there.
            let mut bounded = (&mut input).take(MAX_IMPORT_LINE_BYTES as u64 + 2);
            let read = bounded.read_until(b'\n', &mut buffer).map_err(|e| bad(e.to_string()))?;
            if read == 0 {
                break;
            }
            let content = buffer.strip_suffix(b"\n").unwrap_or(&buffer);
            let content = content.strip_suffix(b"\r").unwrap_or(content);
            if content.len() > MAX_IMPORT_LINE_BYTES {
                return Err(bad(format!("longer than {MAX_IMPORT_LINE_BYTES} bytes; not read further")));
            }
            let line = std::str::from_utf8(content).map_err(|e| bad(format!("not UTF-8: {e}")))?;
            if line.trim().is_empty() {
                continue;
            }
            let value: Value = serde_json::from_str(line).map_err(|e| bad(format!("not JSON: {e}")))?;
            if let Some(pseudonymized) = value.get("pseudonymized") {
                let key = pseudonymized["key"]
                    .as_str()
                    .filter(|key| key.len() == 8 && key.bytes().all(|b| b.is_ascii_hexdigit()));
                importing.pseudonym_key(
                    key.ok_or_else(|| bad("pseudonymized: expected {\"key\": 8 hex digits}".into()))?,
                )?;
                continue;
            }
            match (value.get("service"), value.get("toolTemplate"), value.get("model")) {
                (Some(_), _, _) => importing.service(&parse_service_line(&value).map_err(bad)?)?,
                (None, Some(_), _) => importing.template(&parse_template_line(&value).map_err(bad)?)?,
                (None, None, Some(_)) => importing.llm(&parse_llm_line(&value).map_err(bad)?)?,
                (None, None, None) => {
                    let mut exchange = rules.exchange(parse_line(&value, line).map_err(bad)?);
                    if let Some(why) = exchange.over_record_bounds() {
                        return Err(bad(why));
                    }
                    exchange.provenance = provenance(&value).map_err(bad)?;
                    importing.exchange(&exchange)?;
                }
            }
            imported += 1;
        }
        Ok(imported)
    })
}

fn parse_service_line(value: &Value) -> Result<ServiceAnswer, String> {
    let text = |key: &str| value.get(key).and_then(Value::as_str).ok_or(format!("{key:?} must be a string"));
    let route = ServiceRoute::parse(text("service")?)
        .ok_or("\"service\" must be \"gateway\", \"gateway-v2\" or \"chat-message\"")?;
    let body = match (value.get("body"), value.get("bodyText").and_then(Value::as_str)) {
        (Some(body), None) => canonical_json(body),
        (None, Some(text)) => text.to_owned(),
        _ => return Err("a service answer needs either \"body\" (JSON) or \"bodyText\" (text)".into()),
    };
    Ok(ServiceAnswer {
        route,
        upstream: text("upstream")?.to_owned(),
        status: status(value)?,
        content_type: text("contentType")?.to_owned(),
        body,
    })
}

/// A `"toolTemplate"` line: an answer to `tools/call` of that tool on
/// `"server"` for any arguments, `"text"` with `{{argument}}` holes.
fn parse_template_line(value: &Value) -> Result<AnswerTemplate, String> {
    let text = |key: &str| value.get(key).and_then(Value::as_str).ok_or(format!("{key:?} must be a string"));
    let tool = text("toolTemplate")?;
    if tool.is_empty() {
        return Err("\"toolTemplate\" must name a tool".into());
    }
    let input_schema = match value.get("inputSchema") {
        None => json!({"type": "object", "properties": {}}),
        Some(schema) if schema.is_object() => schema.clone(),
        Some(_) => return Err("\"inputSchema\" must be a JSON object".into()),
    };
    let delay_ms = match value.get("delayMs") {
        None => 0,
        Some(delay) => delay.as_u64().ok_or("\"delayMs\" must be a whole number of milliseconds")?,
    };
    let failure = match value.get("errorRate") {
        None => None,
        Some(rate) => Some(TemplateFailure {
            rate: rate
                .as_f64()
                .filter(|rate| (0.0..=1.0).contains(rate))
                .ok_or("\"errorRate\" must be a share of calls, from 0 to 1")?,
            seed: match value.get("errorSeed") {
                None => 0,
                Some(seed) => seed.as_u64().ok_or("\"errorSeed\" must be a whole number")?,
            },
            status: match value.get("errorStatus") {
                None => None,
                Some(status) => Some(
                    status
                        .as_u64()
                        .filter(|s| (100..600).contains(s))
                        .map(|s| s as u16)
                        .ok_or("\"errorStatus\" must be an HTTP status code")?,
                ),
            },
        }),
    };
    Ok(AnswerTemplate {
        server: text("server")?.to_owned(),
        tool: tool.to_owned(),
        description: value.get("description").and_then(Value::as_str).unwrap_or_default().to_owned(),
        input_schema,
        text: text("text")?.to_owned(),
        delay_ms,
        failure,
    })
}

/// A line's `"status"`: an HTTP status code.
fn status(value: &Value) -> Result<Status, String> {
    value
        .get("status")
        .and_then(Value::as_u64)
        .filter(|s| (100..600).contains(s))
        .and_then(|s| Status::new(s as u16))
        .ok_or_else(|| "\"status\" must be an HTTP status code".into())
}

/// A line's optional `recordedAt` (seconds since 1970), `recordedFrom`,
/// `recordedBy` and `keysSorted`.
fn provenance(value: &Value) -> Result<Provenance, String> {
    let text = |key: &str| match value.get(key) {
        None => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(_) => Err(format!("{key:?} must be a string")),
    };
    let recorded_at = match value.get("recordedAt") {
        None => None,
        Some(at) => Some(at.as_i64().ok_or("\"recordedAt\" must be whole seconds since 1970")?),
    };
    let keys_sorted = match value.get("keysSorted") {
        None => false,
        Some(sorted) => sorted.as_bool().ok_or("\"keysSorted\" must be true or false")?,
    };
    Ok(Provenance {
        recorded_at,
        upstream: text("recordedFrom")?,
        recorder: text("recordedBy")?,
        keys_sorted,
    })
}

/// The text each message's body is written in on an exchange's line, as
/// serde_json reads it ([`RawValue`]): what the messages keep as written.
#[derive(Deserialize, Default)]
struct Bodies<'l> {
    #[serde(borrow, default)]
    messages: Vec<BodyText<'l>>,
    #[serde(borrow, default)]
    asides: Vec<BodyText<'l>>,
}

#[derive(Deserialize)]
struct BodyText<'l> {
    #[serde(borrow)]
    body: Option<&'l RawValue>,
}

impl Bodies<'_> {
    /// The texts of the messages' (or the asides') bodies, in order.
    fn texts<'b>(bodies: &'b [BodyText<'_>]) -> Vec<Option<&'b str>> {
        bodies.iter().map(|message| message.body.map(RawValue::get)).collect()
    }
}

/// An exchange's line, `value` read from `line`, whose messages keep their
/// text in it.
fn parse_line(value: &Value, line: &str) -> Result<RawExchange, String> {
    let text = |key: &str| value.get(key).and_then(Value::as_str).ok_or(format!("{key:?} must be a string"));
    let era = Era::parse(text("era")?).ok_or("\"era\" must be \"handshake\" or \"stateless\"")?;
    let request = value.get("request").filter(|r| r.get("method").is_some_and(Value::is_string));
    let mut messages = Vec::new();
    let listed = value.get("messages").and_then(Value::as_array).ok_or("\"messages\" must be an array")?;
    if listed.is_empty() {
        return Err("\"messages\" is empty: an exchange needs its answer".into());
    }
    // Not read (a message that is not an object): the checks below say why.
    let bodies: Bodies = serde_json::from_str(line).unwrap_or_default();
    let texts = Bodies::texts(&bodies.messages);
    for (i, message) in listed.iter().enumerate() {
        messages.push(recorded_message(message, texts.get(i).copied().flatten())?);
    }
    let asides = match value.get("asides") {
        None => Vec::new(),
        Some(asides) => parse_asides(asides, &Bodies::texts(&bodies.asides))?,
    };
    Ok(RawExchange {
        server: text("server")?.to_owned(),
        era,
        protocol_version: text("protocolVersion")?.to_owned(),
        request: request.cloned().ok_or("\"request\" must be a JSON-RPC request with a \"method\"")?,
        status: status(value)?,
        content_type: text("contentType")?.to_owned(),
        messages,
        asides,
        stream: read_stream_shape(value)?,
    })
}

/// A line's `"asides"`: each a message with its `channel` and the method it
/// came `after`; `texts`, their bodies' texts where the messages keep theirs.
pub(crate) fn parse_asides(value: &Value, texts: &[Option<&str>]) -> Result<Vec<Aside>, String> {
    let mut asides = Vec::new();
    let listed = value.as_array().ok_or("\"asides\" must be an array")?;
    for (i, aside) in listed.iter().enumerate() {
        let after = match aside.get("after") {
            None => None,
            Some(after) => {
                Some(after.as_str().ok_or("an aside's \"after\" must be a method name")?.to_owned())
            }
        };
        let channel = aside.get("channel").and_then(Value::as_str).unwrap_or("standalone");
        let in_flight = match aside.get("inFlight") {
            None => false,
            Some(flag) => flag.as_bool().ok_or("an aside's \"inFlight\" must be true or false")?,
        };
        asides.push(Aside {
            after,
            in_flight,
            channel: Channel::parse(channel)
                .ok_or("an aside's \"channel\" must be \"standalone\" or \"subscription\"")?,
            message: recorded_message(aside, texts.get(i).copied().flatten())?,
        });
    }
    Ok(asides)
}

/// A message of a line: `offsetMs`, `direction`, `body`; `text`, its
/// body's text in the line, which it keeps.
fn recorded_message(message: &Value, text: Option<&str>) -> Result<RecordedMessage, String> {
    Ok(RecordedMessage {
        offset_ms: message.get("offsetMs").and_then(Value::as_u64).unwrap_or(0),
        direction: message
            .get("direction")
            .and_then(Value::as_str)
            .and_then(Direction::parse)
            .ok_or("each message needs \"direction\": \"server\" or \"client\"")?,
        body: message.get("body").cloned().ok_or("each message needs a \"body\"")?,
        written: text.map(Into::into),
        shallow: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_over_the_bound_is_refused_without_reading_it_whole() {
        let long = std::io::repeat(b' ').take(MAX_IMPORT_LINE_BYTES as u64 + 10).chain(&b"\n"[..]);
        let input = std::io::BufReader::new(LINE.as_bytes().chain(&b"\n"[..]).chain(long));
        let mut cassette = Cassette::open_in_memory().unwrap();
        let error = import(input, &mut cassette).unwrap_err().to_string();
        assert!(error.contains("line 2: longer than 67108864 bytes"), "{error}");
        assert!(cassette.exchanges().unwrap().is_empty(), "nothing written");
        // A line of exactly the bound is read (and here refused as JSON, not for its length).
        let exact = std::io::repeat(b' ').take(MAX_IMPORT_LINE_BYTES as u64).chain(&b"x\r\n"[..]);
        let error = import(std::io::BufReader::new(exact), &mut cassette).unwrap_err().to_string();
        assert!(error.contains("line 1: longer than"), "{error}");
        let fits = std::io::repeat(b' ').take(MAX_IMPORT_LINE_BYTES as u64 - 1).chain(&b"x\r\n"[..]);
        let error = import(std::io::BufReader::new(fits), &mut cassette).unwrap_err().to_string();
        assert!(error.contains("line 1: not JSON"), "{error}");
    }

    const LINE: &str = r#"{"contentType":"application/json","era":"handshake","messages":[{"body":{"id":5,"jsonrpc":"2.0","result":{"tools":[]}},"direction":"server","offsetMs":2}],"protocolVersion":"2025-06-18","request":{"id":5,"jsonrpc":"2.0","method":"tools/list"},"recordedAt":1790000000,"recordedBy":"0.1.0","recordedFrom":"mcp.example:443","server":"mcp_MeServer","status":200}"#;

    const ASIDE_LINE: &str = r#"{"asides":[{"after":"notifications/initialized","body":{"id":0,"jsonrpc":"2.0","method":"roots/list"},"channel":"standalone","direction":"server","offsetMs":3},{"after":"notifications/initialized","body":{"id":0,"jsonrpc":"2.0","result":{"roots":[]}},"channel":"standalone","direction":"client","offsetMs":4}],"contentType":"application/json","era":"handshake","messages":[{"body":{"id":1,"jsonrpc":"2.0","result":{"protocolVersion":"2025-11-25"}},"direction":"server","offsetMs":2}],"protocolVersion":"2025-11-25","request":{"id":1,"jsonrpc":"2.0","method":"initialize"},"server":"mcp_MeServer","status":200,"stream":{"closedAfter":0,"primed":true,"retryMs":500}}"#;
    const SERVICE_LINE: &str = r#"{"body":[{"mcpServerName":"mcp_MeServer","url":"https://g.example/agents/servers/mcp_MeServer"}],"contentType":"application/json","service":"gateway-v2","status":200,"upstream":"https://g.example:443"}"#;
    const TEMPLATE_LINE: &str = r#"{"delayMs":250,"description":"Reads a message","inputSchema":{"properties":{"id":{"type":"string"}},"type":"object"},"server":"mcp_MailTools","text":"Message {{id}}","toolTemplate":"GetMessage"}"#;
    const MODEL_LINE: &str = r#"{"body":"{\n  \"id\": \"chatcmpl-1\",\n  \"total\": 123456789012345678901234567890\n}","contentType":"application/json","method":"POST","model":"openai","recordedAt":1790000000,"request":"{ \"model\": \"m\", \"messages\": [] }","status":200,"target":"/chat/completions"}"#;
    const STREAM_LINE: &str = r#"{"contentType":"text/event-stream","events":["data: {\"delta\":\"Hel\"}","event: done\ndata: [DONE]"],"method":"POST","model":"openai","offsetsMs":[3,9],"request":"{\"stream\":true}","status":200,"target":"/chat/completions"}"#;
    const TEXT_SERVICE_LINE: &str = r#"{"bodyText":"ok","contentType":"text/plain","service":"chat-message","status":200,"upstream":"https://g.example:443"}"#;

    #[test]
    fn import_then_export_round_trips_in_canonical_form() {
        let mut cassette = Cassette::open_in_memory().unwrap();
        let input = format!(
            "{LINE}\n{ASIDE_LINE}\n\n{SERVICE_LINE}\n{TEXT_SERVICE_LINE}\n{MODEL_LINE}\n{STREAM_LINE}\n{TEMPLATE_LINE}\n"
        );
        assert_eq!(import(input.as_bytes(), &mut cassette).unwrap(), 7);
        let llms = cassette.llm_exchanges().unwrap();
        assert!(matches!(&llms[0].answer, LlmAnswer::Whole(body) if body.contains("\n  \"total\": 1234")));
        assert_eq!(llms[0].request, r#"{ "model": "m", "messages": [] }"#, "the request as written");
        let LlmAnswer::Events(events) = &llms[1].answer else { panic!("{llms:?}") };
        assert_eq!((events[1].offset_ms, events[1].text.as_str()), (9, "event: done\ndata: [DONE]"));
        assert_eq!(cassette.exchanges().unwrap()[1].asides.len(), 2, "asides are stored");
        let shape = StreamShape { primed: true, retry_ms: Some(500), closed_after: Some(0) };
        assert_eq!(cassette.exchanges().unwrap()[1].stream, shape, "so is the stream's shape");
        assert_eq!(cassette.templates().unwrap()[0].delay_ms, 250);
        assert_eq!(cassette.service_answers().unwrap()[1].body, "ok");
        let mut first = Vec::new();
        export(&cassette, Timings::Kept, &mut first).unwrap();
        let mut again = Cassette::open_in_memory().unwrap();
        import(first.as_slice(), &mut again).unwrap();
        let mut second = Vec::new();
        export(&again, Timings::Kept, &mut second).unwrap();
        assert_eq!(first, second);
        let first = String::from_utf8(first).unwrap();
        assert!(first.contains("\"id\":\"mcp-tape:request-id\""));
        assert!(first.ends_with(&format!("{MODEL_LINE}\n{STREAM_LINE}\n{TEMPLATE_LINE}\n")), "{first}");
        assert!(
            first.contains(&ASIDE_LINE.replace("\"id\":1,", "\"id\":\"mcp-tape:request-id\",")),
            "{first}"
        );
        assert!(first.contains(
            "\"recordedAt\":1790000000,\"recordedBy\":\"0.1.0\",\"recordedFrom\":\"mcp.example:443\""
        ));
    }

    #[test]
    fn timings_are_left_out_unless_asked_for() {
        let mut cassette = Cassette::open_in_memory().unwrap();
        import(format!("{LINE}\n{ASIDE_LINE}\n").as_bytes(), &mut cassette).unwrap();
        let mut left = Vec::new();
        export(&cassette, Timings::Left, &mut left).unwrap();
        let left = String::from_utf8(left).unwrap();
        assert!(!left.contains("recordedAt") && !left.contains("offsetMs"), "{left}");
        assert!(left.contains(r#""direction":"server"}"#), "{left}");
        let mut kept = Vec::new();
        export(&cassette, Timings::Kept, &mut kept).unwrap();
        let kept = String::from_utf8(kept).unwrap();
        assert!(kept.contains(r#""recordedAt":1790000000"#) && kept.contains(r#""offsetMs":4}"#), "{kept}");
    }

    #[test]
    fn a_message_keeps_its_senders_text_through_import_and_export() {
        let body = r#"{"jsonrpc":"2.0","id":5,"result":{"structuredContent":{"price":1.50,"total":1e2,"neg0":-0,"big":123456789012345678901234567890,"esc":"caf\u00e9"}}}"#;
        let line = LINE.replace(r#"{"id":5,"jsonrpc":"2.0","result":{"tools":[]}}"#, body);
        let aside =
            r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":1E-7}}"#;
        let line = line.replace(
            r#""contentType""#,
            &format!(
                r#""asides":[{{"body":{aside},"channel":"standalone","direction":"server"}}],"contentType""#
            ),
        );
        let mut cassette = Cassette::open_in_memory().unwrap();
        import(format!("{line}\n").as_bytes(), &mut cassette).unwrap();
        let mut out = Vec::new();
        export(&cassette, Timings::Left, &mut out).unwrap();
        let out = String::from_utf8(out).unwrap();
        assert!(out.contains(&body.replace(r#""id":5"#, r#""id":"mcp-tape:request-id""#)), "{out}");
        assert!(out.contains(aside), "{out}");
    }

    #[test]
    fn bad_lines_are_named_and_nothing_is_written() {
        let mut cassette = Cassette::open_in_memory().unwrap();
        let input = format!("{LINE}\n{{\"era\":\"later\"}}\n");
        let err = import(input.as_bytes(), &mut cassette).unwrap_err().to_string();
        assert!(err.starts_with("line 2:"), "{err}");
        assert!(cassette.exchanges().unwrap().is_empty());
        let shaped = LINE.replace("\"status\":200}", "\"status\":200,\"stream\":{\"closedAfter\":-1}}");
        let err = import(format!("{shaped}\n").as_bytes(), &mut cassette).unwrap_err().to_string();
        assert!(err.contains("\"closedAfter\" must be a count of messages"), "{err}");
    }
}
