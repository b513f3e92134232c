"""The MCP server's children (``prun.mcp.child.run``) on real processes: one that prints more
than its limit is ended with its whole process group and reported so; a line of any length
is read whole, and lines come as printed."""

from __future__ import annotations

import os
import sys

import anyio
import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed")

from helpers import poll
from prun.mcp import child


def zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return False


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_child_that_prints_past_its_limit_is_ended_with_its_group(tmp_path):
    grandchild = tmp_path / "grandchild.pid"
    code = ("import subprocess, sys\n"
            "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
            f"open({str(grandchild)!r}, 'w').write(str(p.pid))\n"
            "while True:\n"
            "    sys.stdout.write('x' * 1000 + '\\n')\n")

    done = anyio.run(lambda: child.run([sys.executable, "-c", code], cwd=str(tmp_path),
                                       bound=300, output_max=256 * 1024))
    assert done.over_limit and done.exit_code is None and not done.timed_out
    assert 0 < sum(len(line) + 1 for line in done.lines) <= 256 * 1024
    pid = int(grandchild.read_text())
    # its group was signalled: the grandchild goes as soon as it runs (reaped by init)
    assert poll(lambda: not alive(pid) or zombie(pid)), f"{pid} outlived its group's end"

def test_lines_of_any_length_come_whole(tmp_path):
    code = ("import sys\n"
            "sys.stdout.write('a' * 3_000_000 + '\\n' + 'b\\r\\n' + 'tail')\n")
    heard = []

    async def on_line(line: str) -> None:
        heard.append(len(line))

    done = anyio.run(lambda: child.run([sys.executable, "-c", code], cwd=str(tmp_path),
                                       bound=300, on_line=on_line))
    assert done.exit_code == 0 and not done.over_limit
    assert done.lines == ["a" * 3_000_000, "b", "tail"]
    assert heard == [3_000_000, 1, 4]
