"""Fixtures for the fault suite: a real repository as the working directory, workspaces and
the ledger beside it."""

from __future__ import annotations

import subprocess

import pytest


@pytest.fixture
def repo(tmp_path, monkeypatch):
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "README").write_text("a repository for fault tests\n")
    subprocess.run(["git", "-C", str(root), "add", "README"], check=True)
    subprocess.run(["git", "-C", str(root), "-c", "user.email=t@example.com", "-c",
                    "user.name=t", "commit", "-q", "-m", "init"], check=True)
    monkeypatch.chdir(root)
    monkeypatch.setenv("PRUN_WORKSPACE_ROOT", str(tmp_path / "workspaces"))
    monkeypatch.setenv("PRUN_STALL_THRESHOLD", "3600")
    return root
