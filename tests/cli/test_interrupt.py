"""Ctrl-C exits as the README's exit-code table says: 130, except the commands its row names,
which end what they run and exit as it ended (a foreground `prun run`: its run cancelled, 1)."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

from helpers import poll, write_plan

ROOT = Path(__file__).resolve().parents[2]


def table_row(code: int) -> str:
    readme = (ROOT / "README.md").read_text()
    found = re.search(rf"^\| {code} \| `\w+` \| (.*) \|$", readme, re.M)
    assert found, f"the README's exit-code table has no row for {code}"
    return found.group(1)


def start(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "prun", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def interrupted(proc: subprocess.Popen) -> tuple[int, str, str]:
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out, err


def test_ctrl_c_exits_as_the_readme_table_says(repo, tmp_path):
    row = table_row(130)
    assert row.startswith("Ctrl-C")
    assert "a foreground `prun run` or `prun resume` cancels its run (1, cancelled)" in row

    began = tmp_path / "began"
    waits = f"open({str(began)!r}, 'w').close()\nimport time\nwhile True: time.sleep(1)\n"
    write_plan(repo / "plan.yaml", [{"id": "slow", "executor": "command", "prompt": "waits",
                                     "command": [sys.executable, "-c", waits]}], sandbox="off")
    run = start("run", "plan.yaml")
    poll(began.exists)                       # the supervisor holds the run and its unit runs
    code, out, err = interrupted(run)
    assert code == 1, out + err
    assert "status=cancelled" in out
