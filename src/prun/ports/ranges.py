"""A run's block of its units' own port ranges (``RunRanges``), leased from the registry;
and the blocks a cluster's worker process holds for the runs whose units it runs
(``worker_block``), from which a cluster's unit reserves its ports there (``PortsThere``)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from .probe import in_use
from .registry import Holder, PortRange
from .reserve import PortRequest, Reservation, lease, release, reserve


class RunRanges:
    """A run's units' own ranges: leased from the registry a block at a time, in the run's
    name (``<run>/ranges``, held by its keeper; or ``name``), and handed to its units and
    taken back in memory, so that a unit costs the registry no write unless it names or
    fixes ports.

    A range is handed out least recently used first, and only when a ``bind()`` finds none
    of its ports in use (a server of the unit before may have left one in TIME_WAIT); one in
    use waits its turn again. ``close`` gives the whole block back."""

    def __init__(self, run_id: str, pid: int, started: float | None, size: int,
                 env: Mapping[str, str] | None = None, block: int = 16,
                 name: str | None = None):
        self.holder = Holder(name or f"{run_id}/ranges", run_id, None, pid, started)
        self.size, self.env, self.block = size, env, max(1, block)
        self._free: list[PortRange] = []
        self._leased = 0
        self._lock = threading.Lock()

    def take(self) -> PortRange:
        """The least recently used free range none of whose ports is in use, else one of a
        new block leased from the registry. The lock guards only the list: the ports are
        probed and the registry written without it, so giving a range back (the run loop
        does it) never waits for either."""
        with self._lock:
            tries = len(self._free)
        for _ in range(tries):
            with self._lock:
                if not self._free:
                    break
                r = self._free.pop(0)
            if not any(in_use(p) for p in r.ports):
                return r
            self.give_back(r)          # in use now: it waits its turn again
        got = lease(self.holder, self.block, self.size, self.env)
        with self._lock:
            self._leased += len(got)
            self._free.extend(got[1:])
        return got[0]

    def give_back(self, r: PortRange) -> None:
        with self._lock:
            self._free.append(r)

    def idle(self) -> bool:
        """Whether every range it leased is back."""
        with self._lock:
            return len(self._free) == self._leased

    def close(self) -> None:
        """Give every leased range back to the registry (the run has ended)."""
        with self._lock:
            if self._leased:
                release(self.holder.attempt_id, self.env, self.holder)
            self._free, self._leased = [], 0


WORKER_BLOCK = 4   # ranges a worker process leases at a time for one run
_BLOCKS: dict[tuple[str, int], RunRanges] = {}   # (run, range size) -> this process's block
_BLOCKS_LOCK = threading.Lock()


@contextlib.contextmanager
def worker_block(run_id: str, size: int, env: Mapping[str, str] | None) -> Iterator[RunRanges]:
    """This process's block of ``run_id``'s ranges on this machine (a cluster's worker
    process holds it: its units' own ranges cost the registry no write each), made when a
    unit of the run first asks; while the caller holds it, no other thread takes from or
    gives back to it. Once every range is back, it is given back to the registry."""
    with _BLOCKS_LOCK:
        block = _BLOCKS.get((run_id, size))
        if block is None:
            me = Holder.of_process(f"{run_id}/ranges", run_id)
            block = _BLOCKS[(run_id, size)] = RunRanges(
                run_id, me.pid, me.started, size, env, block=WORKER_BLOCK,
                name=f"{run_id}/ranges/{me.pid}")   # a machine may have several workers
        try:
            yield block
        finally:
            if block.idle():
                block.close()
                del _BLOCKS[(run_id, size)]


@dataclass(frozen=True)
class PortsThere:
    """A unit's ports as its task reserves them on the machine that runs it (a Dask
    worker's), before the unit starts, and gives back when it ends. It travels with the task,
    by reference (prun is installed on the worker). Its own range comes from the worker
    process's block of the run's ranges (``worker_block``: leased from that
    machine's registry a few at a time, handed out in memory); what it names or fixes is
    reserved in that registry for the attempt. The worker process holds them all: if it
    dies, they are free again."""

    request: PortRequest
    run_id: str
    packet_id: str

    def take(self, attempt_id: str, env: Mapping[str, str]) -> Reservation:
        """Reserve here; raises ``PortBusy`` while a fixed port is held by another unit
        here, ``PortsExhausted`` when there is no room (nothing is kept then)."""
        holder = Holder.of_process(attempt_id, self.run_id, self.packet_id)
        with worker_block(self.run_id, self.request.count, env) as block:
            own = block.take()
        if not self.request.fixed and not self.request.names:
            return Reservation(holder, own)
        try:
            return reserve(holder, self.request, env, own=own)
        except BaseException:
            self._give_back_range(own, env)
            raise

    def give_back(self, held: Reservation, env: Mapping[str, str]) -> None:
        if held.fixed or held.named:
            release(held.holder.attempt_id, env, held.holder)
        self._give_back_range(held.range, env)

    def _give_back_range(self, own: PortRange, env: Mapping[str, str]) -> None:
        with worker_block(self.run_id, self.request.count, env) as block:
            block.give_back(own)
