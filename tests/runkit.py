"""Small helpers for run tests: command packets, plan files, bounded polling."""

from __future__ import annotations

import sys

from helpers import poll as poll  # re-exported for run tests
from helpers import write_plan as write_plan


def py_unit(pid: str, code: str, **fields) -> dict:
    """An inline command packet running ``code`` with this interpreter."""
    return {"id": pid, "executor": "command", "command": [sys.executable, "-c", code],
            "prompt": f"unit {pid}", **fields}



