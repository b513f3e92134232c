"""A session unit in a run (``executor: session``): no process is launched. The coordinator
spawns the subagent from the unit's handoff file and attaches its identifier with
``prun receipt``; the unit is done when its result file lands (non-empty). With no receipt by
its timeout it is not dispatched and the run stops; with a receipt and no result it times out.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from ..attempt import statedir
from ..attempt.dispatch import Dispatch, HandedOff
from ..ledger import PacketStatus, Status, now_iso
from .context import RunContext
from .ends import End, NotDispatched, Settled, Successor
from .quarantine import quarantine
from .unit import UnitState


async def session(ctx: RunContext, u: UnitState, d: Dispatch, handed: HandedOff) -> End:
    """The unit ``handed`` to the coordinator: wait for its receipt and its result."""
    aid, sd = u.current_attempt, d.state
    ctx.ledger.update_attempt(aid, "handed to the coordinator", state_dir=sd.path,
                              workspace=d.workspace, mode=d.p.mode)
    ctx.emit("handoff", u, "run it as a subagent, then attach its receipt",
             handoff=sd.file(statedir.HANDOFF), receipt_cmd=handed.line("RECEIPT-CMD"))
    stop = u.stop = asyncio.Event()
    limit = min(time.time() + d.settings.timeout_s, ctx.state.deadline or float("inf"))
    result = d.p.result_file
    receipt = await attend(ctx, u, handed, stop, limit)
    status, reason = verdict(u, receipt, handed.landed(), stop.is_set())
    if u.superseded or status in (Status.CANCELLED, Status.TIMEOUT):
        quarantine(ctx.paths, u, d.workspace, result_file=result, everything=True)
    ctx.ledger.update_attempt(aid, reason, status=status, reason=reason,
                              finished_at=now_iso())
    if u.superseded:
        u.superseded = False
        u.predecessor = aid
        return Successor(f"reassigned; {aid} superseded")
    if status == Status.NOT_DISPATCHED:
        return NotDispatched(f"run session unit {u.packet.id} as a subagent",
                             "its receipt (prun receipt STATE_DIR --attempt-id ID)")
    pstatus = {Status.SUCCEEDED: PacketStatus.SUCCEEDED,
               Status.TIMEOUT: PacketStatus.TIMEOUT}.get(status, PacketStatus.CANCELLED)
    return Settled(pstatus, reason, {"result_file": result})


async def attend(ctx: RunContext, u: UnitState, handed: HandedOff,
                 stop: asyncio.Event, limit: float) -> str | None:
    """Look for the receipt, then the result, until both are there, ``stop`` is set or
    ``limit`` passes (files land without an event to await). Returns the receipt, None when
    none was attached."""
    receipt: str | None = None
    if time.time() >= limit:
        return receipt
    delay = 0.05
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(limit - time.time()):
            while not stop.is_set():
                if receipt is None:
                    receipt = handed.receipt()
                    if receipt:
                        u.started = time.time()
                        ctx.ledger.update_attempt(
                            u.current_attempt, "the coordinator attached its receipt",
                            status=Status.DISPATCHED, receipt=receipt, dispatched_at=now_iso())
                        ctx.emit("dispatched", u, receipt=receipt)
                if receipt and handed.landed():
                    break
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await stop.wait()
                delay = min(delay * 1.5, 1.0)
    return receipt


def verdict(u: UnitState, receipt: str | None, landed: bool,
            stopped: bool) -> tuple[Status, str]:
    """The session attempt's status and why, from its receipt, whether its result landed
    and whether it was stopped (cancelled or reassigned)."""
    if receipt is not None and landed and not u.superseded:
        return Status.SUCCEEDED, "result landed"
    if stopped and not u.superseded:
        return Status.CANCELLED, "cancelled"
    if receipt is None:
        return Status.NOT_DISPATCHED, "no receipt was attached"
    if stopped:
        return Status.CANCELLED, "cancelled"
    return Status.TIMEOUT, "no result before the deadline"
