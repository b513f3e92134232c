"""Admission by the machine's room: a run's unit starts only while the machine's available
memory is above ``--memfree`` (and above the unit's own ``resources.memory``) and its load is
under ``--load``; ``--parallel auto`` (``parallel: auto``) sets the parallelism to the cores and
both from the machine. When none of the run's units is running one may always start, so a busy
machine slows a run but never stalls it. A unit held back waits (never fails): its packet's
note is ``waiting reason=memfree`` (or ``load``), which ``prun status`` and the live view show.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import psutil

from .._util.sizes import format_size, parse_size
from ..errors import UsageError

RETRY_S = 1.0               # a held unit looks at the machine again this often
HELD = "waiting reason="    # the start of a held unit's note
REASONS = ("memfree", "load")
AUTO_MEMFREE_SHARE = 0.10   # parallel: auto keeps a tenth of the machine's memory free
_LOAD = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(%?)\s*")


@dataclass(frozen=True)
class Admission:
    """What a run's units need of the machine to start: ``memfree`` bytes available, the
    one-minute load under ``load`` (None: not looked at)."""

    memfree: int | None = None
    load: float | None = None

    def __bool__(self) -> bool:
        return self.memfree is not None or self.load is not None

    def as_json(self) -> dict[str, Any]:
        return {"memfree": self.memfree, "load": self.load}

    @classmethod
    def of(cls, data: Mapping[str, Any] | None) -> Admission:
        data = data or {}
        return cls(data.get("memfree"), data.get("load"))

    def look(self) -> Machine:
        """The machine as the run's admission sees it now (read once per launch pass: a
        pass may ask about a thousand waiting units)."""
        return Machine(psutil.virtual_memory().available if self.memfree is not None else None,
                       os.getloadavg()[0] if self.load is not None else None)

    def held(self, unit_memory: int | None, machine: Machine) -> str | None:
        """Why a unit (its ``resources.memory``) may not start on ``machine``: a note
        starting with ``HELD`` and the reason word, or None when the machine has room."""
        if self.memfree is not None and machine.available is not None:
            need = max(self.memfree, unit_memory or 0)
            if machine.available <= need:
                return (f"{HELD}memfree available={format_size(machine.available)} "
                        f"needs={format_size(need)}")
        if self.load is not None and machine.load is not None and machine.load >= self.load:
            return f"{HELD}load load={machine.load:.2f} limit={self.load:g}"
        return None


@dataclass(frozen=True)
class Machine:
    """What the machine has now: ``available`` memory in bytes and the one-minute ``load``
    (None: not looked at)."""

    available: int | None
    load: float | None


def parse_load(text: str, *, what: str = "--load") -> float:
    """A load limit: a number, or a percentage of the cores (``80%``)."""
    m = _LOAD.fullmatch(text)
    if m is None or float(m.group(1)) <= 0:
        raise UsageError(f"{what} {text!r} is not a load",
                         hint="give a number above 0 (2.5) or a percentage of the cores (80%)")
    value = float(m.group(1))
    return value * cores() / 100 if m.group(2) else value


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def admission(memfree: str | None, load: str | None, auto: bool) -> Admission:
    """The run's admission from ``--memfree`` and ``--load`` (each as written); ``auto``
    (``--parallel auto``) fills what was not given from the machine: a tenth of its memory
    free, a load under its cores."""
    free = parse_size(memfree, what="--memfree") if memfree is not None else None
    limit = parse_load(load) if load is not None else None
    if auto:
        free = free if free is not None \
            else int(psutil.virtual_memory().total * AUTO_MEMFREE_SHARE)
        limit = limit if limit is not None else float(cores())
    return Admission(free, limit)


def held_reason(note: str | None) -> str | None:
    """``memfree`` or ``load`` when a packet's note says it is held for the machine's room."""
    if not note or not note.startswith(HELD):
        return None
    word = note[len(HELD):].split(" ", 1)[0]
    return word if word in REASONS else None
