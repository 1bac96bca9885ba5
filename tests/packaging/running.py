"""Running a command in the packaging checks: packages.py and platforms.py share these."""

import subprocess

TIMEOUT_S = 300


def run(command, cwd=None, env=None, timeout=TIMEOUT_S):
    """Runs `command`; its exit code and output (stdout and stderr)."""
    result = subprocess.run(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                            timeout=timeout)
    return result.returncode, result.stdout + result.stderr


def must(command, cwd=None, env=None, timeout=TIMEOUT_S):
    """The output of `command`, which must succeed."""
    code, output = run(command, cwd, env, timeout)
    assert code == 0, f"{command[:4]} exited {code}:\n{output[-6000:]}"
    return output
