#!/usr/bin/env bash
# Builds what users install, from this checkout, into DIR (default: dist/):
# - the Python wheel mcp_tape-VERSION-py3-none-manylinux_2_17_x86_64.whl: the release binary (linked
#   with zig against glibc 2.17, so it runs on any x86-64 Linux of the last decade) and the pytest
#   plugin (maturin, pinned in packaging/requirements.txt);
# - the npm tarballs mcp-tape-VERSION.tgz (the `mcp-tape` command, startTape, the vitest helper) and
#   mcp-tape-linux-x64-VERSION.tgz (@mcp-tape/linux-x64: the same binary).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:-$root/dist}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$root"

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
for manifest in packaging/npm/*/package.json; do
    if ! grep -q "\"version\": \"$version\"" "$manifest"; then
        echo "packaging: $manifest does not say version $version (Cargo.toml's)" >&2
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

rm -f "$out"/mcp_tape-*.whl "$out"/mcp-tape-*.tgz
echo "packaging: building the wheel (maturin, zig, manylinux2014)" >&2
target=x86_64-unknown-linux-gnu
PATH="$venv/bin:$PATH" maturin build --release --locked --zig --compatibility manylinux2014 \
    --target "$target" --out "$out" >&2
# Where cargo (and so maturin) put the build: CARGO_TARGET_DIR when set, as cargo honours it.
target_dir=${CARGO_TARGET_DIR:-$root/target}
case "$target_dir" in /*) ;; *) target_dir="$root/$target_dir" ;; esac
binary="$target_dir/$target/release/mcp-tape"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
echo "packaging: packing the npm packages" >&2
cp -r packaging/npm/linux-x64 packaging/npm/mcp-tape "$stage/"
mkdir -p "$stage/linux-x64/bin"
cp "$binary" "$stage/linux-x64/bin/mcp-tape"
for package in linux-x64 mcp-tape; do
    (cd "$stage/$package" && npm pack --silent --pack-destination "$out" >/dev/null)
done
ls -l "$out" >&2
