//! The agent's model on the cassette: its exchanges written and read back
//! (schema 10), a streamed answer's events in their own rows.

use std::path::Path;
use std::sync::Arc;

use rusqlite::{Connection, params};

use super::load::status;
use crate::error::CassetteError;
use crate::model::{LlmAnswer, LlmEvent, LlmExchange, LlmSource};

/// Model exchanges arrived with schema 10.
pub(super) const SINCE: i64 = 10;

/// Inserts `exchange` and its events through `conn` (inside a transaction
/// the caller owns).
pub(super) fn insert(conn: &Connection, exchange: &LlmExchange) -> rusqlite::Result<()> {
    let body = match &exchange.answer {
        LlmAnswer::Whole(body) => Some(body.as_str()),
        LlmAnswer::Events(_) => None,
    };
    conn.prepare_cached(
        "INSERT INTO model_exchange (model, method, target, request, status, content_type, body, recorded_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![
        exchange.model,
        exchange.method,
        exchange.target,
        exchange.request,
        exchange.status.as_u16(),
        exchange.content_type,
        body,
        exchange.recorded_at,
    ])?;
    let LlmAnswer::Events(events) = &exchange.answer else { return Ok(()) };
    let id = conn.last_insert_rowid();
    let mut insert = conn.prepare_cached(
        "INSERT INTO model_event (exchange_id, seq, offset_ms, event) VALUES (?1, ?2, ?3, ?4)",
    )?;
    for (seq, event) in (0_i64..).zip(events) {
        insert.execute(params![id, seq, i64::try_from(event.offset_ms).unwrap_or(i64::MAX), event.text])?;
    }
    Ok(())
}

/// Every model exchange `conn` (the cassette at `path`) holds, in recorded order.
pub(super) fn read(conn: &Connection, path: &Path) -> Result<Vec<LlmExchange>, CassetteError> {
    let cassette: Arc<Path> = Arc::from(path);
    let mut select = conn.prepare(
        "SELECT id, model, method, target, request, status, content_type, body, recorded_at \
         FROM model_exchange ORDER BY id",
    )?;
    let mut events =
        conn.prepare("SELECT offset_ms, event FROM model_event WHERE exchange_id = ?1 ORDER BY seq")?;
    let mut rows = select.query([])?;
    let mut exchanges = Vec::new();
    while let Some(row) = rows.next()? {
        let id: i64 = row.get(0)?;
        let body: Option<String> = row.get(7)?;
        let answer = match body {
            Some(body) => LlmAnswer::Whole(body),
            None => LlmAnswer::Events(
                events
                    .query_map(params![id], |event| {
                        let offset_ms: i64 = event.get(0)?;
                        Ok(LlmEvent { offset_ms: u64::try_from(offset_ms).unwrap_or(0), text: event.get(1)? })
                    })?
                    .collect::<rusqlite::Result<_>>()?,
            ),
        };
        exchanges.push(LlmExchange {
            model: row.get(1)?,
            method: row.get(2)?,
            target: row.get(3)?,
            request: row.get(4)?,
            status: status(row.get(5)?).map_err(|why| CassetteError::Damaged { id, why })?,
            content_type: row.get(6)?,
            answer,
            recorded_at: row.get(8)?,
            source: Some(LlmSource { cassette: Arc::clone(&cassette), row: id }),
        });
    }
    Ok(exchanges)
}

/// Removes the model exchanges of these rows (their events with them), each
/// only if it still holds the exchange `holds` says (a row re-recorded since,
/// or gone, is kept and said); returns what was removed and what was kept,
/// as [`super::Removed`] tells it.
pub(super) fn remove(
    conn: &mut Connection,
    rows: &[(i64, String)],
    holds: impl Fn(i64, &LlmExchange) -> bool,
    path: &Path,
) -> Result<super::Removed, CassetteError> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let mut done = super::Removed::default();
    {
        let present = read(&tx, path)?;
        for (row, told) in rows {
            match present.iter().find(|exchange| exchange.source.as_ref().is_some_and(|s| s.row == *row)) {
                Some(exchange) if holds(*row, exchange) => {
                    tx.execute("DELETE FROM model_exchange WHERE id = ?1", params![row])?;
                    done.removed.push((*row, told.clone()));
                }
                Some(exchange) => done.kept.push((
                    *row,
                    format!("model {} {} {}", exchange.model, exchange.method, exchange.target),
                )),
                None => done.kept.push((*row, String::new())),
            }
        }
    }
    tx.commit()?;
    Ok(done)
}
