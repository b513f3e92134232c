"""Fixtures for plan and packet tests: write plan and packet files into a temp folder."""

from __future__ import annotations

import textwrap

import pytest


@pytest.fixture
def write(tmp_path):
    """write(name, text) -> path: a dedented file under tmp_path (folders made as needed)."""

    def _write(name: str, text: str):
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        return path

    return _write
