"""A throwaway clone's change against its declared base, read without trusting the clone.

The change is everything in the clone's working tree that differs from the base commit:
modified, added (untracked files included, ignored ones not), deleted, renamed and binary files,
whether or not the worker staged or committed them. It is read through ``prun.git.untrusted``:
a private ``GIT_DIR`` and a private index made for the read, after a bounded walk of the tree
(``prun.git.scan``) left out what must never be read (special files, nested repositories,
files too large or sparse, links outside the tree); each is a finding on the change. Neither
the worker's index nor its files change, and nothing the unit wrote in its ``.git`` (config,
hooks, attributes, index) is read by git. Commits the worker made despite the rule are listed
too (``base..HEAD``, its ``HEAD`` read by prun as a bounded file).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from ..errors import GitError, WorkspaceError
from .clonefiles import BrokenClone, read_head
from .overlayview import merged
from .scan import Finding
from .untrusted import Reader, reading

STATUS_NAMES = {"M": "modified", "A": "added", "D": "deleted", "R": "renamed", "C": "copied",
                "T": "type-changed", "U": "unmerged"}
LINK_MODE = "120000"


@dataclass(frozen=True)
class FileChange:
    path: str                       # the path after the change (the deleted path for a deletion)
    status: str                     # modified, added, deleted, renamed, copied, type-changed
    old_path: str | None = None     # for renames and copies
    binary: bool = False
    added: int | None = None        # lines (None for binary files)
    deleted: int | None = None
    link_target: str | None = None  # the path is a symbolic link after the change: its target

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
    findings: tuple[Finding, ...] = ()  # what was left out of it, or why it was not read
    complete: bool = True           # False: the tree was not read (see ``findings``)
    saved: str | None = None        # read from the record prun clean saved (its path), not
                                    # from the clone, which is gone (``prun.git.saved``)

    @property
    def empty(self) -> bool:
        return not self.files

    @property
    def paths(self) -> list[str]:
        """Every path the change touches (both sides of a rename), sorted."""
        return sorted({p for f in self.files for p in f.paths})

    @property
    def links(self) -> dict[str, str]:
        """The symbolic links the change adds or changes: path -> target."""
        return {f.path: f.link_target for f in self.files
                if f.link_target is not None and f.status != "deleted"}

    def as_dict(self) -> dict[str, Any]:
        return {"clone": self.clone, "base": self.base, "head": self.head,
                "files": [f.as_dict() for f in self.files], "commits": list(self.commits),
                "head_moved": self.head_moved, "complete": self.complete,
                "findings": [f.as_dict() for f in self.findings],
                "read_from": "saved" if self.saved else "clone", "saved": self.saved}


_DIFF = ("diff", "--cached", "-M", "--no-ext-diff", "--no-textconv", "--no-color",
         "--ignore-submodules=none")


def read_change(clone: str | os.PathLike[str], base: str, *, with_patch: bool = False,
                store: str | None = None) -> Change:
    """The clone's change against ``base`` (a full commit id; ``HEAD`` means the commit the
    clone's own HEAD names). A clone prun cannot read comes back with no files,
    ``complete=False`` and a ``broken-clone`` finding saying why, never an exception; a clone
    that is not there (any more) is a ``GitError``."""
    clone = os.path.abspath(os.fspath(clone))
    if not base or base.startswith("-"):
        raise GitError(["rev-parse", base], 128, f"bad revision {base!r}")
    try:
        with merged(clone) as view:
            head = read_head(view.path)
            if base == "HEAD":
                base = head
            with reading(clone, base, store=store, view=view) as r:
                return _read(r, head, with_patch)
    except (BrokenClone, WorkspaceError) as e:   # WorkspaceError: its overlay cannot be mounted
        if not os.path.lexists(clone):   # gone (moved aside meanwhile): not a broken clone
            raise GitError(["read", clone], 128, "no clone there any more") from None
        broken = e if isinstance(e, BrokenClone) else BrokenClone(e.message)
        return Change(clone, base, "", findings=(broken.finding(),), complete=False)


def _read(r: Reader, head: str, with_patch: bool) -> Change:
    r.stage()
    if not r.complete:
        return Change(r.clone, r.base, head, findings=tuple(r.findings), complete=False)
    listing = r.git([*_DIFF, "-z", "--raw", "--numstat", r.base]).stdout
    patch = None
    if with_patch:
        patch = r.git([*_DIFF, "--binary", "--full-index", r.base], text=False).stdout
    links = r.scan.links if r.scan else {}
    raw, counts = _parse_raw_numstat(listing)
    files = []
    for code, old, new, mode in raw:
        kind = STATUS_NAMES.get(code[0], "modified")
        path = new or old
        added, deleted = counts.get(path, (None, None))
        files.append(FileChange(path=path, status=kind,
                                old_path=old if kind in ("renamed", "copied") else None,
                                binary=path in counts and added is None, added=added,
                                deleted=deleted,
                                link_target=links.get(path) if mode == LINK_MODE else None))
    files.sort(key=lambda f: f.path)
    try:
        commits, moved = r.commits(head)
    except BrokenClone as e:   # its commits cannot be listed: the change itself still counts
        commits, moved = (), False
        r.findings.append(e.finding())
    return Change(r.clone, r.base, head, tuple(files), commits, moved, patch,
                  tuple(r.findings))


def patch_of(clone: str | os.PathLike[str], base: str) -> bytes:
    """The clone's change against ``base`` as a binary patch (``git apply`` can apply it)."""
    return read_change(clone, base, with_patch=True).patch or b""


_RawEntry = tuple[str, str, str | None, str]   # status code, path, new path or None, new mode
_LineCounts = dict[str, tuple[int | None, int | None]]  # path -> lines added, deleted


def _parse_raw_numstat(text: str) -> tuple[list[_RawEntry], _LineCounts]:
    """``git diff --raw --numstat -z`` output: [(status, path, new path or None, new mode)]
    and {path: (added, deleted)}, (None, None) for a binary file."""
    parts = text.split("\0")
    raw: list[_RawEntry] = []
    counts: _LineCounts = {}
    i = 0
    while i < len(parts) and parts[i]:
        token = parts[i]
        if token.startswith(":"):
            fields = token[1:].split(" ")
            code, mode = fields[-1], fields[1]
            if code[0] in "RC":
                raw.append((code, parts[i + 1], parts[i + 2], mode))
                i += 3
            else:
                raw.append((code, parts[i + 1], None, mode))
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
