//! Cassettes and what they hold, above the domain types ([`crate::model`])
//! and the protocol modules, below the engine; each module uses only those
//! listed before it:
//!
//! - [`store`]: SQLite files: open and migrate, the writer thread, the
//!   loader.
//! - [`template`]: answer templates: `{{argument}}` holes filled from a call.
//! - [`tape`]: the replay index (recordings and answer templates) and the
//!   per-session cursors.
//!
//! Cassettes in other forms (JSON Lines, HAR, other tools' recordings,
//! Agent 365 mock files) are [`crate::interchange`]'s, a room above this
//! one.

pub mod store;
pub mod tape;
pub mod template;
