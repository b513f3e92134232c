"""Waiting for a launched worker: until it exits or its deadline (then its process group is
ended), in the dispatcher's own process (``wait``) or the supervisor's event loop
(``wait_async``); meanwhile the stream's new lines are fed to the executor's reader
(``Follower``), so the conversation id is recorded as soon as it is known."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from . import statedir
from .exitlog import exit_code as _exit_code

TYPE_CHECKING = False
if TYPE_CHECKING:
    import asyncio

    from ..executors.base import StreamReader
    from ..executors.records import StreamResult
    from .core import Dispatch

SLICE_S = 0.25          # the synchronous wait reads the stream this often until the id is known
SLICE_KNOWN_S = 5.0     # ... and this often after
ASYNC_SLICE_S = 1.0     # the supervisor reads it this often until the id is known, then not


SEEK_DATA, SEEK_HOLE = getattr(os, "SEEK_DATA", None), getattr(os, "SEEK_HOLE", None)
READ_BYTES = 1 << 20          # the stream is read this much at a time...
MAX_LINE_BYTES = 4 << 20      # ...and a line longer than this is skipped (counted as bad)


class Follower:
    """The worker's stream (``tail`` in its state dir) as read so far: each new complete line
    goes to the executor's reader, the conversation id to the state dir as soon as it is
    known. A command's output is not an event stream: it is read whole at the end.

    Memory stays bounded whatever the stream's size: it is read ``READ_BYTES`` at a time,
    and a line that grows past ``MAX_LINE_BYTES`` is dropped as it is read (one bad line).
    A tail that is not a regular file (a link, a FIFO the unit put in its place) is never
    read: ``refused`` says what it is, and the attempt fails for it; a hole in it (a stdout
    truncated to gigabytes) is skipped, not read."""

    def __init__(self, reader: StreamReader, state: statedir.StateDir, event_stream: bool):
        self.reader = reader
        self.state = state
        self.event_stream = event_stream
        self.offset = 0              # bytes of the tail read so far
        self.rest = b""              # the last, incomplete line
        self.skipping = False        # inside a line too long to keep
        self.session_known = False   # the conversation id is in the state dir
        self.refused: str | None = None  # what the tail turned out to be, not a regular file

    def pump(self) -> None:
        """Feed the stream's new complete lines to the reader; record the session id early."""
        if not self.event_stream or self.refused:
            return
        from .._util.fsutil import UnsafeFile, open_regular

        try:
            fd = open_regular(self.state.file(statedir.TAIL))
        except UnsafeFile as e:   # the unit put something else in its place: never read
            self.refused = e.what
            return
        except OSError:
            return
        try:
            while True:
                chunk = os.pread(fd, self._data_ahead(fd), self.offset)
                if not chunk:
                    break
                self.offset += len(chunk)
                self._lines(chunk)
        except OSError:
            pass
        finally:
            os.close(fd)
        self.record_session()

    def _data_ahead(self, fd: int) -> int:
        """How much to read next: the data at the read position, a hole before it skipped. A
        stream is written, never made sparse: a hole is a unit's truncation of its stdout, so
        its gigabytes of zeros are never read (the line it cuts is bad)."""
        if SEEK_DATA is None or SEEK_HOLE is None:
            return READ_BYTES
        try:
            data = os.lseek(fd, self.offset, SEEK_DATA)
            hole = os.lseek(fd, data, SEEK_HOLE)
        except OSError:   # no data left (ENXIO), or not on this file system: read on
            return READ_BYTES
        if data > self.offset:
            self.offset = data
            self.rest, self.skipping = b"", True
            self.reader.result.bad_lines += 1
        return max(1, min(READ_BYTES, hole - data))

    def _lines(self, chunk: bytes) -> None:
        lines = chunk.split(b"\n")
        last = lines.pop()
        for i, line in enumerate(lines):
            if i == 0:
                line, self.rest = self.rest + line, b""
                if self.skipping:
                    self.skipping = False
                    continue
            self.reader.feed(line.decode("utf-8", "replace"))
        if lines:
            self.rest = last
        elif not self.skipping:
            self.rest += last
        if len(self.rest) > MAX_LINE_BYTES:
            self.rest, self.skipping = b"", True
            self.reader.result.bad_lines += 1

    def finish(self, read: bool) -> StreamResult:
        """What the whole stream said; ``read``: read what is left of it first, its last line
        even without a newline."""
        if read:
            self.pump()
            if self.rest:
                self.reader.feed(self.rest.decode("utf-8", "replace"))
                self.rest = b""
        stream = self.reader.finish(self.state.file(statedir.TAIL))
        self.record_session()
        return stream

    def record_session(self) -> None:
        sid = self.reader.result.session_id
        if sid and not self.session_known:
            try:
                self.state.write(statedir.CONVERSATION_ID, sid)
            except OSError:   # a full disk: tried again at the next read
                return
            self.session_known = True


def wait(d: Dispatch) -> tuple[int | None, bool]:
    """Wait for the worker to exit or its deadline. Returns (exit code, timed out)."""
    from .._util.process import end_group

    w, follower = d.running(), d.follow()
    while True:
        remaining = d.deadline - time.time()
        if remaining <= 0:
            end_group(w, d.p.config.kill_grace_s)
            follower.pump()
            return w.reap(), True
        # Short slices only until the conversation id is known, then long ones.
        if w.wait_exit(min(remaining, SLICE_KNOWN_S if follower.session_known else SLICE_S)):
            break
        follower.pump()
    w.sweep()
    return w.reap(), False


async def wait_async(d: Dispatch, stop: asyncio.Event | None = None,
                     hard_deadline: float | None = None,
                     on_end: Callable[[str], None] | None = None
                     ) -> tuple[int | None, str | None]:
    """The supervisor's wait, in its event loop: until the worker exits, the deadline
    (the unit's, or ``hard_deadline`` if sooner) or ``stop`` (an asyncio.Event) is set.
    ``on_end(why)`` runs before the group is ended. Returns (exit code, why) with why
    None, "timeout" or "cancelled"."""
    import asyncio

    from .._util.process import end_group

    w = d.running()
    limit = min(d.deadline, hard_deadline or d.deadline)
    exited = asyncio.create_task(w.await_exit())
    stopped = asyncio.create_task(stop.wait()) if stop is not None else None
    waits = [t for t in (exited, stopped) if t is not None]
    try:
        async with asyncio.timeout(max(0.0, limit - time.time())):
            why = await _exit_or_stop(d.follow(), exited, stopped)
    except TimeoutError:
        why = "timeout"
    finally:  # both waits end here, however the wait did
        for t in waits:
            t.cancel()
        await asyncio.gather(*waits, return_exceptions=True)
    if why is None:
        w.sweep()
    else:
        if on_end is not None:
            on_end(why)
        await asyncio.to_thread(end_group, w, d.p.config.kill_grace_s)
        d.follow().pump()
    return await _exit_code(w, d.state), why  # it has exited: reaping does not block


async def _exit_or_stop(follower: Follower, exited: asyncio.Task[None],
                        stopped: asyncio.Task[bool] | None) -> str | None:
    """Until the worker exits (None) or the stop is set ("cancelled"), reading the stream
    every ``ASYNC_SLICE_S`` until the conversation id is known."""
    import asyncio

    waits = {exited} if stopped is None else {exited, stopped}
    while True:
        reading = follower.event_stream and not follower.session_known
        done, _ = await asyncio.wait(waits, timeout=ASYNC_SLICE_S if reading else None,
                                     return_when=asyncio.FIRST_COMPLETED)
        if exited in done:
            return None
        if stopped in done:
            return "cancelled"
        follower.pump()
