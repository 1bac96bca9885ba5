"""`python -m mcp_tape ARGS`: runs the mcp-tape binary this package installed with ARGS."""

import os
import sys

from mcp_tape import TapeError, binary


def main():
    try:
        executable = binary()
    except TapeError as error:
        sys.exit(f"mcp-tape: {error}")
    os.execv(executable, [executable, *sys.argv[1:]])


if __name__ == "__main__":
    main()
