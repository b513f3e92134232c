"""The run's state: its units, the scheduler's place in them, why it stopped launching, and
what it has yet to tell (packet statuses for the ledger, events for the renderer and hooks).

A plain data class that only the run loop changes (``prun.run.loop``); a unit's task reads it
(its deadline, the units it comes after) and returns what happened to it as an end
(``prun.run.ends``), which the loop applies here. Nothing in it writes anywhere: the loop
writes what it has to tell (``take_told``) after each of its steps.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..ledger import PacketStatus, RunStatus
from .admission import Admission
from .events import Event
from .unit import UnitState


@dataclass(frozen=True)
class PacketChange:
    """A packet's new status, for the ledger."""

    packet_id: str
    status: PacketStatus
    cause: str
    data: dict[str, Any] | None = None


Told = PacketChange | Event


@dataclass
class RunState:
    """One run as its loop drives it."""

    run_id: str
    units: dict[str, UnitState]          # the frozen packets, each as a unit, in plan order
    parallel: int
    deadline: float | None               # epoch seconds
    admission: Admission = field(default_factory=Admission)   # what a unit needs of the machine
    cursor: int = 0                      # every unit before it is finished
    parked: set[str] = field(default_factory=set)
    stopped: str | None = None           # why the run stopped launching (no receipt)
    budget_reached: str | None = None    # why the budget let no more units start
    pools_hit: dict[str, float] = field(default_factory=dict)  # quota group -> its reset
    cancelled: bool = False
    timed_out: bool = False
    told: list[Told] = field(default_factory=list)   # to be written and emitted, in order
    order: list[UnitState] = field(init=False)        # the units, in plan order

    def __post_init__(self) -> None:
        self.order = list(self.units.values())

    def set_packet(self, u: UnitState, status: PacketStatus, cause: str, **data: Any) -> None:
        """Change a packet's status (the ledger is told at the end of the step)."""
        if status in (PacketStatus.PENDING, PacketStatus.PARKED):
            self.cursor = 0  # it is open again: scan from the start
        if status == PacketStatus.PARKED:
            self.parked.add(u.packet.id)
        else:
            self.parked.discard(u.packet.id)
        u.status = status
        self.told.append(PacketChange(u.packet.id, status, cause, data or None))

    def emit(self, kind: str, u: UnitState | None = None, cause: str = "",
             **data: Any) -> None:
        """An event to tell at the end of the step."""
        self.told.append(event(self.run_id, kind, u, cause, **data))

    def take_told(self) -> list[Told]:
        told, self.told = self.told, []
        return told

    def settled(self, running: int) -> bool:
        """Whether the run is over: no unit's task runs (``running``) and every unit is
        finished, or pending (or parked) behind a stop, a cancel, the deadline or the budget."""
        if running:
            return False
        for u in self.units.values():
            if u.status.terminal:
                continue
            if u.status == PacketStatus.RUNNING:
                return False
            if not (self.stopped or self.cancelled or self.timed_out or self.budget_reached):
                return False
        return True

    def final_status(self) -> RunStatus:
        if self.cancelled:
            return RunStatus.CANCELLED
        if self.timed_out:
            return RunStatus.TIMEOUT
        if self.stopped or self.budget_reached:
            return RunStatus.STOPPED
        if all(u.status == PacketStatus.SUCCEEDED for u in self.units.values()):
            return RunStatus.SUCCEEDED
        return RunStatus.FAILED

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for u in self.units.values():
            counts[u.status.value] = counts.get(u.status.value, 0) + 1
        return counts


def event(run_id: str, kind: str, u: UnitState | None = None, cause: str = "",
          **data: Any) -> Event:
    """An event of the run, about ``u`` when given (its attempt and executor)."""
    return Event(kind, run_id, packet_id=u.packet.id if u else None,
                 attempt_id=u.attempt_id if u else None,
                 executor=u.executor if u else None, cause=cause,
                 data={k: v for k, v in data.items() if v is not None})
