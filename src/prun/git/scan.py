"""What a unit left in its tree, found before any git reads it: a bounded ``lstat`` walk.

``scan(root)`` walks a clone's work tree (its own ``.git`` aside) without following a link and
without opening anything but a regular file (and that only to look for holes), and finds what
must never be read, nor be part of a change:

- ``special-file path= kind=``: a FIFO, socket or device (``kind``: fifo, socket,
  char-device, block-device, other);
- ``nested-repository path=``: a folder below the root holding a ``.git`` (folder, file or
  link): a ``gitdir:`` file would send git elsewhere, so nothing in it is read;
- ``file-too-large path= size= limit=``: a regular file over ``MAX_FILE_BYTES``;
- ``sparse-file path= size= allocated=``: a regular file of at least ``SPARSE_MIN_BYTES``
  with less than half its size allocated and a hole in it: never read, never expanded;
- ``link-outside path= target=``: a symbolic link whose target is absolute, or resolves
  outside the root or into a ``.git``;
- ``unreadable-path path= error=``: a folder the walk could not list (git cannot either);
- ``unsafe-git-file path= kind=|size=``: a ``.gitignore``, ``.gitattributes`` or
  ``.gitmodules`` that is not a regular file of at most ``MAX_GIT_FILE_BYTES``: git opens
  these on its own (a FIFO would hang it), so the tree is not read at all;
- ``too-many-files limit=``: more than ``MAX_ENTRIES`` entries: the walk stops and the tree
  is not read at all.

Each is reported once, by its path relative to the root; what lies in a nested repository or
past the entry limit is not looked at. ``Scan.links`` holds every symbolic link found (path ->
target, as the link holds it).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field

MAX_ENTRIES = 1_000_000                 # files, folders and links in one tree
MAX_FILE_BYTES = 100 * 1024 * 1024      # one file (GitHub refuses files past 100 MiB too)
SPARSE_MIN_BYTES = 1024 * 1024          # smaller files are never called sparse
MAX_GIT_FILE_BYTES = 1024 * 1024        # a .gitignore, .gitattributes or .gitmodules
GIT_FILES = (".gitignore", ".gitattributes", ".gitmodules")
MAX_LINK_HOPS = 40                     # links followed resolving one link (the kernel's bound)

_KINDS = ((stat.S_ISFIFO, "fifo"), (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "char-device"),
          (stat.S_ISBLK, "block-device"))


@dataclass(frozen=True)
class Finding:
    """One thing found in a tree: a stable slug, the path (relative to the root; None for
    the tree as a whole) and the facts behind it."""

    code: str
    path: str | None = None
    detail: Mapping[str, object] = field(default_factory=dict)

    @property
    def fatal(self) -> bool:
        """The tree is not read at all (git would hang on it, or it is too big to walk)."""
        return self.code in ("unsafe-git-file", "too-many-files", "too-many-findings")

    @property
    def folder(self) -> bool:
        """The path is a folder whose whole content is left out."""
        return self.code in ("nested-repository", "unreadable-path")

    def facts(self) -> dict[str, object]:
        """Its path (when it has one), then its detail."""
        return {**({"path": self.path} if self.path is not None else {}), **self.detail}

    def as_dict(self) -> dict[str, object]:
        return {"code": self.code, **self.facts()}


@dataclass(frozen=True)
class Scan:
    root: str
    findings: tuple[Finding, ...] = ()
    links: Mapping[str, str] = field(default_factory=dict)
    entries: int = 0

    @property
    def fatal(self) -> bool:
        return any(f.fatal for f in self.findings)

    @property
    def excluded(self) -> tuple[Finding, ...]:
        """The findings whose path is left out of the change (every one that has a path)."""
        return tuple(f for f in self.findings if f.path is not None)


def scan(root: str | os.PathLike[str], *, max_entries: int = MAX_ENTRIES,
         max_file: int = MAX_FILE_BYTES) -> Scan:
    """Walk the tree at ``root`` (its ``.git`` aside) and say what must not be read."""
    root = os.path.abspath(os.fspath(root))
    findings: list[Finding] = []
    links: dict[str, str] = {}
    count = 0
    folders = [(root, "")]
    while folders:
        folder, prefix = folders.pop()
        try:
            with os.scandir(folder) as listing:
                entries = list(listing)
        except OSError as e:
            findings.append(Finding("unreadable-path", prefix.rstrip("/") or ".",
                                    {"error": errno.errorcode.get(e.errno or 0, str(e.errno))}))
            continue
        if prefix and any(e.name == ".git" for e in entries):
            findings.append(Finding("nested-repository", prefix.rstrip("/")))
            continue
        for entry in entries:
            if not prefix and entry.name == ".git":
                continue
            count += 1
            if count > max_entries:
                findings.append(Finding("too-many-files", None, {"limit": max_entries}))
                return Scan(root, tuple(findings), links, count)
            rel = prefix + entry.name
            try:   # the entry's type from the listing: no system call for most of them
                if entry.is_dir(follow_symlinks=False):
                    folders.append((entry.path, rel + "/"))
                    continue
                st = entry.stat(follow_symlinks=False)
            except OSError:   # gone meanwhile
                continue
            findings.extend(_entry(entry.path, rel, st, root, links, max_file))
    findings.sort(key=lambda f: (f.path or "", f.code))
    return Scan(root, tuple(findings), links, count)


def _entry(path: str, rel: str, st: os.stat_result, root: str, links: dict[str, str],
           max_file: int) -> list[Finding]:
    """What is wrong with one entry that is not a folder."""
    found: list[Finding | None] = []
    if stat.S_ISLNK(st.st_mode):
        found.append(_link(path, rel, root, links))
    elif stat.S_ISREG(st.st_mode):
        found.append(_regular(path, rel, st, max_file))
    else:
        found.append(Finding("special-file", rel, {"kind": _kind(st.st_mode)}))
    if os.path.basename(rel) in GIT_FILES:
        found.append(_git_file(rel, st))
    return [f for f in found if f is not None]


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "other")


def _link(path: str, rel: str, root: str, links: dict[str, str]) -> Finding | None:
    try:
        target = os.readlink(path)
    except OSError:
        return None
    links[rel] = target
    if os.path.isabs(target) or not _resolves_inside(root, rel):
        return Finding("link-outside", rel, {"target": target})
    return None


def _resolves_inside(root: str, rel: str) -> bool:
    """Whether the link at ``rel`` resolves to the root or below it, and not into a ``.git``
    of any folder: resolved one part at a time inside ``root``, following the links on the
    way (not ``realpath``: ``root`` may be an overlay workspace's view,
    ``/proc/<pid>/root/...``, which ``realpath`` would leave)."""
    todo, done, hops = rel.split("/"), list[str](), 0
    while todo:
        part = todo.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            if not done:
                return False
            done.pop()
            continue
        try:
            target = os.readlink(os.path.join(root, *done, part))
        except OSError:   # not a link (or not there): a plain part
            done.append(part)
            continue
        hops += 1
        if os.path.isabs(target) or hops > MAX_LINK_HOPS:
            return False
        todo = target.split("/") + todo
    return not any(p.lower() == ".git" for p in done)


def _regular(path: str, rel: str, st: os.stat_result, max_file: int) -> Finding | None:
    allocated = getattr(st, "st_blocks", None)
    if allocated is not None and st.st_size >= SPARSE_MIN_BYTES \
            and allocated * 512 < st.st_size // 2 and _has_hole(path, st):
        return Finding("sparse-file", rel, {"size": st.st_size, "allocated": allocated * 512})
    if st.st_size > max_file:
        return Finding("file-too-large", rel, {"size": st.st_size, "limit": max_file})
    return None


def _has_hole(path: str, st: os.stat_result) -> bool:
    """Whether the regular file at ``path`` (``st``: its lstat) has a hole before its end
    (``SEEK_HOLE``). Where the file system cannot say, the allocation alone decides. Opened
    only as what it was: a regular file, never through a link, never waiting."""
    seek_hole = getattr(os, "SEEK_HOLE", None)
    if seek_hole is None:
        return True
    flags = (os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
             | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    try:
        fd = os.open(path, flags)
    except OSError:
        return True
    try:
        now = os.fstat(fd)
        if not stat.S_ISREG(now.st_mode) or now.st_ino != st.st_ino:
            return True
        return os.lseek(fd, 0, seek_hole) < now.st_size
    except OSError:
        return True
    finally:
        os.close(fd)


def _git_file(rel: str, st: os.stat_result) -> Finding | None:
    if not stat.S_ISREG(st.st_mode):
        kind = "link" if stat.S_ISLNK(st.st_mode) else _kind(st.st_mode)
        return Finding("unsafe-git-file", rel, {"kind": kind})
    if st.st_size > MAX_GIT_FILE_BYTES:
        return Finding("unsafe-git-file", rel, {"size": st.st_size,
                                                "limit": MAX_GIT_FILE_BYTES})
    return None


__all__ = [
    "GIT_FILES",
    "MAX_ENTRIES",
    "MAX_FILE_BYTES",
    "MAX_GIT_FILE_BYTES",
    "SPARSE_MIN_BYTES",
    "Finding",
    "Scan",
    "scan",
]
