//! SQLite cassettes. A cassette is one file holding normalized exchanges
//! (schema in `migrations/`). This module owns opening and migrating a file
//! and writing finished exchanges (the writer thread commits what queued up
//! while it was busy in one transaction); [`load`] reads
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

mod load;
mod models;
mod writer;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags, params};

pub use load::{Everything, Loaded, cassette_files, load, load_as_text};
pub use writer::{Prepare, Writer, WriterHandle, WriterReport};

use crate::error::{CassetteError, Error};
use crate::limits::MAX_TAGGED_ROWS;
use crate::model::{
    AnswerTemplate, Aside, Exchange, MatchKey, ModelExchange, ServiceAnswer, Text, canonical_json,
};

/// What [`Cassette::remove`] did: each row removed, and each row kept
/// because it no longer holds what it was asked to remove (with what it
/// holds now; empty when it holds nothing), each with its server, method
/// and request params.
#[derive(Debug, Default)]
pub struct Removed {
    pub removed: Vec<(i64, String)>,
    pub kept: Vec<(i64, String)>,
}

/// The schema steps, in order; index + 1 is the `user_version` each brings
/// a cassette to. Be sure to never change the order or edit a released step.
const MIGRATIONS: [&str; 10] = [
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

    /// Every model exchange in the cassette, in recorded order.
    ///
    /// # Errors
    ///
    /// An SQLite failure, or a row that does not hold a valid exchange.
    pub fn model_exchanges(&self) -> Result<Vec<ModelExchange>, Error> {
        self.read_model_exchanges().map_err(|kind| Error::Cassette { path: self.path.clone(), kind })
    }

    fn read_model_exchanges(&self) -> Result<Vec<ModelExchange>, CassetteError> {
        if self.version < models::SINCE { Ok(Vec::new()) } else { models::read(&self.conn, &self.path) }
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
                model_exchanges: self.read_model_exchanges()?,
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
    pub fn remove_models(
        &mut self,
        rows: &[(i64, String)],
        holds: impl Fn(i64, &ModelExchange) -> bool,
    ) -> Result<Removed, Error> {
        if self.version < models::SINCE {
            return Ok(Removed {
                kept: rows.iter().map(|(row, _)| (*row, String::new())).collect(),
                ..Removed::default()
            });
        }
        let path = self.path.clone();
        models::remove(&mut self.conn, rows, holds, &path).map_err(|kind| Error::Cassette { path, kind })
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
                    Entry::Model(exchange) => models::insert(&tx, exchange).map(|()| None),
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

/// A cassette being written in one transaction ([`Cassette::import`]).
pub struct Importing<'c> {
    tx: rusqlite::Transaction<'c>,
    path: &'c Path,
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
    pub fn model(&mut self, exchange: &ModelExchange) -> Result<(), Error> {
        models::insert(&self.tx, exchange).map_err(|e| self.failed(e))
    }

    /// Adds an answer template, replacing one for the same server and tool.
    ///
    /// # Errors
    ///
    /// An SQLite failure.
    pub fn template(&mut self, template: &AnswerTemplate) -> Result<(), Error> {
        upsert_template_row(&self.tx, template).map_err(|e| self.failed(e))
    }

    fn failed(&self, error: rusqlite::Error) -> Error {
        Error::Cassette { path: self.path.to_owned(), kind: error.into() }
    }
}

/// Writes `template`, replacing one for the same (server, tool).
fn upsert_template_row(conn: &Connection, template: &AnswerTemplate) -> rusqlite::Result<()> {
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
    Model(Box<ModelExchange>),
}

/// The same SQLite error again (one failure reported for each entry it failed).
fn clone_error(error: &rusqlite::Error) -> rusqlite::Error {
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
fn next_occurrence(conn: &Connection, key: &MatchKey) -> rusqlite::Result<i64> {
    conn.prepare_cached("SELECT coalesce(max(occurrence) + 1, 0) FROM exchange WHERE match_key = ?1")?
        .query_row(params![key], |r| r.get(0))
}

/// Inserts an exchange as occurrence `occurrence` of its key, its messages
/// and its asides, through `conn` (inside a transaction the caller owns);
/// returns its row.
fn insert_exchange_rows(conn: &Connection, exchange: &Exchange, occurrence: i64) -> rusqlite::Result<i64> {
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
fn insert_aside_rows(conn: &Connection, row: i64, asides: &[Aside]) -> rusqlite::Result<()> {
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
fn run_cached(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(drop)
}

fn insert_service_row(conn: &Connection, answer: &ServiceAnswer) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT INTO service_answer (route, upstream, status, content_type, body) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![answer.route, answer.upstream, answer.status.as_u16(), answer.content_type, answer.body],
    )
    .map(drop)
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
mod tests {
    use super::*;
    use crate::model::{
        Direction, Era, MatchKey, Provenance, RecordedMessage, ServiceRoute, Status, StreamShape,
    };
    use serde_json::json;

    /// Recorders started at the same moment on a new cassette once saw
    /// "database is locked" (creation and migration did not wait as writes
    /// do): each opener now waits, and only the first migrates.
    #[test]
    fn openers_racing_on_a_new_cassette_all_open_it() {
        use std::sync::{Arc, Barrier};
        let dir = tempfile::tempdir().unwrap();
        for round in 0..20 {
            let path = dir.path().join(format!("race-{round}.sqlite"));
            let start = Arc::new(Barrier::new(4));
            let openers: Vec<_> = (0..4)
                .map(|_| {
                    let (path, start) = (path.clone(), Arc::clone(&start));
                    std::thread::spawn(move || {
                        start.wait();
                        Cassette::open(&path).map(|cassette| cassette.version).map_err(|e| e.to_string())
                    })
                })
                .collect();
            for opener in openers {
                let opened = opener.join().unwrap();
                assert_eq!(opened, Ok(MIGRATIONS.len() as i64), "round {round}");
            }
        }
    }

    /// A cassette let go of while a reader holds an older snapshot keeps
    /// the newer pages only in its `-wal` file, and says so; let go of
    /// alone, it is one file.
    #[test]
    fn a_cassette_says_when_recordings_stay_in_its_wal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("held.sqlite");
        let mut cassette = Cassette::open(&path).unwrap();
        cassette.insert(&sample("mcp_A", "first", "one")).unwrap();
        let reader = Connection::open(&path).unwrap();
        reader.execute_batch("BEGIN").unwrap();
        let _: i64 = reader.query_row("SELECT count(*) FROM exchange", [], |r| r.get(0)).unwrap();
        cassette.insert(&sample("mcp_A", "second", "two")).unwrap();
        let settled = cassette.settle();
        assert!(matches!(settled, Settled::InWal { pages } if pages > 0), "{settled:?}");
        reader.execute_batch("COMMIT").unwrap();
        drop(reader);
        assert_eq!(cassette.settle(), Settled::Whole);
        assert!(!sibling_exists(&path, "-wal"), "the WAL is gone once nobody holds the file");
    }

    fn sibling_exists(path: &Path, suffix: &str) -> bool {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        Path::new(&name).exists()
    }

    /// A stored `tools/call` of `tool` on `server` answered with one text
    /// block; its key stands for (server, tool).
    fn sample(server: &str, tool: &str, text: &str) -> Exchange {
        use sha2::{Digest, Sha256};
        Exchange {
            server: server.into(),
            era: Era::Handshake,
            protocol_version: "2025-06-18".into(),
            method: "tools/call".into(),
            key: MatchKey::from_digest(Sha256::digest(format!("{server}\0{tool}")).into()),
            request: json!({"jsonrpc": "2.0", "id": "mcp-tape:request-id", "method": "tools/call",
                "params": {"name": tool}}),
            status: Status::OK,
            content_type: "application/json".into(),
            messages: vec![RecordedMessage {
                offset_ms: 3,
                direction: Direction::Server,
                body: json!({"jsonrpc": "2.0", "id": "mcp-tape:request-id",
                    "result": {"content": [{"type": "text", "text": text}]}}),
                written: None,
            }],
            asides: Vec::new(),
            stream: StreamShape::default(),
            provenance: Provenance::default(),
            source: None,
        }
    }

    #[test]
    fn migrations_apply_once_and_reopen_cleanly() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.sqlite");
        Cassette::open(&path).unwrap();
        let cassette = Cassette::open(&path).unwrap();
        let version: i64 = cassette.conn.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
        assert_eq!(version, MIGRATIONS.len() as i64);
    }

    #[test]
    fn insert_numbers_occurrences_and_round_trips() {
        let mut cassette = Cassette::open_in_memory().unwrap();
        let first = sample("mcp_MailTools", "GetMessage", "one");
        assert_eq!(cassette.insert(&first).unwrap(), 0);
        assert_eq!(cassette.insert(&sample("mcp_MailTools", "GetMessage", "two")).unwrap(), 1);
        assert_eq!(cassette.insert(&sample("mcp_MeServer", "GetMessage", "x")).unwrap(), 0);
        let mut loaded = cassette.exchanges().unwrap();
        assert_eq!(loaded.len(), 3);
        assert_eq!(loaded[0].source.as_ref().map(|s| s.row), Some(1), "read back with its row");
        assert_eq!(
            loaded[0].messages[0].as_sent(),
            first.messages[0].as_sent(),
            "the text stored is the text read"
        );
        loaded[0].messages[0].written = None;
        assert_eq!(loaded[0], Exchange { source: loaded[0].source.clone(), ..first });
    }

    #[test]
    fn a_batch_commits_together_and_one_failing_entry_spoils_no_other() {
        let mut cassette = Cassette::open_in_memory().unwrap();
        cassette
            .conn
            .execute_batch(
                "CREATE TRIGGER refuse BEFORE INSERT ON exchange WHEN NEW.server = 'refused' \
                 BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;",
            )
            .unwrap();
        let entries: Vec<Entry> = ["first", "refused", "third"]
            .into_iter()
            .map(|server| Entry::Exchange(Box::new(sample(server, "GetMessage", "x")), None))
            .collect();
        let outcomes = cassette.insert_batch(&entries);
        let ok: Vec<bool> = outcomes.iter().map(Result::is_ok).collect();
        assert_eq!(ok, [true, false, true]);
        assert!(outcomes[1].as_ref().unwrap_err().to_string().contains("refused by the test"));
        let servers: Vec<String> = cassette.exchanges().unwrap().into_iter().map(|e| e.server).collect();
        assert_eq!(servers, ["first", "third"]);
        assert!(cassette.exchanges().unwrap().iter().all(|e| e.messages.len() == 1), "messages with them");
    }

    /// The writer thread runs as `SCHED_BATCH` (policy 3 in field 41 of
    /// `/proc/self/task/*/stat`), so a queued entry does not preempt the
    /// runtime thread that queued it.
    #[test]
    fn the_writer_thread_yields_to_the_runtime() {
        let writer = writer::Writer::start(Cassette::open_in_memory().unwrap()).unwrap();
        let committed = writer.handle().write(sample("mcp_MailTools", "GetMessage", "x"), None);
        assert!(committed.blocking_recv().unwrap(), "committed, so the thread has set its policy");
        let mut policies = Vec::new();
        for task in std::fs::read_dir("/proc/self/task").unwrap() {
            let task = task.unwrap().path();
            // Another test's thread may end between the listing and this read.
            let Ok(name) = std::fs::read_to_string(task.join("comm")) else { continue };
            if name.trim_end() == "cassette-writer" {
                let stat = std::fs::read_to_string(task.join("stat")).unwrap();
                let after_name = &stat[stat.rfind(')').unwrap() + 2..];
                policies.push(after_name.split(' ').nth(41 - 3).unwrap().to_owned());
            }
        }
        assert!(!policies.is_empty(), "the writer thread is named");
        assert!(policies.iter().all(|p| p == "3"), "SCHED_BATCH: {policies:?}");
        assert_eq!(writer.finish().total(), 1);
    }

    /// The next occurrence of a key is remembered between batches, and
    /// learned again when the file changed another way: an exchange of the
    /// same key committed by another connection, one inserted outside a
    /// batch. A stale count would break the (match_key, occurrence) key.
    #[test]
    fn occurrences_count_on_across_batches_and_writers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("counted.sqlite");
        let mut cassette = Cassette::open(&path).unwrap();
        let entry = || Entry::Exchange(Box::new(sample("mcp_A", "Get", "x")), None);
        let all_ok =
            |outcomes: Vec<Result<(), Error>>| assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
        all_ok(cassette.insert_batch(&[entry(), entry()]));
        all_ok(cassette.insert_batch(&[entry()]));
        Cassette::open(&path).unwrap().insert(&sample("mcp_A", "Get", "elsewhere")).unwrap();
        all_ok(cassette.insert_batch(&[entry()]));
        cassette.insert(&sample("mcp_A", "Get", "outside a batch")).unwrap();
        all_ok(
            cassette.insert_batch(&[entry(), Entry::Exchange(Box::new(sample("mcp_B", "Get", "x")), None)]),
        );
        let mut rows = cassette.conn.prepare("SELECT server, occurrence FROM exchange ORDER BY id").unwrap();
        let stored: Vec<(String, i64)> =
            rows.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().collect::<Result<_, _>>().unwrap();
        let expected: Vec<(String, i64)> = [
            ("mcp_A", 0),
            ("mcp_A", 1),
            ("mcp_A", 2),
            ("mcp_A", 3),
            ("mcp_A", 4),
            ("mcp_A", 5),
            ("mcp_A", 6),
            ("mcp_B", 0),
        ]
        .into_iter()
        .map(|(server, n)| (server.to_owned(), n))
        .collect();
        assert_eq!(stored, expected);
    }

    #[test]
    fn service_answers_round_trip_in_order() {
        let mut cassette = Cassette::open_in_memory().unwrap();
        let answer = |route, body: &str| ServiceAnswer {
            route,
            upstream: "https://gateway.example:443".into(),
            status: Status::OK,
            content_type: "application/json".into(),
            body: body.into(),
        };
        let listed = answer(ServiceRoute::GatewayV2, "[]");
        let chat = answer(ServiceRoute::ChatMessage, "{}");
        cassette.insert_service(&listed).unwrap();
        cassette.insert_service(&chat).unwrap();
        assert_eq!(cassette.service_answers().unwrap(), [listed, chat]);
        assert!(cassette.exchanges().unwrap().is_empty());
    }

    #[test]
    fn refuses_a_newer_schema_without_touching_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new.sqlite");
        drop(Cassette::open(&path).unwrap());
        let conn = Connection::open(&path).unwrap();
        conn.pragma_update(None, "user_version", 99).unwrap();
        drop(conn);
        let before = std::fs::read(&path).unwrap();
        let err = Cassette::open(&path).err().unwrap().to_string();
        assert!(err.contains("newer mcp-tape (schema 99"), "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), before);
    }

    /// The loader once read exchanges and their messages in two statements
    /// outside a transaction, so an exchange committed in between showed up
    /// as "message without its exchange".
    #[test]
    fn reads_a_cassette_that_is_being_written_consistently() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("busy.sqlite");
        let mut cassette = Cassette::open(&path).unwrap();
        let writer = std::thread::spawn(move || {
            for n in 0..1500 {
                cassette.insert(&sample("mcp_Busy", &format!("tool{}", n % 7), &n.to_string())).unwrap();
            }
        });
        let mut reads = 0;
        while !writer.is_finished() {
            let exchanges = Cassette::open_read_only(&path).unwrap().read_everything().unwrap().exchanges;
            assert!(exchanges.iter().all(|e| e.messages.len() == 1));
            reads += 1;
        }
        writer.join().unwrap();
        let exchanges = Cassette::open_read_only(&path).unwrap().read_everything().unwrap().exchanges;
        assert_eq!((exchanges.len(), reads > 0), (1500, true));
    }

    #[test]
    fn reads_an_older_schema_without_migrating_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v1.sqlite");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(MIGRATIONS[0]).unwrap();
        conn.pragma_update(None, "user_version", 1).unwrap();
        drop(conn);
        let before = std::fs::read(&path).unwrap();
        let cassette = Cassette::open_read_only(&path).unwrap();
        let everything = cassette.read_everything().unwrap();
        assert!(
            everything.exchanges.is_empty()
                && everything.service_answers.is_empty()
                && everything.templates.is_empty()
        );
        drop(cassette);
        assert_eq!(std::fs::read(&path).unwrap(), before, "read-only means untouched");
        let empty = dir.path().join("empty.sqlite");
        std::fs::write(&empty, b"").unwrap();
        let err = Cassette::open_read_only(&empty).err().unwrap().to_string();
        assert!(err.contains("an empty file"), "{err}");
    }

    #[test]
    fn a_schema_7_cassette_reads_as_sorted_and_new_rows_keep_the_senders_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v7.sqlite");
        let conn = Connection::open(&path).unwrap();
        for step in &MIGRATIONS[..7] {
            conn.execute_batch(step).unwrap();
        }
        conn.pragma_update(None, "user_version", 7).unwrap();
        conn.execute_batch(
            "INSERT INTO exchange (server, era, protocol_version, method, match_key, occurrence, request, \
             status, content_type) VALUES ('s', 'handshake', '2025-06-18', 'tools/list', \
             '0000000000000000000000000000000000000000000000000000000000000000', 0, '{}', 200, \
             'application/json'); \
             INSERT INTO message (exchange_id, seq, offset_ms, direction, body) \
             VALUES (1, 0, 0, 'server', '{\"id\":1,\"jsonrpc\":\"2.0\",\"result\":{}}');",
        )
        .unwrap();
        drop(conn);
        let read_only = Cassette::open_read_only(&path).unwrap().exchanges().unwrap();
        assert!(read_only[0].provenance.keys_sorted, "before schema 8 every message was sorted");

        let mut cassette = Cassette::open(&path).unwrap();
        let version: i64 = cassette.conn.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
        assert_eq!(version, MIGRATIONS.len() as i64);
        let mut new = sample("s", "t", "x");
        new.messages[0].body =
            serde_json::from_str(r#"{"result":{"z":1,"a":{"y":2,"b":3}},"jsonrpc":"2.0","id":"x"}"#).unwrap();
        cassette.insert(&new).unwrap();
        let loaded = cassette.exchanges_as_text().unwrap();
        assert!(loaded[0].provenance.keys_sorted, "the old row stays marked after migrating");
        assert!(!loaded[1].provenance.keys_sorted);
        assert_eq!(
            &*loaded[1].messages[0].body,
            r#"{"result":{"z":1,"a":{"y":2,"b":3}},"jsonrpc":"2.0","id":"x"}"#
        );
        assert_eq!(&*loaded[1].request, &*canonical_json(&new.request), "the request stays canonical");
    }

    #[test]
    fn refuses_a_negative_schema_version_without_touching_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("odd.sqlite");
        drop(Cassette::open(&path).unwrap());
        Connection::open(&path).unwrap().pragma_update(None, "user_version", -1).unwrap();
        let before = std::fs::read(&path).unwrap();
        let err = Cassette::open(&path).err().unwrap().to_string();
        assert!(err.contains("user_version -1 is no schema version"), "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), before);
    }

    #[test]
    fn refuses_foreign_files_without_touching_them() {
        let dir = tempfile::tempdir().unwrap();
        let text = dir.path().join("notes.sqlite");
        std::fs::write(&text, "hello, not a database").unwrap();
        let err = Cassette::open(&text).err().unwrap().to_string();
        assert!(err.contains("not an SQLite database"), "{err}");
        assert_eq!(std::fs::read(&text).unwrap(), b"hello, not a database");

        let other = dir.path().join("other.sqlite");
        Connection::open(&other).unwrap().execute_batch("CREATE TABLE t (x)").unwrap();
        let before = std::fs::read(&other).unwrap();
        let err = Cassette::open(&other).err().unwrap().to_string();
        assert!(err.contains("not an mcp-tape cassette"), "{err}");
        assert_eq!(std::fs::read(&other).unwrap(), before);
    }
}
