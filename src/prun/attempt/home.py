"""A unit's private home: the folder its ``HOME`` names, made per attempt in its state dir.

The worker's agent CLI finds there what it needs of the person's home (its configuration and
credentials: ``Executor.home_files``), as copies: it works as it does for the person, and what
it writes (a refreshed token, its sessions, its settings) stays in the copy; the person's own
files are never written. A follow-up that resumes a conversation reuses the home of the attempt
it continues, where the CLI kept that conversation.

The copy is bounded: only the paths the executor names; inside a copied folder, the names it
skips (caches, history, sessions of other projects) are left out, symbolic links are never
followed (nor copied) and only regular files are read; a file over ``MAX_FILE_BYTES`` is left
out (with one warning line), and the copy stops at ``MAX_TOTAL_BYTES`` or ``MAX_ENTRIES``. A path
the executor names that is itself a symbolic link (a dotfile kept elsewhere) is read through it.
"""

from __future__ import annotations

import os
import shutil
import stat
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ..executors.base import HomeFiles

MAX_FILE_BYTES = 32 << 20     # a configuration or credentials file is small
MAX_TOTAL_BYTES = 128 << 20
MAX_ENTRIES = 5000
# the person's variables that name folders in their home: a unit's follow its own HOME
XDG_FOLDERS = ("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME")
# prun's own variables that name the person's places to make things in (workspaces, state
# dirs): a unit cannot write there; a prun it may run (subdispatch) makes its own under its HOME
PRUN_PLACES = ("PRUN_WORKSPACE_ROOT", "PRUN_STATE_ROOT")


def person_home(env: Mapping[str, str]) -> str:
    """The person's home folder: ``$HOME``, else the account's."""
    home = env.get("HOME", "").strip()
    return home if os.path.isabs(home) else os.path.expanduser("~")


def environment(home: str, files: HomeFiles, env: Mapping[str, str]) -> dict[str, str]:
    """What the unit's environment gets for its home ``home``: ``HOME``, and each of the CLI's
    configuration-folder variables the person set, pointed into the copy."""
    out = {"HOME": home}
    for var, under in files.env_dirs.items():
        if env.get(var, "").strip():
            out[var] = os.path.join(home, under) if under else home
    return out


def fill(home: str, files: HomeFiles, env: Mapping[str, str]) -> None:
    """Copy into the fresh folder ``home`` what ``files`` names of the person's home (see the
    module's docstring for the bounds)."""
    if not files.paths:
        return
    source_home = person_home(env)
    budget = _Budget()
    for rel in files.paths:
        source = _source(rel, files, env, source_home)
        if source is None:
            continue
        _copy_top(source, os.path.join(home, rel), files.skip, budget)


def _source(rel: str, files: HomeFiles, env: Mapping[str, str], source_home: str) -> str | None:
    """Where ``rel`` (a path under HOME) is for this person: under the folder a variable of
    ``env_dirs`` names, when it is set and ``rel`` is under what it stands for."""
    for var, under in files.env_dirs.items():
        value = env.get(var, "").strip()
        if not value:
            continue
        if not under:
            return os.path.join(value, rel)
        if rel == under or rel.startswith(under + "/"):
            return value + rel[len(under):]
    return os.path.join(source_home, rel)


class _Budget:
    __slots__ = ("bytes", "entries")

    def __init__(self) -> None:
        self.bytes = 0
        self.entries = 0

    def take(self, size: int) -> bool:
        if self.entries >= MAX_ENTRIES or self.bytes + size > MAX_TOTAL_BYTES:
            return False
        self.entries += 1
        self.bytes += size
        return True


def _copy_top(source: str, dest: str, skip: frozenset[str], budget: _Budget) -> None:
    try:
        st = os.stat(source)   # the named path itself may be a link (a dotfile kept elsewhere)
    except OSError:
        return
    os.makedirs(os.path.dirname(dest), mode=0o700, exist_ok=True)
    if stat.S_ISDIR(st.st_mode):
        _copy_tree(source, dest, skip, budget)
    elif stat.S_ISREG(st.st_mode):
        _copy_file(source, dest, budget, follow=True)


def _copy_tree(source: str, dest: str, skip: frozenset[str], budget: _Budget) -> None:
    if not budget.take(0):
        return
    os.makedirs(dest, mode=0o700, exist_ok=True)
    try:
        entries = list(os.scandir(source))
    except OSError:
        return
    for entry in entries:
        if entry.name in skip:
            continue
        try:
            if entry.is_symlink():
                continue                    # never followed out of the folder, never copied
            if entry.is_dir(follow_symlinks=False):
                _copy_tree(entry.path, os.path.join(dest, entry.name), skip, budget)
            elif entry.is_file(follow_symlinks=False):
                _copy_file(entry.path, os.path.join(dest, entry.name), budget, follow=False)
        except OSError:
            continue


def _copy_file(source: str, dest: str, budget: _Budget, *, follow: bool) -> None:
    """A regular file, read without blocking (a FIFO is never opened for long), its mode kept
    (at least readable and writable by its owner)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(source, flags)
    except OSError:
        return
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return
        if st.st_size > MAX_FILE_BYTES:
            from .._util.say import say_once

            say_once(f"prun: warning: {source} is not copied into units' homes: it is larger "
                     f"than {MAX_FILE_BYTES >> 20} MiB")
            return
        if not budget.take(st.st_size):
            return
        out = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW,
                      (st.st_mode & 0o777) | 0o600)
        with os.fdopen(out, "wb") as w:
            while chunk := f.read(1 << 20):
                w.write(chunk)


def carry(earlier: str, home: str) -> None:
    """Move an earlier attempt's home (a real folder, never a link) to ``home``, the
    follow-up's own place, where each attempt's home always is; copied when it cannot be
    moved (another file system). Nothing happens when the earlier one is not a folder."""
    try:
        if not stat.S_ISDIR(os.lstat(earlier).st_mode):
            return
        os.rename(earlier, home)
    except FileNotFoundError:
        return
    except OSError:
        shutil.copytree(earlier, home, symlinks=True)
