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

from ..attempt.finishing import UNPUBLISHED
from ..errors import PrunError
from ..ledger import ATTEMPT_STATUS, PACKET_STATUS, PacketStatus, Status, now_iso
from . import schedule
from .unit import UnitState, parse_time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..attempt.outcome import Outcome
    from ..executors.base import Executor
    from .supervisor import Supervisor


def settle(sup: Supervisor, u: UnitState, outcome: Outcome, why: str | None, *,
           executor: Executor, workspace: str | None, quiet: bool = True) -> None:
    """Record the judged attempt of ``u`` (its ``outcome``; ``executor`` ran it in
    ``workspace``) and start what follows it."""
    aid = u.current_attempt
    sup.commits.unsynced = True
    status = ATTEMPT_STATUS.get(outcome.kind, Status.FAILED)
    quarantined, unmoved = None, ""
    if u.superseded or why is not None:
        try:
            quarantined = quarantine(sup, u, workspace, result_file=outcome.result_file,
                                     response_file=outcome.response_file,
                                     fallback=outcome.published == "fallback",
                                     everything=u.superseded)
        except OSError as e:   # a full disk: its output stays where it is, said so
            quarantined = None
            unmoved = f"; its partial output could not be quarantined ({e.strerror or e})"
    if u.superseded:
        status = Status.QUARANTINED if outcome.ok else Status.CANCELLED
    elif outcome.quota and status == Status.FAILED and not u.cancel_requested:
        status = Status.QUOTA  # a quota stop is never a failure: a follow-up is parked
    cause = (outcome.reason or str(outcome.kind)) + unmoved
    if outcome.reason in UNPUBLISHED:
        cause += (f"; its output is kept in its state dir: free space, then `prun resume "
                  f"{sup.run_id}` publishes it")
    if not quiet:
        cause += "; its process group did not end within the bound"
    if outcome.escaped:
        what = "; ".join(_cmdline(e)[:80] for e in outcome.escaped)
        note = f"{len(outcome.escaped)} process(es) left its process group: {what}"
        sup.emit("escaped", u, f"{note}; ended with it")
        cause += f"; {note}"
    quota, spent = outcome.quota, outcome.spend
    sup.ledger.update_attempt(
        aid, cause, status=status, reason=outcome.reason, exit_code=outcome.worker_exit,
        error=outcome.error or None, model=outcome.model,
        resets_at=quota.resets_at if quota else None, quarantine=quarantined,
        tokens_in=spent.tokens_in if spent else None,
        tokens_out=spent.tokens_out if spent else None,
        tokens_cached=spent.tokens_cached if spent else None,
        cost_usd=spent.cost_usd if spent else None, finished_at=now_iso())
    if u.superseded:
        u.superseded = False
        u.predecessor = aid
        sup.emit("quarantined", u, "superseded by a reassignment", quarantine=quarantined)
        sup.set_packet(u, PacketStatus.PENDING, f"reassigned; {aid} superseded")
        return
    if status == Status.QUOTA:
        u.carry_on(executor, None, because="A quota limit stopped your "
                   f"earlier attempt {aid}.")
        return schedule.park(sup, u, parse_time(quota.resets_at if quota else None),
                             (quota.message if quota else "") or "quota reached mid-run")
    if outcome.reason == "resume-refused" and not u.cancel_requested:
        return fresh_start(sup, u, executor, outcome.error)
    if outcome.reason == "worker-lost" and not u.cancel_requested and may_retry_lost(sup, u):
        return lost_successor(sup, u, executor, outcome.error)
    if u.cancel_requested and status != Status.SUCCEEDED:
        status = Status.CANCELLED
    pstatus = PACKET_STATUS.get(status, PacketStatus.FAILED)
    sup.set_packet(u, pstatus, cause)
    sup.emit(pstatus.value, u, cause, result_file=outcome.result_file,
             exit_code=int(outcome.exit_code), reason=outcome.reason, quarantine=quarantined)
    if u.followups:
        follow_up(sup, u, u.followups.pop(0))


def _cmdline(escape: dict[str, object]) -> str:
    """An escaped process's command line as recorded (a list of words; anything else: ?)."""
    words = escape.get("cmdline")
    return " ".join(map(str, words)) if isinstance(words, list) and words else "?"


def fresh_start(sup: Supervisor, u: UnitState, executor: Executor, error: str | None) -> None:
    """Resuming the conversation was refused: a fresh attempt carries the partial result."""
    aid = u.current_attempt
    why = (f"Resuming the conversation of {u.predecessor} was refused "
           f"({error or 'by the CLI'}), so this attempt starts fresh.")
    sup.ledger.record_event("resume-refused", run_id=sup.run_id, packet_id=u.packet.id,
                            attempt_id=aid, status="resume-refused", cause=why)
    u.carry_on(executor, u.asked, because=why, fresh=True, earlier_result=u.resumed_result)
    sup.set_packet(u, PacketStatus.PENDING, "resume refused: a fresh attempt carries the "
                   "partial result")


LOST_RETRIES = 1   # successors a packet may get after lost workers (``worker_lost: retry``)


def may_retry_lost(sup: Supervisor, u: UnitState) -> bool:
    """Whether the plan allows a successor after a cluster worker died mid-unit
    (``cluster: {worker_lost: retry}``): once per packet, counted in the ledger (so a
    resumed supervisor allows no more), never silently."""
    conf = sup.cluster_config
    if conf is None or conf.worker_lost != "retry":
        return False
    return u.lost_retries < LOST_RETRIES


def lost_successor(sup: Supervisor, u: UnitState, executor: Executor,
                   error: str | None) -> None:
    """A linked successor of an attempt whose cluster worker died: a fresh start in the same
    workspace, counted in the ledger with a ``worker-lost`` event (committed before the
    successor's own row, which waits behind the ledger's queue)."""
    aid = u.current_attempt
    u.lost_retries += 1
    why = f"The cluster worker running {aid} died ({error or 'worker lost'})."
    sup.ledger.spend_lost_retry(sup.run_id, u.packet.id, aid, why)
    u.carry_on(executor, None, because=why + " This attempt starts again.", fresh=True)
    sup.set_packet(u, PacketStatus.PENDING, "worker lost: the plan allows one successor")


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


def quarantine(sup: Supervisor, u: UnitState, workspace: str | None, *,
               result_file: str | None, response_file: str | None = None,
               fallback: bool = False, everything: bool) -> str | None:
    """Move what the worker produced (its own result file, the response beside it, and
    its workspace) out of reach of integration. ``fallback``: the result file holds prun's
    own FALLBACK text, kept unless ``everything`` (the published result too) is moved."""
    dest = sup.paths.quarantine / f"{u.packet.id}.{u.seq}"
    moved = []
    for path, is_result in ((result_file, True), (response_file, False)):
        if not path or not os.path.exists(path):
            continue
        if is_result and fallback and not everything:
            continue  # prun's own FALLBACK text is evidence, not partial output
        dest.mkdir(parents=True, exist_ok=True)
        shutil.move(path, dest / os.path.basename(path))
        moved.append(os.path.basename(path))
    ws = workspace
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
