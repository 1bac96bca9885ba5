#!/usr/bin/env bash
# Re-records cassettes/agent365-demo.sqlite (and its review copy, agent365-demo.jsonl) with
# `mcp-tape record` in front of agent365_upstream.py, driven by the official Python SDK in both
# protocol eras (record_demo.py). Everything runs on 127.0.0.1.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
rm -f "$root/cassettes/agent365-demo.sqlite" "$root/cassettes/agent365-demo.jsonl"
"$python" "$here/record_demo.py" --binary "$binary" --cassettes "$root/cassettes" --name agent365-demo
"$binary" export "$root/cassettes/agent365-demo.sqlite" -o "$root/cassettes/agent365-demo.jsonl"
echo "recorded: $(wc -l < "$root/cassettes/agent365-demo.jsonl") exchanges in cassettes/agent365-demo.sqlite" >&2
