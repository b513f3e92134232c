"""Fixtures for panel tests: a real git repository as the working directory, the three fake
agent CLIs installed (helpers in panelkit.py)."""

from __future__ import annotations

import pytest
from panelkit import Panelists


@pytest.fixture
def panelists(tmp_path, monkeypatch, repo) -> Panelists:
    return Panelists(tmp_path / "fakes", monkeypatch)
