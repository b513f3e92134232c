"""The run's group commit: the ledger writes the supervisor queues are applied together every
``FLUSH_S``, and the files of the units settled since the last commit reach the disk first (one
``syncfs``, not an fsync a file). A launching attempt's own rows go ahead of that queue
(``Ledger.ahead``) and are committed at once, before its worker starts: a launch waits for no
sync of the units settled before it, and the ledger's log stays causal, since what a launch
implies of other units (its packet running, in the place of one that ended) is written
behind their ends, in the queue.

A write that fails (a full disk, an I/O error: ``StateError``) keeps its queue and is tried
again: every ``FLUSH_S`` while the run goes on, with one warning per spell of failures. A
launch waits for its row at most ``LEDGER_WAIT_S`` (then it is not launched: the run stops
launching), and so does the run's end: a ledger that still cannot be written then ends the
supervisor with one line (``prun resume RUN`` records what the state dirs kept, once it can)."""

from __future__ import annotations

import asyncio
import os
import sys
import time

from .._util.fsutil import sync_fs
from ..errors import StateError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..ledger import Ledger

FLUSH_S = 0.05  # the ledger lags the supervisor by at most this (a crash loses no worker:
                # resume finds every launched attempt through its state dir)
LEDGER_WAIT_S = 10.0   # how long a launch, or the run's end, waits for a failing ledger


class GroupCommit:
    """One per supervisor. ``unsynced`` is set by whoever settles a unit (its result and
    ``outcome.json`` were written without an fsync each)."""

    def __init__(self, ledger: Ledger, root: str):
        self.ledger, self.root = ledger, root
        self.unsynced = False                # units settled since the last syncfs
        self._one = asyncio.Lock()           # one commit of the queue at a time
        self.failing: str | None = None      # the error of the current spell of failures

    async def flush_often(self) -> None:
        """Apply the queued ledger writes every FLUSH_S: one short transaction for many."""
        while True:
            await asyncio.sleep(FLUSH_S)
            try:
                await self._commit()
            except Exception as e:  # the queue is kept; the next flush tries again
                self._failed(e)
            else:
                self._recovered()

    async def _commit(self) -> None:
        """The files of the units settled so far reach the disk in one syncfs, and only then
        does the ledger record those units as finished."""
        async with self._one:
            n = self.ledger.pending
            if n and self.unsynced:
                self.unsynced = False
                try:
                    await asyncio.to_thread(sync_fs, self.root)
                except OSError:
                    self.unsynced = True   # still due: the ends wait for it
                    raise
            self.ledger.flush(upto=n)   # with what was written ahead (alone when n is 0)

    async def durable(self, *, behind_queue: bool = False) -> None:
        """Until the rows written ahead of the queue so far are committed: by one commit,
        made at once and shared by every unit launching in the same moment. ``behind_queue``
        (rows written in the queue, behind an end they depend on): until the queue so far is
        committed too, after its syncfs."""
        led = self.ledger
        ahead, queued = led.ahead_applied + led.pending_ahead, led.applied + led.pending
        await asyncio.sleep(0)   # the others launching in this moment write theirs too
        given_up = time.monotonic() + LEDGER_WAIT_S
        while led.ahead_applied < ahead or (behind_queue and led.applied < queued):
            try:
                if behind_queue:
                    await self._commit()
                else:
                    led.flush_ahead()
            except Exception as e:  # kept; tried again
                self._failed(e)
                if time.monotonic() >= given_up:
                    raise self._unwritten(e) from e
                await asyncio.sleep(FLUSH_S)
        self._recovered()

    def commit_now(self) -> None:
        """Everything queued, synchronously (the run is ending), tried again for at most
        ``LEDGER_WAIT_S`` while the ledger cannot be written (``StateError`` then)."""
        given_up = time.monotonic() + LEDGER_WAIT_S
        delay = FLUSH_S
        while True:
            try:
                self.sync()
                self.ledger.flush()
                return self._recovered()
            except (StateError, OSError) as e:
                self._failed(e)
                if time.monotonic() >= given_up:
                    raise self._unwritten(e) from e
            time.sleep(delay)
            delay = min(delay * 2, 1.0)

    def close(self) -> None:
        """The run is over: what is still queued is written (``commit_now``), and writes go
        straight to the ledger again. After a failure the run's end already waited for, one
        more try only (its error raised, the queue kept)."""
        if self.failing is None:
            self.commit_now()
        else:
            self.sync()
            self.ledger.flush()
        self.ledger.stop_deferring()

    def sync(self) -> None:
        if self.unsynced:
            sync_fs(self.root)   # a failure keeps it due
            self.unsynced = False

    def _failed(self, e: Exception) -> None:
        """One warning per spell of failures (the flusher tries every FLUSH_S)."""
        if self.failing != str(e):
            self.failing = str(e)
            print(f"prun: warning: the ledger was not updated ({e}); retrying",
                  file=sys.stderr, flush=True)

    def _recovered(self) -> None:
        if self.failing is not None:
            self.failing = None
            print("prun: the ledger is written again", file=sys.stderr, flush=True)

    def _unwritten(self, e: Exception) -> StateError:
        """The error that ends a launch's wait, or the run, on a ledger that stays
        unwritable: what failed, and how the run is completed once it can be written."""
        what = e.message if isinstance(e, StateError) else f"the ledger cannot be written: {e}"
        return StateError(what, hint=f"free space on its disk, then `prun resume "
                          f"{os.path.basename(self.root)}` records what the run's state "
                          "dirs kept")
