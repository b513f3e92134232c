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
from ..ledger import PacketStatus, Status, now_iso
from .settle import no_receipt, quarantine
from .unit import UnitState

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .supervisor import Supervisor


async def session(sup: Supervisor, u: UnitState, d, handed) -> None:
    """Hand the unit to the coordinator, then wait for its receipt and its result."""
    from .._util.fsutil import file_size

    aid, sd = u.attempt_id, d.state
    lines = handed.lines
    sup.ledger.update_attempt(aid, "handed to the coordinator", state_dir=sd.path,
                              workspace=d.workspace, mode=d.p.mode)
    sup.emit("handoff", u, "run it as a subagent, then attach its receipt",
             handoff=sd.file(statedir.HANDOFF),
             receipt_cmd=next((x.split(" ", 1)[1] for x in lines
                               if x.startswith("RECEIPT-CMD ")), None))
    u.stop = asyncio.Event()
    limit = min(time.time() + d.settings.timeout_s, sup.deadline or float("inf"))
    result = d.p.result_file
    receipt = None

    async def until_done() -> None:
        """Look for the receipt, then the result, until both are there or it is stopped."""
        nonlocal receipt
        delay = 0.05
        while not u.stop.is_set():
            if receipt is None:
                receipt = sd.read(statedir.RECEIPT)
                if receipt:
                    u.started = time.time()
                    sup.ledger.update_attempt(aid, "the coordinator attached its receipt",
                                              status=Status.DISPATCHED, receipt=receipt,
                                              dispatched_at=now_iso())
                    sup.emit("dispatched", u, receipt=receipt)
            if receipt and file_size(result) > 0:
                return
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):  # files land without an event to await
                    await u.stop.wait()
            delay = min(delay * 1.5, 1.0)

    if time.time() < limit:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(limit - time.time()):
                await until_done()
    done = receipt is not None and file_size(result) > 0 and not u.superseded
    if done:
        status, reason = Status.SUCCEEDED, "result landed"
    elif u.stop.is_set() and not u.superseded:
        status, reason = Status.CANCELLED, "cancelled"
    elif receipt is None:
        status, reason = Status.NOT_DISPATCHED, "no receipt was attached"
    else:
        status = Status.CANCELLED if u.stop.is_set() else Status.TIMEOUT
        reason = "cancelled" if u.stop.is_set() else "no result before the deadline"
    if u.superseded or status in (Status.CANCELLED, Status.TIMEOUT):
        quarantine(sup, u, d.workspace, result_file=result, everything=True)
    sup.ledger.update_attempt(aid, reason, status=status, reason=reason,
                              finished_at=now_iso())
    if u.superseded:
        u.superseded = False
        u.predecessor = aid
        return sup.set_packet(u, PacketStatus.PENDING, f"reassigned; {aid} superseded")
    if status == Status.NOT_DISPATCHED:
        return no_receipt(sup, u, None, f"run session unit {u.packet.id} as a subagent",
                          "its receipt (prun receipt STATE_DIR --attempt-id ID)")
    pstatus = {Status.SUCCEEDED: PacketStatus.SUCCEEDED,
               Status.TIMEOUT: PacketStatus.TIMEOUT}.get(status, PacketStatus.CANCELLED)
    sup.set_packet(u, pstatus, reason)
    sup.emit(pstatus.value, u, reason, result_file=result)
