"""The soak run (not part of the test command): 32 clients for ten minutes
against `mcp-tape replay` of a generated cassette with SSE answers, then
against `mcp-tape record` in front of the floor; sessions opened and closed
all along (bench/soak.rs). Prints each run's requests, errors and the
server's RSS series, and checks that record stored every exchange a client
saw answered.

    python3 bench/soak.py --bin target/release [--seconds 600] [--clients 32]
"""

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import Server  # noqa: E402


def soak(tool, server, seconds, clients, json_path, sse_path):
    done = subprocess.run([tool, server.base, str(server.proc.pid), str(seconds), str(clients), json_path, sse_path],
                          capture_output=True, text=True, timeout=seconds + 120, check=True)
    return json.loads(done.stdout)


def report(name, result):
    series = result["rss_mib"]
    print(f"## {name}: {result['requests']} requests, {result['answered']} answered, {result['errors']} errors")
    print(f"RSS MiB every 30 s: {', '.join(str(m) for m in series)}")
    print(f"RSS after the first sample to the end: {series[1] if len(series) > 1 else series[0]} -> {series[-1]}")
    for error in result["first_errors"]:
        print(f"  error: {error}")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bin", required=True)
    parser.add_argument("--seconds", type=int, default=600)
    parser.add_argument("--clients", type=int, default=32)
    args = parser.parse_args()
    tool = lambda name: os.path.join(args.bin, name)  # noqa: E731
    failed = False
    with tempfile.TemporaryDirectory() as scratch:
        cassettes = os.path.join(scratch, "replay")
        os.makedirs(cassettes)
        subprocess.run([tool("gen-cassette"), "1000", os.path.join(cassettes, "bench.sqlite")], check=True)
        replay = Server([tool("mcp-tape"), "replay", cassettes, "--port", "0"], os.path.join(scratch, "replay.log"))
        path = "/agents/servers/mcp_Bench"
        result = soak(tool("soak"), replay, args.seconds, args.clients, path, path)
        replay.stop()
        report("replay", result)
        failed |= result["errors"] > 0

        floor = Server([tool("floor")], os.path.join(scratch, "floor.log"))
        recorded = os.path.join(scratch, "recorded")
        record = Server([tool("mcp-tape"), "record", "--upstream", floor.base, "--cassettes", recorded,
                         "--name", "soak", "--port", "0"], os.path.join(scratch, "record.log"))
        result = soak(tool("soak"), record, args.seconds, args.clients, path, "/sse")
        record.stop()
        floor.stop()
        report("record", result)
        stored = sqlite3.connect(os.path.join(recorded, "soak.sqlite")).execute(
            "SELECT count(*) FROM exchange").fetchone()[0]
        print(f"record stored {stored} exchanges; clients saw {result['answered']} answered")
        failed |= result["errors"] > 0 or stored != result["answered"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
