"""Reading a file a person named (a plan, a packet, a prompt, the config file) as a regular
file of bounded size: a FIFO, a device (``/dev/zero``), a socket or a folder is refused before
anything is read, so it can neither block nor fill memory, and a file over its bound is refused
whole. Each refusal is one ``UsageError`` (or the subclass asked for) naming the path.
"""

from __future__ import annotations

import os
import stat

from ..errors import UsageError

MiB = 1024 * 1024

_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def read_regular(path: str | os.PathLike[str], limit: int, what: str = "file",
                 error: type[UsageError] = UsageError) -> bytes:
    """The bytes of the regular file at ``path``, at most ``limit`` of them; ``error`` (a
    ``UsageError``) when it is missing, unreadable, not a regular file or larger. ``what``
    names the file in the message ("plan", "config file", ...)."""
    shown = os.fspath(path)
    fix = f"give a {what} that is a regular file"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise error(f"{shown}: no such file", hint="check the path") from None
    except IsADirectoryError:
        raise error(f"{shown}: is a directory, not a {what}", hint=fix) from None
    except OSError as e:
        raise error(f"{shown}: cannot read the {what} ({e.strerror})",
                    hint="check the path and its permissions") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        if stat.S_ISDIR(st.st_mode):
            raise error(f"{shown}: is a directory, not a {what}", hint=fix)
        kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a file")
        raise error(f"{shown}: is {kind}, not a regular file", hint=fix)
    with os.fdopen(fd, "rb") as f:
        data = f.read(limit + 1) if st.st_size <= limit else b""
        if st.st_size > limit or len(data) > limit:
            size = max(st.st_size, len(data))
            raise error(f"{shown}: the {what} is {size} bytes, more than the {limit} it may be",
                        hint=f"a {what} is at most {limit // MiB} MiB")
    return data
