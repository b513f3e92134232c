"""Fixtures for the fault suite: a real repository as the working directory, workspaces and
the ledger beside it."""

from __future__ import annotations

import pytest

from helpers import working_repo


@pytest.fixture
def repo(tmp_path, monkeypatch):
    return working_repo(tmp_path, monkeypatch, {"README": "a repository for fault tests\n"})
