"""The machine-wide port registry: one JSON file in the user's state folder
(``$XDG_STATE_HOME/prun/ports.json``, see ``registry_path``), its entries and its lock.

Every read-modify-write holds an exclusive ``flock`` on ``ports.json.lock`` beside the file
and replaces the file atomically, so a reader sees the old registry or the new one, never
half of one. Each entry names its holder (attempt, run, packet) and the process that holds it
(pid and start time: the supervisor or dispatcher that reserved it, not the worker). An entry
whose process no longer runs, or whose pid now belongs to a process with another start time,
is stale and dropped on every access: a crash leaks no port for longer than its holder lived.
A file that is not the registry's JSON is set aside as ``ports.json.corrupt-<time>`` with one
warning, and the registry starts again empty.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from .._util.fsutil import atomic_write
from .._util.process import create_time, same_process_alive
from ..errors import StateError
from ..settings import PORT_LIMIT, load

REGISTRY = "ports.json"
FORMAT = 1                      # the registry file's format
LOCK_WAIT_S = 10.0              # the registry's lock is held for milliseconds; past this, a holder is stuck


@dataclass(frozen=True)
class PortRange:
    """``count`` contiguous ports from ``base``."""

    base: int
    count: int = 1

    @property
    def last(self) -> int:
        return self.base + self.count - 1

    @property
    def ports(self) -> range:
        return range(self.base, self.base + self.count)

    def overlaps(self, other: PortRange) -> bool:
        return self.base <= other.last and other.base <= self.last

    def __str__(self) -> str:
        return str(self.base) if self.count == 1 else f"{self.base}-{self.last}"

    def env(self) -> dict[str, str]:
        """As a unit's own range: ``PRUN_PORT_BASE`` and ``PRUN_PORT_COUNT``."""
        return {"PRUN_PORT_BASE": str(self.base), "PRUN_PORT_COUNT": str(self.count)}


@dataclass(frozen=True)
class Holder:
    """Who holds ports: an attempt (of a packet, in a run) and the process that reserved them
    for it, named by pid and start time (``prun._util.process.create_time``)."""

    attempt_id: str
    run_id: str | None
    packet_id: str | None
    pid: int
    started: float | None

    @classmethod
    def of_process(cls, attempt_id: str, run_id: str | None = None,
                   packet_id: str | None = None, pid: int | None = None) -> Holder:
        """A holder whose ports last as long as process ``pid`` (default: this process)."""
        pid = os.getpid() if pid is None else pid
        started = _this_process()[1] if pid == os.getpid() else create_time(pid)
        if started is None:
            raise ValueError(f"no process {pid} to hold ports")
        return cls(attempt_id, run_id, packet_id, pid, started)


KINDS = ("range", "name", "fixed")   # an entry is a unit's own range, a named port or fixed ports


@dataclass(frozen=True)
class Entry:
    """One line of the registry: ports, what they are to their holder, who holds them, since
    when (seconds since the epoch)."""

    ports: PortRange
    kind: str                   # one of KINDS
    holder: Holder
    taken_at: float
    name: str | None = None     # a named port's name

    @cached_property
    def text(self) -> str:
        """The entry as the registry file holds it: one JSON object (kept once made: a
        registry with hundreds of entries is written at every reservation)."""
        h = self.holder
        return json.dumps({"base": self.ports.base, "count": self.ports.count,
                           "kind": self.kind, "name": self.name, "attempt": h.attempt_id,
                           "run": h.run_id, "packet": h.packet_id, "pid": h.pid,
                           "started": h.started, "taken": self.taken_at}, sort_keys=True)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Entry:
        """Raises ValueError, TypeError or KeyError for anything this module did not write."""
        base, count, pid = (_whole(d[k]) for k in ("base", "count", "pid"))
        if not (base >= 1 and count >= 1 and base + count <= PORT_LIMIT and pid > 0
                and d["kind"] in KINDS):
            raise ValueError(f"not a registry entry: {d!r}")
        started = None if d["started"] is None else float(d["started"])
        holder = Holder(str(d["attempt"]), d["run"], d["packet"], pid, started)
        return cls(PortRange(base, count), d["kind"], holder, float(d["taken"]), d["name"])


def _whole(value: object) -> int:
    if type(value) is not int:
        raise TypeError(f"not a whole number: {value!r}")
    return value


def registry_path(env: Mapping[str, str] | None = None) -> str:
    """The registry file: ``ports.json`` in the user's state folder."""
    return os.path.join(load(env).user_state, REGISTRY)


_THREADS = threading.Lock()


class Registry:
    """The registry's live entries, read under its lock and written back, if they changed,
    before the lock is let go.

    A file that holds the very bytes this process last read or wrote is not parsed again
    (``_seen``): a supervisor, most often the only writer, reads back what it wrote.
    """

    def __init__(self, path: str, alive: tuple[int, float | None] | None = None):
        self.path = path
        self.alive = alive           # a holding process the caller knows to be alive
        self.entries: list[Entry] = []
        self.changed = False
        self._lock = -1

    def __enter__(self) -> Registry:
        lock_path = self.path + ".lock"
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        _THREADS.acquire()   # this process's threads queue here, not on the file lock
        try:
            self._lock = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
            try:
                _flock(self._lock, lock_path)
                found = self._load()
                self.entries = _live(found, self.alive)
                self.changed = self.changed or len(self.entries) != len(found)
            except BaseException:
                os.close(self._lock)
                raise
        except BaseException:
            _THREADS.release()
            raise
        return self

    def replace(self, entries: list[Entry]) -> None:
        self.entries = entries
        self.changed = True

    def __exit__(self, *exc: object) -> None:
        try:
            if self.changed:
                data = (f'{{"entries": [{", ".join(e.text for e in self.entries)}], '
                        f'"format": {FORMAT}}}\n').encode()
                # Not fsynced: the rename is atomic for readers, and after a power cut every
                # holder is gone anyway.
                atomic_write(self.path, data, durable=False)
                _seen[self.path] = (data, self.entries)
        finally:
            os.close(self._lock)   # lets go of the lock
            _THREADS.release()

    def _load(self) -> list[Entry]:
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return []
        seen = _seen.get(self.path)
        if seen and seen[0] == data:
            return list(seen[1])
        try:
            doc = json.loads(data)          # bytes: json reads them as UTF-8
            if doc.get("format") != FORMAT:
                raise ValueError(f"format {doc.get('format')!r}")
            entries = [Entry.from_json(d) for d in doc["entries"]]
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            self._set_aside(type(e).__name__)
            return []
        _seen[self.path] = (data, entries)
        return list(entries)

    def _set_aside(self, why: str) -> None:
        aside = f"{self.path}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
        os.replace(self.path, aside)
        self.changed = True
        print(f"prun: warning: the port registry {self.path} was not readable ({why}); set it "
              f"aside as {aside} and started a new one", file=sys.stderr, flush=True)


_seen: dict[str, tuple[bytes, list[Entry]]] = {}   # registry file -> its bytes and entries


def _flock(fd: int, path: str) -> None:
    """Take the exclusive lock, waiting at most LOCK_WAIT_S."""
    deadline = time.monotonic() + LOCK_WAIT_S
    pause = 0.001
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise StateError(f"the port registry's lock {path} has been held for "
                                 f"{LOCK_WAIT_S:.0f} s",
                                 hint=f"a process holding it is stuck: see `fuser {path}`")
            time.sleep(pause)
            pause = min(pause * 2, 0.02)


def _live(entries: list[Entry], known: tuple[int, float | None] | None = None) -> list[Entry]:
    """The entries whose holding process still runs (each process checked once; this one and
    ``known`` are)."""
    if not entries:
        return entries

    alive: dict[tuple[int, float | None], bool] = {_this_process(): True}
    if known is not None:
        alive[known] = True
    out = []
    for e in entries:
        key = (e.holder.pid, e.holder.started)
        if key not in alive:
            alive[key] = same_process_alive(*key, unproven=True)
        if alive[key]:
            out.append(e)
    return out


def _this_process() -> tuple[int, float | None]:
    """This process's pid and start time, read once (a supervisor holds most entries itself,
    and asking about a process costs more than the rest of a reservation)."""
    global _this
    if _this is None or _this[0] != os.getpid():     # read again in a forked child
        from .._util.process import create_time

        _this = (os.getpid(), create_time(os.getpid()))
    return _this


_this: tuple[int, float | None] | None = None

