"""Helpers for tests: fake CLIs, running the real prun command."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

FAKES = Path(__file__).parent / "fakes"


def make_fake_cli(folder: Path, name: str, source: Path) -> Path:
    """An executable ``name`` in ``folder`` that runs ``source`` with this interpreter."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(f"#!{sys.executable}\n" + source.read_text())
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def calls(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def prun(*args: str, env: dict | None = None, timeout: float = 60, cwd=None):
    """Run the real ``prun`` command (this interpreter, the installed package)."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    return subprocess.run([sys.executable, "-m", "prun", *args], capture_output=True, text=True,
                          env=full_env, timeout=timeout, cwd=cwd)
