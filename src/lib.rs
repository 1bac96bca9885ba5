//! mcp-tape: a record/replay proxy daemon for MCP (Model Context Protocol)
//! traffic over Streamable HTTP and stdio.
//!
//! ```text
//! client ──HTTP───▶ transport::http ──┐
//! client ──stdio──▶ transport::stdio ─┴─▶ engine ──┬─▶ record ──▶ normalize ─▶ redact ─▶ cassette::store (SQLite writer)
//!                     │                            └─▶ replay ──▶ cassette::tape (in-memory index of cassettes)
//!                     │                                   └──▶ mcp fallback (mock answers)
//!                     └─ recording: the engine's link (proxy ──HTTPS──▶ MCP server, or child
//!                        ──stdin/stdout──▶ stdio server); each answer shown to the engine's
//!                        Flight, a final one sent once its Held commit resolves
//! ```
//!
//! One direction: a front door (`transport`) turns bytes into one parsed
//! JSON-RPC message and the facts around it (a [`engine::Call`]); the
//! [`engine::Engine`] answers or says what to forward; the front door
//! frames the answer (the HTTP door decides every status, in
//! `transport/http/status.rs`). The engine has no HTTP in it, and its two modes,
//! `engine::replay` and `engine::record`, never import each other (record's
//! `--mode missing` composes both in [`engine::Mode::Missing`]). A
//! transport is a module under `transport` that builds `Call`s and frames
//! `Step`s; `docs/ARCHITECTURE.md` walks through both and where a third goes.
//!
//! # Layout
//!
//! Bottom to top; each module uses only modules listed before it.
//!
//! - [`limits`]: every bound on what mcp-tape is sent or reads, in one
//!   place (bytes, counts, waits).
//! - [`os`]: what differs by operating system: a spawned command's process
//!   tree (a process group, a Job Object; the terminal while it runs), the
//!   stops that reach mcp-tape (signals, console events), exit codes and
//!   an exit with no teardown, one file by two paths, stderr written whole
//!   beside the stdio door, stdin and stdout driven by the reactor, reads
//!   that say when their bytes arrived, a thread's freed memory given
//!   back. Every `unsafe` block is here.
//! - [`util`]: log-safe text (and text cut to a bound), a poison-proof
//!   lock, text split at a byte, the fast map of per-request lookups, a
//!   file written whole or not at all, long work run off the async
//!   workers (and large requests' turns), a line to stderr that never
//!   fails the run.
//! - [`logging`]: where log lines go (one buffer, one writer thread; a
//!   stderr nobody reads drops lines rather than hold the daemon).
//! - [`jsonrpc`]: the JSON-RPC 2.0 envelope: `Message`, `RequestId`,
//!   `Params` (and the cache of params read before), `ErrorCode`,
//!   `ErrorObject`; no MCP, no I/O. Its [`jsonrpc::scan`] is the one
//!   hand-written JSON reader: the usual request's byte scan, and JSON kept
//!   as its sender wrote it, with only what changed written anew.
//! - [`model`]: the domain types every layer speaks.
//! - [`error`]: start-up errors ([`error::Error`]) and the one request
//!   error ([`error::RequestError`]): faults by side, mapped once to HTTP
//!   status and JSON-RPC error.
//! - [`secrets`]: secret shapes (provider key and token formats) and how
//!   random a value looks: what `lint` finds and `--redact-pattern` scrubs.
//! - [`redact`]: sensitive body keys and header credentials.
//! - [`pseudonym`]: personal data (people's names, addresses, GUIDs, phone
//!   numbers, listed terms) found in a message and given keyed pseudonyms
//!   of the same form (`--pseudonymize`), or only found (`lint`); the key.
//! - [`mcp`]: protocol knowledge: eras, versions, headers, stateless checks,
//!   mock answers ([`mcp::fallback`]), era conversions ([`mcp::convert`]).
//! - [`normalize`]: match keys, placeholders, field diffs, and the settings
//!   record and replay share so that match keys agree.
//! - [`matching`]: the match rules file (`mcp-tape.toml`, `--rules`):
//!   `[[match]]` tables read and checked at start, globs, pointer patterns,
//!   the `ignore` and `normalize` transforms.
//! - [`faults`]: fault rules (`[[fault]]` tables, `--fault`, Agent 365
//!   mocks' `errorRate`): which calls, when (`nth`, `every`, `after`,
//!   `once`, a seeded `rate`), what happens; read and checked at start.
//! - [`sse`]: the `text/event-stream` encoder and incremental parser.
//! - [`agent365`]: the Agent 365 service endpoints that are not MCP
//!   (gateway discovery, chat history): routes, listings, url rewriting;
//!   the server name of an Agent 365 path.
//! - [`cassette`]: SQLite cassettes (open, migrate, writer thread,
//!   loader), answer templates, and the replay index with its per-session
//!   cursors ([`cassette::tape`]).
//! - [`interchange`]: cassettes in other forms, both ways: canonical JSON
//!   Lines, HAR, other tools' recordings (one [`interchange::foreign::Reader`]
//!   per format), Agent 365 mock files and snapshots.
//! - [`config`]: plain validated settings.
//! - [`cli`]: clap definitions, validated into a [`config::Command`] (`cli::validate`).
//! - [`engine`]: one message in, a [`engine::Step`] out: what a step is
//!   made of, below every other room of it ([`engine::step`]: the call,
//!   its outcome, an answer's messages; [`engine::answer`]: the answer),
//!   replay ([`engine::replay`], its handshake-era sessions in `engine::sessions`),
//!   record ([`engine::record`]: held commits, which exchange a server
//!   message belongs to), what a door holds while record forwards
//!   ([`engine::flight`]) and a message it shows the engine
//!   ([`engine::message`]), what a door does for its engine, fixed when it
//!   is built ([`engine::policy`]), re-enacting a recorded stream
//!   ([`engine::reenact`]), what a replayed server says on its own and
//!   each session's standalone stream ([`engine::said`]), which recording
//!   a match rule picks ([`engine::by_rule`], [`engine::nearest`]), what
//!   was worked out for params read before ([`engine::memory`]), which
//!   fault rule fires for a call ([`engine::inject`], before either mode
//!   is asked), a request the recordings did not answer
//!   ([`engine::miss`]), the ledger of what a run exercised
//!   ([`engine::ledger`]), and the agent's LLM on the tape
//!   ([`engine::llm`]; an LLM's turn in a line for the report:
//!   [`engine::turn`]).
//! - [`report`]: a run's ledger told as a summary, JUnit XML, a JSON
//!   usage report (which `prune` and `rules suggest` read back) and an
//!   HTML page for a person (`report::html`); under GitHub Actions, the
//!   step summary and an annotation a miss (`report::github`).
//! - [`suggest`]: `rules suggest`: match rules from a report's misses,
//!   checked against the cassette.
//! - [`drift`]: answers and tool catalogues compared (same, changed, gone;
//!   breaking, additive, cosmetic), and two cassettes (`diff`).
//! - [`lint`]: stored cassettes searched for secrets.
//! - [`transport`]: the front doors: [`transport::http`] (hyper: rules,
//!   a request's server, log line and body, what a tape's handlers share,
//!   framing, statuses, replayed streams a client can resume, the record
//!   proxy, the agent's LLM at `/model/NAME`, the accept loop and what
//!   answers its requests (one app, or tapes taking turns), the
//!   upstream client and when its connections' reads arrived, the one
//!   wrapper that notes a connection's traffic) and
//!   [`transport::stdio`] (line framing, the output writer, record's child
//!   process).
//! - [`ci`]: the command `mcp-tape test` wraps (its environment, its
//!   process group, the signals passed on), or the lines a test runner's
//!   tapes are told in instead (`--tapes-on-stdin`).
//! - [`verify`]: recordings re-sent to the live server and compared.
//! - [`cmd`]: one module per command, each wiring its parts together
//!   ([`cmd::run`] picks the command); `main.rs` parses the command line,
//!   starts logging, maps the outcome to an exit code.

pub mod agent365;
pub mod cassette;
pub mod ci;
pub mod cli;
pub mod cmd;
pub mod config;
pub mod drift;
pub mod engine;
pub mod error;
pub mod faults;
pub mod interchange;
pub mod jsonrpc;
pub mod limits;
pub mod lint;
pub mod logging;
pub mod matching;
pub mod mcp;
pub mod model;
pub mod normalize;
#[allow(unsafe_code)]
pub mod os;
pub mod pseudonym;
pub mod redact;
pub mod report;
pub mod secrets;
pub mod sse;
pub mod suggest;
pub mod transport;
pub mod util;
pub mod verify;
