#!/usr/bin/env bash
# The benchmark command (not part of the test command): installs wrk from Debian if it is missing,
# installs the interop tests' pinned Node and SDKs (tests/interop/setup.sh), builds release binaries,
# and runs bench.py, which prints the table and writes bench/results.md.
# Loopback only; eight to ten minutes.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if ! command -v wrk >/dev/null; then
    echo "bench: installing wrk (Debian package)" >&2
    if [ "$(id -u)" -eq 0 ]; then apt-get install -y wrk >&2; else sudo apt-get install -y wrk >&2; fi
fi
# The pinned Node and TypeScript SDK of the interop tests, for bench/sdk_upstream.mjs (sets $node).
source "$root/tests/interop/setup.sh"
ln -sfn ../tests/interop/node_modules "$root/bench/node_modules"
cd "$root"
cargo build --locked --release --quiet --bin mcp-tape
cargo build --locked --release --quiet -p mcp-tape-bench
exec python3 "$root/bench/bench.py" --bin "$root/target/release" --node "$node" --out "${1:-$root/bench/results.md}"
