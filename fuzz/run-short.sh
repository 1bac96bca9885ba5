#!/usr/bin/env bash
# The short fuzz run of the test command: each target for a few seconds from
# the committed seed corpus (new inputs go to a scratch directory, so the
# repository is left as it was). Installs the pinned cargo-fuzz if missing;
# needs the nightly toolchain (libFuzzer's sanitizer instrumentation).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
CARGO_FUZZ_VERSION=0.13.2
SECONDS_EACH=${FUZZ_SECONDS:-10}
if ! rustup run nightly rustc --version > /dev/null 2>&1; then
    echo "fuzz: installing the nightly toolchain" >&2
    rustup toolchain install nightly --profile minimal
fi
if ! cargo fuzz --version 2>/dev/null | grep -q "$CARGO_FUZZ_VERSION"; then
    echo "fuzz: installing cargo-fuzz $CARGO_FUZZ_VERSION" >&2
    cargo install --locked --quiet cargo-fuzz --version "$CARGO_FUZZ_VERSION"
fi
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
if ! cargo +nightly fuzz build --dev > "$scratch/build.log" 2>&1; then
    tail -40 "$scratch/build.log" >&2
    echo "fuzz: the targets do not build" >&2
    exit 1
fi
tail -1 "$scratch/build.log" >&2
for target in $(cargo +nightly fuzz list); do
    mkdir -p "$scratch/$target"
    if ! cargo +nightly fuzz run --dev "$target" "$scratch/$target" "corpus/$target" -- \
        -max_total_time="$SECONDS_EACH" > "$scratch/$target.log" 2>&1; then
        tail -40 "$scratch/$target.log" >&2
        echo "fuzz: $target failed" >&2
        exit 1
    fi
    echo "fuzz: $target: $(grep -Eo 'Done [0-9]+ runs' "$scratch/$target.log") in ${SECONDS_EACH}s, no crash" >&2
done
