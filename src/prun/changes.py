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
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from . import gitcmd

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

    def as_dict(self) -> dict:
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

    def as_dict(self) -> dict:
        return {"clone": self.clone, "base": self.base, "head": self.head,
                "files": [f.as_dict() for f in self.files], "commits": list(self.commits),
                "head_moved": self.head_moved}


@contextmanager
def private_index(clone: str) -> Iterator[dict[str, str]]:
    """An environment whose ``GIT_INDEX_FILE`` is a throwaway copy of the clone's index, with
    every file of the working tree added to it (``git add -A``)."""
    git_dir = gitcmd.out(["rev-parse", "--absolute-git-dir"], clone)
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
        env = {"GIT_INDEX_FILE": path}
        gitcmd.git(["add", "-A", "--ignore-errors", "--", "."], clone, env=env, check=False)
        yield env
    finally:
        for p in (path, path + ".lock"):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass


def read_change(clone: str | os.PathLike, base: str, *, with_patch: bool = False) -> Change:
    """The clone's change against ``base`` (a commit id or any revision the clone knows)."""
    clone = os.fspath(clone)
    base = gitcmd.rev(clone, base)
    head = gitcmd.out(["rev-parse", "--verify", "-q", "HEAD"], clone, check=False) or base
    commits: tuple[str, ...] = ()
    head_moved = False
    if head != base:
        commits = tuple(gitcmd.out(["rev-list", "--reverse", f"{base}..{head}"], clone).split())
        is_descendant = gitcmd.git(["merge-base", "--is-ancestor", base, head], clone,
                                   check=False).returncode == 0
        head_moved = not is_descendant
    untracked = set(filter(None, gitcmd.git(
        ["ls-files", "-z", "--others", "--exclude-standard"], clone).stdout.split("\0")))
    with private_index(clone) as env:
        status = gitcmd.git(["diff", "--cached", "-M", "-z", "--no-ext-diff", "--name-status",
                             base], clone, env=env).stdout
        numstat = gitcmd.git(["diff", "--cached", "-M", "-z", "--no-ext-diff", "--numstat",
                              base], clone, env=env).stdout
        patch = None
        if with_patch:
            patch = gitcmd.git(["diff", "--cached", "-M", "--binary", "--full-index",
                                "--no-ext-diff", "--no-color", base], clone, env=env,
                               text=False).stdout
    counts = _parse_numstat(numstat)
    files = []
    for code, old, new in _parse_name_status(status):
        kind = STATUS_NAMES.get(code[0], "modified")
        path = new or old
        added, deleted = counts.get(path, (None, None))
        binary = path in counts and added is None
        files.append(FileChange(path=path, status=kind,
                                old_path=old if kind in ("renamed", "copied") else None,
                                binary=binary, added=added, deleted=deleted,
                                untracked=kind == "added" and path in untracked))
    files.sort(key=lambda f: f.path)
    return Change(clone, base, head, tuple(files), commits, head_moved, patch)


def patch_of(clone: str | os.PathLike, base: str) -> bytes:
    """The clone's change against ``base`` as a binary patch (``git apply`` can apply it)."""
    return read_change(clone, base, with_patch=True).patch or b""


def _parse_name_status(text: str) -> Iterator[tuple[str, str, str | None]]:
    parts = text.split("\0")
    i = 0
    while i < len(parts) and parts[i]:
        code = parts[i]
        if code[0] in "RC":
            yield code, parts[i + 1], parts[i + 2]
            i += 3
        else:
            yield code, parts[i + 1], None
            i += 2


def _parse_numstat(text: str) -> dict[str, tuple[int | None, int | None]]:
    """path -> (added, deleted); (None, None) for a binary file."""
    out: dict[str, tuple[int | None, int | None]] = {}
    parts = text.split("\0")
    i = 0
    while i < len(parts) and parts[i]:
        added, deleted, path = parts[i].split("\t", 2)
        if path == "":              # a rename: old and new paths follow
            path = parts[i + 2]
            i += 3
        else:
            i += 1
        out[path] = ((int(added), int(deleted)) if added != "-" else (None, None))
    return out
