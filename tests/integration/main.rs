//! Integration tests: the real replay server on 127.0.0.1 port 0, driven over
//! real sockets by raw HTTP, by the official Rust MCP SDK (rmcp), and the
//! real binary for what only the process shows (exit codes, signals, logs).

// The tests look at processes and sockets through libc (pipe sizes, pidfds, socket options);
// the rule that unsafe code lives in src/os/ is the crate's.
#![allow(unsafe_code)]

mod agent365;
mod architecture;
mod asides;
mod binary;
mod ci;
mod drift;
mod eras;
mod faults;
mod fidelity;
mod http_rules;
mod imports;
mod limits;
mod models;
mod pseudonyms;
mod record;
mod recorded;
mod resume;
mod rmcp_clients;
mod rules;
mod secrets;
mod stdio;
mod support;
mod tapes;
mod templates;
mod upstream;
mod written;
