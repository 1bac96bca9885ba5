//! Every bound mcp-tape puts on what it is sent or reads, in one place: what
//! a client, an upstream, a stdio server or a file can make it hold, and
//! how long it waits. What happens at each is said where it is enforced
//! and in `docs/limits.md`.

use std::time::Duration;

/// Largest POST body accepted; larger ones get 413.
///
/// Enforced in [`crate::transport::http`].
pub const MAX_REQUEST_BODY_BYTES: usize = 4 * 1024 * 1024;

/// Longest request-target (path and query) served; a longer one gets 414,
/// as nginx's default buffers give. No MCP route needs more.
///
/// Enforced in [`crate::transport::http`].
pub const MAX_REQUEST_TARGET_BYTES: usize = 8 * 1024;

/// Connections served at once; further ones wait in the listen backlog.
///
/// Enforced in [`crate::transport::http::server`].
pub const MAX_CONNECTIONS: usize = 1024;

/// An HTTP/1 client has this long (or the idle timeout, when shorter) from
/// the first byte of a request head to its end.
///
/// Enforced in [`crate::transport::http::server`].
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// A request body must arrive within [`HEADER_READ_TIMEOUT`] plus one
/// second for each this many bytes of it (on top of the idle timeout each
/// wait for a piece of it gets): a client that trickles a body in cannot
/// hold a connection for long. Past it: 408.
///
/// Enforced in [`crate::transport::http`].
pub const MIN_BODY_RATE: usize = 16 * 1024;

/// Longest line accepted from the client; a longer one is refused.
///
/// Enforced in [`crate::transport::stdio`].
pub const MAX_STDIO_LINE_BYTES: usize = 4 * 1024 * 1024;

/// Longest line from the child buffered to be recorded; a longer one is
/// relayed piece by piece and not stored.
///
/// Enforced in [`crate::transport::stdio::child`].
pub const MAX_CHILD_LINE_BYTES: usize = 64 * 1024 * 1024;

/// Lines from the client waiting for a recorded stdio server to read them,
/// at most (each at most [`MAX_STDIO_LINE_BYTES`]); past it mcp-tape stops
/// reading its own stdin until the server reads (back-pressure). What is
/// still queued when mcp-tape stops is dropped, and logged.
///
/// Enforced in [`crate::transport::stdio`].
pub const MAX_QUEUED_CHILD_LINES: usize = 16;

/// Largest JSON answer read whole; a larger one gets the client a 502.
///
/// Enforced in the record proxy (`transport/http/proxy.rs`).
pub const MAX_JSON_ANSWER_BYTES: usize = 64 * 1024 * 1024;

/// Bytes of JSON answers read whole that all requests together may hold
/// at once (four of the largest): a request whose answer would pass it
/// gets 503 ([`Unanswered::Busy`](crate::error::Unanswered::Busy)) instead of the recorder running out of memory.
///
/// Enforced in the record proxy (`transport/http/proxy.rs`).
pub const MAX_ANSWERS_IN_FLIGHT_BYTES: usize = 4 * MAX_JSON_ANSWER_BYTES;

/// Largest message record reads into a tree; a larger one is held as its
/// text, only its small top-level members read (the id, the method), and
/// scrubbed in one pass over the text: a tree of `[0,0,…]` is sixteen
/// times its text.
///
/// Enforced in [`crate::engine::AsWritten`].
pub const MAX_TREE_MESSAGE_BYTES: usize = 1024 * 1024;

/// Largest answer (all its messages) captured for the cassette; past it
/// the answer is still relayed whole, but not stored, and the log says so.
///
/// Enforced in [`crate::engine::record`].
pub const MAX_RECORDED_STREAM_BYTES: usize = 32 * 1024 * 1024;

/// Largest event the parser buffers; a bigger one ends parsing (the bytes
/// still flow, see [`Overflow`](crate::sse::Overflow)).
///
/// Enforced in [`crate::sse`].
pub const MAX_SSE_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// Upstream sessions whose negotiated version, and whose last exchange
/// (where what the server says on its own goes), are remembered at most.
///
/// Enforced in [`crate::engine::record`].
pub const MAX_TRACKED_SESSIONS: usize = 10_000;

/// What the server in one tracked session saw last, kept per session: the
/// exchanges (and client notifications) a message it says on its own can
/// follow. One heard late may have arrived before the latest of them was
/// sent on; it follows the one sent before it arrived.
///
/// Enforced in [`crate::engine::record`].
pub const MAX_SPOTS_PER_SESSION: usize = 8;

/// Messages a replay session holds for its GET stream while none is open
/// (or the open one is not keeping up) at most; past it the oldest go.
///
/// Enforced in [`crate::engine::said`].
pub const MAX_HELD_ASIDES: usize = 256;

/// How long a replayed answer waits for what the server said before it (on
/// the session's GET stream) to be written to the client; past it the
/// answer goes anyway, so a client that does not read its GET stream still
/// gets its answers.
///
/// Enforced in [`crate::transport::http`].
pub const MAX_ASIDE_WRITE_WAIT: Duration = Duration::from_secs(1);

/// Recording, how long what the server said on its GET stream after an
/// answer waits for the client to have that answer, which waits for its
/// commit: as long as a commit may wait for the cassette's lock, and then
/// some, so that the client hears the two in the order the server said
/// them however slow the disk; past it (a client that does not read its
/// answer) the message goes anyway.
///
/// Enforced in [`crate::engine::Listener`].
pub const MAX_ANSWER_WRITE_WAIT: Duration = Duration::from_secs(10);

/// Recorded answers whose SSE stream the server closed before the answer,
/// waiting for the client to resume them (`GET` with `Last-Event-ID`); past
/// it the oldest is dropped unstored (logged).
///
/// Enforced in [`crate::transport::http`] (the record proxy).
pub const MAX_PARKED_STREAMS: usize = 256;

/// Replayed SSE answers a client can resume from any event id it was sent
/// (`GET` with `Last-Event-ID`), and the bytes of their messages kept for
/// it; past either the oldest are forgotten (a resume from them then opens
/// a plain standalone stream).
///
/// Enforced in [`crate::transport::http`].
pub const MAX_RESUMABLE_STREAMS: usize = 1024;
pub const MAX_RESUMABLE_BYTES: usize = 16 * 1024 * 1024;

/// Resumable streams one session keeps at most, within
/// [`MAX_RESUMABLE_STREAMS`]: past it that session's oldest is forgotten,
/// so one client cannot push out every other session's.
///
/// Enforced in [`crate::transport::http`] (its `resume` module).
pub const MAX_RESUMABLE_STREAMS_PER_SESSION: usize = 64;

/// Recorded exchanges whose row the cassette writer remembers, for what the
/// server says on its own after one was committed; an aside of an older one
/// is not stored (logged).
///
/// Enforced in [`crate::cassette::store`].
pub const MAX_TAGGED_ROWS: usize = 4096;

/// Live sessions kept at most; the least recently used is ended to make room (its client
/// then gets 404 and starts over, as the spec prescribes).
///
/// Enforced in [`crate::engine::replay`]; the sessions a fault rule lost
/// (`lose_session`) are remembered to this bound too, the oldest forgotten
/// first, in [`crate::engine::inject`].
pub const MAX_SESSIONS: usize = 10_000;

/// Longest line read (bytes, without its newline): the recorder's own
/// bound on a stored answer. A longer line is refused, not read on.
///
/// Enforced in [`crate::interchange::jsonl`].
pub const MAX_IMPORT_LINE_BYTES: usize = 64 * 1024 * 1024;

/// Largest mocks file read (they are a few KiB; the cap keeps a name that
/// points at something endless from eating memory).
///
/// Enforced in [`crate::interchange::a365_mocks`].
pub const MAX_MOCKS_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// Largest file `import --from` reads (HAR files of long sessions run to
/// tens of MiB; it is held whole while it is read).
///
/// Enforced in [`crate::interchange::foreign`].
pub const MAX_FOREIGN_FILE_BYTES: u64 = 256 * 1024 * 1024;

/// Deepest nesting of YAML flow collections (`[` and `{` inside one
/// another) an import reads: a deeper file is refused before it is parsed,
/// whose work grows with the square of that depth (the YAML parser's own
/// limit, 128, is met only after it).
///
/// Enforced in [`crate::interchange::foreign`] (mcp-vcr's YAML).
pub const MAX_YAML_FLOW_DEPTH: usize = 64;

/// Cases a ledger counts one by one besides those the cassettes hold;
/// the requests of any further case count in one case, [`CaseKey::others`](crate::engine::ledger::CaseKey::others),
/// so a client sending ever new names cannot grow the ledger without bound.
///
/// Enforced in [`crate::engine::ledger`].
pub const MAX_OTHER_CASES: usize = 1000;

/// Leaves (scalars, empty objects and arrays, each at its pointer) of a
/// request's params that the `nearest` match rule ranks at most: a request
/// with more is refused by the rule (an honest miss), so that ranking it
/// against every recording of its tool stays bounded.
///
/// Enforced in [`crate::engine::by_rule`].
pub const MAX_RANKED_LEAVES: usize = 512;

/// Recorded calls a `nearest` rule's tie-break (the edit distance between
/// differing values) looks at, among those that tie on the fewest
/// differing leaves: the first recorded ones; past them recording order
/// decides. Keeps a request's ranking to a fixed amount of work however
/// many recordings tie.
///
/// Enforced in [`crate::engine::nearest`].
pub const MAX_TIE_BREAKS: usize = 256;

/// Differences between a request and a recording that a log line, report
/// or miss message tells one by one, at most (the first ones; then how
/// many more).
///
/// Enforced in [`crate::normalize`].
pub const MAX_DIFFERENCES_TOLD: usize = 8;

/// Recordings of a kind a miss compares with the request, at most (the
/// first recorded): the nearest it names are the nearest of those, and
/// the miss says how many of how many were compared.
///
/// Enforced in [`crate::engine::replay`].
pub const MAX_MISS_COMPARED: usize = 256;

/// Leaves (scalars, empty objects and arrays) a miss compares at most, the
/// request's leaves times the recordings it is compared with: a request
/// of many leaves is compared with fewer recordings (one at least).
///
/// Enforced in [`crate::engine::replay`].
pub const MAX_MISS_COMPARED_LEAVES: usize = MAX_MISS_COMPARED * MAX_RANKED_LEAVES;

/// Moments a ledger keeps for the run's timeline at most (the first ones);
/// the counts go on past it.
///
/// Enforced in [`crate::engine::ledger`].
pub const MOMENTS_KEPT: usize = 10_000;

/// Bytes of a name or value from the network a log line or a run's
/// ledger keeps: a 3 MB method name must not make a 3 MB line or key.
///
/// Enforced in [`crate::util`].
pub const MAX_SHOWN_BYTES: usize = 256;

/// Credentials shorter than this are not scrubbed from text: a short
/// placeholder such as `Bearer x` would otherwise corrupt every stored
/// string containing an `x`. Real tokens are far longer.
///
/// Enforced in [`crate::redact`].
pub const MIN_SCRUBBED_SECRET_CHARS: usize = 8;

/// Credential values one recorded exchange may carry (header credentials
/// and values under credential keys, each distinct): above it the
/// exchange is not stored (logged; the client gets the not-stored error),
/// so scrubbing stays bounded.
///
/// Enforced in [`crate::engine::record`].
pub const MAX_SECRETS_PER_EXCHANGE: usize = 1024;

/// Bytes of large requests (past [`crate::util::LARGE_INPUT_BYTES`] each)
/// worked through at once: a request's parsed form takes some fifty times
/// its size (4 MiB of `[{"a":0},…]` about 210 MB), so past this a large
/// request waits for its turn, and memory in flight stays near a gigabyte
/// however many arrive together. Twice the largest body, so two of those
/// are worked through at once and one always fits.
///
/// Enforced in [`crate::util::large_work_turn`].
pub const MAX_LARGE_WORK_BYTES: usize = 2 * MAX_REQUEST_BODY_BYTES;

/// Bytes waiting to be written past which logging threads wait.
///
/// Enforced in [`crate::logging`].
pub const MAX_PENDING_LOG_BYTES: usize = 4 * 1024 * 1024;

/// How long a logging thread waits for room before it takes stderr for
/// stalled (nobody reads it): from then on lines are dropped, and counted,
/// until a write goes through again, so that a daemon whose stderr nobody
/// reads goes on answering and stopping.
///
/// Enforced in [`crate::logging`].
pub const MAX_LOG_ROOM_WAIT: Duration = Duration::from_secs(1);

/// In-flight requests get this long to finish after a shutdown signal (or
/// a tape's end).
///
/// Enforced in [`crate::transport::http`].
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// After the grace, how long the 503s to requests still waiting get to be
/// written (streams under way are cut then).
///
/// Enforced in [`crate::transport::http`].
pub const STOPPING_ANSWERED: Duration = Duration::from_secs(1);

/// How long `test --tapes-on-stdin`, ending, waits for stdout to take the
/// answers told and not yet written before it exits without them (a test
/// runner that stopped reading).
///
/// Enforced in [`crate::ci::Teller`].
pub const MAX_TELL_FLUSH_WAIT: Duration = Duration::from_secs(3);

/// How long a stopping process waits for the log writer to write what is
/// left before it exits without it (stderr stalled).
///
/// Enforced in [`crate::logging`].
pub const MAX_LOG_FLUSH_WAIT: Duration = Duration::from_secs(3);

/// The room asked for the pipe stderr is, when it is one (Linux): a busy
/// daemon's batch of log lines (about 180 KB, 10 ms at 130,000 requests a
/// second) goes in one write, without the writer waiting for the reader
/// to make room. 1 MiB is the most an unprivileged process may ask by
/// default (`/proc/sys/fs/pipe-max-size`).
///
/// Asked in `main.rs` ([`crate::os::widen_stderr_pipe`]).
pub const LOG_PIPE_BYTES: usize = 1024 * 1024;

/// Largest rules file (`--rules`, `mcp-tape.toml`) read: far more than any
/// hand-written one. A larger one, or one that is no regular file (a FIFO,
/// `/dev/zero`), is refused before it is parsed (exit 2).
///
/// Enforced in [`crate::cmd`].
pub const MAX_RULES_FILE_BYTES: u64 = 1024 * 1024;

/// The longest line `mcp-tape test --tapes-on-stdin` reads for a tape: its
/// arguments, inline fault rules included. A longer one is refused, and
/// the tape after it is read as usual.
///
/// Enforced in [`crate::cmd`].
pub const MAX_TAPE_LINE_BYTES: u64 = 1024 * 1024;

/// Largest usage report (`--report`) that `rules suggest` and `prune` read:
/// room for the unused recordings of a cassette of a few hundred thousand
/// exchanges; a larger file, or one that is no regular file, is refused
/// before it is parsed.
///
/// Enforced in [`crate::cmd`].
pub const MAX_REPORT_BYTES: u64 = 64 * 1024 * 1024;

/// Requests a `hang` fault holds at once over HTTP: each keeps its
/// connection, so past this a hang answers 503 at once, as a busy gateway
/// does, and other clients still get a connection.
///
/// Enforced in [`crate::transport::http`].
pub const MAX_HANGING_REQUESTS: usize = 256;

/// How long a `hang` fault holds a request before the 504 a gateway in
/// front of a silent server gives (unless the client gives up first).
///
/// Enforced in [`crate::transport::http`].
pub const MAX_HANG: Duration = Duration::from_secs(300);

/// Longest name pattern (`server`, `tool`, `prompt`, `uri`, `method` in a
/// rules file), and longest name any pattern but `*` is matched against: a
/// match then takes at most this many steps per character of the pattern
/// (a 1 MB tool name against `*` and 2000 letters once took 3 s a request).
///
/// Enforced in [`crate::matching`].
pub const MAX_GLOB_CHARS: usize = 1024;
