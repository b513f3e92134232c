"""Fixtures for panel tests: a real git repository as the working directory, the three fake
agent CLIs installed (helpers in panelkit.py)."""

from __future__ import annotations

import subprocess

import pytest
from panelkit import Panelists


@pytest.fixture
def repo(tmp_path, monkeypatch):
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "README").write_text("a repository for panels\n")
    subprocess.run(["git", "-C", str(root), "add", "README"], check=True)
    subprocess.run(["git", "-C", str(root), "-c", "user.email=t@example.com", "-c",
                    "user.name=t", "commit", "-q", "-m", "init"], check=True)
    monkeypatch.chdir(root)
    monkeypatch.setenv("PRUN_WORKSPACE_ROOT", str(tmp_path / "workspaces"))
    monkeypatch.setenv("PRUN_STALL_THRESHOLD", "3600")
    return root


@pytest.fixture
def panelists(tmp_path, monkeypatch, repo) -> Panelists:
    return Panelists(tmp_path / "fakes", monkeypatch)
