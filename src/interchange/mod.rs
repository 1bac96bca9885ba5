//! Cassettes in the forms other tools and people read, both ways, above
//! the cassette store and the protocol modules they use:
//!
//! - [`jsonl`]: cassettes as canonical JSON Lines (export, import).
//! - [`foreign`]: other tools' recordings (HAR, the MCP Inspector,
//!   mcp-cassette, mcp-recorder, mcp-vcr) read as exchanges; cassettes
//!   written as HAR.
//! - [`a365_mocks`]: the Agent 365 CLI mock tooling server's mock files,
//!   read as answer templates (not replay's own mock answers, which are
//!   `mcp::fallback`).

pub mod a365_mocks;
pub mod foreign;
pub mod jsonl;
