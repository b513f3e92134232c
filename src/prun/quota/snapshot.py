"""The quota snapshot: one JSON file saying, per quota group, what is left and when it resets.

Location: ``$PRUN_QUOTA_SNAPSHOT``, else ``quota.json`` in the user's cache folder for prun.
Schema (version 1; docs/quota.md has the full description)::

    {"version": 1,
     "updated_at": "2026-11-30T16:49:11Z",
     "groups": {
       "agy-gemini": {"left": 0.62, "resets_at": "2026-11-30T21:00:00Z",
                      "read_at": "2026-11-30T16:49:11Z", "source": "probe", "error": null},
       "agy-claude-gpt": {"left": 0.0, "resets_at": "2026-11-30T17:23:11Z",
                          "read_at": "2026-11-30T16:49:11Z", "source": "hit",
                          "error": null, "message": "Individual quota reached ...",
                          "reset_estimated": false}}}

Reading never raises: a missing, empty, truncated or mistyped file becomes a ``Snapshot`` with
``problem`` set (the whole file) or ``bad`` entries (one group each). Writing is a
read-modify-write under an advisory lock beside the file, published by temp file + rename.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

import platformdirs

from .._util.fsutil import atomic_write_json

SCHEMA_VERSION = 1
# A read_at further ahead of this machine's clock than this is not believed.
CLOCK_SKEW_S = 120.0
LOCK_WAIT_S = 5.0


def snapshot_path(env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    given = env.get("PRUN_QUOTA_SNAPSHOT", "").strip()
    if given:
        return os.path.abspath(os.path.expanduser(given))

    return os.path.join(platformdirs.user_cache_dir("prun", appauthor=False), "quota.json")


# times ------------------------------------------------------------------------------------------

def iso(ts: float | None = None) -> str:
    """A UTC ISO 8601 time with a ``Z``, to the second."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if ts is None else ts))


def parse_time(value: str) -> float:
    """Seconds since the epoch of an ISO 8601 time (no zone means UTC); ValueError if bad."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError("not a time string")
    dt = datetime.fromisoformat(value.strip())
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


def normalise_time(value: str | None) -> str | None:
    """Any ISO time -> ``YYYY-MM-DDTHH:MM:SSZ`` (None and unparseable text -> None)."""
    if value is None:
        return None
    try:
        return iso(parse_time(value))
    except (ValueError, OverflowError, OSError):
        return None


# one group --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class GroupState:
    """One quota group as the snapshot reports it. ``left`` is a fraction (0..1) or None."""

    group: str
    left: float | None = None
    resets_at: str | None = None
    read_at: str | None = None
    source: str | None = None       # "probe", "probe:<what it read>", "hit"
    error: str | None = None        # why there is no reading (probe failure, bad entry)
    message: str | None = None      # the backend's quota message, for a hit
    reset_estimated: bool = False   # resets_at was not reported but assumed (a hit)

    @property
    def known(self) -> bool:
        """A reading exists."""
        return self.left is not None

    @property
    def empty(self) -> bool:
        """Known, nothing left, and the reset time (if any) is not yet past."""
        if self.left is None or self.left > 0:
            return False
        if self.resets_at is None:
            return True
        try:
            return parse_time(self.resets_at) > time.time()
        except (ValueError, OverflowError, OSError):
            return True

    def age_s(self, now: float | None = None) -> float | None:
        """Seconds since the reading (None when never read or unparseable)."""
        if not self.read_at:
            return None
        try:
            return (time.time() if now is None else now) - parse_time(self.read_at)
        except (ValueError, OverflowError, OSError):
            return None

    def stale(self, ttl_s: float, now: float | None = None) -> bool:
        age = self.age_s(now)
        return age is None or age > ttl_s or age < -CLOCK_SKEW_S

    @property
    def state(self) -> str:
        return "empty" if self.empty else ("ok" if self.known else "unknown")

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"left": self.left, "resets_at": self.resets_at, "read_at": self.read_at,
               "source": self.source, "error": self.error}
        if self.message is not None:
            out["message"] = self.message
        if self.reset_estimated:
            out["reset_estimated"] = True
        return out


def entry_from_json(group: str, obj: object, now: float | None = None) -> GroupState:
    """Validate one snapshot entry. Raises ValueError saying what is wrong."""
    now = time.time() if now is None else now
    if not isinstance(obj, dict):
        raise ValueError("entry is not an object")
    left = obj.get("left")
    if left is not None:
        if isinstance(left, bool) or not isinstance(left, int | float):
            raise ValueError(f"left is {type(left).__name__}, not a number or null")
        if not math.isfinite(left) or not 0 <= left <= 1:
            raise ValueError(f"left={left} is outside 0..1")
        left = float(left)
    texts: dict[str, str | None] = {}
    for key in ("resets_at", "read_at", "source", "error", "message"):
        value = obj.get(key)
        if value is not None and not isinstance(value, str):
            raise ValueError(f"{key} is {type(value).__name__}, not a string or null")
        texts[key] = value
    for key in ("resets_at", "read_at"):
        text = texts[key]
        if text is not None:
            try:
                parse_time(text)
            except (ValueError, OverflowError, OSError):
                raise ValueError(f"{key}={text!r} is not an ISO 8601 time")
    read_at = texts["read_at"]
    if read_at is not None and parse_time(read_at) > now + CLOCK_SKEW_S:
        raise ValueError(f"read_at={read_at} is in the future")
    estimated = obj.get("reset_estimated", False)
    if not isinstance(estimated, bool):
        raise ValueError("reset_estimated is not true or false")
    return GroupState(group, left, texts["resets_at"], texts["read_at"], texts["source"],
                      texts["error"], texts["message"], estimated)


# the whole file ---------------------------------------------------------------------------------

@dataclass
class Snapshot:
    path: str
    groups: dict[str, GroupState] = field(default_factory=dict)
    updated_at: str | None = None
    problem: str | None = None            # the file as a whole is unreadable (or missing)
    bad: dict[str, str] = field(default_factory=dict)  # group -> what is wrong with its entry

    @property
    def missing(self) -> bool:
        return self.problem == "no snapshot file yet"

    def state(self, group: str) -> GroupState:
        if group in self.groups:
            return self.groups[group]
        if group in self.bad:
            return GroupState(group, error=f"bad snapshot entry: {self.bad[group]}")
        return GroupState(group)

    def to_json(self) -> dict[str, object]:
        return {"version": SCHEMA_VERSION, "updated_at": self.updated_at,
                "groups": {g: s.to_json() for g, s in sorted(self.groups.items())}}


def load(path: str) -> Snapshot:
    """Read the snapshot; never raises (see ``Snapshot.problem`` and ``Snapshot.bad``)."""
    snap = Snapshot(path)
    try:
        with open(path, "rb") as f:
            data = f.read(8 * 1024 * 1024)
    except FileNotFoundError:
        snap.problem = "no snapshot file yet"
        return snap
    except OSError as e:
        snap.problem = f"cannot read it: {e.strerror or e}"
        return snap
    if not data.strip():
        snap.problem = "the file is empty"
        return snap
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        snap.problem = f"not valid JSON (truncated?): {e}"
        return snap
    if not isinstance(obj, dict):
        snap.problem = "not a JSON object"
        return snap
    version = obj.get("version", SCHEMA_VERSION)
    if isinstance(version, bool) or not isinstance(version, int) or version > SCHEMA_VERSION:
        snap.problem = f"unknown schema version {version!r}"
        return snap
    groups = obj.get("groups", {})
    if not isinstance(groups, dict):
        snap.problem = "groups is not an object"
        return snap
    updated = obj.get("updated_at")
    snap.updated_at = updated if isinstance(updated, str) and normalise_time(updated) else None
    now = time.time()
    for group, entry in groups.items():
        try:
            snap.groups[str(group)] = entry_from_json(str(group), entry, now)
        except ValueError as e:
            snap.bad[str(group)] = str(e)
    return snap


def update(path: str, change: Callable[[dict[str, GroupState]], None]) -> Snapshot:
    """Re-read the snapshot under its lock, let ``change`` edit the groups, write it back.

    Unreadable entries are dropped (the file is repaired); the write is atomic.
    """
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with FileLock(path + ".lock", wait_s=LOCK_WAIT_S):
        snap = load(path)
        groups = dict(snap.groups)
        change(groups)
        snap = Snapshot(path, groups, iso())
        atomic_write_json(path, snap.to_json())
    return snap


class FileLock:
    """An advisory ``flock`` on a side file. ``wait_s=0``: try once (see ``acquired``).

    After ``wait_s`` without the lock the body runs anyway: a stuck holder must not stop
    dispatching, and every write is atomic, so the worst case is a lost update.
    """

    def __init__(self, path: str, wait_s: float = LOCK_WAIT_S):
        self.path = path
        self.wait_s = wait_s
        self.fd: int | None = None
        self.acquired = False

    def __enter__(self) -> FileLock:
        try:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            return self
        deadline = time.monotonic() + self.wait_s
        delay = 0.005
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self.acquired = True
                return self
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    return self
                time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
                delay = min(delay * 2, 0.1)
            except OSError:
                return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing releases the flock
            self.fd = None
