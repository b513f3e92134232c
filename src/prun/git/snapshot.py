"""The read-only snapshot: the repository at a run's base, for the run's read-only units to read.

A read-only unit works in an empty scratch dir (``workspace.make_scratch``); the snapshot is
handed to it as an extra directory. There is one per base per run, shared by every read-only
unit of that run and base: ``ensure_snapshot(parent, repo_root, base)`` makes
``<parent>/snapshot-<base[:12]>`` the first time and finds it every other time, from threads
and processes alike.

Made once, under an exclusive ``flock`` on ``parent`` (the others wait for it whole):

1. ``git clone --no-checkout`` into ``<name>.making`` (a local clone: object files
   hard-linked from the repository on the same file system, copied on another one; no
   ``--local``, with which git fails there with EXDEV), then the base checked out
   detached by one worker per core, as ``workspace.make_clone`` does, with
   ``core.trustctime=false`` (step 4 moves every file's ctime; without it each ``git status``
   would read every file again, unable to record what it learnt in the read-only index);
2. ``origin`` removed, no push config left, ``protocol.allow=never``;
3. ``.git/logs`` removed (its first line names the source path: nothing in a snapshot does),
   and the marker ``.git/prun-workspace.json`` (kind ``snapshot``, the base) written, so
   ``workspace.remove`` and ``prun clean`` remove it;
4. every write bit taken off every file and folder, ``.git`` included
   (``readonly.drop_write`` on each entry);
5. renamed to its final name (a half-made snapshot is never visible under it), then recorded
   outside it (atomic, durable writes): the stat of every entry in ``<name>.stat``, then
   ``<name>.json`` with the base and the fingerprint of that listing. Finding the snapshot
   reads only the small ``.json``.

Root ignores file modes: the read-only modes stop accidents by other users, not root.
``snapshot_changes`` says afterwards whether anything changed it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import posixpath
import re
import shutil
import stat
from collections.abc import Iterator
from dataclasses import dataclass

from .._util import gitcmd
from .._util.fsutil import atomic_write, atomic_write_json, read_bytes, read_json
from ..errors import GitError, StateError, UsageError, WorkspaceError
from .pushconfig import strip_push_config
from .readonly import drop_write
from .workspace import CLONE_MARKER, _inside, _write_marker, marker, remove

CHANGES_SHOWN = 20                      # items ``snapshot_changes`` lists before a count
IGNORED = ".git/index"                  # see ``snapshot_changes``
_COMMIT_ID = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")   # SHA-1 or SHA-256
_OBJECTS = ".git/objects/"

# What is recorded of one entry, a JSON array: [path, type, mode, size, mtime_ns, ctime_ns]
_Entry = list[str | int | None]


@dataclass(frozen=True)
class Snapshot:
    """A run's read-only snapshot: where it is, the commit it holds, and the fingerprint of
    its recorded listing (the stat of everything in it when it was made)."""

    path: str
    base: str
    fingerprint: str


def ensure_snapshot(parent: str, repo_root: str, base: str) -> Snapshot:
    """The snapshot of ``repo_root`` at commit ``base`` (a full commit id) in ``parent``:
    made by the first caller, found by every other, threads and processes alike; a caller that
    comes while it is being made waits for it whole."""
    if not _COMMIT_ID.fullmatch(base):
        raise UsageError(f"a snapshot's base must be a full commit id, not {base!r}",
                         hint="freeze the base first: git rev-parse <name>")
    parent = os.path.abspath(os.fspath(parent))
    path = os.path.join(parent, f"snapshot-{base[:12]}")
    found = _recorded(path, base)
    if found:
        return found
    repo_root = os.path.abspath(os.fspath(repo_root))
    if _inside(path, repo_root):
        raise WorkspaceError(f"a snapshot must live outside the repository: {path}",
                             hint="set PRUN_WORKSPACE_ROOT to a folder outside the repository")
    os.makedirs(parent, exist_ok=True)
    with _locked(parent):
        found = _recorded(path, base)
        if found:
            return found
        if not os.path.lexists(path):
            return _record(path, base, _make(repo_root, base, path))
        if (marker(path) or {}).get("base") != base:
            raise WorkspaceError(f"{path} exists and is not the snapshot of {base[:12]}",
                                 hint="remove it, or give the run another workspace folder")
        # made whole by a caller that died before recording it
        return _record(path, base, _walk(path))


def snapshot_changes(path: str) -> list[str]:
    """What changed in the snapshot at ``path`` since it was made; empty when nothing did.

    A stat walk, no content read: every entry's path, type, size, mtime, ctime and mode are
    compared with the record, so a file or folder added, removed, renamed, rewritten or
    re-moded is caught, and so is a moved ``HEAD`` or a changed ref (files under ``.git``).
    ctime cannot be set back from user space: a rewrite that restores mtime and size is still
    caught. Not compared: ``.git/index`` (a plain ``git status`` run as root may rewrite it)
    and the times and size of the ``.git`` folder that rewrite renames it into; the times of
    object files, which the local clone hard-linked from the source (any later clone of the
    source, the run's object store among them, links them again, which moves their ctime; git
    freshens an object's mtime when a repository sharing it writes that object again), so an
    object is compared by size; a
    folder's times when an entry in it was added or removed (that entry is the change). Each
    item is ``<path> <what>``: ``added``, ``removed``, ``modified``, ``mode 444->644`` or
    ``type file->dir``; at most ``CHANGES_SHOWN`` of them (objects last), then ``+<n> more``.
    """
    path = os.path.abspath(os.fspath(path))
    recorded = _entries(path)
    if not os.path.lexists(path):
        return [". removed"]
    now = _walk(path)
    now.pop(IGNORED, None)
    items = _differences({str(e[0]): e for e in recorded}, now)  # e[0]: its path
    items.sort(key=lambda item: (item[0].startswith(_OBJECTS), item[0]))
    shown = [f"{rel} {what}" for rel, what in items[:CHANGES_SHOWN]]
    if len(items) > CHANGES_SHOWN:
        shown.append(f"+{len(items) - CHANGES_SHOWN} more")
    return shown


def remove_snapshot(path: str) -> bool:
    """Remove the snapshot at ``path`` (``workspace.remove``: only a folder with prun's marker)
    and its record. Returns False when it was already gone."""
    path = os.path.abspath(os.fspath(path))
    removed = remove(path)
    for recorded in (_record_path(path), _listing_path(path)):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(recorded)
    return removed


# Making -------------------------------------------------------------------------------------

def _make(repo_root: str, base: str, path: str) -> dict[str, os.stat_result]:
    """Make the snapshot at ``path``; returns the lstat of every entry in it."""
    making = f"{path}.making"
    if os.path.lexists(making):  # left by a maker that died: only the lock holder makes one
        _discard(making)
    try:
        gitcmd.rev(repo_root, base)
    except GitError:
        raise WorkspaceError(f"base {base[:12]} is not a commit in {repo_root}",
                             hint="give the run's frozen base commit")
    try:
        gitcmd.git(["clone", "--quiet", "--no-checkout", "-c", "core.longpaths=true",
                    "-c", "core.trustctime=false", repo_root, making])
        gitcmd.git(["-c", "checkout.workers=0", "checkout", "--quiet", "--detach", base], making)
        gitcmd.git(["remote", "remove", "origin"], making)
        strip_push_config(making)
        gitcmd.git(["config", "protocol.allow", "never"], making)
        git_dir = os.path.join(making, ".git")
        shutil.rmtree(os.path.join(git_dir, "logs"), ignore_errors=True)
        _write_marker(os.path.join(git_dir, CLONE_MARKER), "snapshot", base=base)
        listing = _walk(making)
        # one walk for the modes and the record: what a folder holds before the folder
        for rel in sorted(listing.keys() - {"."}, reverse=True):
            entry = os.path.join(making, rel)
            if drop_write(entry, listing[rel]):
                listing[rel] = os.lstat(entry)
        drop_write(making, listing["."])
        os.rename(making, path)
        listing["."] = os.lstat(path)   # the rename moved its ctime, and nothing else's
        return listing
    except BaseException as e:  # nothing half-made is left, even for the next maker to sweep
        _discard(making)
        if isinstance(e, GitError):
            raise WorkspaceError(f"could not make a snapshot at {path}: {e.message}",
                                 hint="check that the repository is readable and the disk "
                                      "not full")
        raise


def _discard(making: str) -> None:
    if not os.path.lexists(making):
        return
    if marker(making):  # read-only modes come after the marker: remove() restores them
        remove(making)
    else:
        shutil.rmtree(making, ignore_errors=True)


@contextlib.contextmanager
def _locked(folder: str) -> Iterator[None]:
    """An exclusive ``flock`` on ``folder`` itself (no lock file to leave behind). The wait is
    bounded by the holder's work (its git calls time out) and the kernel releases the lock
    of a holder that dies."""
    fd = os.open(folder, os.O_RDONLY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the flock


# The record ---------------------------------------------------------------------------------

def _record_path(path: str) -> str:
    return f"{path}.json"


def _listing_path(path: str) -> str:
    return f"{path}.stat"


def _recorded(path: str, base: str) -> Snapshot | None:
    """The snapshot at ``path`` when it is whole and recorded, else None."""
    record = read_json(_record_path(path))
    fingerprint = record.get("fingerprint") if isinstance(record, dict) else None
    if not isinstance(fingerprint, str) or not os.path.isdir(path):
        return None
    if record.get("base") != base:
        raise WorkspaceError(f"{path} holds the snapshot of {record.get('base')}, not {base}",
                             hint="give the run another workspace folder")
    return Snapshot(path, base, fingerprint)


def _record(path: str, base: str, listing: dict[str, os.stat_result]) -> Snapshot:
    """Write ``listing`` (the lstat of every entry) as ``<name>.stat``, a JSON array of
    ``_entry`` rows, then the record ``<name>.json`` that names its fingerprint: a record is
    only ever beside its listing."""
    entries = [_entry(rel, st) for rel, st in sorted(listing.items()) if rel != IGNORED]
    data = json.dumps(entries).encode()
    atomic_write(_listing_path(path), data)
    fingerprint = _fingerprint(data)
    atomic_write_json(_record_path(path), {"kind": "snapshot", "base": base,
                                           "fingerprint": fingerprint, "entries": len(entries)})
    return Snapshot(path, base, fingerprint)


def _fingerprint(listing: bytes) -> str:
    return hashlib.sha256(listing).hexdigest()[:16]


def _entries(path: str) -> list[_Entry]:
    """The recorded entries of the snapshot at ``path``, checked against its fingerprint."""
    record, listing = read_json(_record_path(path)), read_bytes(_listing_path(path))
    if not isinstance(record, dict) or listing is None:
        raise StateError(f"no record of a snapshot at {path}",
                         hint="a snapshot is made and recorded by ensure_snapshot")
    if _fingerprint(listing) != record.get("fingerprint"):
        raise StateError(f"the listing of the snapshot at {path} does not match its record",
                         hint="its record was changed; the snapshot cannot be checked")
    entries: list[_Entry] = json.loads(listing)
    return entries


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    return "link" if stat.S_ISLNK(mode) else "other"


def _entry(rel: str, st: os.stat_result) -> _Entry:
    """What is recorded of one entry: ``[path, type, mode, size, mtime_ns, ctime_ns]``, None
    where a value is not compared (see ``snapshot_changes``)."""
    kind, mode = _kind(st.st_mode), stat.S_IMODE(st.st_mode)
    if rel == ".git":
        return [rel, kind, mode, None, None, None]
    # A hard link made or dropped elsewhere moves a file's ctime without changing it: git's
    # objects are linked by every local clone and repack of the source (the run's object
    # store too), so their ctime is never compared. Nor is an object's mtime: git
    # "freshens" an object it is asked to write again (utime on the existing file), and the
    # repository shares the inode. An object is named by its content's hash: a rewrite shows
    # in its size, or to git itself.
    if kind == "file" and rel.startswith(_OBJECTS):
        return [rel, kind, mode, st.st_size, None, None]
    shared = kind == "file" and st.st_nlink > 1
    return [rel, kind, mode, st.st_size, st.st_mtime_ns, None if shared else st.st_ctime_ns]


def _walk(root: str) -> dict[str, os.stat_result]:
    """The lstat of every entry under ``root`` (itself as ``.``), by path relative to it."""
    found = {".": os.lstat(root)}
    folders = [(root, "")]
    while folders:
        folder, prefix = folders.pop()
        try:
            listing = os.scandir(folder)
        except OSError:  # unreadable now: its entries count as removed
            continue
        with listing:
            for entry in listing:
                rel = prefix + entry.name
                try:
                    st = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                found[rel] = st
                if stat.S_ISDIR(st.st_mode):
                    folders.append((entry.path, rel + "/"))
    return found


def _differences(before: dict[str, _Entry],
                 now: dict[str, os.stat_result]) -> list[tuple[str, str]]:
    added, removed = now.keys() - before.keys(), before.keys() - now.keys()
    listing_changed = {posixpath.dirname(rel) or "." for rel in added | removed}
    items = [(rel, "added") for rel in added] + [(rel, "removed") for rel in removed]
    for rel in before.keys() & now.keys():
        st = now[rel]
        if _entry(rel, st) == before[rel]:  # the usual case, at the cost of one comparison
            continue
        _, kind, mode, size, mtime, ctime = before[rel]
        if _kind(st.st_mode) != kind:
            items.append((rel, f"type {kind}->{_kind(st.st_mode)}"))
            continue
        new_mode = stat.S_IMODE(st.st_mode)
        if new_mode != mode:
            items.append((rel, f"mode {mode:o}->{new_mode:o}"))
        rewritten = ((size is not None and st.st_size != size)
                     or (mtime is not None and st.st_mtime_ns != mtime)
                     # a mode change moves ctime too: then ctime says nothing more
                     or (ctime is not None and st.st_ctime_ns != ctime and new_mode == mode))
        if rewritten and not (kind == "dir" and rel in listing_changed):
            items.append((rel, "modified"))
    return items


__all__ = ["CHANGES_SHOWN", "Snapshot", "ensure_snapshot", "remove_snapshot",
           "snapshot_changes"]
