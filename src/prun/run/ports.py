"""Ports: one registry for the whole machine, so units of concurrent runs never share a port.

A unit gets ports in three ways, all recorded in one JSON file in the user's state folder
(``$XDG_STATE_HOME/prun/ports.json``, see ``registry_path``):

* its own range: ``PRUN_PORT_COUNT`` (default 10) contiguous ports, exported as
  ``PRUN_PORT_BASE`` and ``PRUN_PORT_COUNT``;
* ``port:NAME`` in its packet's ``state``: one port of its own, exported as
  ``PRUN_PORT_<NAME>`` (upper-cased, ``-`` as ``_``);
* ``port:8000`` or ``port:8000-8010`` in its packet's ``state``: fixed ports, taken as written
  or not at all. If another live holder (any run on the machine) has one of them, ``reserve``
  raises ``PortBusy`` naming it and takes nothing.

Assigned ports come from ``PRUN_PORT_START`` (default 20000) up to 65535, lowest first. They
skip every port the registry holds (fixed ones included) and every port a ``bind()`` on
127.0.0.1 finds in use right now. Fixed ports are not probed: the packet says it needs them.

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
import os
import re
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property

from .._util.fsutil import atomic_write
from ..errors import PortBusy, PortsExhausted, PortsUnavailable, StateError, UsageError
from ..settings import PORT_COUNT_DEFAULT, PORT_LIMIT, load

REGISTRY = "ports.json"
FORMAT = 1                      # the registry file's format
LOCK_WAIT_S = 10.0              # the registry's lock is held for milliseconds; past this, a holder is stuck
PORT_KINDS = frozenset({"port", "ports"})   # ``ports:`` is read as ``port:``, as ``prun check`` does

_NUMBERS = re.compile(r"^(\d+)(?:-(\d+))?$")
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")
_SETTINGS = frozenset({"PRUN_PORT_BASE", "PRUN_PORT_COUNT", "PRUN_PORT_START"})
_FIX = "write port:8000, port:8000-8010, or port:NAME (a letter, then letters, digits, '_', '-')"


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


# Settings and requests ----------------------------------------------------------------------


@dataclass(frozen=True)
class PortRequest:
    """The ports one unit asks for: fixed ranges as written, names to assign one port each, and
    the size of its own range."""

    fixed: tuple[PortRange, ...] = ()
    names: tuple[str, ...] = ()
    count: int = PORT_COUNT_DEFAULT


def env_name(name: str) -> str:
    """The variable a ``port:NAME`` is exported as: ``PRUN_PORT_<NAME>``."""
    return "PRUN_PORT_" + name.upper().replace("-", "_")


def port_request(state: Iterable[str], env: Mapping[str, str] | None = None, *,
                 where: str | None = None) -> PortRequest:
    """The port request of a packet's ``state`` entries (other kinds, ``db:orders``, are not
    ports and are left out) and the unit's range size (``PRUN_PORT_COUNT``). A malformed port
    entry raises UsageError naming it (after ``where``, e.g. the packet's ``file:line``)."""
    fixed: list[PortRange] = []
    names: dict[str, str] = {}      # variable -> name
    for text in state:
        kind, _, value = text.partition(":")
        if kind.strip().lower() not in PORT_KINDS:
            continue
        value = value.strip()
        numbers = _NUMBERS.match(value)
        if numbers:
            fixed.append(_fixed(text, int(numbers[1]), int(numbers[2] or numbers[1]), where))
        elif _NAME.match(value):
            if env_name(value) in _SETTINGS:
                _refuse(text, f"would be exported as {env_name(value)}, a variable of prun's "
                        "own", "give the port another name", where)
            other = names.setdefault(env_name(value), value)
            if other != value:
                _refuse(text, f"gives the same variable {env_name(value)} as port:{other}",
                        "give each named port a name of its own", where)
        elif value:
            _refuse(text, "is neither a port, a range nor a name", _FIX, where)
        else:
            _refuse(text, "names no port", _FIX, where)
    return PortRequest(tuple(fixed), tuple(names.values()), load(env).port_count)


def _fixed(text: str, low: int, high: int, where: str | None) -> PortRange:
    if not 1 <= low <= PORT_LIMIT - 1 or not 1 <= high <= PORT_LIMIT - 1:
        _refuse(text, f"is out of range (ports go from 1 to {PORT_LIMIT - 1})",
                "give a port from 1 to 65535, or port:NAME for one prun assigns", where)
    if high < low:
        _refuse(text, "runs backwards", f"write the lower port first: port:{high}-{low}", where)
    return PortRange(low, high - low + 1)


def _refuse(text: str, why: str, hint: str, where: str | None) -> None:
    prefix = f"{where}: " if where else ""
    raise UsageError(f"{prefix}state entry {text!r} {why}", hint=hint)


# Holders, entries, reservations -------------------------------------------------------------

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
        from .._util.process import create_time

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
        import json

        h = self.holder
        return json.dumps({"base": self.ports.base, "count": self.ports.count,
                           "kind": self.kind, "name": self.name, "attempt": h.attempt_id,
                           "run": h.run_id, "packet": h.packet_id, "pid": h.pid,
                           "started": h.started, "taken": self.taken_at}, sort_keys=True)

    @classmethod
    def from_json(cls, d: dict) -> Entry:
        """Raises ValueError, TypeError or KeyError for anything this module did not write."""
        base, count, pid = (_whole(d[k]) for k in ("base", "count", "pid"))
        if not (base >= 1 and count >= 1 and base + count <= PORT_LIMIT and pid > 0
                and d["kind"] in KINDS):
            raise ValueError(f"not a registry entry: {d!r}")
        started = None if d["started"] is None else float(d["started"])
        holder = Holder(str(d["attempt"]), d["run"], d["packet"], pid, started)
        return cls(PortRange(base, count), d["kind"], holder, float(d["taken"]), d["name"])


def _whole(value) -> int:
    if type(value) is not int:
        raise TypeError(f"not a whole number: {value!r}")
    return value


@dataclass(frozen=True)
class Reservation:
    """What ``reserve`` gave one attempt: its own range, its fixed ports, its named ports."""

    holder: Holder
    range: PortRange
    fixed: tuple[PortRange, ...] = ()
    named: Mapping[str, int] = field(default_factory=dict, hash=False)   # name -> port

    @property
    def ports(self) -> tuple[int, ...]:
        """Every port it holds, in order."""
        held = {*self.range.ports, *self.named.values()}
        for r in self.fixed:
            held.update(r.ports)
        return tuple(sorted(held))

    def env(self) -> dict[str, str]:
        """The variables the unit gets: ``PRUN_PORT_BASE``, ``PRUN_PORT_COUNT`` and one
        ``PRUN_PORT_<NAME>`` per named port."""
        return {**self.range.env(), **{env_name(n): str(p) for n, p in self.named.items()}}


# The registry -------------------------------------------------------------------------------

def registry_path(env: Mapping[str, str] | None = None) -> str:
    """The registry file: ``ports.json`` in the user's state folder."""
    return os.path.join(load(env).user_state, REGISTRY)


def reserve(holder: Holder, request: PortRequest, env: Mapping[str, str] | None = None,
            own: PortRange | None = None) -> Reservation:
    """Take the ports ``request`` asks for, for ``holder``: all of them, or none.

    Fixed ports held by another live attempt raise ``PortBusy``; no room left in the span
    raises ``PortsExhausted``. Reserving again for the same attempt replaces what it held.
    ``own``: the attempt's own range, taken already (a run's ``RunRanges``); only its named
    and fixed ports are then taken here.
    """
    start = load(env).port_start
    with _Registry(registry_path(env), alive=(holder.pid, holder.started)) as registry:
        others = [e for e in registry.entries if e.holder.attempt_id != holder.attempt_id]
        for wanted in request.fixed:
            for e in others:
                if e.ports.overlaps(wanted):
                    raise PortBusy(max(wanted.base, e.ports.base), wanted, e.holder)
        taken = [e.ports for e in others] + list(request.fixed)
        free = _FreePorts(start, taken + ([own] if own else []))
        now = time.time()
        mine = []
        if own is None:
            own = free.take(request.count)
            mine.append(Entry(own, "range", holder, now))
        named = {name: free.take(1).base for name in request.names}
        registry.replace([
            *others, *mine,
            *(Entry(PortRange(p), "name", holder, now, n) for n, p in named.items()),
            *(Entry(r, "fixed", holder, now) for r in request.fixed)])
    return Reservation(holder, own, request.fixed, named)


def lease(holder: Holder, count: int, size: int,
          env: Mapping[str, str] | None = None) -> list[PortRange]:
    """``count`` more ranges of ``size`` ports for ``holder``, kept beside what it holds
    already, in one write of the registry: a run's block of own ranges (``RunRanges``)."""
    start = load(env).port_start
    with _Registry(registry_path(env), alive=(holder.pid, holder.started)) as registry:
        free = _FreePorts(start, [e.ports for e in registry.entries])
        got = [free.take(size) for _ in range(count)]
        now = time.time()
        registry.replace([*registry.entries, *(Entry(r, "range", holder, now) for r in got)])
    return got


class RunRanges:
    """A run's units' own ranges: leased from the registry a block at a time, in the run's
    name (``<run>/ranges``, held by its keeper), and handed to its units and taken back in
    memory, so that a unit costs the registry no write unless it names or fixes ports.

    A range is handed out least recently used first, and only when a ``bind()`` finds none
    of its ports in use (a server of the unit before may have left one in TIME_WAIT); one in
    use waits its turn again. ``close`` gives the whole block back."""

    def __init__(self, run_id: str, pid: int, started: float | None, size: int,
                 env: Mapping[str, str] | None = None, block: int = 16):
        self.holder = Holder(f"{run_id}/ranges", run_id, None, pid, started)
        self.size, self.env, self.block = size, env, max(1, block)
        self._free: list[PortRange] = []
        self._leased = 0
        self._lock = threading.Lock()

    def take(self) -> PortRange:
        with self._lock:
            for _ in range(len(self._free)):
                r = self._free.pop(0)
                if not any(in_use(p) for p in r.ports):
                    return r
                self._free.append(r)
            got = lease(self.holder, self.block, self.size, self.env)
            self._leased += len(got)
            self._free.extend(got[1:])
            return got[0]

    def give_back(self, r: PortRange) -> None:
        with self._lock:
            self._free.append(r)

    def close(self) -> None:
        """Give every leased range back to the registry (the run has ended)."""
        with self._lock:
            if self._leased:
                release(self.holder.attempt_id, self.env, self.holder)
            self._free, self._leased = [], 0


def release(attempt_id: str, env: Mapping[str, str] | None = None,
            holder: Holder | None = None) -> list[Entry]:
    """Drop every entry of ``attempt_id``; returns them (none when it held nothing).
    ``holder``: the process that holds them, known to be alive (not asked about again)."""
    alive = (holder.pid, holder.started) if holder else None
    with _Registry(registry_path(env), alive=alive) as registry:
        gone = [e for e in registry.entries if e.holder.attempt_id == attempt_id]
        if gone:
            registry.replace([e for e in registry.entries if e.holder.attempt_id != attempt_id])
    return gone


def held(env: Mapping[str, str] | None = None) -> list[Entry]:
    """The live entries, lowest port first."""
    with _Registry(registry_path(env)) as registry:
        return sorted(registry.entries, key=lambda e: (e.ports.base, e.holder.attempt_id))


_THREADS = threading.Lock()


class _Registry:
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

    def __enter__(self) -> _Registry:
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

    def __exit__(self, *exc) -> None:
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
        import json

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
    from .._util.process import same_process_alive

    alive: dict[tuple[int, float | None], bool] = {_this_process(): True}
    if known is not None:
        alive[known] = True
    out = []
    for e in entries:
        key = (e.holder.pid, e.holder.started)
        if key not in alive:
            alive[key] = same_process_alive(*key)
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


class _FreePorts:
    """Ports to assign from ``start`` up: not taken (held in the registry or already given
    out by this reservation) and not in use right now."""

    def __init__(self, start: int, taken: Iterable[PortRange]):
        self.start = start
        self.taken = _merged([(r.base, r.last) for r in taken])
        self._in_use: dict[int, bool] = {}

    def take(self, count: int) -> PortRange:
        """The lowest free run of ``count`` ports, from then on taken."""
        taken = self.taken
        base, i = self.start, 0
        while base + count <= PORT_LIMIT:
            while i < len(taken) and taken[i][1] < base:
                i += 1
            if i < len(taken) and taken[i][0] < base + count:
                base = taken[i][1] + 1
                continue
            busy = next((p for p in range(base, base + count) if self._bound(p)), None)
            if busy is None:
                self.taken = _merged([*taken, (base, base + count - 1)])
                return PortRange(base, count)
            base = busy + 1
        raise PortsExhausted(count, self.start)

    def _bound(self, port: int) -> bool:
        if port not in self._in_use:
            self._in_use[port] = in_use(port)
        return self._in_use[port]


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Inclusive ``(low, high)`` spans as disjoint spans, lowest first."""
    out: list[tuple[int, int]] = []
    for low, high in sorted(spans):
        if out and low <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], high))
        else:
            out.append((low, high))
    return out


def in_use(port: int) -> bool:
    """True when a ``bind()`` of ``port`` on 127.0.0.1 fails right now (someone listens there,
    or it is still in TIME_WAIT)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


__all__ = ["Entry", "Holder", "PortBusy", "PortRange", "PortRequest",
           "PortsExhausted", "PortsUnavailable", "Reservation", "env_name", "held", "in_use",
           "port_request", "registry_path", "release", "reserve"]
