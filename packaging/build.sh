#!/usr/bin/env bash
# Builds what users install, from this checkout, for one platform or all of them:
#
#   packaging/build.sh [--profile NAME] [--pgo PROFDATA] [--out DIR] [all | PLATFORM ...]
#   packaging/build.sh --c-only [--profile NAME] [all | PLATFORM ...]
#
# PLATFORM is a name in packaging/platforms.txt; the default is this machine's. For each, DIR
# (default dist/) gets the Python wheel (the binary and the pytest plugin, built by maturin with zig,
# pinned in packaging/requirements.txt) and the npm package @mcp-tape/PLATFORM
# (mcp-tape-PLATFORM-VERSION.tgz, the same binary, packed by packaging/npm-pack.sh); once, the npm
# package mcp-tape (mcp-tape-VERSION.tgz: the `mcp-tape` command, startTape, the vitest helper). --profile is cargo's
# (default release). --pgo builds with that profile (packaging/pgo.sh makes one; the release
# workflow builds each platform so). A platform whose standard library rustup cannot fetch is left out, with
# rustup's words; one that fails to build is reported and the rest are still built; the script
# ends with a line per platform and exits 1 if any failed. --c-only compiles only the crates with C
# code in them (mimalloc, SQLite, ring) for each platform, with zig as the packages' build uses it,
# and packs nothing: what differs between the profiles beyond Rust's own code (the test command
# builds the packages in the quick profile, and checks the release profile's C this way).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

PLATFORMS=$(grep -v '^#' "$root/packaging/platforms.txt")

usage() {
    echo "usage: packaging/build.sh [--c-only] [--profile NAME] [--pgo PROFDATA] [--out DIR] [all | PLATFORM ...]" >&2
    echo "platforms: $(awk 'NF { printf "%s ", $1 }' <<< "$PLATFORMS")" >&2
    exit 2
}

profile=release
c_only=
pgo=
out=$root/dist
wanted=()
while [ $# -gt 0 ]; do
    case $1 in
        --profile) [ $# -ge 2 ] || usage; profile=$2; shift 2 ;;
        --c-only) c_only=1; shift ;;
        --pgo) [ $# -ge 2 ] || usage; pgo=$(cd "$(dirname "$2")" && pwd)/$(basename "$2"); shift 2 ;;
        --out) [ $# -ge 2 ] || usage; out=$2; shift 2 ;;
        all) wanted+=($(awk 'NF { print $1 }' <<< "$PLATFORMS")); shift ;;
        -*) usage ;;
        *) grep -q "^$1 " <<< "$PLATFORMS" || { echo "packaging: no platform $1" >&2; usage; }
           wanted+=("$1"); shift ;;
    esac
done
if [ ${#wanted[@]} -eq 0 ]; then
    case "$(uname -s)-$(uname -m)" in
        Linux-x86_64) wanted=(linux-x64) ;;
        Linux-aarch64) wanted=(linux-arm64) ;;
        Darwin-x86_64) wanted=(darwin-x64) ;;
        Darwin-arm64) wanted=(darwin-arm64) ;;
        *) echo "packaging: name a platform; this machine is $(uname -s)-$(uname -m)" >&2; usage ;;
    esac
fi
if [ -n "$pgo" ] && [ ! -f "$pgo" ]; then
    echo "packaging: no profile at $pgo (packaging/pgo.sh makes one)" >&2
    exit 2
fi
if [ -z "$c_only" ]; then
    mkdir -p "$out"
    out=$(cd "$out" && pwd)
fi
cd "$root"

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
main_manifest=packaging/npm/mcp-tape/package.json
if ! grep -q "\"version\": \"$version\"" "$main_manifest"; then
    echo "packaging: $main_manifest does not say version $version (Cargo.toml's)" >&2
    exit 1
fi
for platform in $(awk 'NF { print $1 }' <<< "$PLATFORMS"); do
    if ! grep -q "\"@mcp-tape/$platform\": \"$version\"" "$main_manifest"; then
        echo "packaging: $main_manifest does not list @mcp-tape/$platform $version as an optional dependency" >&2
        exit 1
    fi
done

venv="$root/.interop/pack-venv"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
if ! cmp -s packaging/requirements.txt "$venv/requirements.stamp"; then
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r packaging/requirements.txt >&2
    cp packaging/requirements.txt "$venv/requirements.stamp"
fi
# Where cargo (and so maturin) puts a build: CARGO_TARGET_DIR when set, as cargo honours it.
target_dir=${CARGO_TARGET_DIR:-$root/target}
case "$target_dir" in /*) ;; *) target_dir="$root/$target_dir" ;; esac
# cargo's own profiles keep their builds in debug/ (dev) and release/; the others under their name.
profile_dir=$profile
[ "$profile" = dev ] && profile_dir=debug

# zig's C compiler refuses __DATE__ in an optimized build (-Werror=date-time); mimalloc prints it in
# its verbose banner. The date is then the last commit's (SOURCE_DATE_EPOCH), so a build is repeatable.
export CFLAGS="${CFLAGS:-} -Wno-error=date-time"
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
    SOURCE_DATE_EPOCH=$(git log -1 --format=%ct 2>/dev/null || echo 0)
    export SOURCE_DATE_EPOCH
fi

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

# Adds the standard library for `target` if it is missing; says why not and returns 1 if it cannot.
add_target() {
    local platform=$1 target=$2
    if ! rustup target list --installed | grep -qx "$target"; then
        echo "packaging: $platform: adding the standard library for $target (rustup)" >&2
        if ! rustup target add "$target" > "$stage/rustup-$platform.log" 2>&1; then
            echo "packaging: $platform: not to be had here: $(tail -1 "$stage/rustup-$platform.log")" >&2
            return 1
        fi
    fi
}

# Builds one platform's wheel and npm package; says why not on stderr and returns 1 if it cannot, 3
# if rustup cannot add the target.
build_platform() {
    local platform=$1 target=$2 compatibility=$3 os=$4
    add_target "$platform" "$target" || return 3
    local args=(build --locked --zig --profile "$profile" --target "$target" --out "$out")
    [ "$compatibility" != - ] && args+=(--compatibility "$compatibility")
    echo "packaging: $platform: building the wheel (maturin, zig, $target, profile $profile${pgo:+, PGO})" >&2
    local flags=${RUSTFLAGS:-}
    [ -n "$pgo" ] && flags="$flags -Cprofile-use=$pgo -Cllvm-args=-no-pgo-warn-mismatch"
    if ! RUSTFLAGS="$flags" PATH="$venv/bin:$PATH" maturin "${args[@]}" > "$stage/build-$platform.log" 2>&1; then
        grep -E "^(error|  Caused by)" "$stage/build-$platform.log" | head -20 >&2 || true
        tail -5 "$stage/build-$platform.log" >&2
        return 1
    fi
    local exe=mcp-tape
    [ "$os" = win32 ] && exe=mcp-tape.exe
    packaging/npm-pack.sh "$platform" "$target_dir/$target/$profile_dir/$exe" "$out"
}

# Compiles one platform's C crates (those that build with the `cc` crate, for that target) with zig
# as maturin drives it (its `zig cc` and `zig ar`, the same target); says why not on stderr and
# returns 1 if they do not compile, 3 if rustup cannot add the target.
build_c_crates() {
    local platform=$1 target=$2
    add_target "$platform" "$target" || return 3
    local zig_target
    case $target in
        *-apple-darwin) zig_target=${target%%-*}-macos ;;
        *-unknown-linux-gnu) zig_target=${target%%-*}-linux-gnu.2.17 ;;
        *) zig_target=$(awk -F- '{ print $1 "-" $3 "-" $4 }' <<< "$target") ;;
    esac
    printf '#!/bin/sh\nexec "%s" zig cc -- -g -fno-sanitize=all -target %s "$@"\n' "$venv/bin/maturin" "$zig_target" \
        > "$stage/cc-$platform"
    printf '#!/bin/sh\nexec "%s" zig ar -- "$@"\n' "$venv/bin/maturin" > "$stage/ar-$platform"
    chmod +x "$stage/cc-$platform" "$stage/ar-$platform"
    local variable=${target//-/_}
    echo "packaging: $platform: compiling the C crates (zig, $zig_target, profile $profile)" >&2
    local packages=()
    for crate in $(cargo tree --locked -i cc --target "$target" -e normal,build --depth 1 --prefix none |
        tail -n +2 | awk '{ print $1 }' | sort -u); do
        packages+=(-p "$crate")
    done
    if ! env "CC_$variable=$stage/cc-$platform" "AR_$variable=$stage/ar-$platform" PATH="$venv/bin:$PATH" \
        cargo build --locked --profile "$profile" --target "$target" "${packages[@]}" \
        > "$stage/c-$platform.log" 2>&1; then
        grep -E "^(error|warning: [^ ]*@)" "$stage/c-$platform.log" | head -20 >&2 || true
        tail -5 "$stage/c-$platform.log" >&2
        return 1
    fi
}

summary=()
failed=0
[ -n "$c_only" ] || rm -f "$out"/mcp_tape-*.whl "$out"/mcp-tape-*.tgz
for platform in "${wanted[@]}"; do
    read -r _ target compatibility os _ <<< "$(grep "^$platform " <<< "$PLATFORMS")"
    started=$SECONDS
    status=0
    if [ -n "$c_only" ]; then
        build_c_crates "$platform" "$target" || status=$?
    else
        build_platform "$platform" "$target" "$compatibility" "$os" || status=$?
    fi
    case $status in
        0) summary+=("$platform: built in $((SECONDS - started)) s${c_only:+ (the C crates)}") ;;
        3) summary+=("$platform: not built: rustup cannot add $target here (above)") ;;
        *) summary+=("$platform: FAILED to build (above)"); failed=1 ;;
    esac
done
if [ -n "$c_only" ]; then
    printf 'packaging: %s\n' "${summary[@]}" >&2
    exit "$failed"
fi

echo "packaging: packing the npm package mcp-tape" >&2
cp -r packaging/npm/mcp-tape "$stage/main"
if [ -n "${REPOSITORY_URL:-}" ]; then
    (cd "$stage/main" && npm pkg set "repository.type=git" "repository.url=git+$REPOSITORY_URL.git")
fi
(cd "$stage/main" && npm pack --silent --pack-destination "$out" >/dev/null)
printf 'packaging: %s\n' "${summary[@]}" >&2
ls -l "$out" >&2
exit "$failed"
