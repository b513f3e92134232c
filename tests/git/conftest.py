"""Fixtures for workspace, reconciliation and integration tests: real git repositories."""

from __future__ import annotations

from pathlib import Path

import pytest
from gitrepo import commit_all, g, write


@pytest.fixture(autouse=True)
def git_identity(monkeypatch, tmp_path):
    for k, v in {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
                 "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid",
                 "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": str(tmp_path / "gitconfig"),
                 "PRUN_WORKSPACE_ROOT": str(tmp_path / "ws")}.items():
        monkeypatch.setenv(k, v)


@pytest.fixture
def repo(tmp_path) -> Path:
    """A repository with a few files and one commit (HEAD is the base)."""
    root = tmp_path / "repo"
    root.mkdir()
    g(root, "init", "-q", "-b", "main")
    write(root, {
        "src/app/main.py": "def main():\n    return 1\n",
        "src/app/util.py": "".join(f"line {i}\n" for i in range(40)),
        "src/lib/core.py": "CORE = 1\n",
        "docs/guide.md": "# Guide\n",
        "pyproject.toml": "[project]\nname = 'x'\n",
        "assets/logo.bin": bytes(range(256)) * 4,
        "README.md": "readme\n",
    })
    commit_all(root, "base")
    return root
