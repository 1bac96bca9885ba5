#!/usr/bin/env bash
# Packs the npm package of one platform, @mcp-tape/PLATFORM, around a binary built for it:
#
#   packaging/npm-pack.sh PLATFORM BINARY OUT_DIR
#
# Its package.json and README are written from packaging/platforms.txt (os, cpu and libc, so npm
# installs it only where it runs); the tarball, mcp-tape-PLATFORM-VERSION.tgz, goes to OUT_DIR.
# packaging/build.sh runs it for each platform it builds; the release workflow for each binary.
# With REPOSITORY_URL set (the release workflow sets it), package.json names the repository, as npm's
# provenance needs.
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: packaging/npm-pack.sh PLATFORM BINARY OUT_DIR" >&2; exit 2; }
platform=$1 binary=$2 out=$3
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
row=$(grep "^$platform " "$root/packaging/platforms.txt") ||
    { echo "packaging: $platform is not in packaging/platforms.txt" >&2; exit 2; }
read -r _ _ _ os cpu libc words <<< "$row"
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/Cargo.toml" | head -1)
executable=mcp-tape
[ "$os" = win32 ] && executable=mcp-tape.exe

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$out"
cp "$binary" "$stage/bin/$executable"
chmod 755 "$stage/bin/$executable"
libc_field=
[ "$libc" != - ] && libc_field="
  \"libc\": [\"$libc\"],"
cat > "$stage/package.json" <<JSON
{
  "name": "@mcp-tape/$platform",
  "version": "$version",
  "description": "The mcp-tape binary for $words; installed by the mcp-tape package",
  "license": "MIT",
  "os": ["$os"],
  "cpu": ["$cpu"],$libc_field
  "files": ["bin/$executable"],
  "preferUnplugged": true
}
JSON
cat > "$stage/README.md" <<MD
# @mcp-tape/$platform

The \`mcp-tape\` executable for $words. Install
[\`mcp-tape\`](https://www.npmjs.com/package/mcp-tape) instead: it depends on this package, npm
installs it only on the machines it fits, and \`mcp-tape\` finds the binary in it.
MD
if [ -n "${REPOSITORY_URL:-}" ]; then
    (cd "$stage" && npm pkg set "repository.type=git" "repository.url=git+$REPOSITORY_URL.git")
fi
(cd "$stage" && npm pack --silent --pack-destination "$(cd "$out" && pwd)" > /dev/null)
