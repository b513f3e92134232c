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

The registry file and its lock are ``port_registry``; finding free ports (the registry's gaps,
probed with ``bind()``) is ``port_probe``; a run's block of own ranges is ``run_ranges``.

A unit of a cluster run gets its ports on the machine that runs it: ``PortsThere`` travels
with its task, which reserves them in that machine's registry before the unit starts (held
by the Dask worker process) and gives them back when it ends.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..errors import PortBusy, PortsExhausted, PortsUnavailable, UsageError
from ..settings import PORT_COUNT_DEFAULT, PORT_LIMIT, load
from .probe import FreePorts, in_use
from .registry import Entry, Holder, PortRange, Registry, registry_path

PORT_KINDS = frozenset({"port", "ports"})   # ``ports:`` is read as ``port:``, as ``prun check`` does

_NUMBERS = re.compile(r"^(\d+)(?:-(\d+))?$")
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")
_SETTINGS = frozenset({"PRUN_PORT_BASE", "PRUN_PORT_COUNT", "PRUN_PORT_START"})
_FIX = "write port:8000, port:8000-8010, or port:NAME (a letter, then letters, digits, '_', '-')"


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


# Reserving and releasing ---------------------------------------------------------------------

def reserve(holder: Holder, request: PortRequest, env: Mapping[str, str] | None = None,
            own: PortRange | None = None) -> Reservation:
    """Take the ports ``request`` asks for, for ``holder``: all of them, or none.

    Fixed ports held by another live attempt raise ``PortBusy``; no room left in the span
    raises ``PortsExhausted``. Reserving again for the same attempt replaces what it held.
    ``own``: the attempt's own range, taken already (a run's ``RunRanges``); only its named
    and fixed ports are then taken here.
    """
    start = load(env).port_start
    with Registry(registry_path(env), alive=(holder.pid, holder.started)) as registry:
        others = [e for e in registry.entries if e.holder.attempt_id != holder.attempt_id]
        for wanted in request.fixed:
            for e in others:
                if e.ports.overlaps(wanted):
                    raise PortBusy(max(wanted.base, e.ports.base), (wanted.base, wanted.count),
                                   attempt_id=e.holder.attempt_id, run_id=e.holder.run_id,
                                   packet_id=e.holder.packet_id)
        taken = [e.ports for e in others] + list(request.fixed)
        free = FreePorts(start, taken + ([own] if own else []))
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
    with Registry(registry_path(env), alive=(holder.pid, holder.started)) as registry:
        free = FreePorts(start, [e.ports for e in registry.entries])
        got = [free.take(size) for _ in range(count)]
        now = time.time()
        registry.replace([*registry.entries, *(Entry(r, "range", holder, now) for r in got)])
    return got


def release(attempt_id: str, env: Mapping[str, str] | None = None,
            holder: Holder | None = None) -> list[Entry]:
    """Drop every entry of ``attempt_id``; returns them (none when it held nothing).
    ``holder``: the process that holds them, known to be alive (not asked about again)."""
    alive = (holder.pid, holder.started) if holder else None
    with Registry(registry_path(env), alive=alive) as registry:
        gone = [e for e in registry.entries if e.holder.attempt_id == attempt_id]
        if gone:
            registry.replace([e for e in registry.entries if e.holder.attempt_id != attempt_id])
    return gone


def held(env: Mapping[str, str] | None = None) -> list[Entry]:
    """The live entries, lowest port first."""
    with Registry(registry_path(env)) as registry:
        return sorted(registry.entries, key=lambda e: (e.ports.base, e.holder.attempt_id))


__all__ = ["Entry", "Holder", "PortBusy", "PortRange", "PortRequest", "PortsExhausted",
           "PortsUnavailable", "Reservation", "env_name", "held", "in_use",
           "port_request", "registry_path", "release", "reserve"]
