"""Fixtures for panel tests: a real git repository as the working directory, the three fake
agent CLIs installed (helpers in panelkit.py)."""

from __future__ import annotations

import pytest
from panelkit import Panelists

from helpers import working_repo


@pytest.fixture
def repo(tmp_path, monkeypatch):
    return working_repo(tmp_path, monkeypatch, {"README": "a repository for panels\n"})


@pytest.fixture
def panelists(tmp_path, monkeypatch, repo) -> Panelists:
    return Panelists(tmp_path / "fakes", monkeypatch)
