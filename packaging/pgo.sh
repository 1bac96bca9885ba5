#!/usr/bin/env bash
# A profile for a profile-guided (PGO) release build of mcp-tape, made on this machine:
#
#   packaging/pgo.sh [--out PROFDATA] [--rounds N] [--build]
#
# Builds mcp-tape instrumented (release profile, for this machine's own target, under
# target/pgo/generate), runs packaging/pgo.py's workload against it on loopback (N rounds, default
# 200), and merges what it counted into PROFDATA (default target/pgo/mcp-tape.profdata) with the
# toolchain's llvm-profdata (rustup's llvm-tools component, added when missing). With --build it
# then builds the optimized binary from that profile under target/pgo/use and prints its path.
#
# A build for any target of the same source takes the profile as
#   RUSTFLAGS="-Cprofile-use=PROFDATA -Cllvm-args=-no-pgo-warn-mismatch"
# (packaging/build.sh --pgo PROFDATA does; the release workflow too): functions the profile does not
# know (another target's own code) are built as without one.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

usage() {
    echo "usage: packaging/pgo.sh [--out PROFDATA] [--rounds N] [--build]" >&2
    exit 2
}

out=$root/target/pgo/mcp-tape.profdata
rounds=200
build=false
while [ $# -gt 0 ]; do
    case $1 in
        --out) [ $# -ge 2 ] || usage; out=$2; shift 2 ;;
        --rounds) [ $# -ge 2 ] || usage; rounds=$2; shift 2 ;;
        --build) build=true; shift ;;
        *) usage ;;
    esac
done
mkdir -p "$(dirname "$out")"
out=$(cd "$(dirname "$out")" && pwd)/$(basename "$out")
cd "$root"

host=$(rustc -vV | sed -n 's/^host: //p')
profdata=$(rustc --print sysroot)/lib/rustlib/$host/bin/llvm-profdata
if [ ! -x "$profdata" ] && [ ! -x "$profdata.exe" ]; then
    echo "pgo: adding rustup's llvm-tools (llvm-profdata)" >&2
    rustup component add llvm-tools
fi
[ -x "$profdata.exe" ] && profdata=$profdata.exe
exe=mcp-tape
case $host in *windows*) exe=mcp-tape.exe ;; esac

# --target: RUSTFLAGS then reach mcp-tape and its dependencies, not the build scripts cargo runs.
raw=$root/target/pgo/raw
rm -rf "$raw"
echo "pgo: building mcp-tape instrumented ($host)" >&2
# mcp_tape_counting: the instrumented binary exits the ordinary way, so that its counts are written.
RUSTFLAGS="-Cprofile-generate=$raw --cfg mcp_tape_counting" CARGO_TARGET_DIR=$root/target/pgo/generate \
    cargo build --release --locked --bin mcp-tape --target "$host"
echo "pgo: running the workload (packaging/pgo.py, $rounds rounds)" >&2
python3 packaging/pgo.py "target/pgo/generate/$host/release/$exe" --rounds "$rounds"
if ! compgen -G "$raw/*.profraw" >/dev/null; then
    echo "pgo: the workload left no counts in $raw (an instrumented mcp-tape writes them as it exits)" >&2
    exit 1
fi
"$profdata" merge -o "$out" "$raw"
echo "pgo: profile in $out" >&2

if $build; then
    echo "pgo: building mcp-tape from the profile" >&2
    RUSTFLAGS="-Cprofile-use=$out -Cllvm-args=-no-pgo-warn-mismatch" CARGO_TARGET_DIR=$root/target/pgo/use \
        cargo build --release --locked --bin mcp-tape --target "$host"
    echo "$root/target/pgo/use/$host/release/$exe"
fi
