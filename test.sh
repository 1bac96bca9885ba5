#!/usr/bin/env bash
# Every test mcp-tape has, installing what they need (pinned): style checks, `cargo test` (unit tests,
# property tests and integration tests with the rmcp client), a short run of each fuzz target, then
# the interop suite (official Python and TypeScript SDK clients and the official conformance suite
# against the real binary), then the packages: the wheel and npm tarballs built from the checkout,
# installed into a fresh venv and a fresh npm project, the pytest and vitest examples run through them,
# and the HTML report read in headless Chromium.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

# Runs one part and says on stderr how long it took (tests/README.md keeps the figures).
part() {
    local started=$SECONDS
    "$@"
    echo "test.sh: '$*' took $((SECONDS - started)) s" >&2
}

part cargo fmt --all --check
part cargo clippy --locked --workspace --all-targets -- -D warnings
part cargo test --locked
part cargo package --locked --allow-dirty --quiet
part fuzz/run-short.sh
part tests/interop/run.sh
part tests/packaging/run.sh
