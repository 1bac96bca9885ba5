#!/usr/bin/env bash
# The packaging part of the test command: takes the wheels and npm tarballs of every platform that
# test.sh built ($PACKAGES; without it, builds them: packaging/build.sh all), installs what runs and
# inspects the other platforms' binaries and headless Chromium if they are missing (Debian's
# packages), then tries the packages as a person would (packages.py, platforms.py) with the interop
# part's Node 22 and Python.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../interop/setup.sh"
# The packages test.sh built (packaging/build.sh all, in the background), else built here.
dist=${PACKAGES:-}
if [ -z "$dist" ]; then
    dist="$tools/dist"
    "$root/packaging/build.sh" --profile quick --out "$dist" all
fi
# What runs the other platforms' binaries, and looks into them: Debian's qemu-user-static (aarch64),
# the aarch64 glibc for its dynamic binary, wine64 (Windows) and llvm (llvm-objdump for Mach-O and
# PE).
# Installs Debian packages ("$@": apt-get install's options and names), reading the package lists
# first only when the install cannot do without.
debian_install() {
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >&2 ||
        { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >&2; }
}
missing=()
[ -x /usr/bin/qemu-aarch64-static ] || missing+=(qemu-user-static)
[ -e /usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1 ] || missing+=(libc6-arm64-cross)
[ -x /usr/lib/wine/wine64 ] || missing+=(wine64)
command -v llvm-objdump > /dev/null || missing+=(llvm)
if [ ${#missing[@]} -gt 0 ]; then
    echo "packaging: installing Debian's ${missing[*]}" >&2
    debian_install --no-install-recommends "${missing[@]}"
fi
chromium=$(command -v chromium || true)
if [ -z "$chromium" ]; then
    echo "packaging: installing Debian's chromium for the HTML report check" >&2
    debian_install chromium
    chromium=$(command -v chromium)
fi
echo "packaging: $("$chromium" --version 2>/dev/null)" >&2
status=0
"$python" "$root/tests/packaging/packages.py" --dist "$dist" --python "$python" --node "$node" \
    --chromium "$chromium" || status=$?
echo "packaging: building and trying the packages took ${SECONDS} s" >&2
exit "$status"
