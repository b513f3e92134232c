"""Helpers for tests on real git repositories (made in temporary dirs)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from helpers import poll as poll  # re-exported for git tests


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


def make_unit_state(root: Path, unit_id: str, *, outcome: str = "succeeded",
                    result: str | None = "## Summary\n\nDid the work.\n", tool_uses: int = 3,
                    executor: str = "command", tail: str = "") -> tuple[Path, Path]:
    """A finished attempt's state dir (outcome.json, result-file, tail) and its result path."""
    import json

    sd = root / "state" / unit_id
    sd.mkdir(parents=True)
    result_path = root / "results" / f"{unit_id}.md"
    result_path.parent.mkdir(parents=True, exist_ok=True)
    if result is not None:
        result_path.write_text(result)
    (sd / "result-file").write_text(str(result_path) + "\n")
    (sd / "tail").write_text(tail)
    (sd / "outcome.json").write_text(json.dumps({
        "outcome": outcome, "executor": executor, "tool_uses": tool_uses,
        "result_file": str(result_path)}))
    return sd, result_path


def gone(pid: int, timeout: float = 10.0) -> bool:
    """True once ``pid`` has exited (a zombie counts), waiting at most ``timeout`` seconds: a
    killed process can still show as running for a moment while the kernel tears it down."""
    import time

    import psutil

    deadline = time.monotonic() + timeout
    while True:
        try:
            p = psutil.Process(pid)
            if p.status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        if time.monotonic() >= deadline:
            return False
        psutil.wait_procs([p], timeout=0.05)

