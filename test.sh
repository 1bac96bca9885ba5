#!/usr/bin/env bash
# Every test mcp-tape has, installing what they need (pinned): style checks, `cargo test` (unit tests,
# property tests and integration tests with the rmcp client), a short run of each fuzz target, then
# the interop suite (official Python and TypeScript SDK clients and the official conformance suite
# against the real binary), then the packages: the wheel and npm tarballs built from the checkout,
# installed into a fresh venv and a fresh npm project, the pytest and vitest examples run through them,
# and the HTML report read in headless Chromium.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

cargo fmt --all --check
cargo clippy --locked --workspace --all-targets -- -D warnings
cargo test --locked
cargo package --locked --allow-dirty --quiet
fuzz/run-short.sh
tests/interop/run.sh
tests/packaging/run.sh
