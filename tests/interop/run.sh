#!/usr/bin/env bash
# The interop part of the test command: installs the pinned official clients (setup.sh) and runs
# interop.py against the debug binary.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
exec "$python" "$here/interop.py" --binary "$binary" --node "$node" --logs "$tools/logs" --tools "$foreign_tools" "$@"
