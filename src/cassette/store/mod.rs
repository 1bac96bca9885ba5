//! SQLite cassettes. A cassette is one file holding normalized exchanges
//! (schema in `migrations/`). This module owns opening and migrating a file
//! and writing finished exchanges (the writer thread commits what queued up
//! while it was busy in one transaction; the rows each becomes are in
//! `rows`); [`load`] reads
//! cassettes back for replay, and `models` writes and reads the agent's
//! model exchanges. It speaks SQLite and the domain types of
//! `model`, nothing else: no protocol, no HTTP.
//!
//! ## Compatibility
//!
//! A file is recognized by its SQLite header and `application_id`. A file
//! that is not SQLite, belongs to another application, or was written by a
//! newer schema is refused with [`CassetteError`] before anything is written
//! to it. [`Cassette::open`] (record, import) migrates an older cassette in
//! place, all pending steps in one EXCLUSIVE transaction;
//! [`Cassette::open_read_only`] (replay, export) reads any known schema as it
//! is and never writes.
//!
//! ## Durability
//!
//! WAL mode with `synchronous = NORMAL`, each entry in a savepoint of its
//! own inside the batch's transaction: a crashed or killed process loses at
//! most the exchanges not yet committed (whose clients have not seen their
//! answers finish), and never corrupts the file (a power cut may also lose
//! the last commits).

mod llm;
mod load;
mod rows;
mod writer;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags, params};

pub use load::{Everything, Loaded, cassette_files, load, load_as_text};
pub use rows::{Entry, Importing};
use rows::{
    clone_error, insert_aside_rows, insert_exchange_rows, insert_service_row, next_occurrence, run_cached,
    upsert_template_row,
};
pub use writer::{Prepare, Writer, WriterHandle, WriterReport};

use crate::error::{CassetteError, Error};
use crate::limits::MAX_TAGGED_ROWS;
use crate::model::{AnswerTemplate, Exchange, LlmExchange, MatchKey, ServiceAnswer, Text, canonical_json};

/// What [`Cassette::remove`] did: each row removed, and each row kept
/// because it no longer holds what it was asked to remove (with what it
/// holds now; empty when it holds nothing), each with its server, method
/// and request params.
#[derive(Debug, Default)]
pub struct Removed {
    pub removed: Vec<(i64, String)>,
    pub kept: Vec<(i64, String)>,
}

/// The keys of pseudonymized recordings arrived with schema 11.
const PSEUDONYM_KEYS_SINCE: i64 = 11;

/// The schema steps, in order; index + 1 is the `user_version` each brings
/// a cassette to. Be sure to never change the order or edit a released step.
const MIGRATIONS: [&str; 11] = [
    include_str!("../../../migrations/0001_init.sql"),
    include_str!("../../../migrations/0002_service_answers.sql"),
    include_str!("../../../migrations/0003_provenance.sql"),
    include_str!("../../../migrations/0004_answer_templates.sql"),
    include_str!("../../../migrations/0005_template_failures.sql"),
    include_str!("../../../migrations/0006_asides.sql"),
    include_str!("../../../migrations/0007_stream_shape.sql"),
    include_str!("../../../migrations/0008_messages_as_sent.sql"),
    include_str!("../../../migrations/0009_asides_in_flight.sql"),
    include_str!("../../../migrations/0010_model_exchanges.sql"),
    include_str!("../../../migrations/0011_pseudonym_keys.sql"),
];

/// `PRAGMA application_id` of a cassette: 'MCPT'.
const APPLICATION_ID: i64 = 0x4d43_5054;

/// How long a writer waits for a lock held by another connection.
const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
/// How long a cassette being let go of waits for other connections to
/// leave it, to end up one file.
const SETTLE_WAIT: std::time::Duration = std::time::Duration::from_millis(200);

/// How a cassette was left ([`Cassette::settle`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Settled {
    /// Everything recorded is in the file itself.
    Whole,
    /// Another connection holds the file: `pages` of what was recorded are
    /// only in the `-wal` file beside it (-1: unknown how many), which
    /// must go wherever the cassette goes.
    InWal { pages: i64 },
}
/// How long an opener that found the file busy waits before it tries again.
const BUSY_RETRY: std::time::Duration = std::time::Duration::from_millis(5);

/// An open cassette file.
pub struct Cassette {
    conn: Connection,
    path: PathBuf,
    /// The schema the file is at (older than [`MIGRATIONS`] only when opened
    /// read-only, which never migrates).
    version: i64,
    occurrences: Occurrences,
    /// The rows of recently written tagged exchanges, for asides that come after.
    rows: Rows,
}

/// Which row each of the last [`MAX_TAGGED_ROWS`] tagged exchanges went to: an
/// aside the server sends after its exchange was committed names the
/// exchange by the recorder's tag, and is stored with that row.
#[derive(Default)]
struct Rows {
    by_tag: HashMap<Tag, i64>,
    order: std::collections::VecDeque<Tag>,
}

impl Rows {
    fn note(&mut self, tag: Tag, row: i64) {
        if self.order.len() >= MAX_TAGGED_ROWS
            && let Some(oldest) = self.order.pop_front()
        {
            self.by_tag.remove(&oldest);
        }
        self.by_tag.insert(tag, row);
        self.order.push_back(tag);
    }
}

/// The recorder's name for an exchange it recorded, unique while it runs.
pub type Tag = u64;

/// The next occurrence number of each match key [`Cassette::insert_batch`]
/// has written, so that the next one is known without a query (the query's
/// bound key made SQLite prepare it again every time: half of the writer's
/// work). Valid while only this connection writes exchanges: forgotten
/// when another connection has committed (`PRAGMA data_version` moved) or
/// this one wrote exchanges any other way.
#[derive(Default)]
struct Occurrences {
    next: HashMap<MatchKey, i64>,
    data_version: Option<i64>,
}

impl Occurrences {
    fn forget(&mut self) {
        *self = Occurrences::default();
    }
}

impl Cassette {
    /// Opens `path`, creating it if missing, and migrates it to the newest
    /// schema.
    ///
    /// # Errors
    ///
    /// A foreign or too-new file ([`CassetteError`]), or an SQLite failure.
    pub fn open(path: &Path) -> Result<Cassette, Error> {
        let fail = |kind: CassetteError| Error::Cassette { path: path.to_owned(), kind };
        check_header(path).map_err(fail)?;
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| fail(e.into()))?;
        let mut cassette = Cassette {
            conn,
            path: path.to_owned(),
            version: 0,
            occurrences: Occurrences::default(),
            rows: Rows::default(),
        };
        // Switching a new file to WAL takes it whole, and SQLite answers
        // "busy" at once rather than wait for another opener: try again, as
        // the busy handler would, for as long.
        let started = std::time::Instant::now();
        loop {
            match cassette.prepare() {
                Err(CassetteError::Sqlite(e))
                    if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy)
                        && started.elapsed() < BUSY_TIMEOUT =>
                {
                    std::thread::sleep(BUSY_RETRY);
                }
                prepared => break prepared.map_err(fail)?,
            }
        }
        Ok(cassette)
    }

    /// Opens `path` to read it and nothing else, as replay does: it neither
    /// migrates nor writes, so read-only checkouts and `:ro` mounts serve.
    /// A file on a read-only filesystem, where SQLite cannot keep its WAL
    /// index, is opened as immutable.
    ///
    /// # Errors
    ///
    /// A missing, empty, foreign or too-new file, or an SQLite failure.
    pub fn open_read_only(path: &Path) -> Result<Cassette, Error> {
        let fail = |kind: CassetteError| Error::Cassette { path: path.to_owned(), kind };
        let size =
            std::fs::metadata(path).map_err(|source| Error::Read { path: path.to_owned(), source })?.len();
        if size == 0 {
            return Err(fail(CassetteError::Foreign("an empty file".into())));
        }
        check_header(path).map_err(fail)?;
        let flags =
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI;
        let open = |uri: String| -> Result<(Connection, i64), CassetteError> {
            let conn = Connection::open_with_flags(uri, flags)?;
            conn.busy_timeout(BUSY_TIMEOUT)?;
            let version = check_identity(&conn)?;
            Ok((conn, version))
        };
        let uri = file_uri(path);
        let (conn, version) = match open(uri.clone()) {
            Err(CassetteError::Sqlite(e))
                if e.sqlite_error_code() == Some(rusqlite::ErrorCode::CannotOpen) =>
            {
                open(format!("{uri}?immutable=1")).map_err(fail)?
            }
            other => other.map_err(fail)?,
        };
        Ok(Cassette {
            conn,
            path: path.to_owned(),
            version,
            occurrences: Occurrences::default(),
            rows: Rows::default(),
        })
    }

    /// A cassette that lives in memory, for tests.
    pub fn open_in_memory() -> Result<Cassette, Error> {
        let fail = |e: rusqlite::Error| Error::Cassette { path: ":memory:".into(), kind: e.into() };
        let mut cassette = Cassette {
            conn: Connection::open_in_memory().map_err(fail)?,
            path: ":memory:".into(),
            version: 0,
            occurrences: Occurrences::default(),
            rows: Rows::default(),
        };
        cassette.prepare().map_err(|kind| Error::Cassette { path: ":memory:".into(), kind })?;
        Ok(cassette)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn prepare(&mut self) -> Result<(), CassetteError> {
        let conn = &mut self.conn;
        // Before anything is read: another recorder may be creating or
        // migrating the same file this very moment.
        conn.busy_timeout(BUSY_TIMEOUT)?;
        let version = check_identity(conn)?;
        let supported = MIGRATIONS.len() as i64;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        // In WAL mode NORMAL syncs at checkpoints, not at every commit: a
        // committed exchange survives the process being killed, which is the
        // guarantee record makes; only a power cut can lose the last commits.
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        if version < supported {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Exclusive)?;
            // Read again under the lock: another opener may have migrated
            // while this one waited for it.
            let version = check_identity(&tx)?;
            for step in &MIGRATIONS[version as usize..] {
                tx.execute_batch(step)?;
            }
            tx.pragma_update(None, "user_version", supported)?;
            tx.commit()?;
        }
        self.version = supported;
        Ok(())
    }

    /// Every exchange in the cassette, in recorded order.
    ///
    /// # Errors
    ///
    /// An SQLite failure, or a row that does not hold a valid exchange.
    pub fn exchanges(&self) -> Result<Vec<Exchange>, Error> {
        let damaged = |why: String| CassetteError::Damaged { id: 0, why };
        let parsed: Result<Vec<Exchange>, CassetteError> =
            self.exchanges_as_text()?.into_iter().map(|e| e.parse().map_err(damaged)).collect();
        parsed.map_err(|kind| Error::Cassette { path: self.path.clone(), kind })
    }

    /// Every exchange in the cassette, in recorded order, JSON left as stored.
    ///
    /// # Errors
    ///
    /// An SQLite failure, or a row that does not hold a valid exchange.
    pub fn exchanges_as_text(&self) -> Result<Vec<Exchange<Text>>, Error> {
        load::read_all(&self.conn, &self.path, self.version)
            .map_err(|kind| Error::Cassette { path: self.path.clone(), kind })
    }

    /// Writes one finished exchange in its own transaction and returns its
    /// occurrence number (0 for the first exchange with its match key).
    ///
    /// # Errors
    ///
    /// An SQLite failure; nothing of the exchange is then stored.
    pub fn insert(&mut self, exchange: &Exchange) -> Result<i64, Error> {
        self.insert_tx(exchange).map_err(|e| Error::Cassette { path: self.path.clone(), kind: e.into() })
    }

    /// Every service answer in the cassette, in recorded order.
    ///
    /// # Errors
    ///
    /// An SQLite failure, or a row that does not hold a valid answer.
    pub fn service_answers(&self) -> Result<Vec<ServiceAnswer>, Error> {
        self.read_service_answers().map_err(|kind| Error::Cassette { path: self.path.clone(), kind })
    }

    /// Service answers arrived with schema 2; an older file has none.
    fn read_service_answers(&self) -> Result<Vec<ServiceAnswer>, CassetteError> {
        if self.version < 2 { Ok(Vec::new()) } else { load::read_service_answers(&self.conn) }
    }

    /// Every LLM exchange in the cassette, in recorded order.
    ///
    /// # Errors
    ///
    /// An SQLite failure, or a row that does not hold a valid exchange.
    pub fn llm_exchanges(&self) -> Result<Vec<LlmExchange>, Error> {
        self.read_llm_exchanges().map_err(|kind| Error::Cassette { path: self.path.clone(), kind })
    }

    fn read_llm_exchanges(&self) -> Result<Vec<LlmExchange>, CassetteError> {
        if self.version < llm::SINCE { Ok(Vec::new()) } else { llm::read(&self.conn, &self.path) }
    }

    /// Notes that what is stored in the cassette is pseudonymized with the
    /// key of `fingerprint`.
    ///
    /// # Errors
    ///
    /// An SQLite failure.
    pub fn note_pseudonym_key(&self, fingerprint: &str) -> Result<(), Error> {
        rows::insert_pseudonym_key(&self.conn, fingerprint)
            .map_err(|e| Error::Cassette { path: self.path.clone(), kind: e.into() })
    }

    /// The fingerprints of the keys the cassette's recordings were
    /// pseudonymized with (none: it says of none).
    ///
    /// # Errors
    ///
    /// An SQLite failure.
    pub fn pseudonym_keys(&self) -> Result<Vec<String>, Error> {
        if self.version < PSEUDONYM_KEYS_SINCE {
            return Ok(Vec::new());
        }
        let read = || -> rusqlite::Result<Vec<String>> {
            let mut query =
                self.conn.prepare("SELECT fingerprint FROM pseudonym_key ORDER BY fingerprint")?;
            query.query_map([], |row| row.get(0))?.collect()
        };
        read().map_err(|e| Error::Cassette { path: self.path.clone(), kind: e.into() })
    }

    /// How many recordings the cassette holds: its exchanges and its LLM
    /// exchanges, counted without reading them.
    ///
    /// # Errors
    ///
    /// An SQLite failure.
    pub fn recordings(&self) -> Result<usize, Error> {
        let count = |table: &str| {
            self.conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |row| row.get::<_, i64>(0))
        };
        let llms = if self.version < llm::SINCE { Ok(0) } else { count("model_exchange") };
        let counted = count("exchange").and_then(|exchanges| Ok(exchanges + llms?));
        counted
            .map(|n| usize::try_from(n).unwrap_or_default())
            .map_err(|e| Error::Cassette { path: self.path.clone(), kind: e.into() })
    }

    /// Every answer template, by server and tool.
    ///
    /// # Errors
    ///
    /// An SQLite failure, or a row that does not hold a valid template.
    pub fn templates(&self) -> Result<Vec<AnswerTemplate>, Error> {
        self.read_templates().map_err(|kind| Error::Cassette { path: self.path.clone(), kind })
    }

    /// Answer templates arrived with schema 4; an older file has none.
    fn read_templates(&self) -> Result<Vec<AnswerTemplate>, CassetteError> {
        if self.version < 4 { Ok(Vec::new()) } else { load::read_templates(&self.conn, self.version) }
    }

    /// Every exchange (JSON as stored), service answer and answer template,
    /// read in one transaction, so that a recorder committing meanwhile is
    /// seen either before or after each of its commits, never half-way.
    ///
    /// # Errors
    ///
    /// An SQLite failure, or a row that does not hold a valid entry.
    pub fn read_everything(&self) -> Result<Everything, Error> {
        let read = || -> Result<_, CassetteError> {
            let snapshot = self.conn.unchecked_transaction()?;
            let everything = Everything {
                exchanges: load::read_all(&snapshot, &self.path, self.version)?,
                service_answers: self.read_service_answers()?,
                templates: self.read_templates()?,
                llm_exchanges: self.read_llm_exchanges()?,
            };
            snapshot.finish()?;
            Ok(everything)
        };
        read().map_err(|kind| Error::Cassette { path: self.path.clone(), kind })
    }

    /// Hands each exchange to `each` in recorded order, read one at a time
    /// in one read transaction (see [`Everything`] for all at once), so that
    /// memory holds one exchange however long the cassette: what `export`
    /// writes from. The walk ends at `each`'s first error; a failure to read
    /// is an `io::Error` whose inner error is the [`Error`] that names the
    /// cassette.
    ///
    /// # Errors
    ///
    /// `each`'s first error, an SQLite failure or a row that does not hold a
    /// valid exchange.
    pub fn each_exchange(
        &self,
        mut each: impl FnMut(&Exchange) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        let failed = |kind| std::io::Error::other(Error::Cassette { path: self.path.clone(), kind });
        // Dropped at the end: a read transaction has nothing to commit.
        let snapshot = self.conn.unchecked_transaction().map_err(|e| failed(e.into()))?;
        let walked = load::each_exchange(&snapshot, &self.path, self.version, &mut |exchange| {
            let id = exchange.source.as_ref().map_or(0, |source| source.row);
            let exchange = exchange.parse().map_err(|why| failed(CassetteError::Damaged { id, why }))?;
            each(&exchange)
        });
        walked.unwrap_or_else(|kind| Err(failed(kind)))
    }

    /// Removes the exchanges of these rows (their messages with them) in
    /// one transaction, each only if it still holds the exchange named by
    /// its match key and occurrence: a row that holds another (the cassette
    /// was re-recorded since) or none is left as it is, and said.
    ///
    /// # Errors
    ///
    /// An SQLite failure; nothing is then removed.
    pub fn remove(&mut self, rows: &[(i64, MatchKey, i64)]) -> Result<Removed, Error> {
        self.occurrences.forget();
        let remove = |conn: &mut Connection| -> rusqlite::Result<Removed> {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let mut done = Removed::default();
            for (row, key, occurrence) in rows {
                let found = tx.query_row(
                    "SELECT match_key = ?2 AND occurrence = ?3, \
                     server || ' ' || method || ' ' || coalesce(json_extract(request, '$.params'), '') \
                     FROM exchange WHERE id = ?1",
                    params![row, key, occurrence],
                    |r| Ok((r.get::<_, bool>(0)?, r.get::<_, String>(1)?)),
                );
                match found {
                    Ok((true, what)) => {
                        tx.execute("DELETE FROM exchange WHERE id = ?1", params![row])?;
                        done.removed.push((*row, what.trim_end().to_owned()));
                    }
                    Ok((false, what)) => done.kept.push((*row, what.trim_end().to_owned())),
                    Err(rusqlite::Error::QueryReturnedNoRows) => done.kept.push((*row, String::new())),
                    Err(e) => return Err(e),
                }
            }
            tx.commit()?;
            Ok(done)
        };
        remove(&mut self.conn).map_err(|e| Error::Cassette { path: self.path.clone(), kind: e.into() })
    }

    /// Removes the model exchanges of these rows (`(row, what to say)`) in
    /// one transaction, each only if `holds` says the row still holds what
    /// it was asked to remove.
    ///
    /// # Errors
    ///
    /// An SQLite failure; nothing is then removed.
    pub fn remove_llms(
        &mut self,
        rows: &[(i64, String)],
        holds: impl Fn(i64, &LlmExchange) -> bool,
    ) -> Result<Removed, Error> {
        if self.version < llm::SINCE {
            return Ok(Removed {
                kept: rows.iter().map(|(row, _)| (*row, String::new())).collect(),
                ..Removed::default()
            });
        }
        let path = self.path.clone();
        llm::remove(&mut self.conn, rows, holds, &path).map_err(|kind| Error::Cassette { path, kind })
    }

    /// Leaves the file whole on its own: its WAL checkpointed into it and
    /// removed (rollback journal mode), so that readers, replay among them,
    /// need no `-wal` and `-shm` files beside it and leave none in a
    /// checkout. While another connection holds the file it stays in WAL
    /// mode: then what a checkpoint could not move into the file (pages a
    /// reader's older snapshot still needs) lives only in the `-wal` file,
    /// and a warning says so (the recorder, `import` and `prune` all end
    /// here).
    pub fn settle(&self) -> Settled {
        // Waits for other connections briefly: this is a process stopping.
        let _ = self.conn.busy_timeout(SETTLE_WAIT);
        let mode =
            self.conn.pragma_update_and_check(None, "journal_mode", "DELETE", |row| row.get::<_, String>(0));
        if let Ok(mode) = &mode
            && !mode.eq_ignore_ascii_case("wal")
        {
            return Settled::Whole;
        }
        tracing::debug!("{} stays in WAL mode: {mode:?}", self.path.display());
        let checkpoint = self.conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
            Ok((row.get::<_, i64>(1)?, row.get::<_, i64>(2)?))
        });
        let settled = match &checkpoint {
            Ok((in_wal, moved)) if in_wal > moved => Settled::InWal { pages: in_wal - moved },
            Ok(_) => Settled::Whole,
            Err(e) => {
                tracing::debug!("{}: no checkpoint: {e}", self.path.display());
                Settled::InWal { pages: -1 }
            }
        };
        if let Settled::InWal { pages } = settled {
            let pages = if pages < 0 { "some".to_owned() } else { pages.to_string() };
            let path = self.path.display();
            let full = |error: Option<&rusqlite::Error>| {
                error.is_some_and(|e| e.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull))
            };
            if full(mode.as_ref().err()) || full(checkpoint.as_ref().err()) {
                tracing::warn!(
                    "the disk holding {path} is full: {pages} pages of recordings are only in {path}-wal; \
                     keep that file with the cassette, and free space before it is opened again"
                );
            } else {
                tracing::warn!(
                    "another process holds {path}: {pages} pages of recordings are only in {path}-wal; \
                     keep that file with the cassette until it is opened again alone"
                );
            }
        }
        settled
    }

    /// Writes a copy of the cassette, whole and consistent, to `path` (a
    /// file that must not exist yet): what a run records into when its
    /// additions are kept only if it passes.
    ///
    /// # Errors
    ///
    /// An SQLite failure; `path` may then hold part of a copy.
    pub fn copy_to(&self, path: &Path) -> Result<(), Error> {
        let target = path.to_str().ok_or_else(|| Error::Cassette {
            path: path.to_owned(),
            kind: CassetteError::Sqlite(rusqlite::Error::InvalidPath(path.to_owned())),
        })?;
        self.conn
            .execute("VACUUM INTO ?1", params![target])
            .map(drop)
            .map_err(|e| Error::Cassette { path: self.path.clone(), kind: e.into() })
    }

    /// Writes answer templates in one transaction; one for a (server, tool)
    /// the cassette holds already replaces it.
    ///
    /// # Errors
    ///
    /// An SQLite failure; nothing is then written.
    pub fn insert_templates(&mut self, templates: &[AnswerTemplate]) -> Result<(), Error> {
        let insert = |conn: &mut Connection| -> rusqlite::Result<()> {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            for template in templates {
                upsert_template_row(&tx, template)?;
            }
            tx.commit()
        };
        insert(&mut self.conn).map_err(|e| Error::Cassette { path: self.path.clone(), kind: e.into() })
    }

    /// Runs `fill` inside one transaction, committed only if it returns
    /// `Ok`: an import that stops at a bad entry writes nothing.
    ///
    /// # Errors
    ///
    /// `fill`'s error, or an SQLite failure; nothing is then written.
    pub fn import<T>(
        &mut self,
        fill: impl FnOnce(&mut Importing<'_>) -> Result<T, Error>,
    ) -> Result<T, Error> {
        self.occurrences.forget();
        let path = &self.path;
        let failed = |e: rusqlite::Error| Error::Cassette { path: path.clone(), kind: e.into() };
        let tx =
            self.conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate).map_err(failed)?;
        let mut importing = Importing { tx, path };
        let done = fill(&mut importing)?;
        importing.tx.commit().map_err(failed)?;
        Ok(done)
    }

    /// Writes new bodies over recorded messages, each given by its
    /// exchange's row and its place in the answer, in one transaction.
    ///
    /// # Errors
    ///
    /// An SQLite failure; nothing is then changed.
    pub fn update_answers(&mut self, answers: &[(i64, usize, serde_json::Value)]) -> Result<(), Error> {
        let update = |conn: &mut Connection| -> rusqlite::Result<()> {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            for (row, seq, body) in answers {
                tx.execute(
                    "UPDATE message SET body = ?3 WHERE exchange_id = ?1 AND seq = ?2",
                    params![row, *seq as i64, canonical_json(body)],
                )?;
            }
            tx.commit()
        };
        update(&mut self.conn).map_err(|e| Error::Cassette { path: self.path.clone(), kind: e.into() })
    }

    /// Writes one service answer in its own transaction.
    ///
    /// # Errors
    ///
    /// An SQLite failure; nothing is then stored.
    pub fn insert_service(&mut self, answer: &ServiceAnswer) -> Result<(), Error> {
        insert_service_row(&self.conn, answer)
            .map_err(|e| Error::Cassette { path: self.path.clone(), kind: e.into() })
    }

    /// Writes `entries` in one transaction (group commit), each in a
    /// savepoint of its own: one that fails is left out and the others are
    /// committed. Each entry's outcome, in order; all fail if the commit does.
    pub fn insert_batch(&mut self, entries: &[Entry]) -> Vec<Result<(), Error>> {
        let path = self.path.clone();
        let failed = |e: rusqlite::Error| Error::Cassette { path: path.clone(), kind: e.into() };
        let tx = match self.conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate) {
            Ok(tx) => tx,
            Err(e) => return entries.iter().map(|_| Err(failed(clone_error(&e)))).collect(),
        };
        // The write lock is held from here: no other connection commits
        // until this transaction ends.
        let version =
            tx.prepare_cached("PRAGMA data_version").and_then(|mut q| q.query_row([], |r| r.get(0)));
        match version {
            Ok(version) if self.occurrences.data_version == Some(version) => {}
            Ok(version) => {
                self.occurrences = Occurrences { data_version: Some(version), ..Occurrences::default() }
            }
            Err(_) => self.occurrences.forget(),
        }
        let known = &self.occurrences.next;
        let rows = &mut self.rows;
        let mut written_now: HashMap<MatchKey, i64> = HashMap::new();
        let mut outcomes = Vec::with_capacity(entries.len());
        for entry in entries {
            // The savepoint statements are prepared once, like the inserts:
            // SQL text parsed per entry was most of the writer's time.
            let written = run_cached(&tx, "SAVEPOINT entry").and_then(|()| {
                let inserted = match entry {
                    Entry::Exchange(exchange, tag) => {
                        let key = &exchange.key;
                        let known = written_now.get(key).or_else(|| known.get(key)).copied();
                        known.map_or_else(|| next_occurrence(&tx, key), Ok).and_then(|occurrence| {
                            let row = insert_exchange_rows(&tx, exchange, occurrence)?;
                            if let Some(tag) = tag {
                                rows.note(*tag, row);
                            }
                            Ok(Some((*key, occurrence + 1)))
                        })
                    }
                    Entry::Asides(tag, asides) => match rows.by_tag.get(tag) {
                        Some(row) => insert_aside_rows(&tx, *row, asides).map(|()| None),
                        None => Err(rusqlite::Error::QueryReturnedNoRows),
                    },
                    Entry::Service(answer) => insert_service_row(&tx, answer).map(|()| None),
                    Entry::Llm(exchange) => llm::insert(&tx, exchange).map(|()| None),
                };
                match inserted {
                    Ok(next) => run_cached(&tx, "RELEASE entry").map(|()| next),
                    Err(e) => {
                        let _ = run_cached(&tx, "ROLLBACK TO entry")
                            .and_then(|()| run_cached(&tx, "RELEASE entry"));
                        Err(e)
                    }
                }
            });
            outcomes.push(written.map(|next| written_now.extend(next)).map_err(&failed));
        }
        match tx.commit() {
            Ok(()) => {
                self.occurrences.next.extend(written_now);
                outcomes
            }
            Err(e) => {
                self.occurrences.forget();
                entries.iter().map(|_| Err(failed(clone_error(&e)))).collect()
            }
        }
    }

    fn insert_tx(&mut self, exchange: &Exchange) -> rusqlite::Result<i64> {
        self.occurrences.forget();
        let tx = self.conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let occurrence = next_occurrence(&tx, &exchange.key)?;
        insert_exchange_rows(&tx, exchange, occurrence)?;
        tx.commit()?;
        Ok(occurrence)
    }
}

/// The schema version of an mcp-tape cassette, after checking the file is
/// one this binary can read: its application id, and a version neither
/// negative nor newer than [`MIGRATIONS`].
fn check_identity(conn: &Connection) -> Result<i64, CassetteError> {
    // One statement, so one snapshot: read apart, another opener's
    // migration could land between the header fields and the schema.
    let (application_id, version, tables): (i64, i64, i64) = conn.query_row(
        "SELECT (SELECT application_id FROM pragma_application_id), \
                (SELECT user_version FROM pragma_user_version), \
                (SELECT count(*) FROM sqlite_master)",
        [],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )?;
    if application_id != APPLICATION_ID && (application_id != 0 || version != 0 || tables != 0) {
        return Err(CassetteError::Foreign(format!(
            "SQLite database with application_id {application_id}, user_version {version} and {tables} schema objects"
        )));
    }
    let supported = MIGRATIONS.len() as i64;
    if version < 0 {
        return Err(CassetteError::Foreign(format!("user_version {version} is no schema version")));
    }
    if version > supported {
        return Err(CassetteError::TooNew { found: version, supported });
    }
    Ok(version)
}

/// `path` as an SQLite `file:` URI (so that `?immutable=1` can follow).
fn file_uri(path: &Path) -> String {
    let mut uri = String::from("file:");
    for c in path.to_string_lossy().chars() {
        match c {
            '%' | '?' | '#' => uri.push_str(&format!("%{:02X}", c as u32)),
            c => uri.push(c),
        }
    }
    uri
}

/// Refuses a non-empty file that does not start with the SQLite header,
/// before SQLite gets a chance to touch it.
fn check_header(path: &Path) -> Result<(), CassetteError> {
    use std::io::Read;
    const SQLITE_HEADER: &[u8; 16] = b"SQLite format 3\0";
    // A FIFO would block the open below (and SQLite's) until a writer came;
    // a device or a directory is no cassette either.
    if std::fs::metadata(path).is_ok_and(|meta| !meta.is_file()) {
        return Err(CassetteError::Foreign("not a regular file (a FIFO, device or directory)".into()));
    }
    let Ok(mut file) = std::fs::File::open(path) else {
        return Ok(()); // missing: SQLite creates it; unreadable: SQLite reports it
    };
    let mut header = [0u8; 16];
    let read = file.read(&mut header).unwrap_or(0);
    if read == 0 || header == *SQLITE_HEADER {
        Ok(())
    } else {
        Err(CassetteError::Foreign("not an SQLite database".into()))
    }
}

#[cfg(test)]
mod tests;
