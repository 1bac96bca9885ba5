//! Reading cassettes back: which files a set of paths names, and every
//! exchange, service answer and model exchange they hold, in recorded
//! order.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rusqlite::Connection;

use super::Cassette;
use crate::error::{CassetteError, Error};
use crate::model::{
    AnswerTemplate, Aside, Exchange, LlmExchange, Provenance, RecordedMessage, ServiceAnswer, Source, Status,
    StreamShape, TemplateFailure, Text,
};
use crate::util;

/// The cassette files that `paths` name: a directory stands for the
/// `*.sqlite` files in it and in its subdirectories (sorted by path;
/// hidden directories and links to directories are not entered), a file
/// for itself.
///
/// # Errors
///
/// A path that does not exist or a directory that cannot be read.
pub fn cassette_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, Error> {
    let mut files = Vec::new();
    for path in paths {
        let metadata =
            std::fs::metadata(path).map_err(|source| Error::Read { path: path.clone(), source })?;
        if metadata.is_dir() {
            files.extend(
                util::files_under(path, "sqlite").map_err(|(path, source)| Error::Read { path, source })?,
            );
        } else {
            files.push(path.clone());
        }
    }
    Ok(files)
}

/// What a set of cassettes holds. `J` is how exchanges hold their JSON.
#[derive(Debug, Default)]
pub struct Loaded<J = serde_json::Value> {
    pub exchanges: Vec<Exchange<J>>,
    pub service_answers: Vec<ServiceAnswer>,
    pub templates: Vec<AnswerTemplate>,
    pub llm_exchanges: Vec<LlmExchange>,
    /// The fingerprints of the keys the recordings were pseudonymized
    /// with, each once.
    pub pseudonym_keys: Vec<String>,
}

impl<J> Loaded<J> {
    /// Notes `keys` among the keys the recordings were pseudonymized with.
    fn note_keys(&mut self, keys: Vec<String>) {
        for key in keys {
            if !self.pseudonym_keys.contains(&key) {
                self.pseudonym_keys.push(key);
            }
        }
    }
}

/// What one cassette holds, exchanges as stored.
#[derive(Debug, Default)]
pub struct Everything {
    pub exchanges: Vec<Exchange<Text>>,
    pub service_answers: Vec<ServiceAnswer>,
    pub templates: Vec<AnswerTemplate>,
    pub llm_exchanges: Vec<LlmExchange>,
}

/// Everything in `files`, file by file, each in recorded order. Files are
/// opened read-only ([`Cassette::open_read_only`]) and each is read in one
/// transaction.
///
/// # Errors
///
/// The first file that cannot be opened or read, named in the error.
pub fn load(files: &[PathBuf]) -> Result<Loaded, Error> {
    let mut loaded = Loaded::default();
    for file in files {
        let cassette = Cassette::open_read_only(file)?;
        let everything = cassette.read_everything()?;
        loaded.note_keys(cassette.pseudonym_keys()?);
        for exchange in everything.exchanges {
            let damaged =
                |why| Error::Cassette { path: file.clone(), kind: CassetteError::Damaged { id: 0, why } };
            loaded.exchanges.push(exchange.parse().map_err(damaged)?);
        }
        loaded.service_answers.extend(everything.service_answers);
        loaded.templates.extend(everything.templates);
        loaded.llm_exchanges.extend(everything.llm_exchanges);
    }
    Ok(loaded)
}

/// [`load`], with the JSON of exchanges left as stored (what replay indexes).
///
/// # Errors
///
/// The first file that cannot be opened or read, named in the error.
pub fn load_as_text(files: &[PathBuf]) -> Result<Loaded<Text>, Error> {
    let mut loaded = Loaded::default();
    for file in files {
        let cassette = Cassette::open_read_only(file)?;
        let everything = cassette.read_everything()?;
        loaded.note_keys(cassette.pseudonym_keys()?);
        loaded.exchanges.extend(everything.exchanges);
        loaded.service_answers.extend(everything.service_answers);
        loaded.templates.extend(everything.templates);
        loaded.llm_exchanges.extend(everything.llm_exchanges);
    }
    Ok(loaded)
}

pub(super) fn read_service_answers(conn: &Connection) -> Result<Vec<ServiceAnswer>, CassetteError> {
    let mut select = conn
        .prepare("SELECT id, route, upstream, status, content_type, body FROM service_answer ORDER BY id")?;
    let mut rows = select.query([])?;
    let mut answers = Vec::new();
    while let Some(row) = rows.next()? {
        let id: i64 = row.get(0)?;
        let damaged = |why: String| CassetteError::Damaged { id, why };
        answers.push(ServiceAnswer {
            route: row.get(1).map_err(|e| damaged(conversion(e)))?,
            upstream: row.get(2)?,
            status: status(row.get(3)?).map_err(damaged)?,
            content_type: row.get(4)?,
            body: row.get(5)?,
        });
    }
    Ok(answers)
}

/// Every answer template `conn` reads (schema `version`), by server and tool.
pub(super) fn read_templates(conn: &Connection, version: i64) -> Result<Vec<AnswerTemplate>, CassetteError> {
    // Failures arrived with schema 5; an older file has none.
    let failures = if version >= 5 { "error_rate, error_seed, error_status" } else { "NULL, NULL, NULL" };
    let mut select = conn.prepare(&format!(
        "SELECT id, server, tool, description, input_schema, text, delay_ms, {failures} \
         FROM answer_template ORDER BY server, tool"
    ))?;
    let mut rows = select.query([])?;
    let mut templates = Vec::new();
    while let Some(row) = rows.next()? {
        let id: i64 = row.get(0)?;
        let schema: String = row.get(4)?;
        templates.push(AnswerTemplate {
            server: row.get(1)?,
            tool: row.get(2)?,
            description: row.get(3)?,
            input_schema: serde_json::from_str(&schema)
                .map_err(|e| CassetteError::Damaged { id, why: format!("template input schema: {e}") })?,
            text: row.get(5)?,
            delay_ms: row.get::<_, i64>(6)?.max(0) as u64,
            failure: match row.get::<_, Option<f64>>(7)? {
                Some(rate) if (0.0..=1.0).contains(&rate) => Some(TemplateFailure {
                    rate,
                    seed: row.get::<_, Option<i64>>(8)?.unwrap_or(0) as u64,
                    status: row.get::<_, Option<u16>>(9).map_err(|e| CassetteError::Damaged {
                        id,
                        why: format!("template error status: {e}"),
                    })?,
                }),
                Some(rate) => {
                    return Err(CassetteError::Damaged { id, why: format!("template error rate {rate}") });
                }
                None => None,
            },
        });
    }
    Ok(templates)
}

pub(super) fn read_all(
    conn: &Connection,
    path: &Path,
    version: i64,
) -> Result<Vec<Exchange<Text>>, CassetteError> {
    let cassette: Arc<Path> = Arc::from(path);
    let mut exchanges: Vec<(i64, Exchange<Text>)> = Vec::new();
    let mut select = conn.prepare(&exchange_query(version))?;
    let mut rows = select.query([])?;
    while let Some(row) = rows.next()? {
        exchanges.push(exchange_of(row, &cassette)?);
    }
    let mut select = conn.prepare(&format!("{MESSAGE_QUERY} ORDER BY exchange_id, seq"))?;
    let mut rows = select.query([])?;
    let mut slot = 0;
    while let Some(row) = rows.next()? {
        let (id, message) = message_of(row)?;
        while slot < exchanges.len() && exchanges[slot].0 < id {
            slot += 1;
        }
        match exchanges.get_mut(slot) {
            Some((found, exchange)) if *found == id => exchange.messages.push(message),
            _ => return Err(CassetteError::Damaged { id, why: "message without its exchange".into() }),
        }
    }
    if version >= 6 {
        let mut select = conn.prepare(&format!("{} ORDER BY exchange_id, seq", aside_query(version)))?;
        let mut rows = select.query([])?;
        while let Some(row) = rows.next()? {
            let (id, aside) = aside_of(row)?;
            match exchanges.binary_search_by_key(&id, |(found, _)| *found) {
                Ok(slot) => exchanges[slot].1.asides.push(aside),
                Err(_) => {
                    return Err(CassetteError::Damaged { id, why: "an aside without its exchange".into() });
                }
            }
        }
    }
    for (id, exchange) in &exchanges {
        answered(*id, exchange)?;
    }
    Ok(exchanges.into_iter().map(|(_, exchange)| exchange).collect())
}

/// Each exchange of `conn` in recorded order, read one at a time (its
/// messages and asides through their tables' primary keys) and handed to
/// `each`, which has it to itself: memory holds one exchange however many
/// the cassette has. The walk ends at `each`'s first error, which is
/// handed back inside an `Ok` (an `Err` is a failure to read).
pub(super) fn each_exchange<E>(
    conn: &Connection,
    path: &Path,
    version: i64,
    each: &mut dyn FnMut(Exchange<Text>) -> Result<(), E>,
) -> Result<Result<(), E>, CassetteError> {
    let cassette: Arc<Path> = Arc::from(path);
    let mut select = conn.prepare(&exchange_query(version))?;
    let mut messages = conn.prepare(&format!("{MESSAGE_QUERY} WHERE exchange_id = ?1 ORDER BY seq"))?;
    let mut asides = match version {
        6.. => Some(conn.prepare(&format!("{} WHERE exchange_id = ?1 ORDER BY seq", aside_query(version)))?),
        _ => None,
    };
    let mut rows = select.query([])?;
    while let Some(row) = rows.next()? {
        let (id, mut exchange) = exchange_of(row, &cassette)?;
        let mut rows = messages.query([id])?;
        while let Some(row) = rows.next()? {
            exchange.messages.push(message_of(row)?.1);
        }
        if let Some(asides) = &mut asides {
            let mut rows = asides.query([id])?;
            while let Some(row) = rows.next()? {
                exchange.asides.push(aside_of(row)?.1);
            }
        }
        answered(id, &exchange)?;
        if let Err(stopped) = each(exchange) {
            return Ok(Err(stopped));
        }
    }
    Ok(Ok(()))
}

/// The exchange rows' columns as schema `version` has them, in id order.
fn exchange_query(version: i64) -> String {
    // Provenance arrived with schema 3; an older file has none.
    let provenance = if version >= 3 { "recorded_at, upstream, recorder" } else { "NULL, NULL, NULL" };
    // And the stream's shape with schema 7.
    let shape = if version >= 7 { "sse_primed, sse_retry_ms, sse_closed_after" } else { "0, NULL, NULL" };
    // Before schema 8 every message was stored with its keys sorted.
    let sorted = if version >= 8 { "keys_sorted" } else { "1" };
    format!(
        "SELECT id, server, era, protocol_version, method, match_key, request, status, content_type, \
         {provenance}, {shape}, occurrence, {sorted} FROM exchange ORDER BY id"
    )
}

/// One row of [`exchange_query`], with no messages or asides yet.
fn exchange_of(
    row: &rusqlite::Row<'_>,
    cassette: &Arc<Path>,
) -> Result<(i64, Exchange<Text>), CassetteError> {
    let id: i64 = row.get(0)?;
    let damaged = |why: String| CassetteError::Damaged { id, why };
    let request: String = row.get(6)?;
    let key = row.get(5).map_err(|e| damaged(conversion(e)))?;
    let source = Source { cassette: Arc::clone(cassette), row: id, key, occurrence: row.get(15)? };
    let exchange = Exchange {
        server: row.get(1)?,
        era: row.get(2).map_err(|e| damaged(conversion(e)))?,
        protocol_version: row.get(3)?,
        method: row.get(4)?,
        key,
        request: checked_json(request).map_err(damaged)?,
        status: status(row.get(7)?).map_err(damaged)?,
        content_type: row.get(8)?,
        messages: Vec::new(),
        asides: Vec::new(),
        stream: StreamShape {
            primed: row.get(12)?,
            retry_ms: row.get::<_, Option<i64>>(13)?.map(|ms| ms.max(0) as u64),
            closed_after: row.get(14)?,
        },
        provenance: Provenance {
            recorded_at: row.get(9)?,
            upstream: row.get(10)?,
            recorder: row.get(11)?,
            keys_sorted: row.get(16)?,
        },
        source: Some(source),
    };
    Ok((id, exchange))
}

/// The message rows' columns; a row of it is [`message_of`].
const MESSAGE_QUERY: &str = "SELECT exchange_id, offset_ms, direction, body FROM message";

/// One row of [`MESSAGE_QUERY`], with its exchange's id.
fn message_of(row: &rusqlite::Row<'_>) -> Result<(i64, RecordedMessage<Text>), CassetteError> {
    let id: i64 = row.get(0)?;
    Ok((id, recorded_message(row, id, 1)?))
}

/// The message in a row's offset, direction and body, the columns from
/// `first` on, of exchange `id`.
fn recorded_message(
    row: &rusqlite::Row<'_>,
    id: i64,
    first: usize,
) -> Result<RecordedMessage<Text>, CassetteError> {
    let damaged = |why: String| CassetteError::Damaged { id, why };
    let body: String = row.get(first + 2)?;
    Ok(RecordedMessage {
        offset_ms: row.get::<_, i64>(first)?.max(0) as u64,
        direction: row.get(first + 1).map_err(|e| damaged(conversion(e)))?,
        body: checked_json(body).map_err(damaged)?,
        written: None,
        shallow: false,
    })
}

/// The aside rows' columns (schema 6 on) as schema `version` has them.
fn aside_query(version: i64) -> String {
    // Whether one came while its exchange was in flight is known from schema 9.
    let in_flight = if version >= 9 { "in_flight" } else { "0" };
    format!("SELECT exchange_id, after, channel, offset_ms, direction, body, {in_flight} FROM aside")
}

/// One row of [`aside_query`], with its exchange's id.
fn aside_of(row: &rusqlite::Row<'_>) -> Result<(i64, Aside<Text>), CassetteError> {
    let id: i64 = row.get(0)?;
    let aside = Aside {
        after: row.get(1)?,
        in_flight: row.get(6)?,
        channel: row.get(2).map_err(|e| CassetteError::Damaged { id, why: conversion(e) })?,
        message: recorded_message(row, id, 3)?,
    };
    Ok((id, aside))
}

/// Refuses an exchange with no message: replay would have nothing to send
/// (over stdio the client would wait for ever).
fn answered(id: i64, exchange: &Exchange<Text>) -> Result<(), CassetteError> {
    if exchange.messages.is_empty() {
        return Err(CassetteError::Damaged { id, why: "it holds no answer (no message)".into() });
    }
    Ok(())
}

/// What a stored column that is not one of ours holds, as its
/// [`FromSql`](rusqlite::types::FromSql) conversion names it.
fn conversion(error: rusqlite::Error) -> String {
    match error {
        rusqlite::Error::FromSqlConversionFailure(_, _, why) => why.to_string(),
        other => other.to_string(),
    }
}

/// A stored HTTP status, if it is one.
pub(super) fn status(code: i64) -> Result<Status, String> {
    u16::try_from(code).ok().and_then(Status::new).ok_or_else(|| format!("bad status {code}"))
}

/// Stored JSON as it is, once its syntax is known to be sound (checked
/// without building it, so a damaged row is reported here, with its id).
fn checked_json(text: String) -> Result<Text, String> {
    match serde_json::from_str::<serde::de::IgnoredAny>(&text) {
        Ok(_) => Ok(text.into_boxed_str()),
        Err(e) => Err(format!("stored JSON does not parse: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_json_is_checked_for_its_syntax_not_for_what_serde_json_reads() {
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        for readable_or_not in [r#"{"a":"\ud800"}"#, "[1e999]", &deep, r#"{"a":1,"a":2}"#] {
            assert!(checked_json(readable_or_not.into()).is_ok(), "{readable_or_not}");
        }
        for broken in ["[}", r#"{"a":"#, "nul", "", r#"{"a":1}x"#, "[1,]"] {
            let why = checked_json(broken.into()).unwrap_err();
            assert!(why.starts_with("stored JSON does not parse"), "{broken}: {why}");
        }
    }
}
