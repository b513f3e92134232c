"""Fixtures for the quota tests."""

from __future__ import annotations

import pytest
from quota_helpers import QuotaEnv


@pytest.fixture
def q(tmp_path, monkeypatch) -> QuotaEnv:
    return QuotaEnv(tmp_path, monkeypatch)
