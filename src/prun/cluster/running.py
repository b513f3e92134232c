"""The units a Dask worker process runs now, and the functions the coordinator calls on that
worker through the scheduler (``Client.run``): ``signal_unit`` (a signal from a live
supervisor: a cancel, a deadline), ``stop_unit`` (a ``prun pause`` or ``prun cancel`` that
found the supervisor gone: SIGTERM, the grace, SIGKILL, confirmed, with what the unit left)
and ``landed_tail`` (how much of an ended unit's tail the supervisor has written: the task
sends the rest of it no faster than that).

Dask's own cancel does not stop a running task, and a task whose client went away (its
supervisor died) still runs to its end on its worker: these reach it there.
"""

from __future__ import annotations

import asyncio
import signal as signals
import threading
from typing import Any

RETURN_S = 60.0   # for a stopped unit's task to make what it returns (its diff)


class Running:
    """One unit of this worker process: its process (once launched), the signal asked for,
    and, once the task has them, its end and what it returns."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.worker: Any = None       # the process helper's Worker, once launched
        self.signalled: int | None = None
        self.reaped = False
        self.stopping = threading.Event()   # a signal was asked for
        self.ended = threading.Event()      # its group is gone (or it never launched)
        self.returned = threading.Event()   # ``out`` is complete
        self.out: dict[str, Any] = {}
        self.landed = 0                     # the tail's bytes the supervisor has written
        self.landing = threading.Condition(self.lock)   # ... and it said so

    def wait_landed(self, offset: int, timeout: float) -> bool:
        """Until the supervisor has written the tail up to ``offset``; False past ``timeout``."""
        with self.landing:
            return self.landing.wait_for(lambda: self.landed >= offset, timeout)

    def send(self, sig: int) -> None:
        """Signal its group (a unit not launched yet is signalled as it launches)."""
        with self.lock:
            self.signalled = sig
            self.stopping.set()
            if self.worker is not None and not self.reaped:
                self.worker.signal(sig)


RUNNING: dict[str, Running] = {}
LOCK = threading.Lock()


def find(attempt_id: str) -> Running | None:
    with LOCK:
        return RUNNING.get(attempt_id)


async def signal_unit(attempt_id: str, sig: int) -> bool:
    """Signal the process group of the unit running ``attempt_id`` here (in the worker's event
    loop: it only sends the signal). True if it runs here."""
    entry = find(attempt_id)
    if entry is None:
        return False
    entry.send(sig)
    return True


async def landed_tail(attempt_id: str, offset: int) -> bool:
    """The supervisor has written the tail of ``attempt_id`` up to ``offset`` (in the
    worker's event loop). True if it runs here."""
    entry = find(attempt_id)
    if entry is None:
        return False
    with entry.landing:
        entry.landed = max(entry.landed, offset)
        entry.landing.notify_all()
    return True


async def stop_unit(attempt_id: str, grace: float) -> dict[str, Any]:
    """End the unit of ``attempt_id`` here: SIGTERM to its group, ``grace`` seconds for it to
    end, then SIGKILL (and ``grace`` again); then wait for its task to make what it returns.
    Returns whether it ran here, whether its end and an empty group were confirmed, and the
    task's payload (its diff, tail, result)."""
    entry = find(attempt_id)
    if entry is None:
        return {"found": False}
    loop = asyncio.get_running_loop()
    for sig in (signals.SIGTERM, signals.SIGKILL):
        entry.send(sig)
        if await loop.run_in_executor(None, entry.ended.wait, grace):
            break
    await loop.run_in_executor(None, entry.returned.wait, RETURN_S)
    out = dict(entry.out) if entry.returned.is_set() else {}
    return {"found": True, "ended": entry.ended.is_set(),
            "group_gone": bool(out.get("group_gone", entry.ended.is_set())), "payload": out}
