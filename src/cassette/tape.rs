//! The replay index: every loaded exchange by match key and by (server,
//! method), built once at start-up and shared read-only by all connections.
//! Recordings stay as the cassette stores them, JSON text (each message in
//! its sender's member order), with what replay must know about each
//! message read once at load; a hit is
//! served by stamping the caller's id and token into that text. Per-session
//! progress through repeated requests lives in [`Cursors`], owned by
//! whoever owns the session.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::Deserialize;
use serde_json::Value;

use crate::jsonrpc::ErrorCode;
use crate::mcp;
use crate::model::{
    AnswerTemplate, Channel, Direction, Era, Exchange, MatchKey, Source, Status, StreamShape, Text,
};
use crate::normalize::{self, Rules};
use crate::util::FastMap;

/// What kind of named thing a request addresses, for "never seen" checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Named {
    Tool,
    Prompt,
    Resource,
}

/// One recorded message, as replay serves it.
#[derive(Clone, Debug, PartialEq)]
pub struct ServedMessage {
    pub offset_ms: u64,
    pub direction: Direction,
    /// Its JSON text as stored (its sender's member order), placeholders and all.
    pub json: Text,
    /// Its method, for a request or notification; `None` for an answer.
    pub method: Option<Box<str>>,
    /// Its id, if it has one.
    pub id: Option<Value>,
    /// `params.level` of a log notification.
    pub log_level: Option<Box<str>>,
    /// Where [`ServedMessage::json`] holds the caller's id placeholder
    /// ([`normalize::id_placeholder_at`]).
    pub id_at: Option<usize>,
    /// Whether it holds the progress-token placeholder.
    pub has_progress_token: bool,
    /// Its `error`, for an error answer.
    pub error: Option<Box<Value>>,
}

/// The few fields of a message replay decides on, read without building
/// the rest.
#[derive(Deserialize)]
struct Peek {
    method: Option<Box<str>>,
    id: Option<Value>,
    params: Option<Value>,
    error: Option<Value>,
}

impl ServedMessage {
    fn new(offset_ms: u64, direction: Direction, json: Text) -> ServedMessage {
        let peek: Option<Peek> = serde_json::from_str(&json).ok();
        let (method, id, params, error) =
            peek.map_or((None, None, None, None), |p| (p.method, p.id, p.params, p.error));
        let log_level = match method.as_deref() {
            Some("notifications/message") => {
                params.as_ref().and_then(|p| p.get("level")).and_then(Value::as_str).map(Box::from)
            }
            _ => None,
        };
        let id_at = normalize::id_placeholder_at(&json);
        let has_progress_token = normalize::has_progress_placeholder(&json);
        ServedMessage {
            offset_ms,
            direction,
            json,
            method,
            id,
            log_level,
            id_at,
            has_progress_token,
            error: error.map(Box::new),
        }
    }

    /// The message parsed; `None` for one serde_json does not read.
    pub fn parsed(&self) -> Option<Value> {
        serde_json::from_str(&self.json).ok()
    }

    /// The ids the client's replies among `messages` answer.
    pub fn replied<'a>(messages: impl IntoIterator<Item = &'a ServedMessage>) -> Vec<&'a Value> {
        messages
            .into_iter()
            .filter(|m| m.direction == Direction::Client)
            .filter_map(|m| m.id.as_ref())
            .collect()
    }

    /// This message's id if it is a server→client request one of `replied`
    /// answers: replay waits for the client's reply to it.
    pub fn awaits_reply(&self, replied: &[&Value]) -> Option<Value> {
        match (&self.method, &self.id) {
            (Some(_), Some(id)) if replied.contains(&id) => Some(id.clone()),
            _ => None,
        }
    }
}

/// What the server said on its own after a recorded exchange, as replay
/// serves it.
#[derive(Clone, Debug, PartialEq)]
pub struct ServedAside {
    /// The client notification it waits for; `None`: it goes with the answer.
    pub after: Option<Box<str>>,
    /// It goes before the answer (the server said it while the exchange
    /// was in flight).
    pub in_flight: bool,
    pub channel: Channel,
    pub message: ServedMessage,
}

/// One recorded exchange, as replay serves it.
#[derive(Clone, Debug, PartialEq)]
pub struct Recorded {
    pub server: String,
    pub era: Era,
    pub method: String,
    pub key: MatchKey,
    /// The tool or prompt name, or the resource URI, the request names
    /// ([`mcp::subject_of`]), read once at load.
    pub subject: Option<String>,
    /// The normalized request, canonical JSON text.
    pub request: Text,
    pub status: Status,
    pub content_type: String,
    pub messages: Vec<ServedMessage>,
    /// What the server said on its own after it.
    pub asides: Vec<ServedAside>,
    /// How its SSE stream was framed for resumption.
    pub stream: StreamShape,
    /// Its cassette file and row, when it was read from one.
    pub source: Option<Source>,
    /// When it was recorded (seconds since 1970), if the cassette says.
    pub recorded_at: Option<i64>,
    /// Whether it has answered yet.
    pub used: UseMark,
}

/// Set when a recording answers: a flag on the recording, so that a hit
/// costs no lock; the report reads it at the end.
#[derive(Debug, Default)]
pub struct UseMark(AtomicBool);

impl UseMark {
    pub fn mark(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    pub fn is_marked(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

impl Clone for UseMark {
    fn clone(&self) -> UseMark {
        UseMark(AtomicBool::new(self.is_marked()))
    }
}

/// Whether a recording was used does not make it another recording.
impl PartialEq for UseMark {
    fn eq(&self, _: &UseMark) -> bool {
        true
    }
}

impl Recorded {
    /// The request's params, parsed (for miss diagnostics).
    pub fn params(&self) -> Option<Value> {
        let request: Value = serde_json::from_str(&self.request).ok()?;
        request.get("params").cloned()
    }

    /// The final answer (to the request, not a notification or server request).
    fn answer(&self) -> Option<&ServedMessage> {
        self.messages.iter().rev().find(|m| m.direction == Direction::Server && m.method.is_none())
    }

    /// The result of the final answer, parsed, if the exchange succeeded.
    pub fn result(&self) -> Option<Value> {
        self.answer()?.parsed()?.get("result").cloned()
    }

    /// The client capabilities a `-32021` answer names as missing.
    fn required_capabilities(&self) -> Option<Value> {
        let error = self.answer()?.error.as_deref()?;
        if error.get("code").and_then(ErrorCode::of) != Some(mcp::MISSING_CLIENT_CAPABILITY) {
            return None;
        }
        error.pointer("/data/requiredCapabilities").filter(|c| c.is_object()).cloned()
    }
}

/// One of each era's: the exchanges of one match key (in recorded order),
/// or a match rule's recordings of one tool. A request is answered from
/// its own era's first.
#[derive(Debug, Default)]
pub struct ByEra<T> {
    handshake: T,
    stateless: T,
}

impl<T> ByEra<T> {
    pub fn new(handshake: T, stateless: T) -> ByEra<T> {
        ByEra { handshake, stateless }
    }

    pub fn of(&self, era: Era) -> &T {
        match era {
            Era::Handshake => &self.handshake,
            Era::Stateless => &self.stateless,
        }
    }

    pub fn of_mut(&mut self, era: Era) -> &mut T {
        match era {
            Era::Handshake => &mut self.handshake,
            Era::Stateless => &mut self.stateless,
        }
    }

    /// `era`'s, then the other era's, each with its era.
    pub fn own_first(&self, era: Era) -> [(Era, &T); 2] {
        match era {
            Era::Handshake => [(era, &self.handshake), (Era::Stateless, &self.stateless)],
            Era::Stateless => [(era, &self.stateless), (Era::Handshake, &self.handshake)],
        }
    }

    /// `era`'s if it holds any (`holds`), else the other era's; with the
    /// era they are of.
    pub fn for_era(&self, era: Era, holds: impl Fn(&T) -> bool) -> (Era, &T) {
        let [own, other] = self.own_first(era);
        if holds(own.1) { own } else { other }
    }
}

/// All loaded exchanges, indexed.
#[derive(Default)]
pub struct Tape {
    /// Exchanges with the same key, by era.
    by_key: FastMap<MatchKey, ByEra<Vec<Arc<Recorded>>>>,
    /// Exchanges of one server and method, in recorded order.
    by_method: HashMap<(String, String), Vec<Arc<Recorded>>>,
    /// Tool and prompt names each server listed or was called with.
    names: HashSet<(String, Named, String)>,
    /// Each listed tool's `inputSchema`, by server, then tool.
    tool_schemas: HashMap<String, HashMap<String, Value>>,
    /// Each server's own `serverInfo`, from its first recorded `initialize`
    /// or `server/discover` result.
    server_info: FastMap<String, Value>,
    /// Recorded `-32021` refusals by key, with the capabilities they name:
    /// they answer a live request only when it lacks one of those.
    capability_refusals: HashMap<MatchKey, (Value, Arc<Recorded>)>,
    /// Answer templates by server, then tool (sorted by name).
    templates: HashMap<String, BTreeMap<String, AnswerTemplate>>,
    servers: BTreeSet<String>,
    len: usize,
    /// Recorded transport-level rejections left out ([`mcp::is_transport_rejection`]).
    rejections: usize,
}

impl Tape {
    /// Indexes `exchanges`, recomputing each key with `rules` so that replay's
    /// `--ignore-param`s apply to recordings made without them.
    pub fn new(exchanges: Vec<Exchange<Text>>, rules: &Rules) -> Tape {
        let mut tape = Tape::default();
        for exchange in exchanges {
            let request: Value = serde_json::from_str(&exchange.request).unwrap_or(Value::Null);
            let key = rules.match_key(&exchange.server, &exchange.method, request.get("params"));
            let messages: Vec<ServedMessage> = exchange
                .messages
                .into_iter()
                .map(|m| ServedMessage::new(m.offset_ms, m.direction, m.body))
                .collect();
            let subject = mcp::subject_of(&exchange.method, request.get("params")).map(str::to_owned);
            let recorded = Recorded {
                server: exchange.server,
                era: exchange.era,
                method: exchange.method,
                key,
                subject,
                request: exchange.request,
                status: exchange.status,
                content_type: exchange.content_type,
                messages,
                asides: exchange
                    .asides
                    .into_iter()
                    .map(|a| ServedAside {
                        after: a.after.map(String::into_boxed_str),
                        in_flight: a.in_flight,
                        channel: a.channel,
                        message: ServedMessage::new(a.message.offset_ms, a.message.direction, a.message.body),
                    })
                    .collect(),
                stream: exchange.stream,
                source: exchange.source,
                recorded_at: exchange.provenance.recorded_at,
                used: UseMark::default(),
            };
            let answer = recorded.answer();
            let error = answer.and_then(|a| a.error.as_deref());
            let answered_id = answer.and_then(|a| a.id.as_ref());
            if mcp::is_transport_rejection(recorded.era, &request, recorded.status, error, answered_id) {
                tape.rejections += 1;
                continue;
            }
            tape.len += 1;
            tape.servers.insert(recorded.server.clone());
            if let Some(required) = recorded.required_capabilities() {
                tape.capability_refusals.insert(key, (required, Arc::new(recorded)));
                continue;
            }
            tape.learn_names(&recorded, &request);
            tape.learn_server_info(&recorded);
            let recorded = Arc::new(recorded);
            tape.by_key.entry(key).or_default().of_mut(recorded.era).push(Arc::clone(&recorded));
            tape.by_method
                .entry((recorded.server.clone(), recorded.method.clone()))
                .or_default()
                .push(recorded);
        }
        tape
    }

    /// The same tape with `templates` to answer tool calls no recording
    /// matches; their tools count as the server's known tools.
    pub fn with_templates(mut self, templates: Vec<AnswerTemplate>) -> Tape {
        for template in templates {
            self.servers.insert(template.server.clone());
            self.names.insert((template.server.clone(), Named::Tool, template.tool.clone()));
            let server = self.templates.entry(template.server.clone()).or_default();
            server.insert(template.tool.clone(), template);
        }
        self
    }

    /// The answer template of `tool` on `server`, if there is one.
    pub fn template(&self, server: &str, tool: &str) -> Option<&AnswerTemplate> {
        self.templates.get(server)?.get(tool)
    }

    /// The answer templates of `server`, sorted by tool name.
    pub fn templates(&self, server: &str) -> impl Iterator<Item = &AnswerTemplate> {
        self.templates.get(server).into_iter().flat_map(BTreeMap::values)
    }

    /// Every recording replay can answer with (transport-level rejections
    /// are left out at load).
    pub fn recordings(&self) -> impl Iterator<Item = &Arc<Recorded>> {
        self.by_method.values().flatten().chain(self.capability_refusals.values().map(|(_, r)| r))
    }

    fn learn_names(&mut self, recorded: &Recorded, request: &Value) {
        let (kind, list_field, name_field) = match recorded.method.as_str() {
            "tools/call" | "tools/list" => (Named::Tool, "tools", "name"),
            "prompts/get" | "prompts/list" => (Named::Prompt, "prompts", "name"),
            "resources/read" | "resources/list" => (Named::Resource, "resources", "uri"),
            _ => return,
        };
        let mut names: Vec<String> = Vec::new();
        if let Some(name) = request.get("params").and_then(|p| p.get(name_field)).and_then(Value::as_str) {
            names.push(name.to_owned());
        }
        if recorded.method.ends_with("/list") {
            let listed = recorded.result().and_then(|r| r.get(list_field).cloned());
            for item in listed.as_ref().and_then(Value::as_array).into_iter().flatten() {
                let Some(name) = item.get(name_field).and_then(Value::as_str) else { continue };
                names.push(name.to_owned());
                if let Some(schema) = item.get("inputSchema").filter(|_| kind == Named::Tool) {
                    let schemas = self.tool_schemas.entry(recorded.server.clone()).or_default();
                    schemas.entry(name.to_owned()).or_insert_with(|| schema.clone());
                }
            }
        }
        for name in names {
            self.names.insert((recorded.server.clone(), kind, name));
        }
    }

    fn learn_server_info(&mut self, recorded: &Recorded) {
        if self.server_info.contains_key(&recorded.server) {
            return;
        }
        let pointer = match recorded.method.as_str() {
            "initialize" => "/serverInfo",
            "server/discover" => "/_meta/io.modelcontextprotocol~1serverInfo",
            _ => return,
        };
        if let Some(info) =
            recorded.result().and_then(|r| r.pointer(pointer).cloned()).filter(Value::is_object)
        {
            self.server_info.insert(recorded.server.clone(), info);
        }
    }

    /// The recorded server's own `serverInfo`, if a recording shows it.
    pub fn server_info(&self, server: &str) -> Option<&Value> {
        self.server_info.get(server)
    }

    /// The `inputSchema` a recorded `tools/list` gave `tool` on `server`.
    pub fn tool_schema(&self, server: &str, tool: &str) -> Option<&Value> {
        let listed = self.tool_schemas.get(server).and_then(|tools| tools.get(tool));
        listed.or_else(|| self.template(server, tool).map(|t| &t.input_schema))
    }

    /// Recorded transport-level rejections left out at load.
    pub fn rejections(&self) -> usize {
        self.rejections
    }

    /// The recorded `-32021` refusal for `key` if `declared` (the live
    /// request's client capabilities) lacks a capability it names.
    pub fn capability_refusal(&self, key: &MatchKey, declared: Option<&Value>) -> Option<Arc<Recorded>> {
        let (required, recorded) = self.capability_refusals.get(key)?;
        let lacks = required.as_object()?.keys().any(|name| declared.and_then(|d| d.get(name)).is_none());
        lacks.then(|| Arc::clone(recorded))
    }

    /// Number of exchanges loaded (rejections left out).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Every server identity with at least one recording, sorted.
    pub fn servers(&self) -> impl Iterator<Item = &str> {
        self.servers.iter().map(String::as_str)
    }

    /// Whether anything is recorded (or templated) for `server`.
    pub fn holds(&self, server: &str) -> bool {
        self.servers.contains(server)
    }

    /// The names of `kind` that `server` listed or was called with, sorted.
    pub fn names(&self, server: &str, kind: Named) -> Vec<&str> {
        let mut names: Vec<&str> = self
            .names
            .iter()
            .filter(|(held, named, _)| held == server && *named == kind)
            .map(|(_, _, name)| name.as_str())
            .collect();
        names.sort_unstable();
        names
    }

    /// The recorded exchanges of `method` on `server`, in recorded order.
    pub fn recorded(&self, server: &str, method: &str) -> &[Arc<Recorded>] {
        self.by_method.get(&(server.to_owned(), method.to_owned())).map_or(&[], Vec::as_slice)
    }

    /// Whether `server` ever listed or was called with the tool, prompt or
    /// resource `name`.
    pub fn knows(&self, server: &str, kind: Named, name: &str) -> bool {
        self.names.contains(&(server.to_owned(), kind, name.to_owned()))
    }

    /// Whether any recording has `key`.
    pub fn has(&self, key: &MatchKey) -> bool {
        self.by_key.contains_key(key)
    }

    /// The next recorded answer for `key` to a request of `era`: from that
    /// era's recordings if it has any, else the other's; recorded order per
    /// `cursors`, then the last one again once the recording runs out.
    pub fn next(&self, key: &MatchKey, era: Era, cursors: &mut Cursors) -> Option<Arc<Recorded>> {
        let (recorded_in, recorded) = self.by_key.get(key)?.for_era(era, |recorded| !recorded.is_empty());
        cursors.next_in(*key, recorded_in, recorded).map(Arc::clone)
    }
}

/// How far one replay session (or one stateless server) has got through
/// each run of identical requests.
#[derive(Debug, Default)]
pub struct Cursors(FastMap<(MatchKey, Era), usize>);

impl Cursors {
    /// How many requests of the run `key` (recorded in `era`) came before
    /// this one, counting this one for the next.
    pub fn advance(&mut self, key: MatchKey, era: Era) -> usize {
        let position = self.0.entry((key, era)).or_insert(0);
        *position += 1;
        *position - 1
    }
    /// The next of `run` (the recordings of `key` in `era`): in recorded
    /// order, then the last one again once the run is used up; `None` for
    /// an empty run.
    pub fn next_in<'a, R>(&mut self, key: MatchKey, era: Era, run: &'a [Arc<R>]) -> Option<&'a Arc<R>> {
        let last = run.len().checked_sub(1)?;
        Some(&run[self.advance(key, era).min(last)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(server: &str, tool: &str, text: &str) -> Exchange<Text> {
        crate::normalize::tests::sample(server, tool, text).to_text()
    }

    fn text(recorded: &Recorded) -> String {
        recorded.result().unwrap()["content"][0]["text"].as_str().unwrap().to_owned()
    }

    #[test]
    fn repeats_in_recorded_order_then_the_last_one() {
        let tape = Tape::new(vec![call("s", "t", "1"), call("s", "t", "2")], &Rules::default());
        let key = Rules::default().match_key("s", "tools/call", Some(&json!({"name": "t"})));
        let mut cursors = Cursors::default();
        let answers: Vec<_> = (0..3)
            .map(|_| text(&tape.next(&key, Era::Handshake, &mut cursors).unwrap()).to_owned())
            .collect();
        assert_eq!(answers, ["1", "2", "2"]);
        let mut fresh = Cursors::default();
        assert_eq!(text(&tape.next(&key, Era::Handshake, &mut fresh).unwrap()), "1");
    }

    #[test]
    fn answers_from_the_requests_own_era_first() {
        let mut stateless = crate::normalize::tests::sample("s", "t", "stateless");
        stateless.era = Era::Stateless;
        stateless.request["params"]["_meta"] = json!({
            mcp::META_PROTOCOL_VERSION: "2026-07-28",
            mcp::META_CLIENT_CAPABILITIES: {},
        });
        let tape = Tape::new(vec![stateless.to_text(), call("s", "t", "handshake")], &Rules::default());
        let key = Rules::default().match_key("s", "tools/call", Some(&json!({"name": "t"})));
        let mut cursors = Cursors::default();
        for era in [Era::Handshake, Era::Stateless, Era::Handshake] {
            let expected = if era == Era::Handshake { "handshake" } else { "stateless" };
            assert_eq!(text(&tape.next(&key, era, &mut cursors).unwrap()), expected);
        }
        let only_handshake = Tape::new(vec![call("s", "t", "handshake")], &Rules::default());
        assert_eq!(text(&only_handshake.next(&key, Era::Stateless, &mut cursors).unwrap()), "handshake");
    }

    #[test]
    fn knows_names_per_server() {
        let tape = Tape::new(vec![call("s", "t", "1")], &Rules::default());
        assert!(tape.knows("s", Named::Tool, "t"));
        assert!(!tape.knows("other", Named::Tool, "t"));
        assert!(!tape.knows("s", Named::Prompt, "t"));
        assert_eq!(tape.servers().collect::<Vec<_>>(), ["s"]);
        assert_eq!(tape.recorded("s", "tools/call").len(), 1);
    }
}
