"""The other platforms' packages, as far as this x86-64 Linux machine can try them:

- each platform's wheel and npm package hold the same binary, for the right machine, and the npm
  package's os, cpu and libc fields make npm refuse it elsewhere;
- the musl binaries are static (`ldd`), the glibc ones need nothing newer than glibc 2.17;
- the binaries that can run here (x86-64 musl natively, aarch64 under qemu-user-static, Windows
  under wine, given wine/bcryptprimitives.c: Windows 10 has that DLL, wine 8.0 does not) print the
  version, answer the demo cassette's recorded requests over HTTP and over
  stdio with the same bytes as this machine's own binary, and run a tape for a test to the verdict
  written on its stdin, alone and taking turns with others in one process;
- the macOS binaries are Mach-O for the right processor and link only the system's libraries: they
  cannot run here.
"""

import argparse
import http.client
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT / "tests" / "interop"))

from harness import DEMO_JSONL, SHIPPED_CASSETTES, START_TIMEOUT_S, Daemon  # noqa: E402
from running import must, run  # noqa: E402

DEMO_SQLITE = os.path.join(SHIPPED_CASSETTES, "agent365-demo.sqlite")
PLATFORMS_TXT = ROOT / "packaging" / "platforms.txt"
WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"
CI_WORKFLOW = ROOT / ".github" / "workflows" / "ci.yml"
DOCKERFILE = ROOT / "packaging" / "Dockerfile"
QEMU = "/usr/bin/qemu-aarch64-static"
# Where Debian's libc6-arm64-cross puts the aarch64 glibc (the loader and libc qemu needs for a
# dynamic aarch64 binary).
ARM64_SYSROOT = "/usr/aarch64-linux-gnu"
WINE = "/usr/lib/wine/wine64"
# What wine 8.0 lacks of Windows 10, built beside the Windows binary before it runs.
WINE_STAND_IN = HERE / "wine" / "bcryptprimitives.c"
ZIG = [str(ROOT / ".interop" / "pack-venv" / "bin" / "python"), "-m", "ziglang"]
# The stdio replay: this server's session-era requests, after an initialize.
STDIO_SERVER = "mcp_MailTools"
# What a Windows binary may import: DLLs every Windows has.
WINDOWS_SYSTEM_DLL = re.compile(r"^(kernel32|ntdll|ws2_32|advapi32|bcrypt|bcryptprimitives|userenv|shell32|ole32|"
                                r"oleaut32|user32|crypt32|secur32|ncrypt|msvcrt|ucrtbase|synchronization|"
                                r"api-ms-win-[a-z0-9-]+)\.dll$", re.IGNORECASE)


class Platform:
    """One row of packaging/build.sh's table, and how this machine can run its binary."""

    def __init__(self, name, wheel_tag, os_, cpu, libc, machine, runner):
        self.name = name
        self.wheel_tag = wheel_tag
        self.os = os_
        self.cpu = cpu
        self.libc = libc
        self.machine = machine
        self.runner = runner  # the command prefix that runs it here; None: it cannot run here

    @property
    def executable(self):
        return "mcp-tape.exe" if self.os == "win32" else "mcp-tape"


# This machine's platform: its binary's answers are what the others' must be.
HOST = Platform("linux-x64", "manylinux_2_17_x86_64", "linux", "x64", "glibc", "X86-64", [])
OTHERS = [
    Platform("linux-arm64", "manylinux_2_17_aarch64", "linux", "arm64", "glibc", "AArch64",
             [QEMU, "-L", ARM64_SYSROOT]),
    Platform("linux-x64-musl", "musllinux_1_2_x86_64", "linux", "x64", "musl", "X86-64", []),
    Platform("linux-arm64-musl", "musllinux_1_2_aarch64", "linux", "arm64", "musl", "AArch64", [QEMU]),
    Platform("darwin-x64", "macosx_10_12_x86_64", "darwin", "x64", None, "X86_64", None),
    Platform("darwin-arm64", "macosx_11_0_arm64", "darwin", "arm64", None, "ARM64", None),
    Platform("win32-x64", "win_amd64", "win32", "x64", None, "x86-64", [WINE]),
]


def unpacked(dist, platform, work):
    """The platform's wheel and npm tarball unpacked under `work`: (binary from the npm package,
    its package.json as a dict)."""
    wheels = sorted(Path(dist).glob(f"mcp_tape-*{platform.wheel_tag}*.whl"))
    tarballs = sorted(Path(dist).glob(f"mcp-tape-{platform.name}-[0-9]*.tgz"))
    assert len(wheels) == 1 and len(tarballs) == 1, f"one wheel and one tarball expected: {wheels} {tarballs}"
    place = work / platform.name
    with zipfile.ZipFile(wheels[0]) as wheel:
        wheel.extractall(place / "wheel")
    with tarfile.open(tarballs[0]) as tarball:
        tarball.extractall(place / "npm", filter="data")
    from_wheel = sorted((place / "wheel").glob(f"mcp_tape-*.data/scripts/{platform.executable}"))
    from_npm = place / "npm" / "package" / "bin" / platform.executable
    assert len(from_wheel) == 1, sorted(str(p) for p in (place / "wheel").rglob("*"))
    assert from_wheel[0].read_bytes() == from_npm.read_bytes(), "the wheel and the npm package hold different binaries"
    from_npm.chmod(0o755)
    manifest = json.loads((place / "npm" / "package" / "package.json").read_text())
    return from_npm, manifest


def stateless_requests():
    """Each 2026-07-28 request of the demo cassette, with an id and the routing headers it needs."""
    found = []
    with open(DEMO_JSONL) as lines:
        for number, line in enumerate(lines, 1):
            exchange = json.loads(line)
            if exchange["era"] != "stateless":
                continue
            request = dict(exchange["request"], id=number)
            params = request.get("params") or {}
            headers = {"content-type": "application/json", "accept": "application/json, text/event-stream",
                       "mcp-protocol-version": exchange["protocolVersion"], "mcp-method": request["method"]}
            name = params.get("name", params.get("uri"))
            if name is not None:
                headers["mcp-name"] = name
            found.append((f"/agents/servers/{exchange['server']}", json.dumps(request).encode(), headers))
    return found


def stdio_lines():
    """An initialize, `initialized`, then each recorded session-era request of STDIO_SERVER."""
    lines = []
    with open(DEMO_JSONL) as recorded:
        for number, line in enumerate(recorded, 1):
            exchange = json.loads(line)
            if exchange["era"] == "stateless" or exchange["server"] != STDIO_SERVER:
                continue
            request = dict(exchange["request"], id=number)
            meta = (request.get("params") or {}).get("_meta")
            if meta and "progressToken" in meta:
                request["params"] = dict(request["params"], _meta=dict(meta, progressToken=f"progress-{number}"))
            lines.append(request)
            if request["method"] == "initialize" and len(lines) == 1:
                lines.append({"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert lines and lines[0]["method"] == "initialize", lines
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def answers_over_http(command, cassettes=SHIPPED_CASSETTES, env=None):
    """(path, status, body) of each stateless request, from `command` replaying the shipped cassettes."""
    daemon = Daemon(None, [], command=[*command, "replay", cassettes, "--port", "0"], env=env)
    try:
        host, port = daemon.base.removeprefix("http://").split(":")
        answers = []
        for path, body, headers in stateless_requests():
            connection = http.client.HTTPConnection(host, int(port), timeout=START_TIMEOUT_S)
            try:
                connection.request("POST", path, body=body, headers=headers)
                response = connection.getresponse()
                answers.append((path, response.status, response.read()))
            finally:
                connection.close()
        return answers
    finally:
        daemon.proc.terminate()
        daemon.proc.wait(timeout=START_TIMEOUT_S)


def answers_over_stdio(command, env):
    """What `command` writes on stdout replaying STDIO_SERVER's recording, sent stdio_lines() one at a
    time: each request once the one before it is answered, so the bytes do not depend on timing."""
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen([*command, "replay", "--stdio", DEMO_SQLITE, "--server", STDIO_SERVER],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env)
        lines = queue.Queue()
        threading.Thread(target=lambda: [lines.put(line) for line in process.stdout] and None, daemon=True).start()
        written = []
        try:
            for line in stdio_lines().splitlines(keepends=True):
                process.stdin.write(line)
                process.stdin.flush()
                asked = json.loads(line).get("id")
                while asked is not None:
                    answer = lines.get(timeout=START_TIMEOUT_S)
                    written.append(answer)
                    asked = None if json.loads(answer).get("id") == asked else asked
            process.stdin.close()
            code = process.wait(timeout=START_TIMEOUT_S)
        finally:
            process.kill()
        log.seek(0)
        assert code == 0, f"exited {code}:\n{log.read().decode(errors='replace')[-3000:]}"
    return b"".join(written)


def elf_checks(binary, platform):
    header = must(["readelf", "-h", str(binary)])
    assert re.search(rf"Machine:\s+.*{re.escape(platform.machine)}", header), header
    if platform.libc == "musl":
        code, output = run(["ldd", str(binary)])
        assert "not a dynamic executable" in output or "statically linked" in output, (code, output)
        program = must(["readelf", "-l", str(binary)])
        assert "Requesting program interpreter" not in program, program
    else:
        symbols = must(["objdump", "-T", str(binary)])
        versions = {tuple(int(n) for n in v.split(".")) for v in re.findall(r"GLIBC_([0-9.]+[0-9])", symbols)}
        assert versions and max(versions) <= (2, 17), f"needs glibc {max(versions)}"


def macho_checks(binary, platform):
    headers = must(["llvm-objdump", "--macho", "--private-header", str(binary)])
    assert re.search(rf"MH_MAGIC_64\s+{platform.machine}\s", headers), headers
    assert " EXECUTE " in headers, headers
    used = must(["llvm-objdump", "--macho", "--dylibs-used", str(binary)])
    libraries = [line.split(" (")[0].strip() for line in used.splitlines()[1:] if line.strip()]
    assert libraries, used
    foreign = [lib for lib in libraries if not lib.startswith(("/usr/lib/", "/System/Library/"))]
    assert not foreign, f"links libraries a Mac does not have: {foreign}"


def pe_checks(binary, platform):
    headers = must(["llvm-objdump", "-p", str(binary)])
    assert f"file format coff-{platform.machine}" in must(["llvm-objdump", "-f", str(binary)])
    dlls = re.findall(r"DLL Name: (\S+)", headers)
    assert dlls, headers
    foreign = [dll for dll in dlls if not WINDOWS_SYSTEM_DLL.match(dll)]
    assert not foreign, f"imports DLLs Windows does not have: {foreign}"


def version(command, env=None):
    """What `command --version` prints on stdout (wine says things of its own on stderr)."""
    result = subprocess.run([*command, "--version"], env=env, stdin=subprocess.DEVNULL, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, (result.returncode, result.stdout, result.stderr[-2000:])
    return result.stdout.strip()


def turns(command, env=None):
    """Tests' tapes as the pytest plugin and the vitest helper run them (`test --tapes-on-stdin`), stdin
    given whole: a tape and its verdict 0, a line it refuses, a tape and its verdict 3, a tape the end
    of stdin leaves with no verdict; what each answer was (the URL, serving, refused or the code), and
    the exit code."""
    tape = json.dumps([DEMO_SQLITE])
    result = subprocess.run([*command, "test", "--tapes-on-stdin"], env=env,
                            input=f"{tape}\n0\nnot json\n{tape}\n3\n{tape}\n", capture_output=True,
                            text=True, timeout=120)
    lines = result.stdout.splitlines()
    told = [json.loads(line) for line in lines[1:]]
    said = [lines[0].startswith("http://127.0.0.1:") if lines else False]
    said += ["serving" if t.get("serving") else "refused" if "error" in t else t.get("code") for t in told]
    return said, result.returncode


def smoke(command, env=None):
    """What one binary says: its version line, its answers over HTTP (each one 200) and over stdio, and
    how a tape for a test ends."""
    said = {"version": version(command, env)}
    assert re.fullmatch(r"mcp-tape \d+\.\d+\.\d+", said["version"]), said["version"]
    said["http"] = answers_over_http(command, env=env)
    assert len(said["http"]) >= 10 and all(status == 200 for _, status, _ in said["http"]), \
        [(path, status, body[:200]) for path, status, body in said["http"] if status != 200]
    said["stdio"] = answers_over_stdio(command, env)
    replies = [json.loads(line) for line in said["stdio"].splitlines()]
    answered = {reply.get("id") for reply in replies if "result" in reply}
    asked = {json.loads(line).get("id") for line in stdio_lines().splitlines()} - {None}
    assert answered == asked, (sorted(asked), replies[:3])
    said["turns"] = turns(command, env)
    assert said["turns"] == ([True, "serving", 0, "refused", "serving", 3, "serving", 1], 0), said["turns"]
    return said


def in_an_empty_root(binary, work):
    """The static binary alone in a root of its own (what the FROM scratch image holds, with the demo
    cassettes): it replays over HTTP."""
    root = work / "scratch-root"
    (root / "cassettes").mkdir(parents=True)
    shutil.copy(binary, root / "mcp-tape")
    for cassette in Path(SHIPPED_CASSETTES).glob("*.sqlite"):
        shutil.copy(cassette, root / "cassettes")
    assert sorted(p.name for p in root.iterdir()) == ["cassettes", "mcp-tape"]
    return answers_over_http(["chroot", str(root), "/mcp-tape"], cassettes="/cassettes")


def check_all(args, work, checks):
    """Every check of every other platform, each its own line in the tally."""
    wine_prefix = Path(tempfile.mkdtemp(prefix="mcp-tape-wine-", dir=work))
    # wineserver's own directory goes under `work` too (TMPDIR), not into the machine's /tmp for good.
    env = dict(os.environ, WINEPREFIX=str(wine_prefix), WINEDEBUG="-all", WINEDLLOVERRIDES="mscoree,mshtml=",
               TMPDIR=str(work))
    binaries = {}
    expected = {}

    def packaged(platform):
        binary, manifest = unpacked(args.dist, platform, work)
        assert manifest["name"] == f"@mcp-tape/{platform.name}", manifest
        assert manifest["os"] == [platform.os] and manifest["cpu"] == [platform.cpu], manifest
        assert manifest.get("libc") == ([platform.libc] if platform.libc else None), manifest
        if platform.os == "darwin":
            macho_checks(binary, platform)
        elif platform.os == "win32":
            pe_checks(binary, platform)
        else:
            elf_checks(binary, platform)
        binaries[platform.name] = binary

    def host_answers():
        packaged(HOST)
        expected.update(smoke([str(binaries[HOST.name])], env))

    checks.run("platforms: linux-x64: its packages hold one binary, needing glibc 2.17 at most; it answers each "
               "stateless request of the demo over HTTP, and each request of the mailbox's session over stdio "
               "(what the other platforms' binaries must answer), and a tape for a test ends with its verdict, "
               "alone and taking turns", host_answers)

    def profile_workload_runs():
        assert HOST.name in binaries, "the package is missing (above)"
        output = must([sys.executable, str(ROOT / "packaging" / "pgo.py"), str(binaries[HOST.name]), "--rounds", "3"])
        assert re.search(r"pgo: [1-9]\d* HTTP requests; stdio sessions: 1", output), output

    checks.run("platforms: linux-x64: packaging/pgo.py's workload (what a profile-guided release build learns "
               "from) runs against its binary: every answer the status it expects, every daemon ends with 0",
               profile_workload_runs)

    def every_platform_everywhere():
        listed = [line.split()[0] for line in PLATFORMS_TXT.read_text().splitlines()
                  if line.strip() and not line.startswith("#")]
        released = re.findall(r"platform: ([\w-]+),", WORKFLOW.read_text())
        checked = [p.name for p in [HOST, *OTHERS]]
        assert sorted(listed) == sorted(checked) == sorted(released), (listed, checked, released)

    checks.run("platforms: packaging/platforms.txt, the release workflow's matrix and these checks name the "
               "same seven platforms", every_platform_everywhere)

    for platform in OTHERS:
        checks.run(f"platforms: {platform.name}: the wheel and the npm package hold one binary, for "
                   f"{platform.os}-{platform.cpu}{f' ({platform.libc})' if platform.libc else ''}, linking only "
                   "the system's libraries", lambda platform=platform: packaged(platform))
        if platform.runner is None:
            print(f"platforms: {platform.name}: built and inspected, not run (no way to run a "
                  f"{platform.os} binary on this machine)", flush=True)
            continue

        def answers(platform=platform):
            assert platform.name in binaries and expected, "the package or this machine's answers are missing (above)"
            binary = binaries[platform.name]
            if platform.os == "win32":
                must([*ZIG, "cc", "-shared", "-target", "x86_64-windows-gnu", "-O2", "-o",
                      str(binary.parent / "bcryptprimitives.dll"), str(WINE_STAND_IN), "-ladvapi32"])
            command = [*platform.runner, str(binary)]
            assert version(command, env) == expected["version"]
            http = answers_over_http(command, env=env)
            assert http == expected["http"], [(a[0], a[1], a[2][:120], b[2][:120])
                                             for a, b in zip(http, expected["http"]) if a != b]
            stdio = answers_over_stdio(command, env)
            assert stdio == expected["stdio"], (stdio[:400], expected["stdio"][:400])
            assert turns(command, env) == expected["turns"]

        how = {"linux-x64-musl": "here, with no C library beside it",
               "win32-x64": "under wine (with a stand-in for Windows 10's bcryptprimitives.dll)"}.get(
            platform.name, "under qemu-user-static")
        checks.run(f"platforms: {platform.name} {how}: --version, the demo over HTTP and over stdio, "
                   "byte for byte as this machine's binary, and tests' tapes taking turns, each with its verdict",
                   answers)

    def resolver_names_each_package():
        tarball = sorted(Path(args.dist).glob("mcp-tape-[0-9]*.tgz"))
        assert len(tarball) == 1, tarball
        with tarfile.open(tarball[0]) as main:
            main.extractall(work / "main-npm", filter="data")
        package = work / "main-npm" / "package"
        script = package / "names.mjs"
        script.write_text("""
import { platformPackage, missingPlatformPackage } from "./index.js";
const machines = [{}, { platform: "linux", arch: "arm64", glibc: "2.36" },
  { platform: "linux", arch: "x64", glibc: null }, { platform: "linux", arch: "arm64", glibc: null },
  { platform: "darwin", arch: "x64" }, { platform: "darwin", arch: "arm64" }, { platform: "win32", arch: "x64" }];
console.log(JSON.stringify({ names: machines.map(platformPackage),
  none: missingPlatformPackage("@mcp-tape/freebsd-x64") }));
""")
        said = json.loads(must([args.node, str(script)]))
        assert said["names"] == ["@mcp-tape/linux-x64", "@mcp-tape/linux-arm64", "@mcp-tape/linux-x64-musl",
                                 "@mcp-tape/linux-arm64-musl", "@mcp-tape/darwin-x64", "@mcp-tape/darwin-arm64",
                                 "@mcp-tape/win32-x64"], said
        offered = json.loads((package / "package.json").read_text())["optionalDependencies"]
        assert sorted(offered) == sorted(f"@mcp-tape/{p.name}" for p in [HOST, *OTHERS]), offered
        assert "looked for @mcp-tape/freebsd-x64" in said["none"] and "has no such package" in said["none"], said
        assert "@mcp-tape/win32-x64" in said["none"] and "MCP_TAPE_BIN" in said["none"], said

    checks.run("platforms: mcp-tape's resolver names the package of each platform (musl where glibc is not), "
               "each one an optional dependency, and says which it looked for where there is none",
               resolver_names_each_package)

    def npm_refuses_other_machines():
        project = work / "npm-other-machine"
        project.mkdir()
        (project / "package.json").write_text('{"name": "other", "private": true}\n')
        for name in ("linux-arm64", "linux-x64-musl"):
            tarball = sorted(Path(args.dist).glob(f"mcp-tape-{name}-[0-9]*.tgz"))[0]
            code, output = run(["npm", "install", "--no-audit", "--no-fund", str(tarball)], cwd=project)
            assert code != 0 and "EBADPLATFORM" in output, output

    checks.run("platforms: npm refuses @mcp-tape/linux-arm64 and @mcp-tape/linux-x64-musl on this x86-64 glibc "
               "machine (their cpu and libc fields)", npm_refuses_other_machines)

    def release_workflow_lints():
        tools = ROOT / ".interop" / "pack-venv" / "bin"
        lint_env = dict(os.environ, PATH=f"{tools}{os.pathsep}{os.environ['PATH']}")
        must([str(tools / "actionlint"), "-version"], env=lint_env)
        output = must([str(tools / "actionlint"), str(WORKFLOW), str(CI_WORKFLOW)], env=lint_env)
        assert output.strip() == "", output
        ci = CI_WORKFLOW.read_text()
        assert re.search(r"^  push:$", ci, re.M) and re.search(r"^  pull_request:$", ci, re.M), "ci.yml: on push and PR"
        assert "run: .ci/run" in ci and "os: [macos-15, windows-2025]" in ci, "ci.yml: the test command, cargo test"
        broken = work / "broken.yml"
        broken.write_text(WORKFLOW.read_text().replace("${{ matrix.target }}", "${{ matrix.triple }}")
                          .replace('echo "version=$version"', 'echo version=$version'))
        code, output = run([str(tools / "actionlint"), str(broken)], env=lint_env)
        assert code != 0 and "triple" in output and "SC2086" in output, output

    checks.run("platforms: actionlint (with shellcheck) passes the release and CI workflows (ci.yml: the test "
               "command on Linux, cargo test on macOS and Windows, on every push and pull request), and fails a "
               "copy with an unknown matrix key and an unquoted shell variable", release_workflow_lints)

    def from_scratch():
        assert "linux-x64-musl" in binaries, "no musl binary (above)"
        http = in_an_empty_root(binaries["linux-x64-musl"], work)
        assert http == expected["http"], "answers differ in an empty root"
        assert re.search(r"^FROM scratch$", DOCKERFILE.read_text(), re.MULTILINE)

    checks.run("platforms: linux-x64-musl alone in an empty root (chroot: what packaging/Dockerfile's FROM "
               "scratch image holds) replays the demo over HTTP as this machine's binary", from_scratch)
    engine = run(["docker", "info", "--format", "{{.ServerVersion}}"]) if shutil.which("docker") else (1, "no docker")
    if engine[0]:
        print("platforms: the container image is not built here: no Docker engine runs "
              f"({engine[1].strip()[-200:]})", flush=True)
    else:
        checks.run("platforms: the FROM scratch image builds and its binary runs", lambda: image(binaries, work))
    if shutil.which("wineserver"):
        subprocess.run(["wineserver", "-k"], env=env, capture_output=True, timeout=60)


def image(binaries, work):
    """packaging/Dockerfile built for this machine's processor, and run."""
    context = work / "image"
    (context / "amd64").mkdir(parents=True)
    shutil.copy(binaries["linux-x64-musl"], context / "amd64" / "mcp-tape")
    tag = "mcp-tape-test:platforms"
    must(["docker", "build", "--build-arg", "TARGETARCH=amd64", "-f", str(DOCKERFILE), "-t", tag, str(context)])
    try:
        assert must(["docker", "run", "--rm", tag, "--version"]).startswith("mcp-tape ")
    finally:
        run(["docker", "rmi", "-f", tag])


def main():
    parser = argparse.ArgumentParser(description="The release workflow's check of the binary it built: "
                                     "its version, the demo cassette over HTTP and over stdio.")
    parser.add_argument("--smoke", required=True, metavar="BINARY", help="the mcp-tape binary to try")
    said = smoke([str(Path(parser.parse_args().smoke).resolve())])
    print(f"{said['version']}: {len(said['http'])} answers over HTTP, {len(said['stdio'].splitlines())} "
          "lines over stdio, each request answered")


if __name__ == "__main__":
    main()
