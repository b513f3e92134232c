"""Waiting for a launched worker: until it exits or its deadline (then its process group is
ended), in the dispatcher's own process (``wait``) or the supervisor's event loop
(``wait_async``); meanwhile the stream's new lines are fed to the executor's reader
(``stream.Follower``), so the conversation id is recorded as soon as it is known."""

from __future__ import annotations

import time
from collections.abc import Callable

from .exitlog import exit_code as _exit_code

TYPE_CHECKING = False
if TYPE_CHECKING:
    import asyncio

    from .core import Dispatch
    from .stream import Follower

SLICE_S = 0.25          # the synchronous wait reads the stream this often until the id is known
SLICE_KNOWN_S = 5.0     # ... and this often after
ASYNC_SLICE_S = 1.0     # the supervisor reads it this often until the id is known, then not


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
