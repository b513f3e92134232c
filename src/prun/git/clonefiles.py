"""prun's own look at a unit's clone: the few files of its ``.git`` prun reads or writes
itself (``HEAD``, the ref it names, ``packed-refs``, ``info/exclude``, the marker), each
opened without following a link anywhere on the way and without waiting, and read only when
``fstat`` says it is a regular file within a bound; the checks a clone must pass before git
reads it through ``prun.git.untrusted``. Anything else is ``NotRegular`` or ``BrokenClone``,
never a wait or a traceback.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat

from .scan import Finding

HEAD_MAX_BYTES = 4096
PACKED_REFS_MAX_BYTES = 64 * 1024 * 1024
OBJECTS_MAX_ENTRIES = 100_000                # the unit's own .git/objects, when borrowed
OBJECTS_MAX_BYTES = 2 * 1024 * 1024 * 1024
_COMMIT_ID = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")
_REF = re.compile(r"refs/(?:[A-Za-z0-9_+@-][A-Za-z0-9._+@-]*/)*[A-Za-z0-9_+@-][A-Za-z0-9._+@-]*")


class BrokenClone(Exception):
    """A clone prun cannot read: ``why`` says what was found."""

    def __init__(self, why: str):
        super().__init__(why)
        self.why = why

    def finding(self) -> Finding:
        return Finding("broken-clone", None, {"why": self.why})


class NotRegular(Exception):
    """A file that is not a regular file, or is larger than asked: ``what`` says which."""

    def __init__(self, what: str):
        super().__init__(what)
        self.what = what


_FOLDER = os.O_RDONLY | os.O_CLOEXEC | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0)
_FILE = (os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
         | getattr(os, "O_NOCTTY", 0))


def read_inside(root: str, rel: str, limit: int) -> bytes | None:
    """The bytes of ``root/rel`` when it is a regular file of at most ``limit`` bytes, no link
    anywhere on the way from ``root`` (each folder opened without following a link, the file
    without waiting: a FIFO or a device is never read). None when it does not exist;
    ``NotRegular`` when it is anything else."""
    parts = [p for p in rel.split("/") if p]
    try:
        fd = os.open(root, _FOLDER)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise NotRegular(_what(root, e)) from None
    try:
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            try:
                nxt = os.open(part, _FILE if last else _FOLDER, dir_fd=fd)
            except FileNotFoundError:
                return None
            except OSError as e:
                raise NotRegular(_what("/".join(parts[:i + 1]), e)) from None
            os.close(fd)
            fd = nxt
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegular(f"{rel} is not a regular file")
        if st.st_size > limit:
            raise NotRegular(f"{rel} is larger than {limit} bytes")
        data = bytearray()
        while len(data) <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - len(data)))
            if not chunk:
                break
            data += chunk
        if len(data) > limit:
            raise NotRegular(f"{rel} is larger than {limit} bytes")
        return bytes(data)
    finally:
        os.close(fd)


def append_inside(root: str, rel: str, text: str) -> None:
    """Append ``text`` to ``root/rel`` (a file in a unit's clone: ``root`` its ``.git``),
    creating it and its folders, never through a link and never to anything but a regular
    file. ``NotRegular`` when the way there or the file is something else."""
    parts = [p for p in rel.split("/") if p]
    try:
        fd = os.open(root, _FOLDER)
    except OSError as e:
        raise NotRegular(_what(root, e)) from None
    try:
        for i, part in enumerate(parts[:-1]):
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o777, dir_fd=fd)
            try:
                nxt = os.open(part, _FOLDER, dir_fd=fd)
            except OSError as e:
                raise NotRegular(_what("/".join(parts[:i + 1]), e)) from None
            os.close(fd)
            fd = nxt
        try:
            out = os.open(parts[-1], (_FILE & ~os.O_RDONLY) | os.O_WRONLY | os.O_APPEND
                          | os.O_CREAT, 0o666, dir_fd=fd)
        except OSError as e:
            raise NotRegular(_what(rel, e)) from None
        try:
            if not stat.S_ISREG(os.fstat(out).st_mode):
                raise NotRegular(f"{rel} is not a regular file")
            data = text.encode("utf-8", "surrogateescape")
            while data:
                data = data[os.write(out, data):]
        finally:
            os.close(out)
    finally:
        os.close(fd)


def _what(path: str, e: OSError) -> str:
    if e.errno in (errno.ELOOP, errno.ENOTDIR):
        return f"{path} is a link or not a folder"
    return f"{path}: {os.strerror(e.errno or 0)}"


def read_head(clone: str) -> str:
    """The commit the clone's ``HEAD`` names, read by prun: ``HEAD`` and the ref it names as
    bounded regular files (``packed-refs`` as one too); ``BrokenClone`` for anything else."""
    git_dir = os.path.join(clone, ".git")
    try:
        text = read_inside(git_dir, "HEAD", HEAD_MAX_BYTES)
        for _ in range(5):     # a symbolic ref may name another
            value = (text or b"").decode("ascii", "replace").strip()
            if _COMMIT_ID.fullmatch(value):
                return value
            if not value.startswith("ref:"):
                break
            ref = value[4:].strip()
            if not _REF.fullmatch(ref) or ".." in ref or ref.endswith(".lock"):
                raise BrokenClone(f"HEAD names {ref[:80]!r}")
            text = read_inside(git_dir, ref, HEAD_MAX_BYTES)
            if text is None:
                packed = _packed(git_dir, ref)
                if packed is None:
                    raise BrokenClone(f"HEAD names {ref}, which does not exist")
                return packed
    except NotRegular as e:
        raise BrokenClone(e.what) from None
    raise BrokenClone("HEAD names no commit")


def _packed(git_dir: str, ref: str) -> str | None:
    data = read_inside(git_dir, "packed-refs", PACKED_REFS_MAX_BYTES) or b""
    want = ref.encode()
    for line in data.splitlines():
        oid, _, name = line.partition(b" ")
        if name == want and _COMMIT_ID.fullmatch(oid.decode("ascii", "replace")):
            return oid.decode()
    return None


def objects_ok(clone: str, store: str | None) -> str | None:
    """None when the unit's ``.git/objects`` holds only regular files and folders, within
    bounds, and an alternates file that is exactly prun's (none, without a store); else why
    not."""
    objects = os.path.join(clone, ".git", "objects")
    expected = (alternate(store) + "\n").encode() if store else None
    try:
        found = read_inside(os.path.join(clone, ".git"), "objects/info/alternates", 4096)
    except NotRegular as e:
        return e.what
    if found != expected:
        return "objects/info/alternates is not prun's"
    count = size = 0
    folders = [objects]
    while folders:
        folder = folders.pop()
        try:
            with os.scandir(folder) as listing:
                entries = list(listing)
        except OSError as e:
            return _what(os.path.relpath(folder, clone), e)
        for entry in entries:
            count += 1
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                folders.append(entry.path)
            elif stat.S_ISREG(st.st_mode):
                size += st.st_size
            else:
                return f"{os.path.relpath(entry.path, clone)} is not a regular file"
            if count > OBJECTS_MAX_ENTRIES or size > OBJECTS_MAX_BYTES:
                return "its objects are past prun's bounds"
    if os.path.lexists(os.path.join(objects, "info", "http-alternates")):
        return "objects/info/http-alternates exists"
    return None


def check_clone(clone: str) -> None:
    for path, what in ((clone, "the clone"), (os.path.join(clone, ".git"), ".git")):
        try:
            st = os.lstat(path)
        except OSError as e:
            raise BrokenClone(f"{what}: {os.strerror(e.errno or 0)}") from None
        if not stat.S_ISDIR(st.st_mode):
            raise BrokenClone(f"{what} is not a folder")


def odd_git_files(clone: str) -> list[Finding]:
    """The files git itself keeps in the clone's ``.git`` that are there but not regular files
    (an index that is a link to ``/dev/zero`` or a FIFO): never read by prun, but the clone is
    broken."""
    found = []
    for name in ("index", "config", "HEAD"):
        try:
            st = os.lstat(os.path.join(clone, ".git", name))
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode):
            found.append(Finding("broken-clone", None,
                                 {"why": f".git/{name} is not a regular file"}))
    return found



def alternate(store: str) -> str:
    """The line of a clone's ``objects/info/alternates`` that borrows from ``store``."""
    return os.path.join(os.path.realpath(store), "objects")


__all__ = [
    "HEAD_MAX_BYTES",
    "OBJECTS_MAX_BYTES",
    "OBJECTS_MAX_ENTRIES",
    "PACKED_REFS_MAX_BYTES",
    "BrokenClone",
    "NotRegular",
    "alternate",
    "append_inside",
    "check_clone",
    "objects_ok",
    "odd_git_files",
    "read_head",
    "read_inside",
]
