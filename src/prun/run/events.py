"""What a run's supervisor tells the world: one ``Event`` per state change worth showing.

The supervisor emits events; a renderer (``prun.run.render``) prints them and the plan's
``on_event`` hook (``prun.run.hooks``) hears the actionable ones. The ledger keeps the
durable log of every change; events are its readable face.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

# Event kinds a coordinator or a person should act on (the hook runs on these).
ACTIONABLE = frozenset({"handoff", "succeeded", "failed", "timeout", "cancelled", "quarantined", "blocked",
                        "stalled", "parked", "stopped", "run-done"})
# Kinds that mean a unit did not succeed (the terse line printer shows these).
NON_SUCCESS = frozenset({"handoff", "failed", "timeout", "cancelled", "quarantined", "blocked", "stalled",
                         "parked", "stopped", "escaped", "waiting"})


@dataclass
class Event:
    kind: str                       # dispatched, succeeded, failed, ..., run-started, run-done
    run_id: str
    packet_id: str | None = None
    attempt_id: str | None = None
    executor: str | None = None
    model: str | None = None
    cause: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    at: float = field(default_factory=time.time)

    @property
    def actionable(self) -> bool:
        return self.kind in ACTIONABLE

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v not in (None, "", {})}
