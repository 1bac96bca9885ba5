"""Instructions a request, counted by callgrind: issue 48's session request replayed by two builds,
and the floor serving each build's answer.

    python3 bench/callgrind.py --new NEW_BINARY --bin target/release [--old OLD_BINARY | --baseline REV]
                               [--version 2025-06-18] [--calls 1000,3000] [--top 30]

The cassette is compare.py's session cassette (a Python SDK server's `GetMessage`, recorded by the
old build). Each server runs under `valgrind --tool=callgrind`, pinned to core 1, and is asked the
request over one keep-alive connection (Python's http.client, with the session's headers: seven
in all), once for each number of calls. A request's instructions are the difference between the
two runs over the extra calls, so that starting, opening the session and stopping cancel out.
Instructions move far less with the machine's load than requests/s do, so a change too small for
paired rounds still shows here; but not under 1%: tokio's parking and mimalloc's purges follow
timing (one build measured against itself: 25,843 and 25,740).

Prints each server's figure, then the functions whose own instructions a request differ most
between the two builds (`callgrind_annotate`; inlined code counts where it was inlined), for
BENCHMARKS.md's itemized differences. Needs valgrind; --python as in compare.py.
"""

import argparse
import collections
import http.client
import os
import re
import subprocess
import tempfile

from bench import Server
from compare import (GET_MESSAGE, MAIL_PATH, POST_HEADERS, baseline_build, build_arguments, floor_arguments,
                     mcp_post, open_session, record_session)

# callgrind_annotate's line of one function: its count, its share, then file:function [object].
FUNCTION = re.compile(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+(?:\?\?\?:|[^ :]*\.(?:rs|c|h|S):)?(.+?)(?: \[[^\]]*\])?$")


def ask(base, headers, calls):
    """`calls` times the request, on one keep-alive connection to `base`."""
    connection = http.client.HTTPConnection(base.removeprefix("http://"), timeout=120)
    for _ in range(calls):
        connection.request("POST", MAIL_PATH, GET_MESSAGE, {**POST_HEADERS, **headers})
        answer = connection.getresponse()
        body = answer.read()
        if answer.status != 200 or b'"result"' not in body:
            raise RuntimeError(f"{base} answered {answer.status}: {body[:300]!r}")
    connection.close()


def counted(command, calls, headers_at, out, log):
    """The instructions of `command` (a server) asked `calls` times, in all and per function, sending
    the headers `headers_at` gives for the server's base URL."""
    server = Server(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *command], log)
    ask(server.base, headers_at(server.base), calls)
    server.stop()
    annotated = subprocess.run(["callgrind_annotate", "--threshold=100", "--inclusive=no", "--auto=no", out],
                               check=True, capture_output=True, text=True).stdout
    costs = collections.Counter()
    for line in annotated.splitlines():
        match = FUNCTION.match(line)
        if match and "PROGRAM TOTALS" not in line:
            costs[match.group(2)] += int(match.group(1).replace(",", ""))
    total = re.search(r"([\d,]+) \(100\.0%\)\s+PROGRAM TOTALS", annotated)
    if total is None:
        raise RuntimeError(f"no total in callgrind_annotate's output for {out}")
    return int(total.group(1).replace(",", "")), costs


def per_request(command, calls, headers_at, scratch, name):
    """Instructions a request of `command`, in all and per function, from a run of each number of calls."""
    (few, many) = calls
    runs = [counted(command, n, headers_at, os.path.join(scratch, f"{name}-{n}.out"),
                    os.path.join(scratch, f"{name}-{n}.log"))
            for n in (few, many)]
    extra = many - few
    total = (runs[1][0] - runs[0][0]) / extra
    functions = {function: (runs[1][1][function] - runs[0][1][function]) / extra
                 for function in runs[1][1] | runs[0][1]}
    return total, functions


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    build_arguments(parser, "floor")
    parser.add_argument("--version", default="2025-06-18", help="the client's protocol version")
    parser.add_argument("--calls", default="1000,3000", help="the two runs' numbers of calls")
    parser.add_argument("--top", type=int, default=30, help="how many functions to itemize")
    args = parser.parse_args()
    calls = tuple(int(n) for n in args.calls.split(","))
    if len(calls) != 2 or not 0 < calls[0] < calls[1]:
        parser.error("--calls takes two numbers, the first smaller")
    old = args.old or os.path.join(baseline_build(args.baseline), "mcp-tape")
    builds = {"old": old, "new": args.new}

    with tempfile.TemporaryDirectory() as scratch:
        log = lambda name: os.path.join(scratch, f"{name}.log")  # noqa: E731
        recorded = os.path.join(scratch, "cassette")
        record_session(args.python, old, recorded, log)
        figures, functions = {}, {}
        # Replay in a session of its own; the floor (which checks none) with a session's headers.
        in_session = lambda base: open_session(base + MAIL_PATH, args.version)  # noqa: E731
        for key, binary in builds.items():
            # The answer the floor serves: the build's own, asked once outside valgrind.
            replay = Server([binary, "replay", recorded, "--port", "0"], log(f"replay-{key}"))
            session = open_session(replay.base + MAIL_PATH, args.version)
            answered, body = mcp_post(replay.base + MAIL_PATH, GET_MESSAGE, session)
            replay.stop()
            floor = [os.path.join(args.bin, "floor"), "0",
                     *floor_arguments(answered, body, os.path.join(scratch, f"answer-{key}"))]
            figures[key], functions[key] = per_request([binary, "replay", recorded, "--port", "0"], calls,
                                                       in_session, scratch, key)
            figures[f"floor ({key}'s answer)"], _ = per_request(floor, calls, lambda _: session, scratch,
                                                                f"floor-{key}")

    print(f"Instructions a request ({args.version} client; {calls[1]} calls less {calls[0]}, "
          f"over {calls[1] - calls[0]}); old is {args.old or args.baseline}")
    print()
    print("| server | instructions a request |")
    print("|---|---:|")
    for name, figure in figures.items():
        print(f"| {name} | {figure:,.0f} |")
    print()
    print("| function (own instructions) | old | new | new − old |")
    print("|---|---:|---:|---:|")
    old_costs, new_costs = functions["old"], functions["new"]
    names = sorted(old_costs.keys() | new_costs.keys(),
                   key=lambda name: -abs(new_costs.get(name, 0) - old_costs.get(name, 0)))
    for name in names[:args.top]:
        before, after = old_costs.get(name, 0), new_costs.get(name, 0)
        print(f"| `{name[:100]}` | {before:,.0f} | {after:,.0f} | {after - before:+,.0f} |")


if __name__ == "__main__":
    main()
