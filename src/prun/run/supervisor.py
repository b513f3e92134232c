"""The run supervisor: one asyncio process drives every unit of a run.

Each unit's attempt goes through the dispatcher's own steps (``prun.attempt.dispatch``: prepare,
begin, launch, wait, finish); the supervisor adds what a fan-out needs around them. This
module holds the loop and the group commit; each job around it has a module of its own:

* ``schedule``: a queue bounded by the run's parallelism, ``after`` dependencies, quota
  parking and the ports a unit waits for;
* ``drive`` (and ``session`` for a session unit): one attempt, from its workspace and brief
  to its launch and its watch; an attempt counts as dispatched only once its worker runs (pid
  and start time); no receipt leaves the packet pending and stops the run;
* ``settle``: how an attempt ends: at a cancel, a reassignment or the deadline it is
  cancel-requested until its process group is gone, its partial output is quarantined, and
  only then is it recorded as cancelled or timed out; quota stops and follow-ups start a
  linked attempt;
* ``control``: requests from other commands (cancel, reassign, followup) through the ledger,
  with SIGUSR1 as a wake-up; the run's deadline; stalls;
* ``recovery``: started again on a run whose supervisor died (``prun resume``), it
  re-attaches to workers still running (pidfd), judges those that finished meanwhile from
  their state dirs, and launches nothing twice;
* ``unit``: ``UnitState``, the per-unit state they all share.

The supervisor records every change in the ledger and emits ``Event``s; it prints nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from collections.abc import Callable, Coroutine
from typing import Any

from .. import settings
from .._util.timeparse import epoch
from ..errors import PrunError
from ..ledger import Ledger, PacketStatus, RunStatus, Status, now_iso
from . import control, drive, recovery, schedule
from .choices import QuotaPools, git_wrapper
from .detached import ready_signal
from .events import Event
from .freeze import packet_from_spec
from .group_commit import GroupCommit
from .keeper import Keeper
from .paths import RunPaths
from .unit import UnitState

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..cluster.client import Cluster
    from ..ports.ranges import RunRanges
    from .event_hooks import EventHooks

THREADS = 4   # what waits on another process (git, setup, probes) runs here, off the loop


class Supervisor:
    """One run, driven to its end by ``run_until_done``. Its attributes are the run's state,
    shared by the modules that do its jobs (each takes the supervisor as its first argument):
    the frozen run and its units; the scheduler's cursor and parked set; the control flags
    (stopped, cancelled, timed out) and when to look for requests; the group commit's state."""

    def __init__(self, ledger: Ledger, run_id: str, *, emit: Callable[[Event], None],
                 env: dict[str, str] | None = None, keeper: Keeper | None = None,
                 on_claimed: Callable[[], None] | None = None):
        from pathlib import Path

        from ..plan import Plan
        from ..plan.independence import ancestors

        run = ledger.run(run_id)
        if run is None:
            raise PrunError(f"no run {run_id} in the ledger")
        self.ledger = ledger
        self.run = dict(run)
        self.run_id = run_id
        self.paths = RunPaths(Path(self.run["run_dir"]))
        self.env = dict(os.environ if env is None else env)
        self.emit_to = emit
        self.on_claimed = on_claimed   # told once this process holds the run
        self.keeper = keeper or Keeper(self.env)   # starts, reaps and logs the workers
        self.parallel = int(self.run["parallel"] or 1)
        self.deadline = epoch(self.run["deadline"])
        self.started: float | None = None    # this process's start time, once it holds the run
        self.settings = settings.load(self.env)   # read once: every attempt uses this
        self.stall_s = self.settings.stall_s
        self.git_wrapper = git_wrapper(self.settings.user_state)
        self.workspaces = os.path.join(self.settings.workspace_root, run_id)  # the run's
        self._snapshots: dict[str, str] = {}     # base -> the run's read-only snapshot of it
        self.ranges: RunRanges | None = None     # the units' own port ranges (schedule.py)
        from ..cluster.config import read as cluster_config  # a cluster run's (docs/cluster.md)

        self.cluster_config = cluster_config(str(self.paths.root))
        self.cluster: Cluster | None = None
        # the frozen packets, each as a unit, in plan order
        rows = ledger.packets(run_id)
        specs = {row["id"]: json.loads(row["spec"]) for row in rows}
        self.units: dict[str, UnitState] = {
            row["id"]: UnitState(packet=packet_from_spec(specs[row["id"]]),
                                 status=PacketStatus(row["status"]), executor=row["executor"],
                                 reason=specs[row["id"]].get("routing_reason") or "",
                                 base=row["base"], lost_retries=row["lost_retries"])
            for row in rows}
        self.order = list(self.units.values())
        self.sandbox = {pid: spec.get("sandbox") for pid, spec in specs.items()}
        self.plan = Plan(packets=tuple(u.packet for u in self.order))
        self.ancestors = ancestors(self.plan)
        # each packet's may_write and the shared paths (git.reconcile.plan_scope)
        self.scope: tuple[dict[str, tuple[str, ...]], dict[str, str]] | None = None
        # the scheduler (schedule.py)
        self.cursor = 0                      # every unit before it is finished
        self.parked: set[str] = set()
        # control (control.py)
        self.stopped: str | None = None      # why the run stopped launching (no receipt)
        self.cancelled = False
        self.timed_out = False
        self.requests_due = True             # look for control requests at the next turn
        self.next_request_check = 0.0
        self.last_stall_check = 0.0
        # the loop and the group commit
        self.running: set[asyncio.Task[None]] = set()   # the units' tasks, all in _group
        self._group: asyncio.TaskGroup | None = None
        self._wake = asyncio.Event()          # made again for each run_until_done
        self.hooks: EventHooks | None = None  # the on_event hooks, while the run is driven
        self._scratch_ready: bool | None = None  # see scratch_ready
        self.commits = GroupCommit(ledger, str(self.paths.root))  # the ledger's group commit

    # events --------------------------------------------------------------------------------
    def snapshot_of(self, base: str) -> str:
        """The run's read-only snapshot of the code at ``base``: one per base per run, made
        by the first unit that needs it (``git.snapshot``; called from worker threads)."""
        found = self._snapshots.get(base)
        if found is None:
            from ..git.snapshot import ensure_snapshot

            found = self._snapshots[base] = ensure_snapshot(
                self.workspaces, self.run["repo_root"], base).path
        return found

    def has_snapshot(self, base: str) -> bool:
        """Whether the run's read-only snapshot of ``base`` is made already."""
        return base in self._snapshots

    def scratch_ready(self) -> bool:
        """Whether the run's folder of workspaces is made and outside any git work tree,
        checked once per run (a unit whose check failed reports it itself)."""
        if self._scratch_ready is None:
            from ..errors import WorkspaceError
            from ..git.workspace import scratch_parent

            try:
                scratch_parent(self.workspaces)
                self._scratch_ready = True
            except (WorkspaceError, OSError):
                self._scratch_ready = False
        return self._scratch_ready

    def emit(self, kind: str, u: UnitState | None = None, cause: str = "",
             **data: Any) -> None:
        """Tell the renderer (and the plan's hook) of a change; the kinds a later command
        must find are logged in the ledger too."""
        ev = Event(kind, self.run_id, packet_id=u.packet.id if u else None,
                   attempt_id=u.attempt_id if u else None,
                   executor=u.executor if u else None, cause=cause,
                   data={k: v for k, v in data.items() if v is not None})
        if kind in ("stalled", "stopped", "parked", "blocked", "handoff", "escaped", "waiting"):
            self.ledger.record_event(kind, run_id=self.run_id, packet_id=ev.packet_id,
                                     attempt_id=ev.attempt_id, status=kind, cause=cause,
                                     data=ev.data or None)
        self.emit_to(ev)
        if self.hooks is not None:
            self.hooks.fire(ev)

    # the loop ------------------------------------------------------------------------------
    async def run_until_done(self) -> str:
        """Drive the run to its end; returns the run's final status. Every unit's task, the
        ledger flusher and the event hooks live in task groups of this call: none outlives it."""
        from concurrent.futures import ThreadPoolExecutor

        from .._util.process import create_time
        from ..cluster import connected
        from .detached import supervisor_alive
        from .event_hooks import EventHooks

        loop = asyncio.get_running_loop()
        loop.set_default_executor(ThreadPoolExecutor(max_workers=THREADS))
        self._wake = asyncio.Event()
        self.paths.make()
        self.started = create_time(os.getpid())
        self.ledger.claim_run(self.run_id, os.getpid(), self.started, supervisor_alive)
        if self.on_claimed is not None:
            self.on_claimed()
        async with (connected(self.cluster_config, self.run_id, loop) as self.cluster,
                    EventHooks(self.run["on_event"], str(self.paths.hooks_log),
                               self.env) as hooks):  # leaving it waits for them (bounded)
            self.hooks = hooks
            status = await self._supervise(loop)
            if self.ranges is not None:   # every attempt has ended: the block goes back
                await asyncio.to_thread(self.ranges.close)
            counts: dict[str, int] = {}
            for u in self.units.values():
                counts[u.status.value] = counts.get(u.status.value, 0) + 1
            self.emit("run-done", cause=status.value, status=status.value, counts=counts,
                      stopped=self.stopped)
        return status

    async def _supervise(self, loop: asyncio.AbstractEventLoop) -> RunStatus:
        """Recover, then turn the loop until the run is over, with the units' tasks and the
        ledger flusher in one task group."""
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.add_signal_handler(sig, control.cancel_all, self, f"signal {sig.name}")
        loop.add_signal_handler(signal.SIGUSR1, control.requests_sent, self)
        try:
            self.emit("run-started", cause=f"{len(self.units)} packets, parallel {self.parallel}")
            async with asyncio.TaskGroup() as group:
                self._group = group
                recovery.recover(self)
                self.keeper.start(loop)
                self.ledger.defer_writes()
                flusher = group.create_task(self.commits.flush_often(), name="ledger flusher")
                try:
                    return await self._loop()
                finally:
                    flusher.cancel()
        except BaseExceptionGroup as errors:  # the loop's own error: units' tasks never raise
            raise _lone(errors) from None
        finally:
            self._group = None
            self.keeper.close()
            self.commits.close()
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1):
                loop.remove_signal_handler(sig)

    async def _loop(self) -> RunStatus:
        """Requests, the deadline, what to launch; then sleep until something happens."""
        while True:
            if self.requests_due or time.monotonic() >= self.next_request_check:
                control.take_requests(self)
            control.check_deadline(self)
            pools = QuotaPools(self.env)   # read once for the units this pass launches
            for u in schedule.ready(self):
                self.start(u, drive.attempt(self, u, pools))
            if not self.running and self._settled():
                self.commits.commit_now()
                status = self._final_status()
                if self.ledger.close_run(self.run_id, status):
                    return status  # released; a later request starts a new supervisor
                continue           # a request arrived as the run ended: carry it out
            await self._sleep()
            control.check_stalls(self)

    async def _sleep(self) -> None:
        """Until a unit's task ends, a request or signal wakes us, a park ends, the deadline
        comes, or a second passes (the request and stall checks)."""
        now = time.time()
        timeout = 1.0
        parked = [self.units[p].park_until or now for p in self.parked]
        if parked:
            timeout = min(timeout, max(0.0, min(parked) - now))
        if self.deadline:
            timeout = min(timeout, max(0.0, self.deadline - now))
        if not self._wake.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._wake.wait()
        self._wake.clear()

    def _internal_error(self, packet_id: str, exc: BaseException) -> None:
        """A bug while driving one unit: keep its traceback, fail that unit, keep the run."""
        import sys
        import traceback

        traceback.print_exception(exc, file=sys.stderr)
        u = self.units.get(packet_id)
        if u is None or u.status.terminal:
            return
        cause = f"internal error in the supervisor: {type(exc).__name__}: {exc}"
        if u.attempt_id:
            self.ledger.update_attempt(u.attempt_id, cause, status=Status.FAILED,
                                       reason="internal-error", error=cause,
                                       finished_at=now_iso())
        self.set_packet(u, PacketStatus.FAILED, cause)
        self.emit("failed", u, cause)

    def _settled(self) -> bool:
        for u in self.units.values():
            if u.status.terminal:
                continue
            if u.status == PacketStatus.RUNNING:
                return False
            if self.stopped or self.cancelled or self.timed_out:
                continue  # pending units stay pending: the run stopped
            return False
        return True

    def _final_status(self) -> RunStatus:
        if self.cancelled:
            return RunStatus.CANCELLED
        if self.timed_out:
            return RunStatus.TIMEOUT
        if self.stopped:
            return RunStatus.STOPPED
        if all(u.status == PacketStatus.SUCCEEDED for u in self.units.values()):
            return RunStatus.SUCCEEDED
        return RunStatus.FAILED

    def start(self, u: UnitState, coro: Coroutine[object, object, None]) -> None:
        """Drive ``coro`` (an attempt of ``u``) as a task of the run's task group."""
        if self._group is None:
            raise RuntimeError(f"{u.packet.id} started while the run is not being driven")
        self.running.add(self._group.create_task(self._unit_task(u, coro), name=u.packet.id))

    async def _unit_task(self, u: UnitState, coro: Coroutine[object, object, None]) -> None:
        """One unit's task. It never raises: an unexpected error fails that unit only (the
        task group would end the whole run), and the attempt's ports go back whatever
        happened."""
        try:
            try:
                await coro
            finally:
                await schedule.release_ports(self, u)
        except Exception as exc:
            self._internal_error(u.packet.id, exc)
        finally:
            self.running.discard(asyncio.current_task())
            self.wake()

    def wake(self) -> None:
        """Wake the loop: a request, a signal or a cancel wants a turn."""
        self._wake.set()

    def set_packet(self, u: UnitState, status: PacketStatus, cause: str, **data: Any) -> None:
        """Change a packet's status, in the ledger and in the scheduler's view."""
        if status in (PacketStatus.PENDING, PacketStatus.PARKED):
            self.cursor = 0  # it is open again: scan from the start
        if status == PacketStatus.PARKED:
            self.parked.add(u.packet.id)
        else:
            self.parked.discard(u.packet.id)
        u.status = status
        self.ledger.set_packet_status(self.run_id, u.packet.id, status, cause, data or None)


def _lone(errors: BaseExceptionGroup[BaseException]) -> BaseException:
    """The one error a task group gathered (else the group itself), so that the loop's own
    error, a ``PrunError`` say, reaches the caller as it was raised."""
    return errors.exceptions[0] if len(errors.exceptions) == 1 else errors


def run_supervisor(run_id: str, emit: Callable[[Event], None], ledger: Ledger | None = None,
                   env: dict[str, str] | None = None, keeper: Keeper | None = None,
                   on_claimed: Callable[[], None] | None = None) -> str:
    """Drive the run to its end in this process; returns the run's final status. ``keeper``:
    one launched already (``Keeper.launch``), else the supervisor starts its own."""
    own = ledger is None
    ledger = ledger or Ledger.open()
    try:
        sup = Supervisor(ledger, run_id, emit=emit, env=env, keeper=keeper,
                         on_claimed=on_claimed)
        try:
            return asyncio.run(sup.run_until_done())
        finally:
            sup.keeper.close()
    finally:
        if own:
            ledger.close()


def main(argv: list[str] | None = None) -> int:
    """``python -m prun.run.supervisor RUN``: the detached supervisor (output to its log)."""
    import sys

    from .events import LineRenderer

    args = sys.argv[1:] if argv is None else argv
    renderer = LineRenderer(sys.stdout, verbose=True)
    status = run_supervisor(args[0], renderer.handle, on_claimed=ready_signal())
    return 0 if status == RunStatus.SUCCEEDED else 1


if __name__ == "__main__":
    raise SystemExit(main())
