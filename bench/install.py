"""From nothing to the first replayed answer, two ways, in seconds:

- pip: a fresh venv, `pip install` of the wheel packaging/build.sh made (the
  file, no index: what a person's `pip install mcp-tape` does once the wheel is
  downloaded), then `mcp-tape replay --port 0 cassettes/` and one `initialize`
  over loopback until its answer arrives;
- npm: a fresh project, `npm install` of the two tarballs (the `mcp-tape`
  shim and `@mcp-tape/linux-x64`), then the same replay through the shim
  (`node_modules/.bin/mcp-tape`, Node on PATH) and request;
- cargo: `cargo install --locked --path .` into a fresh root with a fresh
  target directory (the cold build a CI job's `cargo install` does; the crates
  are already in cargo's download cache here), then the same replay and request.

Prints one table row per way. Usage:
python3 bench/install.py --wheel dist/mcp_tape-*.whl --tarballs dist/mcp-tape-*.tgz
"""

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "bench", "version": "1"}}}


def first_answer(binary):
    """Starts replay of the shipped cassettes; seconds until its first answer, and the answer."""
    started = time.perf_counter()
    tape = subprocess.Popen([str(binary), "replay", "--port", "0", str(ROOT / "cassettes")],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        url = None
        for line in tape.stderr:
            if "listening on " in line:
                url = line.split("listening on ", 1)[1].split()[0]
                break
        assert url, "replay did not start"
        request = urllib.request.Request(url + "/agents/servers/mcp_MeServer", json.dumps(INITIALIZE).encode(),
                                         {"content-type": "application/json",
                                          "accept": "application/json, text/event-stream"})
        with urllib.request.urlopen(request, timeout=30) as response:
            body = response.read()
        return time.perf_counter() - started, json.loads(body)["result"]["serverInfo"]["name"]
    finally:
        tape.terminate()
        tape.wait(timeout=30)


def timed(command, **kwargs):
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kwargs)
    return time.perf_counter() - started


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--wheel", required=True)
    parser.add_argument("--tarballs", nargs=2, required=True, help="the two npm tarballs")
    parser.add_argument("--skip-cargo", action="store_true")
    args = parser.parse_args()
    print("| way | set up s | install s | start → first answer s | total s |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as scratch:
        venv = Path(scratch) / "venv"
        set_up = timed([sys.executable, "-m", "venv", str(venv)])
        install = timed([str(venv / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check",
                         "--no-index", args.wheel])
        answer, server = first_answer(venv / "bin" / "mcp-tape")
        print(f"| pip install of the wheel (fresh venv) | {set_up:.1f} | {install:.1f} | {answer:.3f} "
              f"| {set_up + install + answer:.1f} |", flush=True)
        assert server == "mcp_MeServer", server
        project = Path(scratch) / "project"
        project.mkdir()
        set_up = timed(["npm", "init", "-y"], cwd=project)
        tarballs = [str(Path(tarball).resolve()) for tarball in args.tarballs]
        install = timed(["npm", "install", "--no-audit", "--no-fund", *tarballs], cwd=project)
        answer, server = first_answer(project / "node_modules" / ".bin" / "mcp-tape")
        print(f"| npm install of the two tarballs (fresh project) | {set_up:.1f} | {install:.1f} | {answer:.3f} "
              f"| {set_up + install + answer:.1f} |", flush=True)
        assert server == "mcp_MeServer", server
        if not args.skip_cargo:
            assert shutil.which("cargo"), "cargo is not on PATH"
            root, target = Path(scratch) / "root", Path(scratch) / "target"
            install = timed(["cargo", "install", "--locked", "--path", str(ROOT), "--root", str(root),
                             "--target-dir", str(target)])
            answer, server = first_answer(root / "bin" / "mcp-tape")
            print(f"| cargo install --locked --path . (cold target dir) | 0.0 | {install:.1f} | {answer:.3f} "
                  f"| {install + answer:.1f} |", flush=True)


if __name__ == "__main__":
    main()
