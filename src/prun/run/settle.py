"""How an attempt of a run ends: its outcome becomes the attempt's and the packet's status.

``settle`` records a judged attempt (quarantining what a cancelled, timed-out or superseded
worker produced) and decides what follows it: nothing, a linked attempt parked until its
quota pool resets, a fresh attempt when a resume was refused, a successor after a
reassignment, or a follow-up asked for while it ran. ``no_receipt`` ends an attempt that was
never dispatched: the packet stays pending and the run stops launching.
"""

from __future__ import annotations

import contextlib
import os
import shutil

from ..errors import PrunError
from ..ledger import PacketStatus, Status, now_iso
from . import schedule
from .unit import OUTCOME_STATUS, UnitState, parse_time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .supervisor import Supervisor


def settle(sup: Supervisor, u: UnitState, d, outcome: str, info: dict, why: str | None,
           quiet: bool = True) -> None:
    """Record the judged attempt ``d`` of ``u`` and start what follows it."""
    aid = u.attempt_id
    sup.unsynced = True
    status = OUTCOME_STATUS.get(outcome, Status.FAILED)
    quarantined = None
    if u.superseded or why is not None:
        quarantined = quarantine(sup, u, d, info, everything=u.superseded)
    if u.superseded:
        status = Status.QUARANTINED if outcome == "succeeded" else Status.CANCELLED
    elif info.get("quota") and status == Status.FAILED and not u.cancel_requested:
        status = Status.QUOTA  # a quota stop is never a failure: a follow-up is parked
    cause = info.get("reason") or outcome
    if not quiet:
        cause += "; its process group did not end within the bound"
    if info.get("escaped"):
        what = "; ".join(" ".join(e.get("cmdline") or ["?"])[:80] for e in info["escaped"])
        note = f"{len(info['escaped'])} process(es) left its process group: {what}"
        sup.emit("escaped", u, f"{note}; ended with it")
        cause += f"; {note}"
    q = info.get("quota") or {}
    sup.ledger.update_attempt(
        aid, cause, status=status, reason=info.get("reason"),
        exit_code=info.get("worker_exit"), error=(info.get("error") or None),
        model=info.get("model"), resets_at=q.get("resets_at"), quarantine=quarantined,
        finished_at=now_iso())
    result = info.get("result_file")
    if u.superseded:
        u.superseded = False
        u.predecessor = aid
        sup.emit("quarantined", u, "superseded by a reassignment", quarantine=quarantined)
        sup.set_packet(u, PacketStatus.PENDING, f"reassigned; {aid} superseded")
        return
    if status == Status.QUOTA:
        u.carry_on(d.p.executor, None, because="A quota limit stopped your "
                   f"earlier attempt {aid}.")
        return schedule.park(sup, u, parse_time(q.get("resets_at")),
                             q.get("message") or "quota reached mid-run")
    if info.get("reason") == "resume-refused" and not u.cancel_requested:
        why = (f"Resuming the conversation of {u.predecessor} was refused "
               f"({info.get('error') or 'by the CLI'}), so this attempt starts fresh.")
        sup.ledger.record_event("resume-refused", run_id=sup.run_id,
                                packet_id=u.packet.id, attempt_id=aid,
                                status="resume-refused", cause=why)
        earlier = u.extra.get("resumed_from") or {}
        u.carry_on(d.p.executor, u.extra.get("asked"), because=why, fresh=True,
                   earlier_result=earlier.get("result_file"))
        return sup.set_packet(u, PacketStatus.PENDING, "resume refused: a fresh "
                              "attempt carries the partial result")
    if u.cancel_requested and status != Status.SUCCEEDED:
        status = Status.CANCELLED
    pstatus = {Status.SUCCEEDED: PacketStatus.SUCCEEDED, Status.TIMEOUT: PacketStatus.TIMEOUT,
               Status.CANCELLED: PacketStatus.CANCELLED}.get(status, PacketStatus.FAILED)
    sup.set_packet(u, pstatus, cause)
    sup.emit(pstatus.value, u, cause, result_file=result, exit_code=info.get("exit_code"),
             reason=info.get("reason"), quarantine=quarantined)
    if u.followups:
        follow_up(sup, u, u.followups.pop(0))


def follow_up(sup: Supervisor, u: UnitState, text: str) -> None:
    """``prun followup``: a linked attempt with a new request, in the same workspace."""
    from .. import executors

    try:
        ex = executors.get(u.executor)
    except PrunError as e:
        return sup.emit("stopped", u, e.line(), action="follow up")
    u.carry_on(ex, text, because=f"Your earlier attempt {u.attempt_id} finished; "
               "this is a follow-up turn.")
    u.cancel_requested = u.superseded = False
    sup.set_packet(u, PacketStatus.PENDING, "follow-up requested")


def quarantine(sup: Supervisor, u: UnitState, d, info: dict, everything: bool) -> str | None:
    """Move what the worker produced (its own result file, the response beside it, and
    its workspace) out of reach of integration. ``everything``: the published result too."""
    dest = sup.paths.quarantine / f"{u.packet.id}.{u.seq}"
    moved = []
    published = info.get("published")
    for key in ("result_file", "response_file"):
        path = info.get(key)
        if not path or not os.path.exists(path):
            continue
        if key == "result_file" and published == "fallback" and not everything:
            continue  # prun's own FALLBACK text is evidence, not partial output
        dest.mkdir(parents=True, exist_ok=True)
        shutil.move(path, dest / os.path.basename(path))
        moved.append(os.path.basename(path))
    ws = d.workspace
    if ws and os.path.isdir(ws):
        target = ws.rstrip(os.sep) + ".quarantined"
        with contextlib.suppress(OSError):
            os.rename(ws, target)
            dest.mkdir(parents=True, exist_ok=True)
            (dest / "workspace").write_text(target + "\n")
            moved.append("workspace")
    return str(dest) if moved else None


def no_receipt(sup: Supervisor, u: UnitState, aid: str | None, action: str, need: str | None,
               state_dir: str | None = None) -> None:
    """Not dispatched: the packet stays pending and the run stops launching."""
    need = need or "the executor returned no attempt id"
    if aid:
        sup.ledger.update_attempt(aid, need, status=Status.NOT_DISPATCHED,
                                  state_dir=state_dir, reason="no-receipt", error=need,
                                  finished_at=now_iso())
        u.predecessor = aid
    sup.set_packet(u, PacketStatus.PENDING, f"not dispatched: {need}")
    sup.stopped = f"{action}: {need}"
    sup.emit("stopped", u, need, action=action)
