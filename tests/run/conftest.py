"""Fixtures for run tests: a real git repository as the working directory, workspaces
outside it, and small helpers to write plans of command units."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest


@pytest.fixture
def repo(tmp_path, monkeypatch):
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "README").write_text("a repository for runs\n")
    subprocess.run(["git", "-C", str(root), "add", "README"], check=True)
    subprocess.run(["git", "-C", str(root), "-c", "user.email=t@example.com", "-c",
                    "user.name=t", "commit", "-q", "-m", "init"], check=True)
    monkeypatch.chdir(root)
    monkeypatch.setenv("PRUN_WORKSPACE_ROOT", str(tmp_path / "workspaces"))
    monkeypatch.setenv("PRUN_STALL_THRESHOLD", "3600")
    return root


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
