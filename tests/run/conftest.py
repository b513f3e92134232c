"""Fixtures for run tests: a real git repository as the working directory, workspaces
outside it (plan helpers are in runkit.py)."""

from __future__ import annotations

import pytest

from helpers import working_repo


@pytest.fixture
def repo(tmp_path, monkeypatch):
    return working_repo(tmp_path, monkeypatch, {"README": "a repository for runs\n"})
