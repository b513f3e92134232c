"""The pre-images of the paths a patch touches in a work tree, saved durably before the patch is
applied and put back when it could not be applied whole (a full disk, an I/O error, a kill).

``save(target, paths, folder)`` records, for each path, what the tree holds there: a file (its
bytes, permission bits and modification time), a symbolic link (its target), a folder, or
nothing; and the folders above the paths that do not exist yet (``git apply`` makes them). Each
file's copy is synced, then the folder, then ``manifest.json`` is written last (synced, renamed
into place): a backup without a manifest was never complete, and nothing was applied over it.

``restore(target, folder)`` takes away whatever is at those paths now (deepest first), removes
the folders the apply made, and puts each pre-image back (outermost first). It can be run any
number of times (a kill during a restore is repaired by the next one). Every step goes from
the target's root one folder at a time without following a link (``O_NOFOLLOW``), so neither
saving nor restoring ever reads or writes through a link.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from .._util.fsutil import atomic_write, sync_fs

MANIFEST = "manifest.json"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class NotRestorable(OSError):
    """A path is in a state the backup cannot hold (a special file, a folder in its way)."""


def save(target: str, paths: Iterable[str], folder: str) -> None:
    """Save the pre-image of each of ``paths`` (relative to ``target``) in ``folder``."""
    if os.path.lexists(folder):
        shutil.rmtree(folder)
    os.makedirs(folder)
    entries: list[dict[str, object]] = []
    made: set[str] = set()
    for n, rel in enumerate(sorted(set(paths))):
        entry: dict[str, object] = {"path": rel}
        with _parent(target, rel) as (fd, name, found):
            if fd is None:        # the folders below the ``found`` ones will be made
                entry["kind"] = "none"
                parts = rel.split("/")
                made.update("/".join(parts[:i + 1]) for i in range(found, len(parts) - 1))
            else:
                entry.update(_save_one(fd, name, os.path.join(folder, str(n))))
        entries.append(entry)
    sync_fs(folder)
    _sync_dir(folder)
    atomic_write(os.path.join(folder, MANIFEST),
                 json.dumps({"target": target, "entries": entries, "made": sorted(made)}) + "\n")


def saved(folder: str) -> bool:
    """A complete backup is in ``folder``."""
    return os.path.isfile(os.path.join(folder, MANIFEST))


def restore(target: str, folder: str) -> None:
    """Put back every path saved in ``folder``. Raises ``OSError`` when it cannot (the disk is
    still full, say): the backup stays, to be restored by a later call."""
    with open(os.path.join(folder, MANIFEST), encoding="utf-8") as f:
        manifest = json.load(f)
    entries = manifest["entries"]
    by_depth = sorted(entries, key=lambda e: e["path"].count("/"), reverse=True)
    for e in by_depth:                                    # take away what is there now
        with _parent(target, e["path"], lenient=True) as (fd, name, _):
            if fd is not None and not (e["kind"] == "folder" and _is_dir(fd, name)):
                _remove(fd, name)
    for made in sorted(manifest["made"], key=lambda p: p.count("/"), reverse=True):
        with _parent(target, made, lenient=True) as (fd, name, _):
            if fd is not None:
                try:
                    os.rmdir(name, dir_fd=fd)
                except OSError:   # gone already, or it holds what someone else put there
                    pass
    for n, e in sorted(enumerate(entries), key=lambda ne: ne[1]["path"].count("/")):
        if e["kind"] == "none":
            continue
        with _parent(target, e["path"], create=True) as (fd, name, _):
            assert fd is not None
            _restore_one(fd, name, e, os.path.join(folder, str(n)))
    sync_fs(target)


def discard(folder: str) -> None:
    shutil.rmtree(folder, ignore_errors=True)


# One path -------------------------------------------------------------------------------------

def _save_one(fd: int, name: str, copy: str) -> dict[str, object]:
    try:
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return {"kind": "none"}
    if stat.S_ISLNK(st.st_mode):
        return {"kind": "link", "link": os.readlink(name, dir_fd=fd)}
    if stat.S_ISDIR(st.st_mode):
        return {"kind": "folder"}
    if not stat.S_ISREG(st.st_mode):
        raise NotRestorable(f"{name}: not a file, a folder or a link")
    src = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd)
    try:
        with os.fdopen(src, "rb", closefd=False) as i, open(copy, "xb") as o:
            shutil.copyfileobj(i, o, 1 << 20)
    finally:
        os.close(src)
    return {"kind": "file", "mode": stat.S_IMODE(st.st_mode), "mtime_ns": st.st_mtime_ns}


def _restore_one(fd: int, name: str, e: dict[str, object], copy: str) -> None:
    kind = e["kind"]
    if kind == "folder":
        if not _is_dir(fd, name):
            os.mkdir(name, dir_fd=fd)
    elif kind == "link":
        os.symlink(str(e["link"]), name, dir_fd=fd)
    elif kind == "file":
        mode = int(str(e["mode"]))
        out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                      mode, dir_fd=fd)
        try:
            with open(copy, "rb") as i, os.fdopen(out, "wb", closefd=False) as o:
                shutil.copyfileobj(i, o, 1 << 20)
                o.flush()
            os.fchmod(out, mode)
        finally:
            os.close(out)
        mtime = int(str(e["mtime_ns"]))
        os.utime(name, ns=(mtime, mtime), dir_fd=fd, follow_symlinks=False)


def _remove(fd: int, name: str) -> None:
    try:
        if _is_dir(fd, name):
            os.rmdir(name, dir_fd=fd)     # a folder the apply made where a file was: now empty
        else:
            os.unlink(name, dir_fd=fd)
    except FileNotFoundError:
        pass


def _is_dir(fd: int, name: str) -> bool:
    try:
        return stat.S_ISDIR(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return False


@contextmanager
def _parent(target: str, rel: str, *, create: bool = False,
            lenient: bool = False) -> Iterator[tuple[int | None, str, int]]:
    """The open folder holding ``rel`` (walked from ``target`` one folder at a time, never
    through a link) and the name in it. When a folder above does not exist: ``create`` makes
    it, else ``(None, name, i)`` with ``i`` the number of folders above that do exist. A link
    or a file where a folder should be raises ``NotRestorable`` (``lenient``: ``(None, ...)``
    as for a missing one)."""
    parts = rel.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise NotRestorable(errno.EINVAL, f"{rel!r}: not a path inside the tree")
    fd = os.open(target, _DIR_FLAGS & ~os.O_NOFOLLOW)   # the target itself is the person's
    try:
        for i, part in enumerate(parts[:-1]):
            try:
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    yield None, parts[-1], i
                    return
                os.mkdir(part, dir_fd=fd)
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as e:
                if e.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                if lenient:
                    yield None, parts[-1], i
                    return
                raise NotRestorable(e.errno, f"{'/'.join(parts[:i + 1])}: not a folder (a "
                                    "link or a file is in the way)") from None
            os.close(fd)
            fd = nxt
        yield fd, parts[-1], len(parts) - 1
    finally:
        os.close(fd)


def _sync_dir(path: str) -> None:
    fd = os.open(path, _DIR_FLAGS)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
