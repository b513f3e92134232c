"""What the benchmarks share."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

# The benchmarks' git: a fixed identity, no system config.
GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@example.invalid",
           "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@example.invalid",
           "GIT_CONFIG_NOSYSTEM": "1"}


def compile_prun() -> None:
    """Byte-compile the prun package, as a regular install does. An editable install (or
    PYTHONDONTWRITEBYTECODE) would make every prun process compile its modules from source,
    a cost no installed prun pays."""
    import prun

    subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.dirname(prun.__file__)],
                   check=False, env=dict(os.environ, PYTHONDONTWRITEBYTECODE=""))


def git(*args: str, cwd=None) -> None:
    subprocess.run(["git", *args], cwd=cwd, env=GIT_ENV, check=True, capture_output=True)


def make_repo(root: Path, files: int, packed: bool = True) -> None:
    """A repository of ``files`` small Python files in 350 folders and one binary, one commit.
    ``packed``: its objects packed (``git gc``), as a repository fetched from a server is."""
    root.mkdir()
    git("init", "-q", "-b", "main", cwd=root)
    for i in range(files):
        d = root / f"pkg{i % 50:02d}" / f"mod{i % 7}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"file{i:05d}.py").write_text(f"# file {i}\n" + "x = 1\n" * (i % 40 + 1))
    (root / "assets").mkdir()
    (root / "assets" / "blob.bin").write_bytes(os.urandom(4096))
    git("add", "-A", cwd=root)
    git("-c", "gc.auto=0", "commit", "-q", "-m", "base", cwd=root)   # no gc in the background
    if packed:
        git("gc", "-q", cwd=root)


def one_file_repo(root: Path) -> Path:
    """A repository of one small file, one commit: where a benchmark's units run."""
    root.mkdir()
    git("init", "-q", "-b", "main", cwd=root)
    (root / "README").write_text("bench\n")
    git("add", "README", cwd=root)
    git("commit", "-q", "-m", "init", cwd=root)
    return root


def timed(fn) -> float:
    """Seconds ``fn()`` took."""
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t
