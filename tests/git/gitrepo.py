"""Helpers for tests on real git repositories (made in temporary dirs)."""

from __future__ import annotations

import subprocess
from pathlib import Path


def g(cwd, *args: str, check: bool = True, input: bytes | None = None):
    """Run git in ``cwd`` the way a person or a worker would."""
    return subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, check=check,
                          input=input)


def gout(cwd, *args: str) -> str:
    return g(cwd, *args).stdout.decode().strip()


def write(root: Path, files: dict[str, str | bytes]) -> None:
    for rel, content in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content)


def commit_all(root: Path, message: str = "c") -> str:
    g(root, "add", "-A")
    g(root, "commit", "-q", "-m", message)
    return gout(root, "rev-parse", "HEAD")
