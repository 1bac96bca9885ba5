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
            shallow: false,
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
    all_ok(cassette.insert_batch(&[entry(), Entry::Exchange(Box::new(sample("mcp_B", "Get", "x")), None)]));
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
