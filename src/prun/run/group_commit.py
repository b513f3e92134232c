"""The run's group commit: the ledger writes the supervisor queues are applied together every
``FLUSH_S``, and the files of the units settled since the last commit reach the disk first (one
``syncfs``, not an fsync a file). A launching attempt's own rows go ahead of that queue
(``Ledger.ahead``) and are committed at once, before its worker starts: a launch waits for no
sync of the units settled before it, and the ledger's log stays causal, since what a launch
implies of other units (its packet running, in the place of one that ended) is written
behind their ends, in the queue."""

from __future__ import annotations

import asyncio
import sys

from .._util.fsutil import sync_fs

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..ledger import Ledger

FLUSH_S = 0.05  # the ledger lags the supervisor by at most this (a crash loses no worker:
                # resume finds every launched attempt through its state dir)


class GroupCommit:
    """One per supervisor. ``unsynced`` is set by whoever settles a unit (its result and
    ``outcome.json`` were written without an fsync each)."""

    def __init__(self, ledger: Ledger, root: str):
        self.ledger, self.root = ledger, root
        self.unsynced = False                # units settled since the last syncfs
        self._one = asyncio.Lock()           # one commit of the queue at a time

    async def flush_often(self) -> None:
        """Apply the queued ledger writes every FLUSH_S: one short transaction for many."""
        while True:
            await asyncio.sleep(FLUSH_S)
            try:
                await self._commit()
            except Exception as e:  # the queue is kept; the next flush tries again
                _warn(e)

    async def _commit(self) -> None:
        """The files of the units settled so far reach the disk in one syncfs, and only then
        does the ledger record those units as finished."""
        async with self._one:
            n = self.ledger.pending
            if n and self.unsynced:
                self.unsynced = False
                await asyncio.to_thread(sync_fs, self.root)
            self.ledger.flush(upto=n)   # with what was written ahead (alone when n is 0)

    async def durable(self, *, behind_queue: bool = False) -> None:
        """Until the rows written ahead of the queue so far are committed: by one commit,
        made at once and shared by every unit launching in the same moment. ``behind_queue``
        (rows written in the queue, behind an end they depend on): until the queue so far is
        committed too, after its syncfs."""
        led = self.ledger
        ahead, queued = led.ahead_applied + led.pending_ahead, led.applied + led.pending
        await asyncio.sleep(0)   # the others launching in this moment write theirs too
        while led.ahead_applied < ahead or (behind_queue and led.applied < queued):
            try:
                if behind_queue:
                    await self._commit()
                else:
                    led.flush_ahead()
            except Exception as e:  # kept; tried again
                _warn(e)
                await asyncio.sleep(FLUSH_S)

    def commit_now(self) -> None:
        """Everything queued, synchronously (the run is ending)."""
        self.sync()
        self.ledger.flush()

    def sync(self) -> None:
        if self.unsynced:
            self.unsynced = False
            sync_fs(self.root)


def _warn(e: Exception) -> None:
    print(f"prun: warning: ledger flush failed ({e}); retrying", file=sys.stderr)
