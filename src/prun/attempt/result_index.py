"""The published-results index: how a waiter knows a result file is final the moment it lands.

A prun dispatcher publishes a unit's result atomically (or keeps the worker's own file after the
worker has exited). Right after that it calls ``record``, which leaves one small JSON entry in a
per-user folder, named by a hash of the result's absolute path::

    <state root>/.published/<sha256(abs path)[:32]>.json
        {"result_identity": {"path": ..., "dev": ..., "ino": ..., "size": ..., "mtime_ns": ...},
         "state_dir": ..., ...}

``<state root>`` is ``prun.attempt.statedir.default_root()`` ($PRUN_STATE_ROOT, else the user's state
folder), whatever root the unit's own state dir lives under, so any waiter finds it. ``lookup``
trusts an entry only while the file still has the identity recorded (device, inode, size,
modification time): a result path reused by a later unit, or a file edited after publication,
is no longer "published" and falls back to the stable-window rule.

The entry is the unit's ``outcome.json`` itself, hard-linked in (one create event, never a
rename, and no file of its own), or, where no link can be made, a small file with the same
fields, created by a hard link of a finished temp file. Neither is fsynced: the entry is a hint
for speed; losing it in a crash costs a stable window.
Entries are tiny and only needed while someone waits for their result: once a day, the
dispatcher that records an entry removes those older than a week. Deleting the folder is always
safe.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from typing import TYPE_CHECKING, Any

from .._util.fsutil import open_regular, read_json
from .publish import RESULT_LIMIT
from .statedir import RECORD_LIMIT

if TYPE_CHECKING:
    from .protocols import ResultIdentity

INDEX_DIRNAME = ".published"
KEEP_S = 7 * 86400    # entries older than this are removed ...
PRUNE_EVERY_S = 86400  # ... at most once a day, by the dispatcher that records one


def index_dir(state_root: str | None = None) -> str:
    """The index folder in ``state_root`` (default: this process's), not created here."""
    if state_root is None:
        from .statedir import default_root

        state_root = default_root()
    return os.path.join(state_root, INDEX_DIRNAME)


def entry_name(result_file: str) -> str:
    digest = hashlib.sha256(os.path.abspath(result_file).encode("utf-8", "surrogateescape"))
    return digest.hexdigest()[:32] + ".json"


def entry_path(result_file: str, folder: str | None = None) -> str:
    return os.path.join(folder or index_dir(), entry_name(result_file))


def identity(result_file: str, *, content: bool = True) -> ResultIdentity | None:
    """What ``result_file`` is now, or None if it is missing, empty, not a regular file or
    larger than prun publishes (``publish.RESULT_LIMIT``): its path, device, inode, size and
    modification time (what ``lookup`` checks), and with ``content`` its SHA-256 (what
    ``changed`` checks: a published result must never change)."""
    path = os.path.abspath(result_file)
    try:
        fd = open_regular(path, RESULT_LIMIT)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if st.st_size == 0:
                return None
            ident: ResultIdentity = {"path": path, "dev": st.st_dev, "ino": st.st_ino,
                                     "size": st.st_size, "mtime_ns": st.st_mtime_ns}
            if content:
                ident["sha256"] = hashlib.file_digest(f, "sha256").hexdigest()
    except OSError:
        return None
    return ident


def changed(recorded: object) -> str | None:
    """Why the published result ``recorded`` (an outcome's ``result_identity``) is no longer
    what was published, or None when it still is (or nothing was recorded)."""
    if not isinstance(recorded, dict) or not isinstance(recorded.get("path"), str) \
            or not recorded["path"]:
        return None
    now = identity(recorded["path"], content="sha256" in recorded)
    if now is None:
        return "it is gone or empty"
    if now["size"] != recorded.get("size"):
        return f"its size is {now['size']} bytes, {recorded.get('size')} when published"
    if "sha256" in recorded and now["sha256"] != recorded["sha256"]:
        return "its content changed after it was published"
    return None


def record(result_file: str, state_dir: str, *, outcome: str | None = None,
           state_root: str | None = None) -> bool:
    """Note that ``result_file`` (as it is now on disk) is final. Never raises; False if not
    recorded (no such file, empty file, or the index folder cannot be written).

    ``outcome``: the unit's ``outcome.json``, already holding this file's ``result_identity``
    and its ``state_dir``. The entry is then a hard link to it, which costs no file of its own;
    where a link cannot be made the entry is written as a small file."""
    path = os.path.abspath(result_file)
    try:
        folder = index_dir(state_root)
        final = entry_path(path, folder)
        if outcome is not None and _link_entry(outcome, final, folder):
            _prune(folder)
            return True
        ident = identity(path)
        if ident is None:
            return False
        data = json.dumps({"result_identity": ident,
                           "state_dir": os.path.abspath(state_dir)}).encode()
        tmp = f"{final}.{os.getpid()}.{os.urandom(3).hex()}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
        try:
            fd = os.open(tmp, flags, 0o600)
        except FileNotFoundError:  # the first entry (or the folder was deleted)
            os.makedirs(folder, exist_ok=True)
            fd = os.open(tmp, flags, 0o600)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        try:
            if not _link_entry(tmp, final, folder):
                os.replace(tmp, final)  # no hard links on this file system
        finally:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
        _prune(folder)
        return True
    except OSError:
        return False


def _link_entry(source: str, final: str, folder: str) -> bool:
    """Link ``source`` in as the entry ``final`` (one create event, never a rename), replacing
    an entry an earlier unit left at the same path. False if no link can be made."""
    for _ in range(2):
        try:
            os.link(source, final)
            return True
        except FileExistsError:
            try:
                os.unlink(final)
            except FileNotFoundError:
                pass
        except FileNotFoundError:
            if not os.path.isdir(folder):
                os.makedirs(folder, exist_ok=True)
            else:
                return False
        except OSError:  # another file system, or no hard links
            return False
    return False


def _prune(folder: str) -> None:
    """Remove entries older than ``KEEP_S``, once a day (a marker file's age says when)."""
    marker = os.path.join(folder, ".pruned")
    now = time.time()
    try:
        if now - os.stat(marker).st_mtime < PRUNE_EVERY_S:
            return
    except FileNotFoundError:
        pass
    with open(marker, "a"):
        pass
    os.utime(marker, (now, now))
    with os.scandir(folder) as entries:
        for e in entries:
            if e.name.endswith(".json"):
                try:
                    if now - e.stat().st_mtime > KEEP_S:
                        os.unlink(e.path)
                except OSError:
                    pass


def rewritten(result_file: str, st: os.stat_result, folder: str | None = None) -> bool:
    """Was the file at ``result_file`` published (the index has its entry, for this very file:
    the same device and inode) and then written again in place (its size or modification
    time differs)? A file replaced by another is a new file, not this."""
    entry = _entry(entry_path(os.path.abspath(result_file), folder))
    ident = entry.get("result_identity") if entry is not None else None
    if not isinstance(ident, dict):
        return False
    same_file = ident.get("dev") == st.st_dev and ident.get("ino") == st.st_ino
    return same_file and (ident.get("size"), ident.get("mtime_ns")) != (st.st_size,
                                                                      st.st_mtime_ns)


def lookup(result_file: str, st: os.stat_result | None = None,
           folder: str | None = None) -> dict[str, Any] | None:
    """The index entry for ``result_file`` if the file on disk is the one a dispatcher published
    (``st``: its stat, when the caller already has it), else None."""
    path = os.path.abspath(result_file)
    entry = _entry(entry_path(path, folder))
    if entry is None:
        return None
    try:
        if st is None:
            st = os.stat(path)
    except OSError:
        return None
    ident = entry.get("result_identity")
    if not isinstance(ident, dict):
        return None
    same = (ident.get("path") == path and ident.get("dev") == st.st_dev
            and ident.get("ino") == st.st_ino and ident.get("size") == st.st_size
            and ident.get("mtime_ns") == st.st_mtime_ns)
    return entry if same else None


def _entry(path: str) -> dict[str, Any] | None:
    """An index entry (a unit's ``outcome.json``, linked in), read as untrusted: a regular
    file of at most ``statedir.RECORD_LIMIT`` bytes holding a JSON object, else None."""
    entry = read_json(path, limit=RECORD_LIMIT)
    return entry if isinstance(entry, dict) else None
