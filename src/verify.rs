//! `mcp-tape verify`: re-sends recorded requests to the live server and
//! compares its answers with the recordings ([`drift`]). One fresh session
//! per recorded server and era (a handshake-era session is opened with the
//! server's recorded `initialize`, or a plain one); by default only the
//! methods that read (lists, `resources/read`, `prompts/get`), since a
//! call can change something. `--update` writes the changed answers over
//! the recorded ones, each cassette in one transaction.

use std::collections::BTreeMap;
use std::path::PathBuf;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use serde_json::{Value, json};

use crate::cassette::store::{self, Cassette};
use crate::config::VerifyConfig;
use crate::drift::{self, Findings, Verdict};
use crate::error::Error;
use crate::mcp;
use crate::model::{Era, Exchange, Source};
use crate::normalize::{ID_PLACEHOLDER, Rules};
use crate::pseudonym::{self, KEY_VARIABLE, Key, Pseudonyms, Scope};
use crate::redact;
use crate::transport::http::upstream::UpstreamClient;
use crate::util::printable;

/// The methods verified without `--include-calls`: they only read.
const READS: [&str; 6] = [
    "tools/list",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
];

/// What verifying found, and how the command ends.
pub struct Verified {
    pub findings: Findings,
    /// Requests the live server could not be asked (transport failures).
    pub failures: Vec<String>,
    /// Recordings rewritten (`--update`).
    pub updated: usize,
    /// Requests left out because their params hold pseudonyms: the live
    /// server knows the values they stand for, not them.
    pub left_out: Vec<String>,
}

/// Verifies the cassettes `config` names against its upstream.
///
/// # Errors
///
/// Unusable cassettes or upstream settings; with `--update`, a cassette
/// that cannot be written.
pub async fn verify(config: &VerifyConfig) -> Result<Verified, Error> {
    let files = store::cassette_files(&config.cassettes)?;
    let loaded = store::load(&files)?;
    let exchanges = loaded.exchanges;
    let pseudonyms = match loaded.pseudonym_keys.is_empty() {
        true => None,
        false => given_pseudonyms(&loaded.pseudonym_keys, config.update)?,
    };
    let upstream =
        UpstreamClient::new(&config.upstream.url, config.upstream.ca.as_deref(), config.upstream.timeouts)?;
    let chosen = |e: &&Exchange| {
        config.server.as_ref().is_none_or(|s| *s == e.server)
            && (READS.contains(&e.method.as_str()) || (config.include_calls && is_call(&e.method)))
    };
    let mut groups: BTreeMap<(String, &str), Vec<&Exchange>> = BTreeMap::new();
    for exchange in exchanges.iter().filter(chosen) {
        groups.entry((exchange.server.clone(), exchange.era.as_str())).or_default().push(exchange);
    }
    let secrets: Vec<String> = config.headers.iter().map(|(_, value)| value.clone()).collect();
    let mut verified =
        Verified { findings: Findings::default(), failures: Vec::new(), updated: 0, left_out: Vec::new() };
    let mut live_lists: BTreeMap<String, (Value, Value)> = BTreeMap::new();
    let mut updates: BTreeMap<PathBuf, Vec<(i64, usize, Value)>> = BTreeMap::new();
    for ((server, _), group) in &groups {
        let era = group[0].era;
        let mut session = match Session::open(&upstream, config, server, era, &exchanges).await {
            Ok(session) => session,
            Err(why) => {
                verified.failures.push(format!("{} ({}): {why}", printable(server), era.as_str()));
                continue;
            }
        };
        for exchange in group {
            let label = drift::label(exchange);
            let Some(recorded) = drift::final_answer(exchange) else { continue };
            if exchange.request.get("params").is_some_and(pseudonym::holds_pseudonym) {
                verified.left_out.push(label);
                continue;
            }
            let mut now = match session.ask(&exchange.request).await {
                Ok(now) => now,
                Err(why) => {
                    verified.failures.push(format!("{label}: {why}"));
                    continue;
                }
            };
            // Compared and stored as recording would have stored it.
            if let Some(pseudonyms) = &pseudonyms {
                pseudonyms.learn(&now, Scope::Mcp);
                pseudonyms.pseudonymize(&mut now, Scope::Mcp);
            }
            let verdict = drift::answer(recorded, &now, &config.ignore_paths);
            if exchange.method == "tools/list"
                && let (Some(before), Some(after)) = (recorded.get("result"), now.get("result"))
            {
                live_lists.entry(server.clone()).or_insert_with(|| (before.clone(), after.clone()));
            }
            if verdict != Verdict::Same
                && let Some(Source { cassette, row, .. }) = &exchange.source
            {
                let seq = exchange.messages.iter().rposition(|m| &m.body == recorded).unwrap_or(0);
                updates.entry(cassette.to_path_buf()).or_default().push((
                    *row,
                    seq,
                    stored_form(now, &secrets),
                ));
            }
            verified.findings.exchanges.push((label, verdict));
        }
    }
    for (server, (before, after)) in &live_lists {
        verified.findings.catalogue.extend(drift::catalogue(server, before, after));
    }
    verified.findings.catalogue.sort();
    if config.update {
        for (file, answers) in &updates {
            Cassette::open(file)?.update_answers(answers)?;
            verified.updated += answers.len();
        }
    }
    Ok(verified)
}

fn is_call(method: &str) -> bool {
    !READS.contains(&method) && !matches!(method, "initialize" | "server/discover" | "ping")
}

/// A live answer as a cassette keeps it: the id placeholder, redacted,
/// the credentials verify sent scrubbed.
/// The pseudonyms the live answers are given, for cassettes pseudonymized
/// with the keys of `fingerprints`, so that they are compared (and, with
/// `update`, stored) as recording would have stored them: the given key's
/// when it is one of theirs. Without it, answers are compared as they
/// are, and said so.
///
/// # Errors
///
/// With `update`, no key given, or another key than theirs: nothing would
/// be stored pseudonymized.
fn given_pseudonyms(fingerprints: &[String], update: bool) -> Result<Option<Pseudonyms>, Error> {
    let shown = fingerprints.join(", ");
    let key = match Key::given(None)? {
        Some((key, _)) if fingerprints.contains(&key.fingerprint()) => {
            return Ok(Some(Pseudonyms::new(key, &pseudonym::Settings::default())));
        }
        Some((key, _)) => format!("the key given is {}, not theirs", key.fingerprint()),
        None => "no key is given".to_owned(),
    };
    let why = format!("the cassettes are pseudonymized (key {shown}) and {key}");
    if update {
        return Err(Error::Config(format!(
            "--update: {why}: give their key in {KEY_VARIABLE}, so that what is stored is pseudonymized too"
        )));
    }
    tracing::warn!("{why}: the live answers are compared as they are (set {KEY_VARIABLE} to their key)");
    Ok(None)
}

fn stored_form(mut answer: Value, secrets: &[String]) -> Value {
    if let Some(object) = answer.as_object_mut() {
        object.insert("id".into(), ID_PLACEHOLDER.into());
    }
    Rules::default().redact(&mut answer);
    redact::scrub(&mut answer, secrets);
    answer
}

/// One conversation with the live server.
struct Session<'a> {
    upstream: &'a UpstreamClient,
    path: String,
    headers: &'a [(String, String)],
    era: Era,
    /// The handshake era's session id and negotiated version.
    session: Option<String>,
    version: Option<String>,
    next_id: u64,
}

impl<'a> Session<'a> {
    async fn open(
        upstream: &'a UpstreamClient,
        config: &'a VerifyConfig,
        server: &str,
        era: Era,
        exchanges: &[Exchange],
    ) -> Result<Session<'a>, String> {
        let path =
            if server.starts_with('/') { server.to_owned() } else { format!("/agents/servers/{server}") };
        let mut session = Session {
            upstream,
            path,
            headers: &config.headers,
            era,
            session: None,
            version: None,
            next_id: 0,
        };
        if era == Era::Stateless {
            return Ok(session);
        }
        let recorded = exchanges.iter().find(|e| e.server == server && e.method == "initialize");
        let initialize = recorded.map(|e| e.request.clone()).unwrap_or_else(|| {
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": mcp::HANDSHAKE_VERSIONS[mcp::HANDSHAKE_VERSIONS.len() - 1], "capabilities": {},
                "clientInfo": {"name": "mcp-tape verify", "version": env!("CARGO_PKG_VERSION")}}})
        });
        let (answer, session_id) = session.post(&initialize).await?;
        if answer.get("error").is_some() {
            return Err(format!("initialize failed: {}", answer["error"]));
        }
        session.session = session_id;
        session.version =
            answer.pointer("/result/protocolVersion").and_then(Value::as_str).map(str::to_owned);
        session.notify(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await?;
        Ok(session)
    }

    /// Sends a recorded request again (a fresh id, no progress token) and
    /// returns the live server's final answer.
    async fn ask(&mut self, recorded: &Value) -> Result<Value, String> {
        let mut request = recorded.clone();
        if let Some(meta) = request.pointer_mut("/params/_meta").and_then(Value::as_object_mut) {
            meta.shift_remove("progressToken");
        }
        Ok(self.post(&request).await?.0)
    }

    async fn notify(&mut self, message: &Value) -> Result<(), String> {
        let request = self.request(message)?;
        let response = self.upstream.send(request).await.map_err(|e| e.to_string())?;
        let _ = response.into_body().collect().await;
        Ok(())
    }

    /// POSTs `message` with a fresh id; the answer with that id, and the
    /// session id the server gave.
    async fn post(&mut self, message: &Value) -> Result<(Value, Option<String>), String> {
        self.next_id += 1;
        let mut message = message.clone();
        message["id"] = self.next_id.into();
        let request = self.request(&message)?;
        let response = self.upstream.send(request).await.map_err(|e| e.to_string())?;
        let session =
            response.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
        let streamed = response
            .headers()
            .get(hyper::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.starts_with("text/event-stream"));
        let status = response.status();
        let idle = self.upstream.timeouts().idle;
        let body = tokio::time::timeout(idle, response.into_body().collect())
            .await
            .map_err(|_| format!("the answer stalled for {}s", idle.as_secs()))?
            .map_err(|e| format!("the answer broke off: {e}"))?
            .to_bytes();
        let id = Value::from(self.next_id);
        let answer = if streamed { answer_in_stream(&body, &id) } else { serde_json::from_slice(&body).ok() };
        match answer {
            Some(answer) => Ok((answer, session)),
            None => Err(format!("HTTP {status} without a JSON-RPC answer")),
        }
    }

    fn request(&self, message: &Value) -> Result<Request<Full<Bytes>>, String> {
        let uri = self.upstream.uri_for(&self.path).map_err(|e| e.to_string())?;
        let mut builder = Request::post(uri)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        if let Some(session) = &self.session {
            builder = builder.header("mcp-session-id", session);
        }
        let version = match self.era {
            Era::Handshake => self.version.clone(),
            Era::Stateless => message
                .pointer(&format!("/params/_meta/{}", mcp::META_PROTOCOL_VERSION.replace('/', "~1")))
                .and_then(Value::as_str)
                .map(str::to_owned),
        };
        if let Some(version) = version {
            builder = builder.header("mcp-protocol-version", version);
        }
        if self.era == Era::Stateless {
            if let Some(method) = message.get("method").and_then(Value::as_str) {
                builder = builder.header("mcp-method", method);
            }
            let params = message.get("params");
            if let Some(name) =
                params.and_then(|p| p.get("name").or_else(|| p.get("uri"))).and_then(Value::as_str)
            {
                builder = builder.header("mcp-name", name);
            }
        }
        for (name, value) in self.headers {
            builder = builder.header(name.as_str(), value.as_str());
        }
        builder.body(Full::new(Bytes::from(message.to_string()))).map_err(|e| e.to_string())
    }
}

/// The message answering `id` in an SSE body.
fn answer_in_stream(body: &[u8], id: &Value) -> Option<Value> {
    let mut parser = crate::sse::Parser::default();
    parser.push(body);
    parser.push(b"\n\n");
    let mut found = None;
    while let Ok(Some((_, event))) = parser.next_event() {
        if let Ok(message) = serde_json::from_str::<Value>(&event.data)
            && message.get("id") == Some(id)
            && message.get("method").is_none()
        {
            found = Some(message);
        }
    }
    found
}
