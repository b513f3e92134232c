"""One attempt of one packet, driven through the dispatcher's steps (``prun.attempt.dispatch``).

``attempt`` chooses the executor, parks the unit if its quota pool is empty, reserves its
ports, records the attempt, then (in a worker thread) makes its workspace, renders its brief
and launches it; a session unit is handed to the coordinator instead. ``watch`` waits for the
launched (or re-attached) worker, ends its process group at a cancel, a reassignment or a
deadline and confirms that the group is gone, then judges it and settles it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import shutil
import signal
import time
from collections.abc import Coroutine
from typing import Any, NamedTuple

from .._util.fsutil import atomic_write
from ..attempt import statedir
from ..attempt.dispatch import (
    Dispatch,
    Request,
    admit,
    finish,
    hand_off,
    plan,
    start_async,
    wait_async,
)
from ..attempt.dispatch import begin as begin_attempt
from ..errors import Blocked, PrunError, QuotaExhausted
from ..git.reconcile import UnitInput, plan_scope
from ..ledger import PacketStatus, Status, now_iso
from ..ports.reserve import PortsUnavailable
from . import brief, schedule
from .choices import QuotaPools, Workspace
from .keeper import KeeperLauncher
from .session import session
from .settle import no_receipt, settle
from .unit import UnitState, parse_time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .._util.worker import WorkerLike as RunWorker
    from ..attempt.launcher import Launcher
    from ..attempt.outcome import Outcome
    from ..executors.base import Executor
    from ..ports.reserve import Reservation
    from .supervisor import Supervisor

QUIESCE_LIMIT_S = 5.0


async def attempt(sup: Supervisor, u: UnitState, pools: QuotaPools) -> None:
    """Start the next attempt of ``u`` and drive it to its end (``pools``: the quota states
    of the scheduling pass that started it)."""
    from .. import executors

    p = u.packet
    executor_name = u.executor
    try:
        ex = executors.get(executor_name)
        settings = ex.settings(sup.env, model=p.model, effort=p.effort,
                               timeout_s=p.timeout_s)
    except PrunError as e:
        return no_receipt(sup, u, None, f"choose the {executor_name} executor for {p.id}",
                          e.line())
    reset = await pools.reset_of(ex, settings.model)
    if reset is not None and reset > time.time():
        return schedule.park(sup, u, reset, f"the {ex.quota_group(settings.model)} quota pool "
                             "is empty")
    aid = f"{sup.run_id}:{p.id}:{u.seq + 1}"
    held = None   # a cluster's unit: reserved on the worker that runs it (ports.PortsThere)
    try:
        if sup.cluster is None:
            held = (schedule.reserve_ports(sup, u, aid) if schedule.ports_at_hand(sup, u)
                    else await asyncio.to_thread(schedule.reserve_ports, sup, u, aid))
    except PortsUnavailable as e:
        return schedule.wait_for_ports(sup, u, e)
    u.seq += 1
    u.attempt_id = aid
    u.ports = held
    result = str(sup.paths.results / f"{p.id}.{u.seq}.md")
    # its own rows, committed before its launch, ahead of the ledger's queue; behind it when
    # it depends on another attempt's end (its predecessor's, or of the packets it comes
    # after), which is then committed first (see GroupCommit)
    follows = bool(u.predecessor or p.after)
    with sup.ledger.ahead(not follows):
        sup.ledger.record_attempt(
            aid, "queued" if not u.predecessor else f"follows {u.predecessor}",
            run_id=sup.run_id, packet_id=p.id, seq=u.seq, executor=executor_name,
            requested_model=settings.model, model=settings.model, routing_reason=u.reason,
            base=u.base, result_path=result, predecessor=u.predecessor,
            continue_from=u.continue_from)
    latest = latest_inputs(sup, u) if u.packet.after else {}
    opening = functools.partial(open_attempt, sup, u, held, executor_name, result, latest)
    try:
        opened = opening() if quick_start(sup, u, ex) else await asyncio.to_thread(opening)
    except Blocked as e:
        sup.ledger.update_attempt(aid, e.reason, status=Status.NOT_DISPATCHED,
                                  reason="blocked", error=e.reason, finished_at=now_iso())
        sup.set_packet(u, PacketStatus.BLOCKED, e.reason)
        sup.emit("blocked", u, e.reason)
        return None
    except PrunError as e:
        return no_receipt(sup, u, aid, f"prepare packet {p.id} for {executor_name}",
                          e.line())
    except OSError as e:
        return no_receipt(sup, u, aid, f"prepare packet {p.id} for {executor_name}",
                          f"{e.strerror or e}: {e.filename or ''}".rstrip(": "))
    place = opened.place
    with sup.ledger.ahead(not follows):
        sup.ledger.update_attempt(aid, None, brief=opened.brief, base=place.base,
                                  workspace=place.path, state_dir=opened.dispatch.state.path)
    if opened.ready:  # exactly once: the attempt's row is durable before its worker exists
        try:
            await sup.commits.durable(behind_queue=follows)
        except PrunError as e:   # the ledger cannot record it (a full disk): not launched
            opened.dispatch.launch_error = f"not launched: {e.line()}"
        else:
            opened = opened._replace(launched=await launch(opened))
    await opened_attempt(sup, u, opened)


async def launch(opened: Opened) -> bool:
    """Start the opened attempt's worker: planned in ``open_attempt``, started by its
    launcher from the loop (the keeper's; a cluster's sends it from a thread)."""
    return opened.planned and await start_async(opened.dispatch)


async def opened_attempt(sup: Supervisor, u: UnitState, opened: Opened) -> None:
    """An attempt ``open_attempt`` started: parked if the quota gate refused it, handed to
    the coordinator (a session unit), not dispatched if its worker did not start, else
    watched to its end."""
    aid, d, place, refused = u.current_attempt, opened.dispatch, opened.place, opened.refused
    u.state_dir = d.state.path
    if place.applied:
        sup.emit("based", u, "starts from the accepted changes of "
                 + ", ".join(place.applied), base=place.base)
    if refused is not None:
        await asyncio.to_thread(finish, d, None, refused=refused)
        sup.commits.unsynced = True
        sup.ledger.update_attempt(aid, "quota gate refused", status=Status.QUOTA,
                                  state_dir=d.state.path, reason="quota",
                                  error=refused.line(), resets_at=refused.resets_at,
                                  finished_at=now_iso())
        u.predecessor = aid
        return schedule.park(sup, u, parse_time(refused.resets_at), refused.line())
    if opened.handed is not None:
        return await session(sup, u, d, opened.handed)
    if not opened.launched:
        await asyncio.to_thread(finish, d, None)
        sup.commits.unsynced = True
        return no_receipt(sup, u, aid, f"start {d.p.executor.name} for packet {u.packet.id}",
                          d.launch_error, state_dir=d.state.path)
    u.started = d.launched_at
    u.stalled = False
    sup.ledger.update_attempt(aid, "worker started", status=Status.DISPATCHED,
                              receipt=d.receipt, state_dir=d.state.path,
                              workspace=d.workspace, mode=u.packet.effective_mode,
                              model=d.settings.model,
                              dispatched_at=now_iso(d.launched_at),
                              sandboxed=d.sandboxed)
    sup.emit("dispatched", u, receipt=d.receipt)
    await watch(sup, u, d)


class Opened(NamedTuple):
    """An attempt as ``open_attempt`` started it."""

    dispatch: Dispatch
    place: Workspace                 # its workspace
    brief: str                       # what it was told
    launched: bool                   # its worker started
    refused: QuotaExhausted | None   # the quota gate refused it before any launch
    handed: Outcome | None = None    # a session unit: handed to the coordinator instead
    ready: bool = False              # begun, to be launched once its ledger row is durable
    planned: bool = False            # its launch planned (``d.planned``), when ready


def quick_start(sup: Supervisor, u: UnitState, ex: Executor) -> bool:
    """Whether opening ``u``'s attempt starts no other process and waits for none: a
    scratch dir (no clone, setup command, dependents' changes or first snapshot of its
    base) and an executor that is not ``metered``. Such an attempt is opened in the event
    loop, the others in a thread (``quick_finish`` is the same for its end; a cluster's
    launch, which may bundle the base, is always sent from a thread).

    Not all in threads: a thread that makes many short system calls trades the GIL with the
    loop's thread at each of them, which costs more than the calls."""
    p = u.packet
    if p.writes_code or p.after or sup.run["setup"] or not quick_finish(ex):
        return False
    snapshot_due = p.snapshot and sup.run["repo_root"] and u.base
    return not (snapshot_due and not sup.has_snapshot(u.base or ""))


def quick_finish(ex: Executor) -> bool:
    """Whether judging and publishing an attempt of ``ex`` waits for no other process: no
    quota probe after a failure (a cluster's unit was landed here already, by a landing
    thread)."""
    return not ex.metered()


def open_attempt(sup: Supervisor, u: UnitState, held: Reservation | None, executor_name: str,
                 result: str, latest: dict[str, UnitInput]) -> Opened:
    """Workspace, brief, validation, state dir, the launch's argv: the file and process work
    of starting an attempt (with the ports ``held`` for it here; None: a cluster's unit,
    whose task reserves them on its worker), in a worker thread unless ``quick_start``.
    Raises ``Blocked`` when a packet it comes after was rejected."""
    from ..attempt.dispatch import prepare
    from . import choices as unitprep
    from .dependents import start

    p = u.packet
    begin = start(sup.plan, p, latest, sup.ancestors) if p.after else None
    ids = {"PRUN_RUN_ID": sup.run_id, "PRUN_ATTEMPT_ID": u.attempt_id or "",
           "PRUN_UNIT_ID": p.id, "PRUN_PACKET_ID": p.id, **(held.env() if held else {})}
    reuse, u.reuse_workspace = u.reuse_workspace, None  # a follow-up's, used once
    place = unitprep.workspace(
        p, root=sup.workspaces, seq=u.seq, repo_root=sup.run["repo_root"], base=u.base,
        setup=sup.run["setup"], env={**sup.env, **ids}, snapshot_of=sup.snapshot_of,
        scratch_ready=sup.scratch_ready,
        start=begin, reuse=reuse, reuse_base=u.attempt_base)
    u.workspace, u.attempt_base, u.result_file = place.path, place.base, result
    state = statedir.create(p.id, str(sup.paths.state))
    ctx = brief.context(
        sup.plan, p, workspace=place.kind, result_file=statedir.outbox(state, result),
        base=place.base,
        applied=place.applied, snapshot=place.snapshot,
        ports=schedule.brief_ports(sup, u, held),
        predecessors=begin.predecessors if begin else {})
    text = prompt(u, ctx)
    prompt_file = os.path.join(sup.paths.prompts, f"{p.id}.{u.seq}.md")
    atomic_write(prompt_file, text, durable=False)
    extra = {**ids, **brief.environment(p, ctx, prompt_file)}
    request = Request(
        executor=executor_name, prompt_file=prompt_file, result_file=result, unit_id=p.id,
        mode=p.effective_mode, continue_from=u.continue_from,
        add_dirs=(place.snapshot,) if place.snapshot else (),
        command=p.command if executor_name == "command" else None, model=p.model,
        effort=p.effort, timeout_s=p.timeout_s, workspace=place.path,
        state_root=str(sup.paths.state), env=sup.env, attempt_id=u.attempt_id,
        extra_env=extra, briefed=True, sandbox=sup.sandbox.get(p.id), outbox=True,
        read_only=read_only(sup, place, prompt_file), hidden=hidden(sup),
        subdispatch=p.subdispatch, config=sup.settings, git_wrapper=sup.git_wrapper,
        prompt=text)
    try:
        prepared = prepare(request)
    except PrunError:
        shutil.rmtree(state.path, ignore_errors=True)  # nothing was written in it yet
        raise
    launcher: Launcher[Dispatch]
    if sup.cluster is not None:   # a cluster run: the attempt is launched on a Dask worker
        launcher = sup.cluster.unit(kind=place.kind, workspace=place.path, base=place.base,
                                    snapshot=place.snapshot, repo_root=sup.run["repo_root"],
                                    setup=sup.run["setup"], fresh=reuse is None,
                                    ports=schedule.ports_there(sup, u))
    else:                         # else by the run's keeper
        launcher = KeeperLauncher(sup.keeper)
    d = Dispatch(prepared, launcher, state, dispatcher_pid=os.getpid(),
                 dispatcher_started=sup.started)
    begin_attempt(d)
    try:
        admit(d)
    except QuotaExhausted as e:
        return Opened(d, place, text, False, e)
    if not prepared.executor.launches_process:  # a session unit: the coordinator runs it
        return Opened(d, place, text, False, None, hand_off(d))
    return Opened(d, place, text, False, None, ready=True, planned=plan(d))


def read_only(sup: Supervisor, place: Workspace, brief_file: str) -> tuple[str, ...]:
    """What a unit's sandbox mounts read-only: the real repository (its .git included), the
    run's published results (a dependent is told its predecessors'), the unit's own brief,
    the run's snapshot and the object stores a code unit's clone borrows from (found by where
    prun made them, never by what the clone says). (Its own places are writable:
    ``prun.attempt.launching``.)"""
    from ..git.store import borrowed

    stores = borrowed(place.path, place.base) if place.kind == "clone" and place.base else []
    paths = [sup.run["repo_root"], str(sup.paths.results), brief_file, place.snapshot, *stores]
    return tuple(p for p in paths if p)


def hidden(sup: Supervisor) -> tuple[str, ...]:
    """What a unit's sandbox hides (an empty folder but for what is bound back in it): every
    run's folder, with its prompts and the state dirs of other units and runs (the dispatcher
    hides every workspace but the unit's own and its snapshot)."""
    return (str(sup.paths.root.parent),)


def prompt(u: UnitState, ctx: brief.Context) -> str:
    """What this attempt receives: the brief; a resumed turn's request; or, for a fresh
    attempt carrying on an earlier one, the brief with what that one left."""
    followup, earlier = u.followup, u.earlier
    u.followup, u.earlier = None, None
    u.asked = followup
    if u.continue_from:
        text = followup or ("A quota limit stopped your earlier turn. Continue the same "
                            "task from where you stopped and finish it.")
        return brief.resumed_turn(u.packet, ctx, text)
    return brief.render(u.packet, ctx, followup=followup, earlier=earlier)


def latest_inputs(sup: Supervisor, u: UnitState) -> dict[str, UnitInput]:
    """The deciding attempt of every packet ``u`` comes after, as reconcile reads it."""
    if sup.scope is None:
        sup.scope = plan_scope(sup.plan, sup.run["repo_root"])
    may_write, shared = sup.scope
    out = {}
    for pid in sup.ancestors.get(u.packet.id, ()):
        a = sup.units[pid]
        status = "succeeded" if a.status == PacketStatus.SUCCEEDED else a.status.value
        out[pid] = UnitInput(
            packet=a.packet, attempt_id=a.attempt_id, status=status,
            state_dir=a.state_dir, workspace=a.workspace, base=a.attempt_base or a.base,
            result_file=a.result_file, executor=a.executor, may_write=may_write[pid],
            shared=shared)
    return out


async def watch(sup: Supervisor, u: UnitState, d: Dispatch) -> None:
    """Wait for the launched (or re-attached) attempt, end it when asked, then judge it."""
    worker = launched_worker(d)
    stop = u.stop = asyncio.Event()
    if u.cancel_requested or u.superseded:
        stop.set()
    code, why = await wait_async(d, stop, sup.deadline,
                                 on_end=lambda why: ending(sup, u, why))
    d.escaped = list(getattr(worker, "escaped", ()))  # ended by the keeper with it
    quiet = True
    if why is not None:
        remote = getattr(worker, "quiesce", None)   # a cluster's worker confirms it there
        quiet = await (_bounded(remote()) if remote is not None else quiesce(worker.pid))
    finishing = functools.partial(finish, d, code, timed_out=why == "timeout",
                                  cancelled=why == "cancelled")
    outcome = (finishing() if quick_finish(d.p.executor)
               else await asyncio.to_thread(finishing))
    settle(sup, u, outcome, why, executor=d.p.executor, workspace=d.workspace, quiet=quiet)


def launched_worker(d: Dispatch) -> RunWorker:
    """The worker ``d`` launched (or re-attached to)."""
    worker: RunWorker | None = d.worker
    if worker is None:
        raise RuntimeError(f"attempt {d.p.request.attempt_id} has no worker to watch")
    return worker


def ending(sup: Supervisor, u: UnitState, why: str) -> None:
    """The worker is about to be ended: the attempt is cancel-requested until it is gone."""
    cause = ("the run's deadline passed" if why == "timeout" and sup.timed_out
             else "its timeout passed" if why == "timeout"
             else "reassigned" if u.superseded else "cancel requested")
    sup.ledger.update_attempt(u.current_attempt, cause, status=Status.CANCEL_REQUESTED)
    sup.emit("cancel-requested", u, cause)


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
