"""Small helpers for run tests: command packets, plan files, bounded polling."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def py_unit(pid: str, code: str, **fields) -> dict:
    """An inline command packet running ``code`` with this interpreter."""
    return {"id": pid, "executor": "command", "command": [sys.executable, "-c", code],
            "prompt": f"unit {pid}", **fields}


def write_plan(path: Path, packets: list[dict], **settings) -> Path:
    path.write_text(json.dumps({**settings, "packets": packets}, indent=1))
    return path


def poll(check, limit: float = 30.0):
    """Wait for ``check()`` to return something truthy (bounded); return it."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        got = check()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError("condition not reached in time")
