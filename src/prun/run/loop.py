"""The run loop: one asyncio process drives every unit of a run over one plain state.

The run's state (``RunState``: the units, the scheduler's place, why it stopped, what it has
to tell) is changed here alone, one named step at a time:

1. ``take_requests``: cancel, reassign and follow-up requests other commands left in the
   ledger (``control``), looked for on SIGUSR1 and every ``REQUEST_POLL_S``;
2. ``check_deadline``: past the run's deadline nothing more starts;
3. ``launch``: the units the scheduler chooses (``schedule.ready``) each get a task, their
   life (``life.life``: one attempt, from its start to its judged end);
4. ``apply_ends``: what each ended task returned (``ends``) becomes the packet's status, the
   events to tell and whether the run stops launching;
5. ``check_stalls``: running units whose output has not grown are reported once;

and after each step ``tell`` writes the packet statuses to the ledger and emits the events.
The loop sleeps until a task ends, a request or signal comes, a park ends or the deadline
passes. Started on a run whose supervisor died (``prun resume``), it first recovers
(``recovery``): re-attached or re-judged attempts are tasks like any other.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from .. import settings
from .._util.process import create_time
from .._util.timeparse import epoch
from ..cluster import connected
from ..cluster.config import read as cluster_config
from ..errors import PrunError
from ..ledger import Ledger, PacketStatus, RunStatus, Status, now_iso
from ..plan import Plan
from ..plan.independence import ancestors
from . import budget, control, recovery, schedule
from .admission import Admission
from .choices import QuotaPools, git_wrapper
from .context import RunContext
from .detached import supervisor_alive
from .ends import Blocked, End, Failed, NotDispatched, Parked, Settled, Successor, Superseded, WaitingForPorts
from .event_hooks import EventHooks
from .events import Event
from .freeze import packet_from_spec
from .keeper import Keeper
from .life import life
from .paths import RunPaths
from .state import PacketChange, RunState
from .unit import UnitState
from .verify import AUTO

THREADS = 4   # what waits on another process or the disk (git, setup, judging) runs here,
#               and the acceptance checks: one per unit's task, so at most ``parallel`` more
STALL_CHECK_S = 30.0   # stalls are looked for at most this often (and 4 times per threshold)


class Loop:
    """One run, driven to its end by ``run_until_done``."""

    def __init__(self, ledger: Ledger, run_id: str, *, emit: Callable[[Event], None],
                 env: dict[str, str] | None = None, keeper: Keeper | None = None,
                 on_claimed: Callable[[], None] | None = None):
        row = ledger.run(run_id)
        if row is None:
            raise PrunError(f"no run {run_id} in the ledger")
        run = dict(row)
        env = dict(os.environ if env is None else env)
        rows = ledger.packets(run_id)
        specs = {r["id"]: json.loads(r["spec"]) for r in rows}
        units = {r["id"]: UnitState(packet=packet_from_spec(specs[r["id"]]),
                                    status=PacketStatus(r["status"]), executor=r["executor"],
                                    reason=specs[r["id"]].get("routing_reason") or "",
                                    base=r["base"], lost_retries=r["lost_retries"])
                 for r in rows}
        self.state = RunState(run_id, units, parallel=int(run["parallel"] or 1),
                              deadline=epoch(run["deadline"]),
                              admission=Admission.of(json.loads(run.get("admission") or "{}")))
        paths = RunPaths(Path(run["run_dir"]))
        user = settings.load(env)
        plan = Plan(packets=tuple(u.packet for u in self.state.order))
        self.ctx = RunContext(
            run=run, state=self.state, ledger=ledger, paths=paths, env=env, settings=user,
            keeper=keeper or Keeper(env), plan=plan, ancestors=ancestors(plan),
            sandbox={pid: spec.get("sandbox") for pid, spec in specs.items()},
            git_wrapper=git_wrapper(user.user_state),
            workspaces=os.path.join(user.workspace_root, run_id),
            cluster_config=cluster_config(str(paths.root)), tell=self.tell)
        self.ledger, self.run_id, self.emit_to = ledger, run_id, emit
        self.budget = budget.gate_of(run, ledger, env)   # None: the run has no budget
        self.on_claimed = on_claimed   # told once this process holds the run
        self.tasks: dict[asyncio.Task[End], UnitState] = {}   # the units' tasks, running
        self.ended: list[tuple[UnitState, End]] = []          # their ends, to be applied
        self.requests_due = True        # look for control requests at the next turn
        self.next_request_check = 0.0
        self.last_stall_check = 0.0
        self.hooks: EventHooks | None = None   # the on_event hooks, while the run is driven
        self._group: asyncio.TaskGroup | None = None
        self._wake = asyncio.Event()

    # the loop ------------------------------------------------------------------------------
    async def run_until_done(self) -> str:
        """Drive the run to its end; returns the run's final status. Every unit's task and
        the event hooks live in task groups of this call: none outlives it."""
        loop = asyncio.get_running_loop()
        loop.set_default_executor(ThreadPoolExecutor(max_workers=THREADS + self.state.parallel))
        self._wake = asyncio.Event()
        ctx = self.ctx
        ctx.paths.make()
        ctx.started = create_time(os.getpid())
        self.ledger.claim_run(self.run_id, os.getpid(), ctx.started, supervisor_alive)
        if self.on_claimed is not None:
            self.on_claimed()
        async with (connected(ctx.cluster_config, self.run_id, loop) as ctx.cluster,
                    EventHooks(ctx.run["on_event"], str(ctx.paths.hooks_log),
                               ctx.env) as hooks):  # leaving it waits for them (bounded)
            self.hooks = hooks
            status = await self._supervise(loop)
            if ctx.ranges is not None:   # every attempt has ended: the block goes back
                await asyncio.to_thread(ctx.ranges.close)
            self.tell(Event("run-done", self.run_id, cause=status.value,
                            data={"status": status.value, "counts": self.state.counts(),
                                  **({"stopped": self.state.stopped}
                                     if self.state.stopped else {})}))
        return status

    async def _supervise(self, loop: asyncio.AbstractEventLoop) -> RunStatus:
        """Recover, then turn the loop until the run is over, the units' tasks in one group."""
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.add_signal_handler(sig, self.cancel_all, f"signal {sig.name}")
        loop.add_signal_handler(signal.SIGUSR1, self.requests_sent)
        try:
            self.state.emit("run-started", cause=f"{len(self.state.units)} packets, "
                            f"parallel {self.state.parallel}")
            self.tell_all()
            async with asyncio.TaskGroup() as group:
                self._group = group
                recovery.recover(self.state, self.ctx, self.start)
                self.tell_all()
                self.ctx.keeper.start(loop)
                return await self._loop()
        except BaseExceptionGroup as errors:  # the loop's own error: units' tasks never raise
            raise _lone(errors) from None
        finally:
            self._group = None
            self.ctx.keeper.close()
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1):
                loop.remove_signal_handler(sig)

    async def _loop(self) -> RunStatus:
        """The steps, in order, until the run is over; between turns, sleep."""
        while True:
            self.step(self.take_requests)
            self.step(control.check_deadline, self.state)
            self.step(self.launch)
            if self.state.settled(len(self.tasks)):
                status = self.state.final_status()
                if self.ledger.close_run(self.run_id, status):
                    return status  # released; a later request starts a new supervisor
                continue           # a request arrived as the run ended: carry it out
            await self._sleep()
            if self.ended:
                self.step(self.apply_ends)
                await asyncio.sleep(0)   # a signal or request that came meanwhile goes first
            self.step(self.check_stalls)

    def step(self, do: Callable[..., None], *args: Any) -> None:
        """One step over the run's state, then what it has to tell is told."""
        do(*args)
        self.tell_all()

    async def _sleep(self) -> None:
        """Until a unit's task ends, a request or signal wakes us, a park ends, the deadline
        comes, or a second passes (the request and stall checks)."""
        now = time.time()
        timeout = 1.0
        parked = [self.state.units[p].park_until or now for p in self.state.parked]
        if parked:
            timeout = min(timeout, max(0.0, min(parked) - now))
        if self.state.deadline:
            timeout = min(timeout, max(0.0, self.state.deadline - now))
        if not self._wake.is_set() and not self.ended:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._wake.wait()
        self._wake.clear()

    # the steps -----------------------------------------------------------------------------
    def take_requests(self) -> None:
        if not self.requests_due and time.monotonic() < self.next_request_check:
            return
        self.requests_due = False
        self.next_request_check = time.monotonic() + control.REQUEST_POLL_S
        control.carry_out(self.state, self.ledger.take_requests(self.run_id))

    def launch(self) -> None:
        """A task for each unit the scheduler chooses now."""
        pools = QuotaPools(self.ctx.env)   # read once for the units this pass launches
        gate = self.budget
        if gate is not None:
            gate.refresh()
        admit = None if gate is None else (lambda u: gate.admit_unit(self.state, u))
        for u in schedule.ready(self.state, len(self.tasks), admit):
            self.start(u, life(self.ctx, u, pools))
        if gate is not None and self.state.budget_reached and gate.budget.hard:
            budget.cancel_running(self.state)

    def apply_ends(self) -> None:
        """What each ended task returned, applied to the run's state."""
        ended, self.ended = self.ended, []
        for u, end in ended:
            apply_end(self.state, self.ledger, u, end)

    def check_stalls(self) -> None:
        stall_s = self.ctx.settings.stall_s
        now = time.time()
        if now - self.last_stall_check < min(STALL_CHECK_S, stall_s / 4):
            return
        self.last_stall_check = now
        control.check_stalls(self.state, stall_s)

    # the units' tasks ----------------------------------------------------------------------
    def start(self, u: UnitState, life: Coroutine[Any, Any, End]) -> None:
        """Run ``life`` (an attempt of ``u``) as a task of the run's task group; its end is
        applied at the loop's next turn."""
        if self._group is None:
            raise RuntimeError(f"{u.packet.id} started while the run is not being driven")
        task = self._group.create_task(self._unit_task(u, life), name=u.packet.id)
        self.tasks[task] = u
        task.add_done_callback(self._ended)

    async def _unit_task(self, u: UnitState, life: Coroutine[Any, Any, End]) -> End:
        """One unit's task. It never raises: an unexpected error fails that unit only (the
        task group would end the whole run), and the attempt's ports go back whatever
        happened."""
        try:
            try:
                return await life
            finally:
                await schedule.release_ports(self.ctx, u)
        except PrunError as e:   # expected, said in one line (a ledger that cannot be written)
            return Failed(f"{e.line()}")
        except Exception as exc:
            traceback.print_exception(exc, file=sys.stderr)
            return Failed(f"internal error in the supervisor: {type(exc).__name__}: {exc}")

    def _ended(self, task: asyncio.Task[End]) -> None:
        u = self.tasks.pop(task)
        if not task.cancelled():
            self.ended.append((u, task.result()))
        self._wake.set()

    # telling -------------------------------------------------------------------------------
    def tell_all(self) -> None:
        """Write the packet statuses the last step changed (in one transaction) and emit its
        events, in order."""
        told_all = self.state.take_told()
        if not told_all:
            return
        with self.ledger.transaction():
            for told in told_all:
                if isinstance(told, PacketChange):
                    self.ledger.set_packet_status(self.run_id, told.packet_id, told.status,
                                                  told.cause, told.data)
                else:
                    self.tell(told)

    def tell(self, ev: Event) -> None:
        """Tell the renderer (and the plan's hook) of a change; the kinds a later command
        must find are logged in the ledger too."""
        if ev.kind in ("stalled", "stopped", "parked", "blocked", "handoff", "escaped",
                       "waiting", "accept-failed", "unverified"):
            self.ledger.record_event(ev.kind, run_id=self.run_id, packet_id=ev.packet_id,
                                     attempt_id=ev.attempt_id, status=ev.kind, cause=ev.cause,
                                     data=ev.data or None)
        self.emit_to(ev)
        if self.hooks is not None:
            self.hooks.fire(ev)

    # what other code asks of a running loop ----------------------------------------------------
    def requests_sent(self) -> None:
        """SIGUSR1: another command added a request to the ledger."""
        self.requests_due = True
        self._wake.set()

    def cancel_all(self, cause: str) -> None:
        """A signal: cancel the whole run."""
        control.cancel_all(self.state, cause)
        self.tell_all()
        self._wake.set()


def apply_end(state: RunState, ledger: Ledger, u: UnitState, end: End) -> None:
    """What happened to ``u``'s task, applied to the run's state."""
    match end:
        case Settled(status, cause, data, followup):
            state.set_packet(u, status, cause)
            state.emit(status.value, u, cause, **data)
            if followup:
                control.follow_up(state, u, followup, cause=AUTO)
            elif u.followups:
                control.follow_up(state, u, u.followups.pop(0))
        case Parked(until, cause, group):
            schedule.park(state, u, until, cause)
            if group and u.park_until:   # no other unit starts on that pool until its reset
                state.pools_hit[group] = max(u.park_until, state.pools_hit.get(group, 0.0))
        case Successor(cause):
            state.set_packet(u, PacketStatus.PENDING, cause)
        case Superseded(aid, quarantine):
            state.emit("quarantined", u, "superseded by a reassignment", quarantine=quarantine)
            state.set_packet(u, PacketStatus.PENDING, f"reassigned; {aid} superseded")
        case NotDispatched(action, need):
            state.set_packet(u, PacketStatus.PENDING, f"not dispatched: {need}")
            state.stopped = f"{action}: {need}"
            state.emit("stopped", u, need, action=action)
        case Blocked(cause):
            state.set_packet(u, PacketStatus.BLOCKED, cause)
            state.emit("blocked", u, cause)
        case WaitingForPorts(note):
            schedule.wait_for_ports(state, u, note)
        case Failed(cause):
            if u.status.terminal:
                return
            if u.attempt_id:   # a ledger that cannot be written ends the run here
                ledger.update_attempt(u.attempt_id, cause, status=Status.FAILED,
                                      reason="internal-error", error=cause,
                                      finished_at=now_iso())
            state.set_packet(u, PacketStatus.FAILED, cause)
            state.emit("failed", u, cause)


def _lone(errors: BaseExceptionGroup[BaseException]) -> BaseException:
    """The one error a task group gathered (else the group itself), so that the loop's own
    error, a ``PrunError`` say, reaches the caller as it was raised."""
    return errors.exceptions[0] if len(errors.exceptions) == 1 else errors
