"""Small helpers for cluster tests: plan files, the ledger's rows, bounded polling."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from helpers import poll as poll  # re-exported for cluster tests
from helpers import write_plan as write_plan


def need_dask() -> None:
    """Skip where Dask distributed is not installed; on CI (CI=true) fail instead."""
    try:
        import distributed  # noqa: F401
    except ImportError as e:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must have Dask distributed (the test extra): {e}")
        pytest.skip(f"Dask distributed is not installed: {e}")




def attempts(repo: Path) -> list[dict]:
    db = sqlite3.connect(repo.parent / "ledger.sqlite")
    db.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in db.execute("SELECT * FROM attempts ORDER BY rowid")]
    finally:
        db.close()

