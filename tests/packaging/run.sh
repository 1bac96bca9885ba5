#!/usr/bin/env bash
# The packaging part of the test command: builds the wheel and npm tarballs from this checkout
# (packaging/build.sh), installs headless Chromium if it is missing (Debian's `chromium`), then
# tries the packages as a person would (packages.py) with the interop part's Node 22 and Python.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../interop/setup.sh"
dist="$tools/dist"
"$root/packaging/build.sh" "$dist"
chromium=$(command -v chromium || true)
if [ -z "$chromium" ]; then
    echo "packaging: installing Debian's chromium for the HTML report check" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >&2 ||
        { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >&2; }
    chromium=$(command -v chromium)
fi
echo "packaging: $("$chromium" --version 2>/dev/null)" >&2
status=0
"$python" "$root/tests/packaging/packages.py" --dist "$dist" --python "$python" --node "$node" \
    --chromium "$chromium" || status=$?
echo "packaging: building and trying the packages took ${SECONDS} s" >&2
exit "$status"
