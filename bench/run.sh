#!/usr/bin/env bash
# The benchmark command (not part of the test command): installs wrk from Debian if it is missing,
# builds release binaries, and runs bench.py, which prints the table and writes bench/results.md.
# Loopback only; six to eight minutes.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if ! command -v wrk >/dev/null; then
    echo "bench: installing wrk (Debian package)" >&2
    if [ "$(id -u)" -eq 0 ]; then apt-get install -y wrk >&2; else sudo apt-get install -y wrk >&2; fi
fi
cd "$root"
cargo build --locked --release --quiet --bin mcp-tape
cargo build --locked --release --quiet -p mcp-tape-bench
exec python3 "$root/bench/bench.py" --bin "$root/target/release" --out "${1:-$root/bench/results.md}"
