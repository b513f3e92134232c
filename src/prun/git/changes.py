"""A throwaway clone's change against its declared base, read without touching the clone.

The change is everything in the clone's working tree that differs from the base commit:
modified, added (untracked files included, ignored ones not), deleted, renamed and binary files,
whether or not the worker staged or committed them. It is read through a private copy of the
clone's index (``GIT_INDEX_FILE``) so neither the worker's index nor its files change.
Commits the worker made despite the rule are listed too (``base..HEAD``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from .._util import gitcmd
from ..errors import GitError

STATUS_NAMES = {"M": "modified", "A": "added", "D": "deleted", "R": "renamed", "C": "copied",
                "T": "type-changed", "U": "unmerged"}


@dataclass(frozen=True)
class FileChange:
    path: str                       # the path after the change (the deleted path for a deletion)
    status: str                     # modified, added, deleted, renamed, copied, type-changed
    old_path: str | None = None     # for renames and copies
    binary: bool = False
    added: int | None = None        # lines (None for binary files)
    deleted: int | None = None
    untracked: bool = False         # an added file the worker never staged

    @property
    def paths(self) -> tuple[str, ...]:
        return (self.old_path, self.path) if self.old_path else (self.path,)

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass(frozen=True)
class Change:
    clone: str
    base: str
    head: str
    files: tuple[FileChange, ...] = ()
    commits: tuple[str, ...] = ()   # commits the worker made on top of the base
    head_moved: bool = False        # HEAD is neither the base nor a descendant of it
    patch: bytes | None = field(default=None, repr=False)

    @property
    def empty(self) -> bool:
        return not self.files

    @property
    def paths(self) -> list[str]:
        """Every path the change touches (both sides of a rename), sorted."""
        return sorted({p for f in self.files for p in f.paths})

    def as_dict(self) -> dict[str, Any]:
        return {"clone": self.clone, "base": self.base, "head": self.head,
                "files": [f.as_dict() for f in self.files], "commits": list(self.commits),
                "head_moved": self.head_moved}


@contextmanager
def private_index(git_dir: str) -> Iterator[dict[str, str]]:
    """An environment whose ``GIT_INDEX_FILE`` is a throwaway copy of the clone's index."""
    fd, path = tempfile.mkstemp(prefix="prun-index-", dir=git_dir)
    os.close(fd)
    try:
        src = os.path.join(git_dir, "index")
        if os.path.exists(src):
            # copy2 keeps the index's mtime, which git's racy-clean check compares file times
            # with: a fresh mtime would make git trust stale stat data and miss a same-size
            # edit made in the same second as the checkout.
            shutil.copy2(src, path)
        else:
            os.unlink(path)
        yield {"GIT_INDEX_FILE": path}
    finally:
        for p in (path, path + ".lock"):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass


def read_change(clone: str | os.PathLike[str], base: str, *, with_patch: bool = False) -> Change:
    """The clone's change against ``base`` (a commit id or any revision the clone knows)."""
    clone = os.fspath(clone)
    if not base or base.startswith("-"):
        raise GitError(["rev-parse", base], 128, f"bad revision {base!r}")
    proc = gitcmd.git(["rev-parse", "--absolute-git-dir", "HEAD", f"{base}^{{commit}}"], clone,
                      check=False)
    lines = proc.stdout.split("\n")
    if proc.returncode != 0 or len(lines) < 3:
        gitcmd.rev(clone, base)                      # raises the precise error
        raise GitError(["rev-parse", "HEAD"], proc.returncode, proc.stderr)
    git_dir, head, base = lines[0], lines[1], lines[2]
    commits: tuple[str, ...] = ()
    head_moved = False
    if head != base:
        commits = tuple(gitcmd.out(["rev-list", "--reverse", f"{base}..{head}"], clone).split())
        is_descendant = gitcmd.git(["merge-base", "--is-ancestor", base, head], clone,
                                   check=False).returncode == 0
        head_moved = not is_descendant
    diff = ["diff", "--cached", "-M", "-z", "--no-ext-diff", "--no-color"]
    with private_index(git_dir) as env:
        staged = set(gitcmd.git([*diff, "--name-only", "--diff-filter=A", base], clone,
                                env=env).stdout.split("\0"))
        gitcmd.git(["add", "-A", "--ignore-errors", "--", "."], clone, env=env, check=False)
        listing = gitcmd.git([*diff, "--raw", "--numstat", base], clone, env=env).stdout
        patch = None
        if with_patch:
            patch = gitcmd.git(["diff", "--cached", "-M", "--no-ext-diff", "--no-color",
                                "--binary", "--full-index", base], clone, env=env,
                               text=False).stdout
    raw, counts = _parse_raw_numstat(listing)
    files = []
    for code, old, new in raw:
        kind = STATUS_NAMES.get(code[0], "modified")
        path = new or old
        added, deleted = counts.get(path, (None, None))
        files.append(FileChange(path=path, status=kind,
                                old_path=old if kind in ("renamed", "copied") else None,
                                binary=path in counts and added is None, added=added,
                                deleted=deleted, untracked=kind == "added" and path not in staged))
    files.sort(key=lambda f: f.path)
    return Change(clone, base, head, tuple(files), commits, head_moved, patch)


def file_diffs(clone: str | os.PathLike[str], base: str, files: Iterable[FileChange], *,
               limit: int = 200_000) -> dict[str, str]:
    """Each file's text diff against ``base`` (what ``git diff`` shows a person: a binary file
    is named, not shown), by its path, at most ``limit`` bytes each (read like
    ``read_change``, through a private index, so the clone is not touched)."""
    clone = os.fspath(clone)
    git_dir = gitcmd.out(["rev-parse", "--absolute-git-dir"], clone)
    out: dict[str, str] = {}
    with private_index(git_dir) as env:
        gitcmd.git(["add", "-A", "--ignore-errors", "--", "."], clone, env=env, check=False)
        for f in files:
            proc = gitcmd.git(["diff", "--cached", "-M", "--no-ext-diff", "--no-color", base,
                               "--", *f.paths], clone, env=env, text=False, check=False)
            text = proc.stdout[:limit].decode("utf-8", "replace")
            out[f.path] = text + ("\n[diff cut]\n" if len(proc.stdout) > limit else "")
    return out


def patch_of(clone: str | os.PathLike[str], base: str) -> bytes:
    """The clone's change against ``base`` as a binary patch (``git apply`` can apply it)."""
    return read_change(clone, base, with_patch=True).patch or b""


_RawEntry = tuple[str, str, str | None]               # status code, path, new path or None
_LineCounts = dict[str, tuple[int | None, int | None]]  # path -> lines added, deleted


def _parse_raw_numstat(text: str) -> tuple[list[_RawEntry], _LineCounts]:
    """``git diff --raw --numstat -z`` output: [(status, path, new path or None)] and
    {path: (added, deleted)}, (None, None) for a binary file."""
    parts = text.split("\0")
    raw: list[_RawEntry] = []
    counts: _LineCounts = {}
    i = 0
    while i < len(parts) and parts[i]:
        token = parts[i]
        if token.startswith(":"):
            code = token.rsplit(" ", 1)[-1]
            if code[0] in "RC":
                raw.append((code, parts[i + 1], parts[i + 2]))
                i += 3
            else:
                raw.append((code, parts[i + 1], None))
                i += 2
            continue
        added, deleted, path = token.split("\t", 2)
        if path == "":              # a rename or copy: old and new paths follow
            path = parts[i + 2]
            i += 3
        else:
            i += 1
        counts[path] = (int(added), int(deleted)) if added != "-" else (None, None)
    return raw, counts
