"""Small helpers for cluster tests: plan files, the ledger's rows, bounded polling."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path

import pytest


def need_dask() -> None:
    """Skip where Dask distributed is not installed; on CI (CI=true) fail instead."""
    try:
        import distributed  # noqa: F401
    except ImportError as e:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must have Dask distributed (the test extra): {e}")
        pytest.skip(f"Dask distributed is not installed: {e}")


def write_plan(path: Path, packets: list[dict], **settings) -> Path:
    path.write_text(json.dumps({**settings, "packets": packets}, indent=1))
    return path


def attempts(repo: Path) -> list[dict]:
    db = sqlite3.connect(repo.parent / "ledger.sqlite")
    db.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in db.execute("SELECT * FROM attempts ORDER BY rowid")]
    finally:
        db.close()


def poll(check, limit: float = 60.0):
    """Wait for ``check()`` to return something truthy (bounded); return it."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        got = check()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError("condition not reached in time")
