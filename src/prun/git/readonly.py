"""Taking write permission away: from one entry (``drop_write``, unsharing a hard-linked file
first) or from a whole tree (``make_readonly``), as a read-only snapshot and an object store
need."""

from __future__ import annotations

import os
import shutil
import stat

_WRITE_BITS = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH


def make_readonly(root: str | os.PathLike[str]) -> None:
    """Take every write permission off ``root`` and everything under it (``drop_write`` on
    each entry, a folder after what it holds)."""
    root = os.fspath(root)
    for folder, dirs, files in os.walk(root, topdown=False):
        for name in files + dirs:
            path = os.path.join(folder, name)
            drop_write(path, os.lstat(path))
    drop_write(root, os.lstat(root))


def drop_write(path: str, st: os.stat_result) -> bool:
    """Take the write bits off the entry at ``path`` whose lstat is ``st``; True if its mode
    changed. A symbolic link is left alone (its mode means nothing), and so is an entry with no
    write bit (not even its ctime moves). A writable file hard-linked from elsewhere (a local
    clone links the source's object files) is replaced by a copy first, so the other tree
    keeps its modes: its folder must still be writable then."""
    mode = stat.S_IMODE(st.st_mode)
    if stat.S_ISLNK(st.st_mode) or not mode & _WRITE_BITS:
        return False
    if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
        copy = f"{path}.prun-unshare"
        shutil.copy2(path, copy)
        os.replace(copy, path)
    os.chmod(path, mode & ~_WRITE_BITS)
    return True
