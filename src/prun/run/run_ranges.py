"""A run's block of its units' own port ranges (``RunRanges``), leased from the registry."""

from __future__ import annotations

import threading
from collections.abc import Mapping

from .port_probe import in_use
from .port_registry import Holder, PortRange
from .ports import lease, release


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

    def at_hand(self) -> bool:
        """Whether a range is free in memory (``take`` may still lease when all are in use)."""
        with self._lock:
            return bool(self._free)

    def give_back(self, r: PortRange) -> None:
        with self._lock:
            self._free.append(r)

    def close(self) -> None:
        """Give every leased range back to the registry (the run has ended)."""
        with self._lock:
            if self._leased:
                release(self.holder.attempt_id, self.env, self.holder)
            self._free, self._leased = [], 0

