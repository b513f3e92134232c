"""Waiting for a launched worker: until it exits or its deadline (then its process group is
ended), in the dispatcher's own process (``wait``) or the supervisor's event loop
(``wait_async``); meanwhile the stream's new lines are fed to the executor's reader
(``pump``), so the conversation id is recorded as soon as it is known."""

from __future__ import annotations

import time
from collections.abc import Callable

from . import statedir
from .exitlog import exit_code as _exit_code

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .core import Dispatch


def wait(d: Dispatch) -> tuple[int, bool]:
    """Wait for the worker to exit or its deadline. Returns (exit code, timed out)."""
    from .._util.process import end_group

    w = d.worker
    while True:
        remaining = d.deadline - time.time()
        if remaining <= 0:
            end_group(w, d.p.config.kill_grace_s)
            pump(d)
            return w.reap(), True
        # Short slices only until the conversation id is known, then long ones.
        if w.wait_exit(min(remaining, 5.0 if d._session_written else 0.25)):
            break
        pump(d)
    w.sweep()
    return w.reap(), False


async def wait_async(d: Dispatch, stop=None, hard_deadline: float | None = None,
                     on_end: Callable[[str], None] | None = None
                     ) -> tuple[int | None, str | None]:
    """The supervisor's wait, in its event loop: until the worker exits, the deadline
    (the unit's, or ``hard_deadline`` if sooner) or ``stop`` (an asyncio.Event) is set.
    ``on_end(why)`` runs before the group is ended. Returns (exit code, why) with why
    None, "timeout" or "cancelled"."""
    import asyncio

    from .._util.process import end_group

    w = d.worker
    limit = min(d.deadline, hard_deadline or float("inf"))
    exit_task = asyncio.ensure_future(w.await_exit())
    stop_task = asyncio.ensure_future(stop.wait()) if stop is not None else None
    waits = {t for t in (exit_task, stop_task) if t is not None}
    why: str | None = "timeout"
    try:
        while (remaining := limit - time.time()) > 0:
            if not d._session_written and d.p.executor.event_stream:
                remaining = min(remaining, 1.0)  # pick the conversation id up early
            done, _ = await asyncio.wait(waits, timeout=remaining,
                                         return_when=asyncio.FIRST_COMPLETED)
            if exit_task in done:
                why = None
                break
            if stop_task is not None and stop_task in done:
                why = "cancelled"
                break
            pump(d)
    finally:
        for t in waits:
            t.cancel()
    if why is None:
        w.sweep()
    else:
        if on_end is not None:
            on_end(why)
        await asyncio.to_thread(end_group, w, d.p.config.kill_grace_s)
        pump(d)
    return await _exit_code(w, d.state), why  # it has exited: reaping does not block


def pump(d: Dispatch) -> None:
    """Feed the stream's new complete lines to the reader; record the session id early.
    (A command's output is not an event stream: it is read whole at the end.)"""
    if not d.p.executor.event_stream:
        return
    try:
        with open(d.state.file(statedir.TAIL), "rb") as f:
            f.seek(d._tail_offset)
            chunk = f.read()
    except OSError:
        return
    d._tail_offset += len(chunk)
    data = d._tail_rest + chunk
    lines = data.split(b"\n")
    d._tail_rest = lines.pop()
    for line in lines:
        d.reader.feed(line.decode("utf-8", "replace"))
    record_session(d)


def record_session(d: Dispatch) -> None:
    sid = d.reader.result.session_id
    if sid and not d._session_written:
        d.state.write(statedir.CONVERSATION_ID, sid)
        d._session_written = True
