"""One unit's life in a run, from scheduled to settled: its task.

``life`` is the task the run loop starts for a unit the scheduler chose: it picks the
executor, parks the unit if its quota pool is empty, reserves its ports, opens the attempt
(``prun.run.drive``: workspace, brief, then the launch seam), records it with where it works
(its row committed before its worker starts), starts and watches its worker, ends it when asked
and judges it. It records the attempt in the ledger as it goes and tells of what happens
mid-attempt (``ctx.emit``), and returns what happened to the unit as an end
(``prun.run.ends``); the loop applies that to the run's state. Blocking work (files, git, the
ports' registry, judging) runs in worker threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Coroutine
from typing import Any

from .. import executors
from .._util.worker import WorkerLike
from ..attempt.dispatch import Dispatch, finish, start_async, wait_async
from ..attempt.finishing import UNPUBLISHED
from ..attempt.outcome import Outcome
from ..errors import Blocked as BlockedError
from ..errors import PortsUnavailable, PrimeFailed, PrunError
from ..executors.base import Executor
from ..ledger import ATTEMPT_STATUS, PACKET_STATUS, AttemptFields, PacketStatus, Status, now_iso
from . import limits, schedule
from .choices import QuotaPools
from .context import RunContext
from .drive import Opened, latest_inputs, open_attempt
from .ends import Blocked, End, NotDispatched, Parked, Settled, Successor, Superseded, WaitingForPorts
from .quarantine import quarantine
from .session import session
from .unit import UnitState, parse_time
from .verify import verified

QUIESCE_LIMIT_S = 5.0
LOST_RETRIES = 1   # successors a packet may get after lost workers (``worker_lost: retry``)


async def life(ctx: RunContext, u: UnitState, pools: QuotaPools) -> End:
    """The next attempt of ``u``, from its start to its end (``pools``: the quota states of
    the scheduling pass that started it)."""
    p, name = u.packet, u.executor
    try:
        ex = executors.get(name)
        settings = ex.settings(ctx.env, model=p.model, effort=p.effort, timeout_s=p.timeout_s)
    except PrunError as e:
        return no_receipt(ctx, u, None, f"choose the {name} executor for {p.id}", e.line())
    group = ex.quota_group(settings.model)
    hit = ctx.state.pools_hit.get(group or "")   # a unit of this run hit its limit
    reset = hit if hit and hit > time.time() else await pools.reset_of(ex, settings.model)
    if reset is not None and reset > time.time():
        return Parked(reset, f"the {group} quota pool is empty")
    aid = f"{ctx.run_id}:{p.id}:{u.seq + 1}"
    held = None   # a cluster's unit: reserved on the worker that runs it (ports.PortsThere)
    if ctx.cluster is None:
        block = schedule.ranges_of(ctx, u)
        try:
            held = await asyncio.to_thread(schedule.reserve_ports, ctx, block, u, aid)
        except PortsUnavailable as e:
            return WaitingForPorts(f"waiting for its ports: {e.message}")
    u.seq += 1
    u.attempt_id, u.ports = aid, held
    result = str(ctx.paths.results / f"{p.id}.{u.seq}.md")
    row = AttemptFields(run_id=ctx.run_id, packet_id=p.id, seq=u.seq, executor=name,
                        requested_model=settings.model, model=settings.model,
                        routing_reason=u.reason, base=u.base, result_path=result,
                        predecessor=u.predecessor, continue_from=u.continue_from,
                        candidate=p.candidate)
    cause = "queued" if not u.predecessor else f"follows {u.predecessor}"
    latest = latest_inputs(ctx, u) if p.after else {}
    action = f"prepare packet {p.id} for {name}"
    try:
        opened = await asyncio.to_thread(open_attempt, ctx, u, held, name, result, latest)
    except BlockedError as e:
        ctx.ledger.record_attempt(aid, e.reason, **row | AttemptFields(
            status=Status.NOT_DISPATCHED, reason="blocked", error=e.reason,
            finished_at=now_iso()))
        return Blocked(e.reason)
    except PrimeFailed as e:   # its unit fails; the run goes on with the others
        ctx.ledger.record_attempt(aid, e.message, **row | AttemptFields(
            status=Status.FAILED, reason="prime-failed", error=e.line(), finished_at=now_iso()))
        return Settled(PacketStatus.FAILED, f"prime-failed: {e.message}",
                       {"reason": "prime-failed", "log": e.log})
    except PrunError as e:
        ctx.ledger.record_attempt(aid, cause, **row)
        return no_receipt(ctx, u, aid, action, e.line())
    except OSError as e:
        ctx.ledger.record_attempt(aid, cause, **row)
        return no_receipt(ctx, u, aid, action, _os_error(e))
    b = opened.briefed
    # committed here, with where it works: its worker starts only after this
    ctx.ledger.record_attempt(aid, cause, **row | AttemptFields(
        base=b.place.base, brief=b.brief, workspace=b.place.path, state_dir=b.state.path))
    u.state_dir = b.state.path
    if b.place.applied:
        ctx.emit("based", u, "starts from the accepted changes of "
                 + ", ".join(b.place.applied), base=b.place.base)
    if opened.error is not None:
        return no_receipt(ctx, u, aid, action, opened.error, state_dir=b.state.path)
    return await started(ctx, u, opened)


def _os_error(e: OSError) -> str:
    return f"{e.strerror or e}: {e.filename or ''}".rstrip(": ")


async def started(ctx: RunContext, u: UnitState, opened: Opened) -> End:
    """An opened attempt: parked if the quota gate refused it, handed to the coordinator (a
    session unit), not dispatched if its worker did not start, else watched to its end."""
    aid, d, refused = u.current_attempt, opened.dispatch, opened.refused
    if refused is not None:
        await asyncio.to_thread(finish, d, None, refused=refused)
        ctx.ledger.update_attempt(aid, "quota gate refused", status=Status.QUOTA,
                                  state_dir=d.state.path, reason="quota",
                                  error=refused.line(), resets_at=refused.resets_at,
                                  finished_at=now_iso())
        u.predecessor = aid
        return Parked(parse_time(refused.resets_at), refused.line())
    launched = opened.planned and await start_async(d)
    if d.handed is not None:
        return await session(ctx, u, d, d.handed)
    if not launched:
        await asyncio.to_thread(finish, d, None)
        return no_receipt(ctx, u, aid, f"start {d.p.executor.name} for packet {u.packet.id}",
                          d.launch_error, state_dir=d.state.path)
    u.started = d.launched_at
    u.stalled = False
    ctx.ledger.update_attempt(aid, "worker started", status=Status.DISPATCHED,
                              receipt=d.receipt, state_dir=d.state.path,
                              workspace=d.workspace, mode=u.packet.effective_mode,
                              model=d.settings.model, dispatched_at=now_iso(d.launched_at),
                              sandboxed=d.sandboxed)
    ctx.emit("dispatched", u, receipt=d.receipt)
    return await watch(ctx, u, d)


async def watch(ctx: RunContext, u: UnitState, d: Dispatch) -> End:
    """Wait for the launched (or re-attached) attempt, end it when asked, then judge it."""
    worker = launched_worker(d)
    stop = u.stop = asyncio.Event()
    if u.cancel_requested or u.superseded:
        stop.set()
    code, why = await wait_async(d, stop, ctx.state.deadline,
                                   on_end=lambda why: ending(ctx, u, why))
    d.escaped = list(getattr(worker, "escaped", ()))  # ended by the keeper with it
    d.limited = limits.verdict(getattr(worker, "limited", None))
    quiet = True
    if why is not None:
        remote = getattr(worker, "quiesce", None)   # a cluster's worker confirms it there
        quiet = await (_bounded(remote()) if remote is not None else quiesce(worker.pid))
    outcome = await asyncio.to_thread(finish, d, code, timed_out=why == "timeout",
                                      cancelled=why == "cancelled")
    end = settle(ctx, u, outcome, why, executor=d.p.executor, workspace=d.workspace,
                 quiet=quiet)
    return await verified(ctx, u, end, d.p.executor, d.settings.model)


def settle(ctx: RunContext, u: UnitState, outcome: Outcome, why: str | None, *,
           executor: Executor, workspace: str | None, quiet: bool = True) -> End:
    """Record the judged attempt of ``u`` (its ``outcome``; ``executor`` ran it in
    ``workspace``; ``why``: cancelled or timeout, when it was ended) and say what follows:
    nothing, a park until its quota pool resets, a fresh attempt when a resume was refused,
    a successor after a reassignment or a lost worker."""
    aid = u.current_attempt
    status = ATTEMPT_STATUS.get(outcome.kind, Status.FAILED)
    quarantined, unmoved = None, ""
    if u.superseded or why is not None:
        try:
            quarantined = quarantine(ctx.paths, u, workspace, result_file=outcome.result_file,
                                     response_file=outcome.response_file,
                                     fallback=outcome.published == "fallback",
                                     everything=u.superseded)
        except OSError as e:   # a full disk: its output stays where it is, said so
            unmoved = f"; its partial output could not be quarantined ({e.strerror or e})"
    if u.superseded:
        status = Status.QUARANTINED if outcome.ok else Status.CANCELLED
    elif outcome.quota and status == Status.FAILED and not u.cancel_requested:
        status = Status.QUOTA  # a quota stop is never a failure: a follow-up is parked
    cause = (outcome.reason or str(outcome.kind)) + unmoved
    if outcome.reason in UNPUBLISHED:
        cause += (f"; its output is kept in its state dir: free space, then `prun resume "
                  f"{ctx.run_id}` publishes it")
    if not quiet:
        cause += "; its process group did not end within the bound"
    if outcome.escaped:
        what = "; ".join(_cmdline(e)[:80] for e in outcome.escaped)
        note = f"{len(outcome.escaped)} process(es) left its process group: {what}"
        ctx.emit("escaped", u, f"{note}; ended with it")
        cause += f"; {note}"
    quota, spent = outcome.quota, outcome.spend
    ctx.ledger.update_attempt(
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
        return Superseded(aid, quarantined)
    if status == Status.QUOTA:
        u.carry_on(executor, None, because=f"A quota limit stopped your earlier attempt {aid}.")
        return Parked(parse_time(quota.resets_at if quota else None),
                      (quota.message if quota else "") or "quota reached mid-run",
                      quota.group if quota else None)
    if outcome.reason == "resume-refused" and not u.cancel_requested:
        return fresh_start(ctx, u, executor, outcome.error)
    if outcome.reason == "worker-lost" and not u.cancel_requested and may_retry_lost(ctx, u):
        return lost_successor(ctx, u, executor, outcome.error)
    if u.cancel_requested and status != Status.SUCCEEDED:
        status = Status.CANCELLED
    return Settled(PACKET_STATUS.get(status, PacketStatus.FAILED), cause,
                   {"result_file": outcome.result_file, "exit_code": int(outcome.exit_code),
                    "reason": outcome.reason, "quarantine": quarantined})


def _cmdline(escape: dict[str, object]) -> str:
    """An escaped process's command line as recorded (a list of words; anything else: ?)."""
    words = escape.get("cmdline")
    return " ".join(map(str, words)) if isinstance(words, list) and words else "?"


def fresh_start(ctx: RunContext, u: UnitState, executor: Executor,
                error: str | None) -> Successor:
    """Resuming the conversation was refused: a fresh attempt carries the partial result."""
    aid = u.current_attempt
    why = (f"Resuming the conversation of {u.predecessor} was refused "
           f"({error or 'by the CLI'}), so this attempt starts fresh.")
    ctx.ledger.record_event("resume-refused", run_id=ctx.run_id, packet_id=u.packet.id,
                            attempt_id=aid, status="resume-refused", cause=why)
    u.carry_on(executor, u.asked, because=why, fresh=True, earlier_result=u.resumed_result)
    return Successor("resume refused: a fresh attempt carries the partial result")


def may_retry_lost(ctx: RunContext, u: UnitState) -> bool:
    """Whether the plan allows a successor after a cluster worker died mid-unit
    (``cluster: {worker_lost: retry}``): once per packet, counted in the ledger (so a
    resumed supervisor allows no more), never silently."""
    conf = ctx.cluster_config
    if conf is None or conf.worker_lost != "retry":
        return False
    return u.lost_retries < LOST_RETRIES


def lost_successor(ctx: RunContext, u: UnitState, executor: Executor,
                   error: str | None) -> Successor:
    """A linked successor of an attempt whose cluster worker died: a fresh start in the same
    workspace, counted in the ledger with a ``worker-lost`` event."""
    aid = u.current_attempt
    u.lost_retries += 1
    why = f"The cluster worker running {aid} died ({error or 'worker lost'})."
    ctx.ledger.spend_lost_retry(ctx.run_id, u.packet.id, aid, why)
    u.carry_on(executor, None, because=why + " This attempt starts again.", fresh=True)
    return Successor("worker lost: the plan allows one successor")


def no_receipt(ctx: RunContext, u: UnitState, aid: str | None, action: str,
               need: str | None, state_dir: str | None = None) -> NotDispatched:
    """Not dispatched: its attempt (if it has one) is closed so; the loop keeps the packet
    pending and stops launching."""
    need = need or "the executor returned no attempt id"
    if aid:
        ctx.ledger.update_attempt(aid, need, status=Status.NOT_DISPATCHED,
                                  state_dir=state_dir, reason="no-receipt", error=need,
                                  finished_at=now_iso())
        u.predecessor = aid
    return NotDispatched(action, need)


def launched_worker(d: Dispatch) -> WorkerLike:
    """The worker ``d`` launched (or re-attached to)."""
    worker: WorkerLike | None = d.worker
    if worker is None:
        raise RuntimeError(f"attempt {d.p.request.attempt_id} has no worker to watch")
    return worker


def ending(ctx: RunContext, u: UnitState, why: str) -> None:
    """The worker is about to be ended: the attempt is cancel-requested until it is gone."""
    cause = ("the run's deadline passed" if why == "timeout" and ctx.state.timed_out
             else "its timeout passed" if why == "timeout"
             else "reassigned" if u.superseded else "cancel requested")
    ctx.ledger.update_attempt(u.current_attempt, cause, status=Status.CANCEL_REQUESTED)
    ctx.emit("cancel-requested", u, cause)


async def _bounded(confirmed: Coroutine[Any, Any, bool]) -> bool:
    try:
        async with asyncio.timeout(QUIESCE_LIMIT_S):
            return await confirmed
    except TimeoutError:
        return False


async def quiesce(pgid: int) -> bool:
    """After the group was ended: confirm no process of it is left (within QUIESCE_LIMIT_S,
    SIGKILL to whatever still is; there is no event to await for an empty group)."""
    delay = 0.01
    if pgid <= 1:   # no local group (0 would be this process's own)
        return False
    try:
        async with asyncio.timeout(QUIESCE_LIMIT_S):
            while True:
                try:
                    os.killpg(pgid, 0)
                except ProcessLookupError:
                    return True
                except PermissionError:
                    return False
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pgid, signal.SIGKILL)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 0.2)
    except TimeoutError:
        return False
