"""Opening one attempt of a packet (``open_attempt``, in one worker thread): its workspace,
its brief and its request (``brief_attempt``), then its ``Dispatch`` built with its launcher
(the launch seam: ``launcher`` is the one place that chooses how an attempt's process is
started) and planned. The unit's task (``prun.run.life``) then records the attempt in the
ledger, with its workspace and state dir, and only then starts the worker: a worker starts only
once its attempt's row is committed. (An attempt opened but never recorded, its supervisor
killed in between, started nothing: its state dir and workspace hold no work.)
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, replace

from .._util.fsutil import atomic_write
from ..attempt import statedir
from ..attempt.dispatch import (
    Dispatch,
    Prepared,
    Request,
    SessionLauncher,
    admit,
    plan,
    prepare,
)
from ..attempt.dispatch import begin as begin_attempt
from ..attempt.launcher import Launcher
from ..errors import PrunError, QuotaExhausted
from ..git.reconcile import UnitInput, plan_scope
from ..git.store import borrowed
from ..git.verdict import AcceptCheck
from ..ledger import PacketStatus
from ..plan import Prime
from ..ports.reserve import Reservation
from . import brief, choices, schedule
from .choices import Workspace
from .context import RunContext
from .dependents import start
from .keeper import KeeperLauncher
from .unit import UnitState


@dataclass(frozen=True)
class Briefed:
    """An attempt ready to be opened: where it works, what it is told, its request."""

    place: Workspace
    brief: str
    prepared: Prepared
    state: statedir.StateDir
    fresh: bool                      # a new workspace (not a follow-up's)


@dataclass(frozen=True)
class Opened:
    """An attempt as ``open_attempt`` left it, ready to start: its ``Dispatch`` built with its
    launcher and planned; or refused by the quota gate; or not startable (``error``)."""

    briefed: Briefed
    dispatch: Dispatch
    planned: bool = False
    refused: QuotaExhausted | None = None
    error: str | None = None         # its opening files could not be written


def brief_attempt(ctx: RunContext, u: UnitState, held: Reservation | None,
                  executor_name: str, result: str,
                  latest: dict[str, UnitInput]) -> Briefed:
    """Workspace, brief, validation and state dir: the file and process work before an
    attempt is opened (with the ports ``held`` for it here; None: a cluster's unit, whose
    task reserves them on its worker), in a worker thread. Raises ``Blocked`` when a packet
    it comes after was rejected."""
    p = u.packet
    begin = start(ctx.plan, p, latest, ctx.ancestors) if p.after else None
    ids = {"PRUN_RUN_ID": ctx.run_id, "PRUN_ATTEMPT_ID": u.attempt_id or "",
           "PRUN_UNIT_ID": p.id, "PRUN_PACKET_ID": p.id, **(held.env() if held else {}),
           **({"PRUN_CANDIDATE": str(p.candidate)} if p.candidate else {})}
    reuse, u.reuse_workspace = u.reuse_workspace, None  # a follow-up's, used once
    place = choices.workspace(
        p, root=ctx.workspaces, seq=u.seq, repo_root=ctx.run["repo_root"], base=u.base,
        setup=ctx.run["setup"], env={**ctx.env, **ids}, snapshot_of=ctx.snapshot_of,
        scratch_ready=ctx.scratch_ready,
        start=begin, reuse=reuse, reuse_base=u.attempt_base,
        prime=Prime.from_json(ctx.run.get("workspace")), templates=ctx.settings.workspace_root)
    u.workspace, u.attempt_base, u.result_file = place.path, place.base, result
    state = statedir.create(p.id, str(ctx.paths.state))
    bctx = brief.context(
        ctx.plan, p, workspace=place.kind, result_file=statedir.outbox(state, result),
        base=place.base,
        applied=place.applied, snapshot=place.snapshot,
        ports=schedule.brief_ports(ctx, u, held),
        predecessors=begin.predecessors if begin else {})
    text = prompt(u, bctx)
    prompt_file = os.path.join(ctx.paths.prompts, f"{p.id}.{u.seq}.md")
    atomic_write(prompt_file, text, durable=False)
    extra = {**ids, **brief.environment(p, bctx, prompt_file)}
    request = Request(
        executor=executor_name, prompt_file=prompt_file, result_file=result, unit_id=p.id,
        mode=p.effective_mode, continue_from=u.continue_from,
        add_dirs=(place.snapshot,) if place.snapshot else (),
        command=p.command if executor_name == "command" else None, model=p.model,
        effort=p.effort, timeout_s=p.timeout_s, workspace=place.path,
        state_root=str(ctx.paths.state), env=ctx.env, attempt_id=u.attempt_id,
        extra_env=extra, briefed=True, sandbox=ctx.sandbox.get(p.id), outbox=True,
        read_only=read_only(ctx, place, prompt_file), hidden=hidden(ctx),
        subdispatch=p.subdispatch, config=ctx.settings, git_wrapper=ctx.git_wrapper,
        prompt=text, workspace_at=place.seen_at, overlays=place.overlays)
    try:
        prepared = prepare(request)
    except PrunError:
        shutil.rmtree(state.path, ignore_errors=True)  # nothing was written in it yet
        raise
    return Briefed(place, text, prepared, state, fresh=reuse is None)


def open_attempt(ctx: RunContext, u: UnitState, held: Reservation | None, executor_name: str,
                 result: str, latest: dict[str, UnitInput]) -> Opened:
    """Everything before an attempt's worker starts, in one worker thread: its workspace,
    brief and request (``brief_attempt``), then its ``Dispatch`` with its launcher (the run's
    keeper; a Dask worker for a cluster run; the coordinator for a session unit), its opening
    files, the quota gate and the launch's file work. The unit's task records what this gives
    in the ledger, then starts the worker (``start_async``). Raises what
    ``brief_attempt`` raises."""
    b = brief_attempt(ctx, u, held, executor_name, result, latest)
    d = Dispatch(b.prepared, launcher(ctx, u, b), b.state, dispatcher_pid=os.getpid(),
                 dispatcher_started=ctx.started)
    try:
        begin_attempt(d)
        admit(d)
    except QuotaExhausted as e:
        return Opened(b, d, refused=e)
    except PrunError as e:
        return Opened(b, d, error=e.line())
    except OSError as e:
        return Opened(b, d, error=f"{e.strerror or e}: {e.filename or ''}".rstrip(": "))
    return Opened(b, d, planned=plan(d))


def launcher(ctx: RunContext, u: UnitState, b: Briefed) -> Launcher[Dispatch]:
    """The launch seam's way for this attempt: the coordinator runs a session unit, a Dask
    worker a cluster run's unit, the run's keeper any other."""
    if not b.prepared.executor.launches_process:
        return SessionLauncher()
    if ctx.cluster is not None:
        place = b.place
        return ctx.cluster.unit(kind=place.kind, workspace=place.path, base=place.base,
                                snapshot=place.snapshot, repo_root=ctx.run["repo_root"],
                                setup=ctx.run["setup"], fresh=b.fresh,
                                ports=schedule.ports_there(ctx, u))
    limits = u.packet.resources
    return KeeperLauncher(ctx.keeper, {k: v for k, v in (("memory", limits.memory),
                                                          ("pids", limits.pids)) if v})


def read_only(ctx: RunContext, place: Workspace, brief_file: str) -> tuple[str, ...]:
    """What a unit's sandbox mounts read-only: the real repository (its .git included), the
    run's published results (a dependent is told its predecessors'), the unit's own brief,
    the run's snapshot and the object stores a code unit's clone borrows from (found by where
    prun made them, never by what the clone says). (Its own places are writable:
    ``prun.attempt.launching``.)"""
    stores = borrowed(place.path, place.base) if place.kind == "clone" and place.base else []
    paths = [ctx.run["repo_root"], str(ctx.paths.results), brief_file, place.snapshot, *stores]
    return tuple(p for p in paths if p)


def hidden(ctx: RunContext) -> tuple[str, ...]:
    """What a unit's sandbox hides (an empty folder but for what is bound back in it): every
    run's folder, with its prompts and the state dirs of other units and runs (the dispatcher
    hides every workspace but the unit's own and its snapshot)."""
    return (str(ctx.paths.root.parent),)


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


def latest_inputs(ctx: RunContext, u: UnitState) -> dict[str, UnitInput]:
    """The deciding attempt of every packet ``u`` comes after, as reconcile reads it, with the
    acceptance check it had in the run (``prun.run.verify``), when one ran."""
    out = {}
    for pid in ctx.ancestors.get(u.packet.id, ()):
        a = ctx.state.units[pid]
        unit = unit_input(ctx, a, "succeeded" if a.status == PacketStatus.SUCCEEDED
                          else a.status.value)
        row = ctx.ledger.attempt(a.attempt_id) if a.attempt_id else None
        out[pid] = replace(unit, accept=AcceptCheck.from_row(dict(row)) if row else None)
    return out


def unit_input(ctx: RunContext, a: UnitState, status: str) -> UnitInput:
    """``a``'s current (or last) attempt as reconcile reads it, its status ``status``."""
    if ctx.scope is None:
        ctx.scope = plan_scope(ctx.plan, ctx.run["repo_root"])
    may_write, shared = ctx.scope
    return UnitInput(
        packet=a.packet, attempt_id=a.attempt_id, status=status, state_dir=a.state_dir,
        workspace=a.workspace, base=a.attempt_base or a.base, result_file=a.result_file,
        executor=a.executor, may_write=may_write[a.packet.id], shared=shared)


