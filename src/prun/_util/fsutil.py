"""Durable file writes, and reads that a file left by a unit cannot turn against prun.

Writes: a temp file in the destination's folder, fsync, then rename or link. ``atomic_write``
replaces its destination; ``publish_new`` never does (it links the temp file into place, which
fails if the destination appeared meanwhile), so a result a worker wrote at the last moment is
never overwritten.

Reads: every file prun reads or copies that a unit could have written (its result, its state
dir's records, its stream) is opened here and only here, by ``open_regular``: the last path
component is never followed when it is a symbolic link (``O_NOFOLLOW``), the open never waits
on a FIFO (``O_NONBLOCK``), and anything but a regular file (a link, FIFO, socket, device,
folder) is refused as ``UnsafeFile`` without one byte read. Every read is bounded: ``read_*``
refuse a file larger than their ``limit`` (``READ_LIMIT``, 64 MiB, unless the caller names
another), ``read_lines`` reads a file 64 KiB at a time (a line at most 64 KiB), ``tail_bytes``
and ``read_head`` read a fixed number of bytes, and ``publish_copy`` copies at most its
``limit``, hole by hole: a sparse file's holes stay holes in the copy, so a 2 GiB file of one
byte costs one byte, never 2 GiB of zeros.
"""

from __future__ import annotations

import errno
import functools  # imported already (by enum)
import itertools
import os
import stat

TYPE_CHECKING = False  # typing stays unimported: this module is on the dispatcher's fast path
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any, TypeAlias

    StrPath: TypeAlias = str | os.PathLike[str]

_counter = itertools.count()

READ_LIMIT = 64 << 20
"""The default bound of every read of a file a unit could have written (64 MiB): a result, a
response, a record of its state dir. Over it, the file is refused (``UnsafeFile``), not read."""

_READ_FLAGS = os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0) | getattr(
    os, "O_NONBLOCK", 0)
_COPY_CHUNK = 1 << 20
LINE_BYTES = 1 << 16   # ``read_lines`` reads this much at a time, and cuts a longer line
_UNBOUNDED = 1 << 62   # ``limit=None``: prun's own files, read whole


class UnsafeFile(OSError):
    """A file prun was to read or copy that is not a regular file (a symbolic link, a FIFO,
    a socket, a device, a folder) or is larger than the bound given: refused unread.
    ``too_large`` tells which; ``size`` is its size when it is a regular file."""

    def __init__(self, path: StrPath, what: str, *, too_large: bool = False, size: int = 0):
        super().__init__(errno.EFBIG if too_large else errno.EINVAL, what, os.fspath(path))
        self.what, self.too_large, self.size = what, too_large, size


def _kind(mode: int) -> str:
    for test, what in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISDIR, "a folder"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return what
    return "not a regular file"


def open_regular(path: StrPath, limit: int | None = None) -> int:
    """A read-only descriptor of the regular file at ``path``: its last component is not
    followed if it is a link, a FIFO is not waited on, anything but a regular file (and, with
    ``limit``, a file larger than ``limit`` bytes) raises ``UnsafeFile``; a missing file
    raises ``FileNotFoundError``. The caller closes it."""
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.EMLINK):   # O_NOFOLLOW met a link
            raise UnsafeFile(path, "a symbolic link") from None
        if e.errno == errno.ENXIO:                   # a socket (or a FIFO with no reader)
            raise UnsafeFile(path, _kind(os.lstat(path).st_mode)) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeFile(path, _kind(st.st_mode))
        if limit is not None and st.st_size > limit:
            raise UnsafeFile(path, f"larger than {limit} bytes ({st.st_size})",
                             too_large=True, size=st.st_size)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def regular_size(path: StrPath, limit: int | None = None) -> int:
    """The size of the regular file at ``path`` (0 when there is none); ``UnsafeFile`` when
    something else is there, or a file larger than ``limit``. Nothing is opened."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return 0
    if not stat.S_ISREG(st.st_mode):
        raise UnsafeFile(path, _kind(st.st_mode))
    if limit is not None and st.st_size > limit:
        raise UnsafeFile(path, f"larger than {limit} bytes ({st.st_size})", too_large=True,
                         size=st.st_size)
    return st.st_size


def read_bounded(path: StrPath, limit: int | None = READ_LIMIT) -> bytes:
    """The whole content of the regular file at ``path``, at most ``limit`` bytes: a larger
    file (or one that grew past it while read) raises ``UnsafeFile``, as does anything but a
    regular file; ``OSError`` when it cannot be read."""
    fd = open_regular(path, limit)
    parts: list[bytes] = []
    try:
        left = _UNBOUNDED if limit is None else limit + 1
        while left > 0 and (chunk := os.read(fd, min(left, _COPY_CHUNK))):
            parts.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    data = b"".join(parts)
    if limit is not None and len(data) > limit:
        raise UnsafeFile(path, f"larger than {limit} bytes", too_large=True, size=len(data))
    return data


def read_lines(path: StrPath, limit: int | None = READ_LIMIT) -> Iterator[str]:
    """The lines of the regular file at ``path`` (as ``str.splitlines`` splits them,
    undecodable bytes replaced), read ``LINE_BYTES`` at a time: never whole, whatever its size.
    A line longer than ``LINE_BYTES`` is cut to its first ``LINE_BYTES``. ``UnsafeFile`` (once
    iterated) as for ``read_bounded``: not a regular file, or more than ``limit`` bytes."""
    fd = open_regular(path, limit)
    try:
        left = _UNBOUNDED if limit is None else limit
        rest, skipping = b"", False
        while chunk := os.read(fd, LINE_BYTES):
            left -= len(chunk)
            if left < 0:
                raise UnsafeFile(path, f"larger than {limit} bytes", too_large=True)
            *ended, last = chunk.split(b"\n")
            for line in ended:
                if not skipping:
                    yield from _split(rest + line, ended=True)
                rest, skipping = b"", False
            if not skipping:
                rest += last
                if len(rest) > LINE_BYTES:
                    yield from _split(rest[:LINE_BYTES], ended=True)
                    rest, skipping = b"", True
        if rest and not skipping:
            yield from _split(rest, ended=False)
    finally:
        os.close(fd)


def _split(line: bytes, ended: bool) -> list[str]:
    """The lines of one newline-delimited piece, as the whole text's ``splitlines`` gives
    them (a form feed before its newline still ends a line of its own)."""
    text = line.decode("utf-8", "replace")
    return (text + "\n").splitlines() if ended else text.splitlines()


def read_head(path: StrPath, n: int) -> bytes:
    """The first ``n`` bytes of the regular file at ``path`` (empty if it cannot be read or
    is not a regular file)."""
    try:
        fd = open_regular(path)
    except OSError:
        return b""
    try:
        return os.read(fd, n)
    except OSError:
        return b""
    finally:
        os.close(fd)


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


def publish_copy(source: StrPath, dest: StrPath, *, durable: bool = True,
                 limit: int | None = READ_LIMIT) -> bool:
    """Publish a copy of the finished regular file ``source`` at ``dest`` unless ``dest``
    exists (False then): copied to a temp file beside ``dest`` (at most ``limit`` bytes, its
    holes kept as holes), then linked into place like ``publish_new``. A copy, never a link:
    what wrote ``source`` cannot change it. ``UnsafeFile`` when ``source`` is not a regular
    file or is larger than ``limit``; nothing is written then."""
    src = open_regular(source, limit)
    try:
        tmp = _copy_beside(src, dest, limit, durable)
    finally:
        os.close(src)
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


def _copy_beside(src: int, dest: StrPath, limit: int | None, durable: bool) -> str:
    """Copy the open file ``src`` to a new temp file beside ``dest``: only its data
    (``SEEK_DATA``/``SEEK_HOLE``), the holes left as holes, its size set at the end. Gives the
    temp file's path; ``UnsafeFile`` when it grows past ``limit`` meanwhile."""
    dest = os.fspath(dest)
    folder, name = os.path.split(os.path.abspath(dest))
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
    while True:
        tmp = os.path.join(folder, f".{name}.{os.getpid()}.{next(_counter)}.tmp")
        try:
            out = os.open(tmp, flags, 0o666)
            break
        except FileExistsError:
            continue
    try:
        size = os.fstat(src).st_size
        if limit is not None and size > limit:
            raise UnsafeFile(tmp, f"larger than {limit} bytes", too_large=True, size=size)
        for start, end in _data_extents(src, size):
            pos = start
            while pos < end and (chunk := os.pread(src, min(_COPY_CHUNK, end - pos), pos)):
                view = memoryview(chunk)
                while view:
                    view = view[os.pwrite(out, view, pos + len(chunk) - len(view)):]
                pos += len(chunk)
        os.ftruncate(out, size)
        if durable:
            os.fsync(out)
    except BaseException:
        os.close(out)
        _unlink_quietly(tmp)
        raise
    os.close(out)
    return tmp


def _data_extents(fd: int, size: int) -> list[tuple[int, int]]:
    """The (start, end) ranges of ``fd`` that hold data, below ``size``; the whole file where
    the file system cannot say (no ``SEEK_DATA``)."""
    seek_data, seek_hole = getattr(os, "SEEK_DATA", None), getattr(os, "SEEK_HOLE", None)
    if seek_data is None or seek_hole is None:
        return [(0, size)]
    extents, pos = [], 0
    while pos < size:
        try:
            start = os.lseek(fd, pos, seek_data)
        except OSError as e:
            if e.errno == errno.ENXIO:     # only a hole is left
                break
            return [(0, size)]
        end = min(os.lseek(fd, start, seek_hole), size)
        if start >= size:
            break
        extents.append((start, end))
        pos = end
    return extents


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def read_bytes(path: StrPath, limit: int | None = READ_LIMIT) -> bytes | None:
    """The regular file's bytes (at most ``limit``), or None if it cannot be read, is not a
    regular file or is larger."""
    try:
        return read_bounded(path, limit)
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


def read_text(path: StrPath, default: str | None = None,
              limit: int | None = READ_LIMIT) -> str | None:
    """The regular file's text (undecodable bytes replaced), or ``default`` if it cannot be
    read, is not a regular file or is larger than ``limit`` bytes."""
    try:
        return read_bounded(path, limit).decode("utf-8", "replace")
    except OSError:
        return default


def read_json(path: StrPath, limit: int | None = READ_LIMIT) -> Any:
    """The file's JSON, or None when it is missing, unreadable, not a regular file, larger
    than ``limit`` bytes, or not JSON."""
    import json

    text = read_text(path, limit=limit)
    if not text:
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def tail_bytes(path: StrPath, limit: int) -> bytes:
    """The last ``limit`` bytes of a regular file (empty if it cannot be read or is not a
    regular file)."""
    try:
        fd = open_regular(path)
    except OSError:
        return b""
    try:
        size = os.fstat(fd).st_size
        return os.pread(fd, limit, max(0, size - limit))
    except OSError:
        return b""
    finally:
        os.close(fd)


def file_size(path: StrPath) -> int:
    """The size of the regular file at ``path``; 0 when it is missing or something else (a
    link is not followed)."""
    try:
        return regular_size(path)
    except OSError:
        return 0
