"""A code unit's change, saved in the run dir before ``prun clean`` removes its clone, and read
back in its place: reconcile judges it, integrate applies it and the review page shows it
exactly as from the clone.

For the attempt ``<seq>`` of packet ``<packet>``, in ``<run dir>/changes/``:

    <packet>.<seq>.patch   the change as prun reads it from the clone (``read_change``): a
                           binary patch against its base, untracked files included
    <packet>.<seq>.json    its record: the base, the clone's HEAD and path, each file with its
                           status, line counts and link target, the worker's commits, whether
                           HEAD moved, the scan's findings, whether the tree was read at all,
                           and the patch's size and SHA-256

Each is written to a temp file, synced, renamed into place, the record last, then the folder is
synced: a record names a whole patch, and a record that is there survives a power loss. Read
back, the patch must be the one the record names (its size and SHA-256), else the saved change
is ``Broken`` (reconcile rejects the packet: ``saved-change-broken``). The only path a record
holds, the clone's, is reported, never read: the patch is found beside the record.

For a read-only attempt, the record holds what reconcile found in each of the run's read-only
snapshots it was given (``snapshots``), saved before ``prun clean`` removes them, and no patch.

Also here, the one rule of what ``prun clean`` keeps: ``waiting`` says whether an attempt's
change still waits to be integrated.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Container, Mapping
from dataclasses import dataclass
from typing import Any

from .._util.fsutil import atomic_write, atomic_write_json, read_bounded, read_json
from .changes import Change, FileChange
from .scan import Finding
from .verdict import REJECTED, Verdict

FOLDER = "changes"
FORMAT = 1
RECORD_LIMIT = 256 << 20     # bytes of one record (a change of a million files fits)


class Broken(Exception):
    """A saved change that cannot be read back as it was saved; ``why`` says what is wrong."""

    def __init__(self, why: str):
        super().__init__(why)
        self.why = why


@dataclass(frozen=True)
class Place:
    """Where one attempt's change is saved."""

    patch: str
    record: str


def place(run_dir: str, packet_id: str, seq: object) -> Place | None:
    """Where the change of attempt ``seq`` of ``packet_id`` is saved in ``run_dir``; None when
    the packet's id cannot name a file there (ids of plans can)."""
    name = f"{packet_id}.{seq}"
    if not packet_id or packet_id.startswith(".") or "/" in name or "\0" in name \
            or (os.altsep and os.altsep in name):
        return None
    stem = os.path.join(run_dir, FOLDER, name)
    return Place(stem + ".patch", stem + ".json")


def save(where: Place, change: Change, *, packet: str, attempt: str | None,
         at: str | None = None) -> None:
    """Save ``change`` (read with its patch; a change whose tree was not read has none) at
    ``where``, durably: the patch, then its record, then the folder synced. ``OSError`` when
    it cannot be written (a full disk): what was there before is left as it was."""
    patch = change.patch or b""
    if change.patch is None and change.complete:
        raise ValueError("a change is saved with its patch (read_change(with_patch=True))")
    folder = os.path.dirname(where.record)
    os.makedirs(folder, exist_ok=True)
    atomic_write(where.patch, patch)
    atomic_write_json(where.record, {
        "format": FORMAT, "packet": packet, "attempt": attempt, "at": at,
        "workspace": change.clone, "base": change.base, "head": change.head,
        "files": [f.as_dict() for f in change.files], "commits": list(change.commits),
        "head_moved": change.head_moved, "complete": change.complete,
        "findings": [{"code": f.code, "path": f.path, "detail": dict(f.detail)}
                     for f in change.findings],
        "patch_bytes": len(patch), "patch_sha256": hashlib.sha256(patch).hexdigest()})
    _sync_folder(folder)


def save_snapshots(where: Place, checks: Mapping[str, list[str]], *, packet: str,
                   attempt: str | None, at: str | None = None) -> None:
    """Save, for a read-only attempt, what reconcile finds in each of the run's read-only
    snapshots it was given (``checks``: path -> what changed there, as
    ``reconcile.checked_snapshot`` says), before ``prun clean`` removes them: a record with no
    patch, merged with what an earlier clean saved. ``OSError`` when it cannot be written."""
    try:
        merged = {**load_snapshots(where.record), **checks}
    except Broken:
        merged = dict(checks)
    folder = os.path.dirname(where.record)
    os.makedirs(folder, exist_ok=True)
    atomic_write_json(where.record, {"format": FORMAT, "packet": packet, "attempt": attempt,
                                     "at": at, "snapshots": merged})
    _sync_folder(folder)


def load_snapshots(record: str) -> dict[str, list[str]]:
    """What ``save_snapshots`` saved with ``record`` ({} when there is no record); ``Broken``
    when it cannot be read as saved."""
    if not os.path.lexists(record):
        return {}
    rec = read_json(record, RECORD_LIMIT)
    checks = rec.get("snapshots") if isinstance(rec, dict) and rec.get("format") == FORMAT \
        else None
    if not isinstance(checks, dict) or not all(
            isinstance(k, str) and isinstance(v, list) and all(isinstance(c, str) for c in v)
            for k, v in checks.items()):
        raise Broken("its record cannot be read")
    return checks


def _sync_folder(folder: str) -> None:
    """The renames into ``folder``, and ``folder`` itself in the run dir, on disk."""
    for path in (folder, os.path.dirname(folder)):
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def load(record: str) -> Change:
    """The change saved with ``record`` (a ``<packet>.<seq>.json``), its patch read from the
    ``.patch`` beside it. ``Broken`` when either is missing, unreadable or not what was
    saved."""
    rec = read_json(record, RECORD_LIMIT)
    if not isinstance(rec, dict) or rec.get("format") != FORMAT:
        raise Broken("its record cannot be read")
    patch_path = record[:-len(".json")] + ".patch" if record.endswith(".json") else None
    size = rec.get("patch_bytes")
    if patch_path is None or not isinstance(size, int) or size < 0:
        raise Broken("its record names no patch")
    try:
        patch = read_bounded(patch_path, size)
    except OSError:
        raise Broken("its patch cannot be read") from None
    if len(patch) != size or hashlib.sha256(patch).hexdigest() != rec.get("patch_sha256"):
        raise Broken("its patch is not the one saved")
    try:
        return Change(
            clone=_str(rec["workspace"]), base=_str(rec["base"]), head=_str(rec["head"]),
            files=tuple(_file(f) for f in _list(rec["files"])),
            commits=tuple(_str(c) for c in _list(rec["commits"])),
            head_moved=_bool(rec["head_moved"]), patch=patch,
            findings=tuple(_finding(f) for f in _list(rec["findings"])),
            complete=_bool(rec["complete"]), saved=record)
    except (KeyError, TypeError, ValueError):
        raise Broken("its record is not one prun wrote") from None


def _str(v: object) -> str:
    if not isinstance(v, str):
        raise TypeError(v)
    return v


def _bool(v: object) -> bool:
    if not isinstance(v, bool):
        raise TypeError(v)
    return v


def _list(v: object) -> list[Any]:
    if not isinstance(v, list):
        raise TypeError(v)
    return v


def _opt(d: Mapping[str, object], key: str, kind: type) -> Any:
    """``d[key]`` when it is of ``kind`` exactly (a bool is no int here), None when absent."""
    v = d.get(key)
    if v is not None and type(v) is not kind:
        raise TypeError(v)
    return v


def _file(d: object) -> FileChange:
    if not isinstance(d, dict):
        raise TypeError(d)
    return FileChange(path=_str(d["path"]), status=_str(d["status"]),
                      old_path=_opt(d, "old_path", str), binary=bool(_opt(d, "binary", bool)),
                      added=_opt(d, "added", int), deleted=_opt(d, "deleted", int),
                      link_target=_opt(d, "link_target", str))


def _finding(d: object) -> Finding:
    if not isinstance(d, dict) or not isinstance(d.get("detail"), dict):
        raise TypeError(d)
    return Finding(_str(d["code"]), _opt(d, "path", str), dict(d["detail"]))


# What prun clean keeps ---------------------------------------------------------------------------

ACCEPTING = ("accept", "include")    # decisions that send a change to integration


def waiting(v: Verdict, decision: str | None,
            integrated: Container[tuple[str, str]]) -> bool:
    """Whether the change of ``v``'s attempt (a code packet's deciding attempt) still waits to
    be integrated, so that its clone is not removed: True unless the person rejected it (a
    ``reject`` decision), ``prun integrate`` applied this very attempt's change into a target
    (``integrated``: (packet, attempt) pairs, ``Journal.integrated``), its verdict is
    rejected with no ``accept`` or ``include`` decision, or its change was read and is empty
    (nothing to integrate). An accepted or needs-review change, an unfinished attempt, and a
    rejected one the person included all wait."""
    if decision == "reject":
        return False
    if v.attempt_id is not None and (v.packet_id, v.attempt_id) in integrated:
        return False
    if v.verdict == REJECTED and decision not in ACCEPTING:
        return False
    return not (v.change is not None and v.change.complete and v.change.empty)


__all__ = ["FOLDER", "Broken", "Place", "load", "load_snapshots", "place", "save",
           "save_snapshots", "waiting"]
