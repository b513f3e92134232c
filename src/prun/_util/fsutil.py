"""Durable file writes: a temp file in the destination's folder, fsync, then rename or link.

``atomic_write`` replaces its destination; ``publish_new`` never does (it links the temp file
into place, which fails if the destination appeared meanwhile), so a result a worker wrote at
the last moment is never overwritten.
"""

from __future__ import annotations

import functools  # imported already (by enum)
import itertools
import os

TYPE_CHECKING = False  # typing stays unimported: this module is on the dispatcher's fast path
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeAlias

    StrPath: TypeAlias = str | os.PathLike[str]

_counter = itertools.count()


def _temp_beside(dest: StrPath, data: bytes, durable: bool = True) -> str:
    """Write ``data`` to a new temp file in ``dest``'s folder; returns its path.

    Named ``.<name>.<pid>.<n>.tmp`` and created with O_EXCL rather than by ``tempfile``: on a
    slow file system ``mkstemp`` and a buffered file object cost three times the syscalls
    themselves, and a run writes a dozen small files per unit.
    """
    dest = os.fspath(dest)
    folder, name = os.path.split(dest if dest[:1] == "/" else os.path.abspath(dest))
    stem = f".{name}.{os.getpid()}."
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
    while True:
        tmp = os.path.join(folder, f"{stem}{next(_counter)}.tmp")
        try:
            fd = os.open(tmp, flags, 0o666)
            break
        except FileExistsError:  # left by a dead process that had our pid: take the next name
            continue
    try:
        write_all(fd, data)
        if durable:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        _unlink_quietly(tmp)
        raise
    os.close(fd)
    return tmp


def _as_bytes(data: bytes | str) -> bytes:
    return data.encode("utf-8", "replace") if isinstance(data, str) else data


def atomic_write(dest: StrPath, data: bytes | str, *, durable: bool = True) -> None:
    """Write ``data`` to ``dest`` so that readers see the old file or the whole new one.
    ``durable=False`` skips the fsync (still atomic for readers; not across a power loss)."""
    tmp = _temp_beside(dest, _as_bytes(data), durable)
    try:
        os.replace(tmp, dest)
    except BaseException:
        _unlink_quietly(tmp)
        raise


def atomic_write_json(dest: StrPath, obj: object, *, durable: bool = True) -> None:
    """One line of JSON, keys sorted (without ``indent`` json uses its C encoder: a run
    writes thousands of these)."""
    import json

    atomic_write(dest, json.dumps(obj, sort_keys=True, default=str) + "\n", durable=durable)


def publish_new(dest: StrPath, data: bytes | str, *, durable: bool = True) -> bool:
    """Publish ``data`` at ``dest`` atomically unless ``dest`` exists. Returns False if it did.
    ``durable=False`` skips the fsync (the caller syncs the file system later, ``sync_fs``)."""
    tmp = _temp_beside(dest, _as_bytes(data), durable)
    try:
        os.link(tmp, dest)
        return True
    except FileExistsError:
        return False
    except OSError:
        # File systems without hard links: rename is still atomic, the check is best effort.
        if os.path.lexists(dest):
            return False
        os.replace(tmp, dest)
        return True
    finally:
        _unlink_quietly(tmp)


def publish_copy(source: StrPath, dest: StrPath, *,
                 durable: bool = True) -> bool:
    """Publish a copy of the finished file ``source`` at ``dest`` unless ``dest`` exists
    (False then): copied in bounded chunks to a temp file beside ``dest``, then linked into
    place like ``publish_new``. A copy, never a link: what wrote ``source`` cannot change it."""
    import shutil

    dest = os.fspath(dest)
    folder, name = os.path.split(os.path.abspath(dest))
    tmp = os.path.join(folder, f".{name}.{os.getpid()}.{next(_counter)}.tmp")
    with open(source, "rb") as src, open(tmp, "xb") as out:
        try:
            shutil.copyfileobj(src, out, 1 << 20)
            out.flush()
            if durable:
                os.fsync(out.fileno())
        except BaseException:
            _unlink_quietly(tmp)
            raise
    try:
        os.link(tmp, dest)
        return True
    except FileExistsError:
        return False
    except OSError:
        if os.path.lexists(dest):
            return False
        os.replace(tmp, dest)
        return True
    finally:
        _unlink_quietly(tmp)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def read_bytes(path: StrPath) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def sync_fs(path: StrPath) -> None:
    """Flush everything written to the file system holding ``path`` to disk: one ``syncfs``
    for a batch of files instead of an fsync each (``sync`` where there is no syncfs)."""
    syncfs = _libc_syncfs()
    if syncfs is None:
        return os.sync()
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if syncfs(fd) != 0:
            os.sync()
    finally:
        os.close(fd)


@functools.cache
def _libc_syncfs() -> Callable[[int], int] | None:
    """libc's ``syncfs``, looked up once (None where there is none)."""
    try:
        import ctypes

        syncfs: Callable[[int], int] = ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return None
    return syncfs


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def read_text(path: StrPath, default: str | None = None) -> str | None:
    """The file's text (undecodable bytes replaced), or ``default`` if it cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return default


def read_json(path: StrPath) -> Any:
    """The file's JSON, or None when it is missing, unreadable or not JSON."""
    import json

    text = read_text(path)
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def tail_bytes(path: StrPath, limit: int) -> bytes:
    """The last ``limit`` bytes of a file (empty if it cannot be read)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - limit))
            return f.read()
    except OSError:
        return b""


def file_size(path: StrPath) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0
