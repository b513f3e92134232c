"""How one unit's task ended, as data: what its attempt came to and what follows it.

A unit's task (``prun.run.life``) records its attempt in the ledger and returns one of these;
the run loop (``prun.run.loop``, ``apply_end``) applies it to the run's state: the packet's
status, the events to tell, whether the run stops launching. The task changes nothing of the
run itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import StateError
from ..ledger import PacketStatus


@dataclass(frozen=True)
class Settled:
    """The attempt was judged and the packet is finished (``status``: succeeded, failed,
    timeout, cancelled). An automatic follow-up (``followup``: its request, ``followup:
    auto``), else one asked for while it ran, starts next."""

    status: PacketStatus
    cause: str
    data: dict[str, Any] = field(default_factory=dict)   # what the event carries
    followup: str | None = None


@dataclass(frozen=True)
class Parked:
    """Its quota pool is empty: it waits until ``until`` (None: reset unknown). ``group``: the
    pool a quota error of its attempt named, which no other unit of the run starts on until
    then."""

    until: float | None
    cause: str
    group: str | None = None


@dataclass(frozen=True)
class Successor:
    """A linked next attempt is due (after a reassignment, a refused resume or a lost
    worker): the packet is pending again, its unit carries the earlier attempt on."""

    cause: str


@dataclass(frozen=True)
class Superseded:
    """Reassigned while it ran: its attempt (``attempt_id``) was ended and what it produced
    quarantined (at ``quarantine``); the successor is due, the packet pending again."""

    attempt_id: str
    quarantine: str | None


@dataclass(frozen=True)
class NotDispatched:
    """No worker started (no receipt): the packet stays pending and the run stops
    launching."""

    action: str
    need: str


@dataclass(frozen=True)
class Blocked:
    """A packet it comes after was rejected: it never starts."""

    cause: str


@dataclass(frozen=True)
class WaitingForPorts:
    """A fixed port it needs is held elsewhere: it stays queued and looks again soon."""

    note: str


@dataclass(frozen=True)
class Failed:
    """A bug while driving it: the packet fails (the traceback went to stderr)."""

    cause: str


@dataclass(frozen=True)
class LedgerUnwritable:
    """The ledger could not record its attempt (a full disk): the run ends with this error;
    ``prun resume`` records what the state dirs kept once it can."""

    error: StateError


End = (Settled | Parked | Successor | Superseded | NotDispatched | Blocked | WaitingForPorts | Failed
       | LedgerUnwritable)
