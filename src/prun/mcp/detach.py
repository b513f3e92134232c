"""``python -m prun.mcp.detach STDERR_FILE -- ARGV...``: run ARGV in a session of its own, its
stderr appended to STDERR_FILE, relay its stdout line by line, and exit with its exit code.

The MCP server's ``dispatch`` tool starts the dispatcher through this, so that a unit goes on
when the call that started it returns (or is cancelled) before the unit ends: only this relay
is ended then, never the dispatcher, and nothing the dispatcher writes later can reach a pipe
nobody reads (its stdout carries one line, as the dispatcher's contract says; its stderr goes
to the file).
"""

from __future__ import annotations

import subprocess
import sys

from .._util.process import start


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 3 or args[1] != "--":
        print("prun: usage: python -m prun.mcp.detach STDERR_FILE -- ARGV...", file=sys.stderr)
        return 2
    with open(args[0], "ab") as err:
        proc = start(args[2:], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err)
    assert proc.stdout is not None
    out = sys.stdout.buffer
    for line in proc.stdout:
        out.write(line)
        out.flush()
    return proc.wait()


if __name__ == "__main__":
    sys.exit(main())
