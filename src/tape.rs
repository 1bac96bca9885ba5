//! The replay index: every loaded exchange by match key and by (server,
//! method), built once at start-up and shared read-only by all connections.
//! Per-session progress through repeated requests lives in [`Cursors`],
//! owned by whoever owns the session.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use serde_json::Value;

use crate::normalize::{MatchKey, Rules};
use crate::store::Exchange;

/// What kind of named thing a request addresses, for "never seen" checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Named {
    Tool,
    Prompt,
}

/// All loaded exchanges, indexed.
#[derive(Default)]
pub struct Tape {
    /// Exchanges with the same key, in recorded order.
    by_key: HashMap<MatchKey, Vec<Arc<Exchange>>>,
    /// Exchanges of one server and method, in recorded order.
    by_method: HashMap<(String, String), Vec<Arc<Exchange>>>,
    /// Tool and prompt names each server listed or was called with.
    names: HashSet<(String, Named, String)>,
    servers: BTreeSet<String>,
    len: usize,
}

impl Tape {
    /// Indexes `exchanges`, recomputing each key with `rules` so that replay's
    /// `--ignore-param`s apply to recordings made without them.
    pub fn new(exchanges: Vec<Exchange>, rules: &Rules) -> Tape {
        let mut tape = Tape { len: exchanges.len(), ..Tape::default() };
        for mut exchange in exchanges {
            exchange.key =
                rules.match_key(&exchange.server, &exchange.method, exchange.request.get("params"));
            tape.learn_names(&exchange);
            tape.servers.insert(exchange.server.clone());
            let exchange = Arc::new(exchange);
            tape.by_key.entry(exchange.key).or_default().push(Arc::clone(&exchange));
            tape.by_method
                .entry((exchange.server.clone(), exchange.method.clone()))
                .or_default()
                .push(exchange);
        }
        tape
    }

    fn learn_names(&mut self, exchange: &Exchange) {
        let server = &exchange.server;
        let (kind, list_field) = match exchange.method.as_str() {
            "tools/call" | "tools/list" => (Named::Tool, "tools"),
            "prompts/get" | "prompts/list" => (Named::Prompt, "prompts"),
            _ => return,
        };
        let mut names: Vec<String> = Vec::new();
        if let Some(name) = exchange.request.pointer("/params/name").and_then(Value::as_str) {
            names.push(name.to_owned());
        }
        for message in &exchange.messages {
            let listed = message.body.pointer(&format!("/result/{list_field}")).and_then(Value::as_array);
            for item in listed.into_iter().flatten() {
                names.extend(item.get("name").and_then(Value::as_str).map(str::to_owned));
            }
        }
        for name in names {
            self.names.insert((server.clone(), kind, name));
        }
    }

    /// Number of exchanges loaded.
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

    /// The recorded exchanges of `method` on `server`, in recorded order.
    pub fn recorded(&self, server: &str, method: &str) -> &[Arc<Exchange>] {
        self.by_method.get(&(server.to_owned(), method.to_owned())).map_or(&[], Vec::as_slice)
    }

    /// Whether `server` ever listed or was called with the tool or prompt `name`.
    pub fn knows(&self, server: &str, kind: Named, name: &str) -> bool {
        self.names.contains(&(server.to_owned(), kind, name.to_owned()))
    }

    /// The next recorded answer for `key`: recorded order per `cursors`, then
    /// the last one again once the recording runs out.
    pub fn next(&self, key: &MatchKey, cursors: &mut Cursors) -> Option<Arc<Exchange>> {
        let recorded = self.by_key.get(key)?;
        let position = cursors.0.entry(*key).or_insert(0);
        let exchange = &recorded[(*position).min(recorded.len() - 1)];
        *position += 1;
        Some(Arc::clone(exchange))
    }
}

/// How far one replay session (or one stateless server) has got through
/// each run of identical requests.
#[derive(Debug, Default)]
pub struct Cursors(HashMap<MatchKey, usize>);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::Era;
    use crate::normalize::RawExchange;
    use crate::store::{Direction, RecordedMessage};
    use serde_json::json;

    fn call(server: &str, tool: &str, text: &str) -> Exchange {
        Rules::default().exchange(RawExchange {
            server: server.into(),
            era: Era::Handshake,
            protocol_version: "2025-06-18".into(),
            request: json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool}}),
            status: 200,
            content_type: "application/json".into(),
            messages: vec![RecordedMessage {
                offset_ms: 0,
                direction: Direction::Server,
                body: json!({"jsonrpc": "2.0", "id": 1, "result": {"text": text}}),
            }],
        })
    }

    fn text(exchange: &Exchange) -> &str {
        exchange.messages[0].body["result"]["text"].as_str().unwrap()
    }

    #[test]
    fn repeats_in_recorded_order_then_the_last_one() {
        let tape = Tape::new(vec![call("s", "t", "1"), call("s", "t", "2")], &Rules::default());
        let key = Rules::default().match_key("s", "tools/call", Some(&json!({"name": "t"})));
        let mut cursors = Cursors::default();
        let answers: Vec<_> =
            (0..3).map(|_| text(&tape.next(&key, &mut cursors).unwrap()).to_owned()).collect();
        assert_eq!(answers, ["1", "2", "2"]);
        let mut fresh = Cursors::default();
        assert_eq!(text(&tape.next(&key, &mut fresh).unwrap()), "1");
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
