#!/usr/bin/env bash
# Every test mcp-tape has, installing what they need (pinned): style checks, `cargo test` (unit tests,
# property tests and integration tests with the rmcp client), a short run of each fuzz target, then
# the interop suite (official Python and TypeScript SDK clients and the official conformance suite
# against the real binary), then the packages: the wheel and npm tarballs built from the checkout,
# installed into a fresh venv and a fresh npm project, the pytest and vitest examples run through them,
# and the HTML report read in headless Chromium.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
case ${1:-} in
    '' | quick) ;;
    *) echo "usage: ./test.sh [quick]" >&2; exit 2 ;;
esac

# Runs one part and says on stderr how long it took (tests/README.md keeps the figures).
part() {
    local started=$SECONDS
    "$@"
    echo "test.sh: '$*' took $((SECONDS - started)) s" >&2
}

# The packages of every platform (packaging/build.sh all) build in the background while the interop
# part runs, at the lowest priority: its clients leave a core idle much of the time, where the parts
# before it keep both busy. The packaging part waits for them; an early failure ends them (a session
# of their own, so one kill reaches every process). The kernel schedules a session as one group
# (autogroup) whatever its processes' nice values, so the group is lowered too. They build in the
# quick profile (no optimization: seven cross builds fit); then the Windows target's C crates are
# compiled in the release profile, which zig's C compiler judges more strictly.
start_packages_build() {
    mkdir -p .interop
    setsid --wait bash -c 'echo 19 > /proc/self/autogroup 2>/dev/null || true
        nice -n 19 packaging/build.sh --profile quick --out .interop/dist all &&
            nice -n 19 packaging/build.sh --c-only win32-x64' build > .interop/build-all.log 2>&1 &
    builder=$!
    builder_started=$SECONDS
    trap 'kill -- -"$builder" 2>/dev/null || true' EXIT
}
packages_built() {
    local status=0 waited=$SECONDS
    wait "$builder" || status=$?
    trap - EXIT
    cat .interop/build-all.log >&2
    echo "test.sh: packaging/build.sh all took $((SECONDS - builder_started)) s in the background;" \
        "the test command waited $((SECONDS - waited)) s for it" >&2
    return "$status"
}

part cargo fmt --all --check
part cargo clippy --locked --workspace --all-targets -- -D warnings
part cargo test --locked
# `./test.sh quick`: the inner loop, the three parts above; CI runs the whole command.
if [[ ${1:-} == quick ]]; then
    exit 0
fi
part cargo package --locked --allow-dirty --quiet
part fuzz/run-short.sh
start_packages_build
part tests/interop/run.sh
packages_built
PACKAGES="$PWD/.interop/dist" part tests/packaging/run.sh
