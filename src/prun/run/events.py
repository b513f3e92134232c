"""What a run's supervisor tells the world: one ``Event`` per state change worth showing.

The supervisor emits events; ``LineRenderer`` prints them (one terse line each) and the plan's
``on_event`` hook (``prun.run.event_hooks``) hears the actionable ones. The ledger keeps the
durable log of every change; events are its readable face.
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any, TextIO

from .._util.quoting import quote, word

# Event kinds a coordinator or a person should act on (the hook runs on these).
ACTIONABLE = frozenset({"handoff", "succeeded", "failed", "timeout", "cancelled", "quarantined", "blocked",
                        "stalled", "parked", "stopped", "run-done", "accept-failed"})
# Kinds that mean a unit did not succeed (the terse line printer shows these).
NON_SUCCESS = frozenset({"handoff", "failed", "timeout", "cancelled", "quarantined", "blocked", "stalled",
                         "parked", "stopped", "escaped", "waiting", "accept-failed", "unverified"})


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


def event_line(ev: Event) -> str:
    words = ["UNIT", quote(ev.packet_id or "-"), ev.kind]
    if ev.kind == "parked" and ev.data.get("reason"):
        words.append(word("reason", ev.data["reason"]))
    if ev.attempt_id:
        words.append(word("attempt", ev.attempt_id))
    if ev.executor:
        words.append(word("executor", ev.executor))
    if ev.cause and ev.kind not in ("succeeded", "dispatched"):
        words.append(word("cause", ev.cause.splitlines()[0][:200]))
    for key in ("resets_at", "quarantine", "handoff", "receipt_cmd", "accept"):
        if ev.data.get(key):
            words.append(word(key, ev.data[key]))
    if ev.kind != "succeeded" and ev.data.get("result_file"):
        words.append(word("result", ev.data["result_file"]))
    return " ".join(words)


class LineRenderer:
    """Prints one line per event worth reporting."""

    def __init__(self, out: TextIO = sys.stdout, verbose: bool = False):
        self.out = out
        self.verbose = verbose

    def handle(self, ev: Event) -> None:
        if ev.kind in ("run-started", "run-done"):
            if self.verbose:
                self._print(f"{ev.kind.upper()} {quote(ev.run_id)} {word('cause', ev.cause)}")
            return
        if ev.kind == "stopped":
            self._print(" ".join(["STOPPED", word("packet", ev.packet_id),
                                  word("action", ev.data.get("action", "")),
                                  word("need", ev.cause)]))
            return
        if self.verbose or ev.kind in NON_SUCCESS:
            self._print(event_line(ev))

    def _print(self, line: str) -> None:
        self.out.write(line + "\n")
        self.out.flush()

    def close(self) -> None:
        pass
