//! Cassettes and what they hold, from the domain types up to the replay
//! index. [`model`] sits below every other layer of the crate (every part
//! speaks its types); the rest sits between the protocol modules and the
//! engine, each using only those listed before it:
//!
//! - [`model`]: the domain types (`Exchange`, `RecordedMessage`,
//!   `Direction`, `Era`, `MatchKey`, `ServiceRoute`, `ServiceAnswer`,
//!   `AnswerTemplate`) and JSON as sent and canonical; SQLite conversions of the
//!   stored ones.
//! - [`store`]: SQLite files: open and migrate, the writer thread, the
//!   loader.
//! - [`template`]: answer templates: `{{argument}}` holes filled from a call.
//! - [`a365_mocks`]: the Agent 365 CLI mock tooling server's mock files,
//!   read as answer templates (not replay's own mock answers, which are
//!   `mcp::fallback`).
//! - [`jsonl`]: cassettes as canonical JSON Lines (export, import).
//! - [`foreign`]: other tools' recordings (HAR, the MCP Inspector,
//!   mcp-cassette, mcp-recorder, mcp-vcr) read as exchanges; cassettes
//!   written as HAR.
//! - [`tape`]: the replay index (recordings and answer templates) and the
//!   per-session cursors.

pub mod a365_mocks;
pub mod foreign;
pub mod jsonl;
pub mod model;
pub mod store;
pub mod tape;
pub mod template;
