//! Recordings made by other tools, read into exchanges: HAR 1.2 files
//! ([`har`], which also writes a cassette as HAR), the MCP Inspector's
//! protocol history and the cassettes of mcp-cassette, mcp-recorder and
//! mcp-vcr (`transcript`).
//!
//! Each reader turns its file into [`ReadExchange`] requests, each with what the
//! file says of its answer; [`import`] then decides what the file may leave
//! open the way record does (the era and protocol version from the headers,
//! the request's `_meta` and the session's `initialize`), scrubs the
//! request's credentials (its headers and credential-like keys) from all of
//! it, normalizes it, and writes every exchange of every file in one
//! transaction: a bad entry anywhere writes nothing.

pub mod har;
mod transcript;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::cassette::store::Cassette;
use crate::error::Error;
use crate::limits::{MAX_FOREIGN_FILE_BYTES, MAX_SECRETS_PER_EXCHANGE};
use crate::mcp;
use crate::model::{Aside, Direction, Era, Provenance, RawExchange, RecordedMessage, Status, StreamShape};
use crate::normalize::Rules;
use crate::redact;

/// One request with its answer, as another tool's file has it: what
/// [`import`] still has to decide is left open (`None`, empty).
#[derive(Debug, Default)]
pub struct ReadExchange {
    /// Where in its file, for errors: `entry 3`, `line 7`.
    pub at: String,
    /// The server's name; `None` takes the one `import` was given, else the file's.
    pub server: Option<String>,
    /// The request's HTTP headers (names lowercase), where the file has them.
    pub headers: Vec<(String, String)>,
    /// The session the request belonged to (`Mcp-Session-Id`), where known.
    pub session: Option<String>,
    pub request: Value,
    pub status: Option<u16>,
    /// `None`: a stream when there is more than one message, as record decides for stdio.
    pub content_type: Option<String>,
    pub messages: Vec<RecordedMessage>,
    pub asides: Vec<Aside>,
    pub stream: StreamShape,
    /// What the file says of the exchange where it said it (a HAR of ours).
    pub era: Option<Era>,
    pub protocol_version: Option<String>,
    pub provenance: Provenance,
}

/// The formats `import --from` reads, in the order `--help` lists them: a
/// new format is one entry here.
pub const READERS: [Reader; 5] = [
    Reader {
        name: "har",
        about: "HAR 1.2, as browsers, mitmproxy and Charles save it",
        read: har::read,
        server_of_name: None,
    },
    Reader {
        name: "inspector",
        about: "the MCP Inspector's protocol history export (inspector-protocol-*.json)",
        read: transcript::inspector,
        server_of_name: Some(transcript::inspector_server),
    },
    Reader {
        name: "mcp-cassette",
        about: "an mcp-cassette cassette (JSON Lines, format v1 or v2)",
        read: transcript::mcp_cassette,
        server_of_name: None,
    },
    Reader {
        name: "mcp-recorder",
        about: "an mcp-recorder cassette (JSON)",
        read: transcript::mcp_recorder,
        server_of_name: None,
    },
    Reader {
        name: "mcp-vcr",
        about: "an mcp-vcr transcript (YAML or NDJSON)",
        read: transcript::mcp_vcr,
        server_of_name: None,
    },
];

/// The reader of one format of another tool's recordings.
#[derive(Debug)]
pub struct Reader {
    /// What `--from` calls it.
    pub name: &'static str,
    /// What it reads, for `--help`.
    pub about: &'static str,
    read: fn(&str) -> Result<ReadFile, String>,
    /// The server a file's name (without its extension) gives, where the
    /// format names files after their server; else the name itself.
    server_of_name: Option<fn(&str) -> Option<String>>,
}

/// The reader `--from` calls `name`.
pub fn reader(name: &str) -> Option<&'static Reader> {
    READERS.iter().find(|reader| reader.name == name)
}

/// What a reader made of one file: the requests, and what it left out and why.
#[derive(Debug, Default)]
pub struct ReadFile {
    pub heard: Vec<ReadExchange>,
    /// Server name the file itself gives (a URL's path, a file name), for entries without one.
    pub server: Option<String>,
    /// What was left out: (what, how many).
    pub skipped: BTreeMap<String, usize>,
}

impl ReadFile {
    pub fn skip(&mut self, what: impl Into<String>) {
        *self.skipped.entry(what.into()).or_default() += 1;
    }

    /// Adds a client's reply to the exchange whose answer carried the
    /// server's request with its id, at `offset_of(that exchange's index,
    /// it)`, or, where an aside carried the request, as an aside beside it
    /// (the latest such, as record ties them).
    pub fn join_reply(
        &mut self,
        id: &Value,
        reply: Value,
        offset_of: impl FnOnce(usize, &ReadExchange) -> u64,
    ) {
        let asks = |body: &Value| body.get("method").is_some() && body.get("id") == Some(id);
        for (index, heard) in self.heard.iter_mut().enumerate().rev() {
            if heard.messages.iter().any(|m| asks(&m.body)) {
                let offset_ms = offset_of(index, heard);
                heard.messages.push(RecordedMessage::new(offset_ms, Direction::Client, reply));
                return;
            }
            if let Some(aside) = heard.asides.iter().rev().find(|a| asks(&a.message.body)) {
                let (after, channel) = (aside.after.clone(), aside.channel);
                let message = RecordedMessage::new(0, Direction::Client, reply);
                heard.asides.push(Aside { after, in_flight: false, channel, message });
                return;
            }
        }
        self.skip("client reply to a request the file does not hold");
    }
}

/// The server a URL names: the Agent 365 name in its path, else the path.
fn server_of_url(url: &str) -> String {
    let after_scheme = url.split_once("://").map_or(url, |(_, rest)| rest);
    let path = after_scheme.find('/').map_or("/", |at| &after_scheme[at..]);
    crate::agent365::server_name(path.split(['?', '#']).next().unwrap_or("/")).to_owned()
}

/// What an import wrote.
#[derive(Debug, Default)]
pub struct Imported {
    pub exchanges: usize,
    pub skipped: BTreeMap<String, usize>,
}

/// Reads every file with `reader`, and writes their exchanges into
/// `cassette` in one transaction. `server` names the server of every
/// exchange (else each file's own: its URLs, else its name).
///
/// # Errors
///
/// A file that cannot be read or is not of the format, an entry that cannot
/// be an exchange (named by file, entry and reason): then nothing is
/// written. A store failure.
pub fn import(
    reader: &Reader,
    files: &[PathBuf],
    server: Option<&str>,
    cassette: &mut Cassette,
) -> Result<Imported, Error> {
    let rules = Rules::default();
    let mut imported = Imported::default();
    // One file held at a time, its exchanges written as they are made: the
    // transaction commits after the last file, or not at all.
    cassette.import(|importing| {
        for file in files {
            let bad = |why: String| Error::Config(format!("{} ({}): {why}", file.display(), reader.name));
            let text = read_regular_file(file, MAX_FOREIGN_FILE_BYTES, "a recording")?;
            let stem = file.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
            let file_server = reader.server_of_name.and_then(|server_of| server_of(&stem)).unwrap_or(stem);
            let (exchanges, skipped) =
                exchanges(reader, &text, server.unwrap_or(&file_server), server.is_some(), &rules)
                    .map_err(bad)?;
            for (number, exchange) in exchanges.iter().enumerate() {
                if let Some(why) = exchange.over_record_bounds() {
                    return Err(bad(format!("exchange {} ({}): {why}", number + 1, exchange.method)));
                }
                importing.exchange(exchange)?;
            }
            imported.exchanges += exchanges.len();
            for (what, count) in skipped {
                *imported.skipped.entry(what).or_default() += count;
            }
        }
        Ok(())
    })?;
    cassette.settle();
    Ok(imported)
}

/// The exchanges of one file's `text`, read by `reader`, normalized and
/// scrubbed, and what was left out. `server` names them where the file
/// does not (or always, when `overrides`).
///
/// # Errors
///
/// Text that is not of the format, or an entry that cannot be an exchange
/// (by entry or line, and reason).
pub fn exchanges(
    reader: &Reader,
    text: &str,
    server: &str,
    overrides: bool,
    rules: &Rules,
) -> Result<(Vec<crate::model::Exchange>, BTreeMap<String, usize>), String> {
    let read = (reader.read)(text)?;
    let file_server = read.server.filter(|_| !overrides).unwrap_or_else(|| server.to_owned());
    let mut versions = Versions::default();
    let mut exchanges = Vec::with_capacity(read.heard.len());
    for heard in read.heard {
        let server = match heard.server.clone().filter(|_| !overrides) {
            Some(server) => server,
            None => file_server.clone(),
        };
        let at = heard.at.clone();
        exchanges.push(versions.exchange(heard, server, rules).map_err(|why| format!("{at}: {why}"))?);
    }
    Ok((exchanges, read.skipped))
}

/// The text of `file`, `what` it is meant to be: a regular file (through
/// links) of at most `limit` bytes; a FIFO, a device or a directory is
/// refused before it is opened, and a file that grows past the limit while
/// it is read is refused too.
///
/// # Errors
///
/// [`Error::Read`] when it cannot be read, [`Error::Config`] when it is no
/// regular file, too large or not UTF-8.
pub fn read_regular_file(file: &Path, limit: u64, what: &str) -> Result<String, Error> {
    use std::io::Read;
    let refused = |why: String| Error::Config(format!("{}: {why}", file.display()));
    let io = |source| Error::Read { path: file.to_owned(), source };
    let metadata = std::fs::metadata(file).map_err(io)?;
    if !metadata.is_file() {
        return Err(refused(format!("not a regular file; {what} must be one")));
    }
    let too_large = || refused(format!("larger than {limit} bytes; not {what}"));
    if metadata.len() > limit {
        return Err(too_large());
    }
    let mut text = String::new();
    let opened = std::fs::File::open(file).map_err(io)?;
    opened.take(limit + 1).read_to_string(&mut text).map_err(io)?;
    if text.len() as u64 > limit {
        return Err(too_large());
    }
    Ok(text)
}

/// The protocol versions `initialize` answers negotiated, by session and
/// by server: what a later request without a version header spoke.
#[derive(Default)]
struct Versions {
    by_session: HashMap<String, String>,
    by_server: HashMap<String, String>,
}

impl Versions {
    /// The stored form of `heard`: era and version decided, credentials
    /// scrubbed, normalized.
    fn exchange(
        &mut self,
        heard: ReadExchange,
        server: String,
        rules: &Rules,
    ) -> Result<crate::model::Exchange, String> {
        let method =
            heard.request.get("method").and_then(Value::as_str).ok_or("the request has no method")?;
        if heard.messages.is_empty() {
            return Err("the request has no answer".into());
        }
        let header = |name: &str| heard.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str());
        let meta_version = heard
            .request
            .pointer("/params/_meta")
            .and_then(|meta| meta.get(mcp::META_PROTOCOL_VERSION))
            .and_then(Value::as_str);
        let said =
            heard.protocol_version.as_deref().or(header(mcp::HEADER_PROTOCOL_VERSION)).or(meta_version);
        let mut protocol_version = match said {
            Some(version) => version.to_owned(),
            None if method == "server/discover" => mcp::STATELESS_VERSIONS[0].to_owned(),
            None => heard
                .session
                .as_ref()
                .and_then(|s| self.by_session.get(s))
                .or_else(|| self.by_server.get(&server))
                .cloned()
                .unwrap_or_else(|| mcp::DEFAULT_HANDSHAKE_VERSION.to_owned()),
        };
        if method == "initialize" {
            let negotiated =
                heard.messages.iter().rev().find_map(|m| m.body.pointer("/result/protocolVersion"));
            if let Some(version) = negotiated.and_then(Value::as_str) {
                protocol_version = version.to_owned();
                if let Some(session) = &heard.session {
                    self.by_session.insert(session.clone(), version.to_owned());
                }
                self.by_server.insert(server.clone(), version.to_owned());
            }
        }
        let era = heard.era.unwrap_or_else(|| mcp::era_of(Some(&protocol_version)));
        let content_type = heard.content_type.unwrap_or_else(|| {
            let streamed = heard.messages.len() > 1;
            if streamed { "text/event-stream" } else { "application/json" }.to_owned()
        });
        let status = heard.status.unwrap_or(200);
        let status = Status::new(status).ok_or(format!("{status} is not an HTTP status"))?;
        let mut raw = RawExchange {
            server,
            era,
            protocol_version,
            request: heard.request,
            status,
            content_type,
            messages: heard.messages,
            asides: heard.asides,
            stream: heard.stream,
        };
        let mut secrets =
            redact::header_secrets(heard.headers.iter().map(|(n, v)| (n.as_str(), v.as_str())), &[]);
        secrets.extend(rules.sensitive_values(&raw.request));
        secrets.sort_unstable();
        secrets.dedup();
        if secrets.len() > MAX_SECRETS_PER_EXCHANGE {
            return Err(format!(
                "the request carries {} credential values, more than the {MAX_SECRETS_PER_EXCHANGE} scrubbed",
                secrets.len()
            ));
        }
        redact::scrub_exchange(&mut raw, &secrets);
        let mut exchange = rules.exchange(raw);
        exchange.provenance = heard.provenance;
        Ok(exchange)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_of_urls() {
        assert_eq!(server_of_url("https://h.example/agents/servers/mcp_Mail?x=1"), "mcp_Mail");
        assert_eq!(server_of_url("http://127.0.0.1:9/mcp#top"), "/mcp");
        assert_eq!(server_of_url("http://127.0.0.1:9/"), "/");
        assert_eq!(server_of_url("http://127.0.0.1:9"), "/");
    }
}
