"""The run's group commit: the ledger writes the supervisor queues are applied together, every
``FLUSH_S`` or at once when a launch waits for its attempt's row, and the files of the units
settled since the last commit reach the disk first (one ``syncfs``, not an fsync a file)."""

from __future__ import annotations

import asyncio
import contextlib
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
        self._committed = asyncio.Event()    # set (and made anew) by each group commit
        self._soon = asyncio.Event()         # a launch waits for the next commit

    async def flush_often(self) -> None:
        """Apply the queued ledger writes every FLUSH_S: one short transaction for many."""
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(FLUSH_S):  # or sooner, when a launch waits for it
                    await self._soon.wait()
            self._soon.clear()
            try:
                await self._commit()
            except Exception as e:  # the queue is kept; the next flush tries again
                print(f"prun: warning: ledger flush failed ({e}); retrying", file=sys.stderr)

    async def _commit(self) -> None:
        """The files of the units settled so far reach the disk in one syncfs, and only then
        does the ledger record those units as finished."""
        n = self.ledger.pending
        if not n:
            return
        if self.unsynced:
            self.unsynced = False
            await asyncio.to_thread(sync_fs, self.root)
        self.ledger.flush(upto=n)
        committed, self._committed = self._committed, asyncio.Event()
        committed.set()

    async def durable(self) -> None:
        """Until the ledger writes queued so far are committed: by a group commit made at
        once, which every unit launching in the same moment shares."""
        target = self.ledger.applied + self.ledger.pending
        if self.ledger.applied < target:
            self._soon.set()
        while self.ledger.applied < target:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(FLUSH_S * 4):  # a flush made elsewhere, or failed
                    await self._committed.wait()

    def commit_now(self) -> None:
        """Everything queued, synchronously (the run is ending)."""
        self.sync()
        self.ledger.flush()

    def sync(self) -> None:
        if self.unsynced:
            self.unsynced = False
            sync_fs(self.root)
