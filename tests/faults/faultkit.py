"""Helpers for the fault suite: units that count their own executions."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def counted_unit(pid: str, log: Path, *, hold: float = 0.0, **fields) -> dict:
    """A command packet that appends one line (its id) to ``log`` each time it executes, holds
    for ``hold`` seconds, then prints a result long enough to be accepted."""
    code = (f"import os, time\n"
            f"fd = os.open({str(log)!r}, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)\n"
            f"os.write(fd, b'{pid}\\n'); os.close(fd)\n"
            f"time.sleep({hold})\n"
            f"print('unit {pid} did its work and reports it here in full')\n")
    return {"id": pid, "executor": "command", "command": [sys.executable, "-c", code],
            "prompt": f"unit {pid}", **fields}


def gated_unit(pid: str, log: Path, gate: Path, *, first: str = "", then: str = "",
               **fields) -> dict:
    """A command packet that appends one line (its id) to ``log`` as it starts, runs
    ``first`` (Python), runs on until the file ``gate`` exists, then runs ``then`` and prints a
    result long enough to be accepted."""
    code = (f"import os, pathlib, signal, subprocess, sys, time\n"
            f"fd = os.open({str(log)!r}, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)\n"
            f"os.write(fd, b'{pid}\\n'); os.close(fd)\n"
            f"{first}\n"
            f"while not pathlib.Path({str(gate)!r}).exists():\n"
            f"    time.sleep(0.02)\n"
            f"{then}\n"
            f"print('unit {pid} did its work and reports it here in full')\n")
    return {"id": pid, "executor": "command", "command": [sys.executable, "-c", code],
            "prompt": f"unit {pid}", **fields}


def executions(log: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    if log.exists():
        for line in log.read_text().split():
            counts[line] = counts.get(line, 0) + 1
    return counts


def until(check, limit: float = 60.0):
    """Wait for ``check()`` to return something truthy (bounded); return it."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if got := check():
            return got
        time.sleep(0.02)
    raise AssertionError("condition not reached in time")


def json_file(path) -> dict | None:
    """A JSON file's object, or None while it does not exist (yet)."""
    try:
        with open(path) as f:
            return json.load(f)
    except (FileNotFoundError, json.JSONDecodeError):
        return None
