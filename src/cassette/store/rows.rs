//! Writing rows: an exchange with its messages and asides, numbered by
//! occurrence of its match key; a service answer; an answer template; an
//! import's one transaction ([`Importing`]); a writer batch's entries.

use std::path::Path;

use rusqlite::{Connection, params};

use super::{Tag, llm};
use crate::error::Error;
use crate::model::{AnswerTemplate, Aside, Exchange, LlmExchange, MatchKey, ServiceAnswer, canonical_json};

/// A cassette being written in one transaction ([`Cassette::import`]).
pub struct Importing<'c> {
    pub(super) tx: rusqlite::Transaction<'c>,
    pub(super) path: &'c Path,
}

impl Importing<'_> {
    /// Adds an exchange as the next occurrence of its key.
    ///
    /// # Errors
    ///
    /// An SQLite failure.
    pub fn exchange(&mut self, exchange: &Exchange) -> Result<(), Error> {
        let tx = &self.tx;
        let inserted = next_occurrence(tx, &exchange.key)
            .and_then(|occurrence| insert_exchange_rows(tx, exchange, occurrence));
        inserted.map(drop).map_err(|e| self.failed(e))
    }

    /// Adds a service answer.
    ///
    /// # Errors
    ///
    /// An SQLite failure.
    pub fn service(&mut self, answer: &ServiceAnswer) -> Result<(), Error> {
        insert_service_row(&self.tx, answer).map_err(|e| self.failed(e))
    }

    /// Adds a model exchange.
    ///
    /// # Errors
    ///
    /// An SQLite failure.
    pub fn llm(&mut self, exchange: &LlmExchange) -> Result<(), Error> {
        llm::insert(&self.tx, exchange).map_err(|e| self.failed(e))
    }

    /// Adds an answer template, replacing one for the same server and tool.
    ///
    /// # Errors
    ///
    /// An SQLite failure.
    pub fn template(&mut self, template: &AnswerTemplate) -> Result<(), Error> {
        upsert_template_row(&self.tx, template).map_err(|e| self.failed(e))
    }

    /// Notes the key of `fingerprint` among those the recordings were
    /// pseudonymized with.
    ///
    /// # Errors
    ///
    /// An SQLite failure.
    pub fn pseudonym_key(&mut self, fingerprint: &str) -> Result<(), Error> {
        insert_pseudonym_key(&self.tx, fingerprint).map_err(|e| self.failed(e))
    }

    fn failed(&self, error: rusqlite::Error) -> Error {
        Error::Cassette { path: self.path.to_owned(), kind: error.into() }
    }
}

/// Notes the key of `fingerprint` among those the recordings were
/// pseudonymized with (once).
pub(super) fn insert_pseudonym_key(conn: &Connection, fingerprint: &str) -> rusqlite::Result<()> {
    conn.execute("INSERT OR IGNORE INTO pseudonym_key (fingerprint) VALUES (?1)", [fingerprint]).map(drop)
}

/// Writes `template`, replacing one for the same (server, tool).
pub(super) fn upsert_template_row(conn: &Connection, template: &AnswerTemplate) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO answer_template (server, tool, description, input_schema, text, delay_ms, \
         error_rate, error_seed, error_status) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) \
         ON CONFLICT (server, tool) DO UPDATE SET description = excluded.description, \
         input_schema = excluded.input_schema, text = excluded.text, delay_ms = excluded.delay_ms, \
         error_rate = excluded.error_rate, error_seed = excluded.error_seed, \
         error_status = excluded.error_status",
    )?
    .execute(params![
        template.server,
        template.tool,
        template.description,
        canonical_json(&template.input_schema),
        template.text,
        i64::try_from(template.delay_ms).unwrap_or(i64::MAX),
        template.failure.as_ref().map(|f| f.rate),
        // SQLite integers are signed: the seed's bits are kept as they are.
        template.failure.as_ref().map(|f| f.seed as i64),
        template.failure.as_ref().and_then(|f| f.status),
    ])
    .map(drop)
}

/// One thing for a cassette to store.
#[derive(Debug)]
pub enum Entry {
    /// An exchange, with the recorder's tag for the asides that may follow it.
    Exchange(Box<Exchange>, Option<Tag>),
    /// What the server said on its own after the exchange tagged so, once
    /// that exchange was stored already.
    Asides(Tag, Vec<Aside>),
    Service(Box<ServiceAnswer>),
    Llm(Box<LlmExchange>),
}

/// The same SQLite error again (one failure reported for each entry it failed).
pub(super) fn clone_error(error: &rusqlite::Error) -> rusqlite::Error {
    match error {
        rusqlite::Error::SqliteFailure(code, message) => {
            rusqlite::Error::SqliteFailure(*code, message.clone())
        }
        other => rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ERROR),
            Some(other.to_string()),
        ),
    }
}

/// The occurrence number the next exchange of `key` gets: one index probe
/// on (match_key, occurrence), however many repeats.
pub(super) fn next_occurrence(conn: &Connection, key: &MatchKey) -> rusqlite::Result<i64> {
    conn.prepare_cached("SELECT coalesce(max(occurrence) + 1, 0) FROM exchange WHERE match_key = ?1")?
        .query_row(params![key], |r| r.get(0))
}

/// Inserts an exchange as occurrence `occurrence` of its key, its messages
/// and its asides, through `conn` (inside a transaction the caller owns);
/// returns its row.
pub(super) fn insert_exchange_rows(
    conn: &Connection,
    exchange: &Exchange,
    occurrence: i64,
) -> rusqlite::Result<i64> {
    conn.prepare_cached(
        "INSERT INTO exchange (server, era, protocol_version, method, match_key, occurrence, \
         request, status, content_type, recorded_at, upstream, recorder, sse_primed, sse_retry_ms, \
         sse_closed_after, keys_sorted) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
    )?
    .execute(params![
        exchange.server,
        exchange.era,
        exchange.protocol_version,
        exchange.method,
        exchange.key,
        occurrence,
        canonical_json(&exchange.request),
        exchange.status.as_u16(),
        exchange.content_type,
        exchange.provenance.recorded_at,
        exchange.provenance.upstream,
        exchange.provenance.recorder,
        exchange.stream.primed,
        exchange.stream.retry_ms.map(|ms| ms.min(i64::MAX as u64) as i64),
        exchange.stream.closed_after,
        exchange.provenance.keys_sorted,
    ])?;
    let id = conn.last_insert_rowid();
    let mut insert = conn.prepare_cached(
        "INSERT INTO message (exchange_id, seq, offset_ms, direction, body) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?;
    for (seq, message) in exchange.messages.iter().enumerate() {
        insert.execute(params![
            id,
            seq as i64,
            message.offset_ms as i64,
            message.direction,
            message.as_sent(),
        ])?;
    }
    insert_aside_rows(conn, id, &exchange.asides)?;
    Ok(id)
}

/// Adds `asides` after those exchange `row` holds already.
pub(super) fn insert_aside_rows(conn: &Connection, row: i64, asides: &[Aside]) -> rusqlite::Result<()> {
    if asides.is_empty() {
        return Ok(());
    }
    let first: i64 = conn
        .prepare_cached("SELECT coalesce(max(seq) + 1, 0) FROM aside WHERE exchange_id = ?1")?
        .query_row(params![row], |r| r.get(0))?;
    let mut insert = conn.prepare_cached(
        "INSERT INTO aside (exchange_id, seq, after, channel, offset_ms, direction, body, in_flight) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?;
    for (seq, aside) in (first..).zip(asides) {
        insert.execute(params![
            row,
            seq,
            aside.after,
            aside.channel,
            aside.message.offset_ms as i64,
            aside.message.direction,
            aside.message.as_sent(),
            aside.in_flight,
        ])?;
    }
    Ok(())
}

/// Runs a statement without parameters or rows, prepared once per connection.
pub(super) fn run_cached(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(drop)
}

pub(super) fn insert_service_row(conn: &Connection, answer: &ServiceAnswer) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT INTO service_answer (route, upstream, status, content_type, body) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![answer.route, answer.upstream, answer.status.as_u16(), answer.content_type, answer.body],
    )
    .map(drop)
}
