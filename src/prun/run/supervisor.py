"""The run supervisor: one asyncio process drives every unit of a run.

Each unit's attempt goes through the dispatcher's own steps (``prun.attempt.dispatch``: prepare,
begin, launch, wait, finish); the supervisor adds what a fan-out needs around them:

* a queue bounded by the run's parallelism, ``after`` dependencies, and quota parking;
* receipts: an attempt counts as dispatched only once its worker runs (pid and start time);
  no receipt leaves the packet pending and stops the run, naming what is missing;
* terminal control: at a cancel, a reassignment or the deadline the attempt is
  cancel-requested until its process group is gone, its partial output is quarantined, and
  only then is it recorded as cancelled or timed out;
* recovery: started again on a run whose supervisor died (``prun resume``), it re-attaches to
  workers still running (pidfd), judges those that finished meanwhile from their state dirs,
  and launches nothing twice;
* control requests from other commands (cancel, reassign) through the ledger, with SIGUSR1 as
  a wake-up.

The supervisor records every change in the ledger and emits ``Event``s; it prints nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from .._util.fsutil import atomic_write, sync_fs
from ..attempt import statedir
from ..attempt.dispatch import Request
from ..errors import PrunError, QuotaExhausted
from ..git.reconcile import plan_scope
from ..ledger import Ledger, PacketStatus, RunStatus, Status, now_iso
from ..plan import Packet
from . import brief
from .dependents import Blocked
from .events import Event
from .keeper import Keeper
from .ports import PortsUnavailable
from .state import RunPaths, _epoch, packet_from_spec

STALL_DEFAULT_S = 600.0
PORT_RETRY_S = 1.0  # a unit whose fixed port is held looks again this often
QUIESCE_LIMIT_S = 5.0
UNKNOWN_RESET_S = 300.0
FLUSH_S = 0.05  # the ledger lags the supervisor by at most this (a crash loses no worker:
                # resume finds every launched attempt through its state dir)
REQUEST_POLL_S = 0.5  # requests are looked for at least this often (SIGUSR1 says at once)
THREADS = 4   # the file work of starting and finishing units runs here, off the event loop

OUTCOME_STATUS = {"succeeded": Status.SUCCEEDED, "timeout": Status.TIMEOUT,
                  "quota": Status.QUOTA, "cancelled": Status.CANCELLED,
                  "failed": Status.FAILED}


# An attempt's final status, as its packet's (quota, no receipt and superseded attempts are
# followed by another attempt instead).
FINAL_PACKET = {Status.SUCCEEDED: PacketStatus.SUCCEEDED, Status.FAILED: PacketStatus.FAILED,
                Status.TIMEOUT: PacketStatus.TIMEOUT, Status.CANCELLED: PacketStatus.CANCELLED}


@dataclass
class UnitState:
    """One packet as the supervisor drives it."""

    packet: Packet
    status: PacketStatus
    executor: str
    reason: str
    base: str | None
    seq: int = 0                       # attempts made so far
    attempt_id: str | None = None      # the current (or last) attempt
    predecessor: str | None = None     # links the next attempt to the one before it
    continue_from: str | None = None   # a state dir to resume (quota follow-up)
    park_until: float | None = None
    not_before: float | None = None        # waiting for a held fixed port until then
    stop: asyncio.Event | None = None
    superseded: bool = False           # reassigned while running: its output is rejected
    cancel_requested: bool = False
    state_dir: str | None = None
    stalled: bool = False
    started: float | None = None
    # the current (or last) attempt's workspace, the commit it started from, its result file
    workspace: str | None = None
    attempt_base: str | None = None
    result_file: str | None = None
    # the next attempt: a follow-up keeps the workspace; its prompt, or what it carries on
    reuse_workspace: str | None = None
    followup: str | None = None
    earlier: object | None = None          # brief.Earlier: a fresh start carries it
    followups: list[str] = field(default_factory=list)   # requested while it was running
    extra: dict = field(default_factory=dict)


class Supervisor:
    def __init__(self, ledger: Ledger, run_id: str, *, emit: Callable[[Event], None],
                 env: dict[str, str] | None = None, keeper: Keeper | None = None):
        run = ledger.run(run_id)
        if run is None:
            raise PrunError(f"no run {run_id} in the ledger")
        self.ledger = ledger
        self.run = dict(run)
        self.run_id = run_id
        self.paths = RunPaths(__import__("pathlib").Path(self.run["run_dir"]))
        self.env = dict(os.environ if env is None else env)
        self.emit_to = emit
        self.parallel = int(self.run["parallel"] or 1)
        self.deadline = _epoch(self.run["deadline"])
        self.units: dict[str, UnitState] = {}
        self.tasks: set[asyncio.Task] = set()
        self.stopped: str | None = None      # why the run stopped launching (no receipt)
        self.cancelled = False
        self.timed_out = False
        self.stall_s = float(self.env.get("PRUN_STALL_THRESHOLD", "") or STALL_DEFAULT_S)
        self._wake: asyncio.Event | None = None
        self._requests_due = True            # look for control requests at the next turn
        self._next_request_check = 0.0
        self.keeper = keeper or Keeper(self.env)   # starts, reaps and logs the workers
        self._last_stall_check = 0.0
        self._unsynced = False               # units settled since the last syncfs
        self.parked: set[str] = set()
        self._briefs: dict[str, tuple] = {}  # attempt id -> (brief, workspace), from its thread
        self._cursor = 0
        self.index: dict[str, int] = {}
        for row in ledger.packets(run_id):
            self.index[row["id"]] = len(self.index)
            spec = json.loads(row["spec"])
            self.units[row["id"]] = UnitState(
                packet=packet_from_spec(spec), status=PacketStatus(row["status"]),
                executor=row["executor"], reason=spec.get("routing_reason") or "",
                base=row["base"])
        self.order = list(self.units.values())
        self.sandbox = {pid: json.loads(row["spec"]).get("sandbox")
                        for pid, row in ((r["id"], r) for r in ledger.packets(run_id))}
        from ..plan import Plan
        from ..plan.independence import ancestors

        self.plan = Plan(packets=tuple(u.packet for u in self.order))
        self.ancestors = ancestors(self.plan)
        self._scope: tuple | None = None      # each packet's may_write and the shared paths

    # events --------------------------------------------------------------------------------
    def emit(self, kind: str, u: UnitState | None = None, cause: str = "", **data) -> None:
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

    hooks = None

    # the loop ------------------------------------------------------------------------------
    async def run_until_done(self) -> str:
        from concurrent.futures import ThreadPoolExecutor

        from .._util.process import create_time
        from .hooks import EventHooks

        loop = asyncio.get_running_loop()
        loop.set_default_executor(ThreadPoolExecutor(max_workers=THREADS))
        self._wake = asyncio.Event()
        self.hooks = EventHooks(self.run["on_event"], str(self.paths.hooks_log), self.env)
        self.paths.make()
        from .state import supervisor_alive

        self.ledger.claim_run(self.run_id, os.getpid(), create_time(os.getpid()),
                              supervisor_alive)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.add_signal_handler(sig, self._request_cancel_all, f"signal {sig.name}")
        loop.add_signal_handler(signal.SIGUSR1, self._requests_sent)
        self.emit("run-started", cause=f"{len(self.units)} packets, parallel {self.parallel}")
        self._recover()
        self.keeper.start(loop)
        self.ledger.defer_writes()
        flusher = loop.create_task(self._flush_often())
        try:
            while True:
                if self._requests_due or time.monotonic() >= self._next_request_check:
                    self._take_requests()
                self._check_deadline()
                self._schedule()
                if not self.tasks and self._settled():
                    self._commit_now()
                    status = self._final_status()
                    if self.ledger.close_run(self.run_id, status):
                        break  # released; a later request starts a new supervisor
                    continue   # a request arrived as the run ended: carry it out
                await self._sleep()
                self._check_stalls()
        finally:
            flusher.cancel()
            self.keeper.close()
            self._sync()
            self.ledger.stop_deferring()
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1):
                loop.remove_signal_handler(sig)
        counts: dict[str, int] = {}
        for u in self.units.values():
            counts[u.status.value] = counts.get(u.status.value, 0) + 1
        self.emit("run-done", cause=status.value, status=status.value, counts=counts,
                  stopped=self.stopped)
        await self.hooks.drain()
        return status

    async def _flush_often(self) -> None:
        """Apply the queued ledger writes every FLUSH_S: one short transaction for many."""
        import sys

        while True:
            await asyncio.sleep(FLUSH_S)
            try:
                await self._commit()
            except Exception as e:  # the queue is kept; the next flush tries again
                print(f"prun: warning: ledger flush failed ({e}); retrying", file=sys.stderr)

    async def _commit(self) -> None:
        """Group commit: the files of the units settled so far (results, outcomes; written
        without an fsync each) reach the disk in one syncfs, and only then does the ledger
        record those units as finished."""
        n = self.ledger.pending
        if not n:
            return
        if self._unsynced:
            self._unsynced = False
            await asyncio.to_thread(sync_fs, self.paths.root)
        self.ledger.flush(upto=n)

    def _commit_now(self) -> None:
        self._sync()
        self.ledger.flush()

    def _sync(self) -> None:
        if self._unsynced:
            self._unsynced = False
            sync_fs(self.paths.root)

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
                await asyncio.wait_for(self._wake.wait(), timeout)
        self._wake.clear()
        for t in [t for t in self.tasks if t.done()]:
            self.tasks.discard(t)
            exc = t.exception()
            if exc is not None:
                self._internal_error(t.get_name(), exc)

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
        self._set_packet(u, PacketStatus.FAILED, cause)
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

    def _schedule(self) -> None:
        if self.stopped or self.cancelled or self.timed_out:
            return
        now = time.time()
        order = self.order
        while self._cursor < len(order) and order[self._cursor].status.terminal:
            self._cursor += 1  # everything before the cursor is finished
        for u in order[self._cursor:]:
            if len(self.tasks) >= self.parallel:
                break
            if u.status == PacketStatus.PARKED and (u.park_until or 0) <= now:
                u.status = PacketStatus.PENDING
                self.parked.discard(u.packet.id)
            if u.status != PacketStatus.PENDING or (u.not_before or 0) > now:
                continue
            deps = [self.units[a].status for a in u.packet.after if a in self.units]
            failed = [a for a in u.packet.after
                      if a in self.units and self.units[a].status.terminal
                      and self.units[a].status != PacketStatus.SUCCEEDED]
            if failed:
                self._set_packet(u, PacketStatus.BLOCKED, f"{failed[0]} did not succeed")
                self.emit("blocked", u, f"it comes after {failed[0]}, which did not succeed")
                continue
            if any(s != PacketStatus.SUCCEEDED for s in deps):
                continue
            self._set_packet(u, PacketStatus.RUNNING, "launching")
            self._start(self._attempt(u), u)

    def _start(self, coro, u: UnitState) -> None:
        async def attempt() -> None:
            try:
                await coro
            finally:  # whatever happened, the attempt's ports go back to the registry
                await self._release_ports(u.attempt_id)

        task = asyncio.get_running_loop().create_task(attempt(), name=u.packet.id)
        self.tasks.add(task)
        task.add_done_callback(lambda _t: self._wake.set())

    def _set_packet(self, u: UnitState, status: PacketStatus, cause: str, **data) -> None:
        if status in (PacketStatus.PENDING, PacketStatus.PARKED):
            self._cursor = 0  # it is open again: scan from the start
        if status == PacketStatus.PARKED:
            self.parked.add(u.packet.id)
        else:
            self.parked.discard(u.packet.id)
        u.status = status
        self.ledger.set_packet_status(self.run_id, u.packet.id, status, cause, data or None)

    # one attempt -----------------------------------------------------------------------------
    async def _attempt(self, u: UnitState) -> None:
        from .. import executors
        from . import prepare as unitprep

        p = u.packet
        executor_name = u.executor
        try:
            ex = executors.get(executor_name)
            settings = ex.settings(self.env, model=p.model, effort=p.effort,
                                   timeout_s=p.timeout_s)
        except PrunError as e:
            return self._no_receipt(u, None, f"choose the {executor_name} executor for {p.id}",
                                    e.line())
        reset = unitprep.pool_reset(ex, settings.model, self.env)
        if reset is not None and reset > time.time():
            return self._park(u, reset, f"the {ex.quota_group(settings.model)} quota pool is "
                              "empty")
        aid = f"{self.run_id}:{p.id}:{u.seq + 1}"
        try:
            held = await asyncio.to_thread(self._reserve_ports, u, aid)
        except PortsUnavailable as e:
            return self._wait_for_ports(u, e)
        u.seq += 1
        u.attempt_id = aid
        u.extra["ports"] = held
        result = str(self.paths.results / f"{p.id}.{u.seq}.md")
        self.ledger.record_attempt(
            aid, "queued" if not u.predecessor else f"follows {u.predecessor}",
            run_id=self.run_id, packet_id=p.id, seq=u.seq, executor=executor_name,
            requested_model=settings.model, model=settings.model, routing_reason=u.reason,
            base=u.base, result_path=result, predecessor=u.predecessor,
            continue_from=u.continue_from)
        latest = self._latest_inputs(u) if u.packet.after else {}
        try:
            d, mode, launched, refused = await asyncio.to_thread(
                self._open_attempt, u, executor_name, result, latest)
        except Blocked as e:
            self.ledger.update_attempt(aid, e.reason, status=Status.NOT_DISPATCHED,
                                       reason="blocked", error=e.reason, finished_at=now_iso())
            self._set_packet(u, PacketStatus.BLOCKED, e.reason)
            self.emit("blocked", u, e.reason)
            return None
        except PrunError as e:
            return self._no_receipt(u, aid, f"prepare packet {p.id} for {executor_name}",
                                    e.line())
        except OSError as e:
            return self._no_receipt(u, aid, f"prepare packet {p.id} for {executor_name}",
                                    f"{e.strerror or e}: {e.filename or ''}".rstrip(": "))
        u.state_dir = d.state.path
        text, place = self._briefs.pop(aid)
        self.ledger.update_attempt(aid, None, brief=text, base=place.base,
                                   workspace=place.path, state_dir=d.state.path)
        if place.applied:
            self.emit("based", u, "starts from the accepted changes of "
                      + ", ".join(place.applied), base=place.base)
        if refused is not None:
            await asyncio.to_thread(d.finish, None, refused=refused)
            self._unsynced = True
            self.ledger.update_attempt(aid, "quota gate refused", status=Status.QUOTA,
                                       state_dir=d.state.path, reason="quota",
                                       error=refused.line(), resets_at=refused.resets_at,
                                       finished_at=now_iso())
            u.predecessor = aid
            return self._park(u, _parse_time(refused.resets_at), refused.line())
        if not d.p.executor.launches_process:
            return await self._session(u, d, launched)
        if not launched:
            await asyncio.to_thread(d.finish, None)
            self._unsynced = True
            return self._no_receipt(u, aid, f"start {executor_name} for packet {p.id}",
                                    d.launch_error, state_dir=d.state.path)
        u.started = d.launched_at
        u.stalled = False
        self.ledger.update_attempt(aid, "worker started", status=Status.DISPATCHED,
                                   receipt=d.receipt, state_dir=d.state.path,
                                   workspace=d.workspace, mode=mode, model=d.settings.model,
                                   dispatched_at=now_iso(d.launched_at),
                                   sandboxed=d.sandboxed)
        self.emit("dispatched", u, receipt=d.receipt)
        await self._watch(u, d)

    def _open_attempt(self, u: UnitState, executor_name: str, result: str, latest: dict):
        """Workspace, brief, validation, state dir, launch: the file and process work of
        starting an attempt, run in a worker thread. Returns (dispatch, mode, launched, quota
        refusal); raises ``dependents.Blocked`` when a packet it comes after was rejected."""
        from ..attempt.dispatch import Dispatch, prepare
        from . import prepare as unitprep
        from .dependents import start

        p = u.packet
        begin = start(self.plan, p.id, latest, self.ancestors) if p.after else None
        held = u.extra["ports"]
        ids = {"PRUN_RUN_ID": self.run_id, "PRUN_ATTEMPT_ID": u.attempt_id or "",
               "PRUN_UNIT_ID": p.id, "PRUN_PACKET_ID": p.id, **held.env()}
        reuse, u.reuse_workspace = u.reuse_workspace, None  # a follow-up's, used once
        place = unitprep.workspace(
            p, run_id=self.run_id, seq=u.seq, repo_root=self.run["repo_root"], base=u.base,
            setup=self.run["setup"], env={**self.env, **ids}, start=begin, reuse=reuse)
        u.workspace, u.attempt_base, u.result_file = place.path, place.base, result
        state = statedir.create(p.id, str(self.paths.state))
        ctx = brief.context(
            self.plan, p, workspace=place.kind, result_file=statedir.outbox(state, result),
            base=place.base,
            applied=place.applied, snapshot=place.snapshot,
            ports=brief.Ports(held.range.base, held.range.count, dict(held.named),
                              tuple(str(r) for r in held.fixed)),
            predecessors=begin.predecessors if begin else {})
        text = self._prompt(u, ctx, executor_name)
        prompt_file = os.path.join(self.paths.prompts, f"{p.id}.{u.seq}.md")
        atomic_write(prompt_file, text, durable=False)
        self._briefs[u.attempt_id] = (text, place)
        extra = {**ids, **brief.environment(p, ctx, prompt_file)}
        request = Request(
            executor=executor_name, prompt_file=prompt_file, result_file=result, unit_id=p.id,
            mode=p.effective_mode, continue_from=u.continue_from,
            add_dirs=(place.snapshot,) if place.snapshot else (),
            command=p.command if executor_name == "command" else None, model=p.model,
            effort=p.effort, timeout_s=p.timeout_s, workspace=place.path,
            state_root=str(self.paths.state), env=self.env, attempt_id=u.attempt_id,
            extra_env=extra, briefed=True, sandbox=self.sandbox.get(p.id), outbox=True,
            read_only=self._read_only(place))
        try:
            prepared = prepare(request)
        except PrunError:
            shutil.rmtree(state.path, ignore_errors=True)  # nothing was written in it yet
            raise
        d = Dispatch(prepared, state, dispatcher_pid=os.getpid(), record=False, in_run=True,
                     keeper=self.keeper)
        mode = p.effective_mode
        try:
            d.begin()
        except QuotaExhausted as e:
            return d, mode, False, e
        if not prepared.executor.launches_process:
            return d, mode, d.hand_off(), None  # a session unit: the coordinator runs it
        return d, mode, d.launch(), None

    def _reserve_ports(self, u: UnitState, aid: str):
        """The attempt's ports from the machine-wide registry (``prun.run.ports``): its own range,
        ports assigned by name, its fixed ports. Held in the keeper's name, which lives as long
        as the run's workers do; released when the attempt ends."""
        from . import ports

        request = ports.port_request(u.packet.state, self.env, where=u.packet.where("state"))
        keeper = self.keeper.ident
        holder = ports.Holder(aid, self.run_id, u.packet.id, keeper.get("pid") or os.getpid(),
                              keeper.get("create_time"))
        return ports.reserve(holder, request, self.env)

    def _wait_for_ports(self, u: UnitState, e) -> None:
        """A fixed port it needs is held (by a unit of any run): it stays queued, and says
        why once."""
        u.not_before = time.time() + PORT_RETRY_S
        note = f"waiting for its ports: {e.message}"
        if u.extra.get("port_note") == note:
            u.status = PacketStatus.PENDING
            return
        u.extra["port_note"] = note
        self._set_packet(u, PacketStatus.PENDING, note)
        self.emit("waiting", u, note)

    async def _release_ports(self, aid: str | None) -> None:
        from . import ports

        if aid:
            try:
                await asyncio.to_thread(ports.release, aid, self.env)
            except PrunError as e:
                import sys

                print(f"prun: warning: ports of {aid} not released ({e.line()})", file=sys.stderr)

    def _read_only(self, place) -> tuple[str, ...]:
        """What a unit's sandbox mounts read-only: the real repository (its .git and the
        run's results included), every other workspace of the run and its snapshot (the unit's
        own workspace and state dir stay writable)."""
        from ..git import workspace as ws

        paths = [self.run["repo_root"], os.path.join(ws.default_root(self.env), self.run_id),
                 place.snapshot]
        return tuple(p for p in paths if p)

    def _prompt(self, u: UnitState, ctx, executor_name: str) -> str:
        """What this attempt receives: the brief; a resumed turn's request; or, for a fresh
        attempt carrying on an earlier one, the brief with what that one left."""
        followup, earlier = u.followup, u.earlier
        u.followup, u.earlier = None, None
        u.extra["asked"] = followup
        if u.continue_from:
            text = followup or ("A quota limit stopped your earlier turn. Continue the same "
                                "task from where you stopped and finish it.")
            return brief.resumed_turn(u.packet, ctx, text)
        return brief.render(u.packet, ctx, followup=followup, earlier=earlier)

    def _latest_inputs(self, u: UnitState) -> dict:
        """The deciding attempt of every packet ``u`` comes after, as reconcile reads it."""
        from ..git.reconcile import UnitInput

        if self._scope is None:
            self._scope = plan_scope(self.plan, self.run["repo_root"])
        may_write, shared = self._scope
        out = {}
        for pid in self.ancestors.get(u.packet.id, ()):
            a = self.units[pid]
            status = "succeeded" if a.status == PacketStatus.SUCCEEDED else a.status.value
            out[pid] = UnitInput(
                packet=a.packet, attempt_id=a.attempt_id, status=status,
                state_dir=a.state_dir, workspace=a.workspace, base=a.attempt_base or a.base,
                result_file=a.result_file, executor=a.executor, may_write=may_write[pid],
                shared=shared)
        return out

    async def _watch(self, u: UnitState, d) -> None:
        """Wait for the launched (or re-attached) attempt, end it when asked, then judge it."""
        u.stop = asyncio.Event()
        if u.cancel_requested or u.superseded:
            u.stop.set()
        code, why = await d.wait_async(u.stop, self.deadline,
                                       on_end=lambda why: self._ending(u, why))
        d.escaped = list(getattr(d.worker, "escaped", ()))  # ended by the keeper with it
        quiet = True
        if why is not None:
            quiet = await _quiesce(d.worker.pid)
        outcome = await asyncio.to_thread(d.finish, code, timed_out=why == "timeout",
                                          cancelled=why == "cancelled")
        self._settle(u, d, outcome.outcome, outcome.info, why, quiet)

    async def _session(self, u: UnitState, d, handed) -> None:
        """A session unit: the coordinator spawns the subagent from the handoff and attaches
        its identifier with `prun receipt`; the unit is done when its result file lands."""
        from .._util.fsutil import file_size

        aid, sd = u.attempt_id, d.state
        lines = handed.info.get("lines", [])
        self.ledger.update_attempt(aid, "handed to the coordinator", state_dir=sd.path,
                                   workspace=d.workspace, mode=d.p.mode)
        self.emit("handoff", u, "run it as a subagent, then attach its receipt",
                  handoff=sd.file(statedir.HANDOFF),
                  receipt_cmd=next((x.split(" ", 1)[1] for x in lines
                                    if x.startswith("RECEIPT-CMD ")), None))
        u.stop = asyncio.Event()
        started = time.time()
        limit = min(started + d.settings.timeout_s, self.deadline or float("inf"))
        receipt = None
        result = d.p.result_file
        delay = 0.05
        while not u.stop.is_set() and time.time() < limit:
            if receipt is None and (receipt := sd.read(statedir.RECEIPT)):
                u.started = time.time()
                self.ledger.update_attempt(aid, "the coordinator attached its receipt",
                                           status=Status.DISPATCHED, receipt=receipt,
                                           dispatched_at=now_iso())
                self.emit("dispatched", u, receipt=receipt)
            if receipt and file_size(result) > 0:
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(u.stop.wait(), delay)
            delay = min(delay * 1.5, 1.0)
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
            self._quarantine(u, d, {"result_file": result, "published": "worker"},
                             everything=True)
        self.ledger.update_attempt(aid, reason, status=status, reason=reason,
                                   finished_at=now_iso())
        if u.superseded:
            u.superseded = False
            u.predecessor = aid
            return self._set_packet(u, PacketStatus.PENDING, f"reassigned; {aid} superseded")
        if status == Status.NOT_DISPATCHED:
            return self._no_receipt(u, None, f"run session unit {u.packet.id} as a subagent",
                                    "its receipt (prun receipt STATE_DIR --attempt-id ID)")
        pstatus = {Status.SUCCEEDED: PacketStatus.SUCCEEDED,
                   Status.TIMEOUT: PacketStatus.TIMEOUT}.get(status, PacketStatus.CANCELLED)
        self._set_packet(u, pstatus, reason)
        self.emit(pstatus.value, u, reason, result_file=result)

    def _ending(self, u: UnitState, why: str) -> None:
        cause = ("the run's deadline passed" if why == "timeout" and self.timed_out
                 else "its timeout passed" if why == "timeout"
                 else "reassigned" if u.superseded else "cancel requested")
        self.ledger.update_attempt(u.attempt_id, cause, status=Status.CANCEL_REQUESTED)
        self.emit("cancel-requested", u, cause)

    def _settle(self, u: UnitState, d, outcome: str, info: dict, why: str | None,
                quiet: bool = True) -> None:
        aid = u.attempt_id
        self._unsynced = True
        status = OUTCOME_STATUS.get(outcome, Status.FAILED)
        quarantine = None
        if u.superseded or why is not None:
            quarantine = self._quarantine(u, d, info, everything=u.superseded)
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
            self.emit("escaped", u, f"{note}; ended with it")
            cause += f"; {note}"
        q = info.get("quota") or {}
        self.ledger.update_attempt(
            aid, cause, status=status, reason=info.get("reason"),
            exit_code=info.get("worker_exit"), error=(info.get("error") or None),
            model=info.get("model"), resets_at=q.get("resets_at"), quarantine=quarantine,
            finished_at=now_iso())
        result = info.get("result_file")
        if u.superseded:
            u.superseded = False
            u.predecessor = aid
            self.emit("quarantined", u, "superseded by a reassignment", quarantine=quarantine)
            self._set_packet(u, PacketStatus.PENDING, f"reassigned; {aid} superseded")
            return
        if status == Status.QUOTA:
            self._carry_on(u, d.p.executor, None, because="A quota limit stopped your "
                           f"earlier attempt {aid}.")
            return self._park(u, _parse_time(q.get("resets_at")),
                              q.get("message") or "quota reached mid-run")
        if info.get("reason") == "resume-refused" and not u.cancel_requested:
            why = (f"Resuming the conversation of {u.predecessor} was refused "
                   f"({info.get('error') or 'by the CLI'}), so this attempt starts fresh.")
            self.ledger.record_event("resume-refused", run_id=self.run_id,
                                     packet_id=u.packet.id, attempt_id=aid,
                                     status="resume-refused", cause=why)
            earlier = u.extra.get("resumed_from") or {}
            self._carry_on(u, d.p.executor, u.extra.get("asked"), because=why, fresh=True,
                           earlier_result=earlier.get("result_file"))
            return self._set_packet(u, PacketStatus.PENDING, "resume refused: a fresh "
                                    "attempt carries the partial result")
        if u.cancel_requested and status != Status.SUCCEEDED:
            status = Status.CANCELLED
        pstatus = {Status.SUCCEEDED: PacketStatus.SUCCEEDED, Status.TIMEOUT: PacketStatus.TIMEOUT,
                   Status.CANCELLED: PacketStatus.CANCELLED}.get(status, PacketStatus.FAILED)
        self._set_packet(u, pstatus, cause)
        self.emit(pstatus.value, u, cause, result_file=result, exit_code=info.get("exit_code"),
                  reason=info.get("reason"), quarantine=quarantine)
        if u.followups:
            self._follow_up(u, u.followups.pop(0))

    # follow-ups ------------------------------------------------------------------------------
    def _carry_on(self, u: UnitState, executor, asked: str | None, *, because: str,
                  fresh: bool = False, earlier_result: str | None = None) -> None:
        """Make ``u``'s next attempt carry on its latest one: linked to it, in the same
        workspace (no edit is lost; Gemini resumes only from the folder it ran in), resuming
        its conversation where the executor can, else a fresh brief saying what it left."""
        last = u.attempt_id
        u.predecessor = last
        u.reuse_workspace = u.workspace
        u.followup = asked
        resumable = (not fresh and executor.can_resume and u.state_dir
                     and statedir.StateDir(u.state_dir).read(statedir.CONVERSATION_ID))
        u.continue_from = u.state_dir if resumable else None
        u.extra["resumed_from"] = {"result_file": u.result_file} if resumable else {}
        if not resumable:
            result = earlier_result or u.result_file
            u.earlier = brief.Earlier(last or "", because, result, _excerpt(result))

    def _follow_up(self, u: UnitState, text: str) -> None:
        """``prun followup``: a linked attempt with a new request, in the same workspace."""
        from .. import executors

        try:
            ex = executors.get(u.executor)
        except PrunError as e:
            return self.emit("stopped", u, e.line(), action="follow up")
        self._carry_on(u, ex, text, because=f"Your earlier attempt {u.attempt_id} finished; "
                       "this is a follow-up turn.")
        u.cancel_requested = u.superseded = False
        self._set_packet(u, PacketStatus.PENDING, "follow-up requested")

    def _request_followup(self, packet_id: str | None, text: str) -> None:
        u = self.units.get(packet_id or "")
        if u is None or not text.strip():
            return
        if u.status.terminal and u.attempt_id:
            return self._follow_up(u, text)
        u.followups.append(text)  # after the attempt that runs (or is due) now

    def _quarantine(self, u: UnitState, d, info: dict, everything: bool) -> str | None:
        """Move what the worker produced (its own result file, the response beside it, and
        its workspace) out of reach of integration. ``everything``: the published result too."""
        dest = self.paths.quarantine / f"{u.packet.id}.{u.seq}"
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

    def _park(self, u: UnitState, until: float | None, cause: str) -> None:
        from . import prepare as unitprep

        unitprep.forget_pool_states()
        until = until if until and until > time.time() else time.time() + UNKNOWN_RESET_S
        u.park_until = until
        cause = f"{cause} (parked until {now_iso(until)})"
        self._set_packet(u, PacketStatus.PARKED, cause, resets_at=now_iso(until))
        self.emit("parked", u, cause, resets_at=now_iso(until))

    def _no_receipt(self, u: UnitState, aid: str | None, action: str, need: str | None,
                    state_dir: str | None = None) -> None:
        """Not dispatched: the packet stays pending and the run stops launching."""
        need = need or "the executor returned no attempt id"
        if aid:
            self.ledger.update_attempt(aid, need, status=Status.NOT_DISPATCHED,
                                       state_dir=state_dir, reason="no-receipt", error=need,
                                       finished_at=now_iso())
            u.predecessor = aid
        self._set_packet(u, PacketStatus.PENDING, f"not dispatched: {need}")
        self.stopped = f"{action}: {need}"
        self.emit("stopped", u, need, action=action)

    # control -------------------------------------------------------------------------------
    def _requests_sent(self) -> None:
        """SIGUSR1: another command added a request to the ledger."""
        self._requests_due = True
        self._wake.set()

    def _take_requests(self) -> None:
        """Carry out the requests in the ledger: looked for on SIGUSR1 (which the commands
        that add one send) and, should a signal be lost, every REQUEST_POLL_S."""
        self._requests_due = False
        self._next_request_check = time.monotonic() + REQUEST_POLL_S
        for r in self.ledger.take_requests(self.run_id):
            if r["kind"] == "cancel":
                if not r["target"]:
                    self._request_cancel_all(r["cause"] or "cancel requested")
                else:
                    self._cancel_one(r["target"], r["cause"] or "cancel requested")
            elif r["kind"] == "reassign":
                self._reassign(r["target"], r["executor"], r["cause"] or "reassigned")
            elif r["kind"] == "followup":
                self._request_followup(r["target"], r["data"] or "")

    def _request_cancel_all(self, cause: str) -> None:
        if self.cancelled:
            return
        self.cancelled = True
        for u in self.units.values():
            self._cancel_unit(u, cause)
        if self._wake is not None:
            self._wake.set()

    def _cancel_one(self, target: str, cause: str) -> None:
        u = self.units.get(target)
        if u is None:
            u = next((x for x in self.units.values() if x.attempt_id == target), None)
        if u is not None:
            self._cancel_unit(u, cause)

    def _cancel_unit(self, u: UnitState, cause: str) -> None:
        if u.status == PacketStatus.RUNNING:
            u.cancel_requested = True
            if u.stop is not None:
                u.stop.set()
        elif not u.status.terminal:
            self._set_packet(u, PacketStatus.CANCELLED, cause)
            self.emit("cancelled", u, cause)

    def _reassign(self, packet_id: str, executor: str | None, cause: str) -> None:
        u = self.units.get(packet_id)
        if u is None:
            return
        if executor:
            u.executor = executor
            u.reason = f"reassigned to {executor}"
        if u.status == PacketStatus.RUNNING:
            u.superseded = True
            if u.stop is not None:
                u.stop.set()
            return
        u.predecessor = u.attempt_id
        u.continue_from = u.reuse_workspace = u.followup = u.earlier = None
        u.cancel_requested = False
        self._set_packet(u, PacketStatus.PENDING, cause)

    def _check_deadline(self) -> None:
        if self.deadline is None or self.timed_out or time.time() < self.deadline:
            return
        self.timed_out = True
        for u in self.units.values():
            if not u.status.terminal and u.status != PacketStatus.RUNNING:
                self._set_packet(u, PacketStatus.CANCELLED,
                                 "the run's deadline passed before it was dispatched")
                self.emit("cancelled", u, "the run's deadline passed before it was dispatched")

    def _check_stalls(self) -> None:
        now = time.time()
        if now - self._last_stall_check < min(30.0, self.stall_s / 4):
            return
        self._last_stall_check = now
        for u in self.units.values():
            if u.status != PacketStatus.RUNNING or not u.state_dir or u.started is None:
                continue
            try:
                last = os.stat(os.path.join(u.state_dir, statedir.TAIL)).st_mtime
            except OSError:
                continue
            last = max(last, u.started)
            if now - last >= self.stall_s and not u.stalled:
                u.stalled = True
                self.emit("stalled", u, f"no output for {int(now - last)} s")
            elif now - last < self.stall_s:
                u.stalled = False

    # recovery ------------------------------------------------------------------------------
    def _recover(self) -> None:
        """Pick the run up from the ledger: finished packets stay finished, attempts an
        earlier supervisor launched are re-attached or judged, nothing is launched twice."""
        self._find_unrecorded()
        attempts: dict[str, list] = {}
        for a in self.ledger.attempts(self.run_id):
            attempts.setdefault(a["packet_id"], []).append(dict(a))
        for pid, u in self.units.items():
            rows = attempts.get(pid, [])
            u.seq = len(rows)
            if not rows:
                if u.status in (PacketStatus.RUNNING, PacketStatus.PARKED):
                    self._set_packet(u, PacketStatus.PENDING, "to be launched")
                continue
            last = rows[-1]
            u.attempt_id = last["id"]
            u.executor = last["executor"] or u.executor
            u.state_dir, u.workspace = last["state_dir"], last["workspace"]
            u.result_file, u.attempt_base = last["result_path"], last["base"]
            status = Status(last["status"])
            if status.terminal:
                if u.status.terminal:
                    continue
                if u.status == PacketStatus.RUNNING and status in FINAL_PACKET:
                    # judged, but the packet's own row missed it: settle it, run nothing
                    self._set_packet(u, FINAL_PACKET[status], f"{last['id']} {status.value}")
                    continue
                # pending or parked after a quota stop, a reassignment or no receipt
                u.predecessor = last["id"]
                if status == Status.QUOTA:
                    from .. import executors

                    self._carry_on(u, executors.get(u.executor), None,
                                   because=f"A quota limit stopped your earlier attempt "
                                   f"{last['id']}.")
                if u.status != PacketStatus.PENDING:
                    self._set_packet(u, PacketStatus.PENDING, "a follow-up attempt is due")
                continue
            launched = last["state_dir"] and statedir.StateDir(last["state_dir"]).worker
            if not launched:  # the earlier supervisor died before this one started
                self.ledger.update_attempt(last["id"], "the supervisor died before its launch",
                                           status=Status.CANCELLED, reason="never-launched",
                                           finished_at=now_iso())
                u.predecessor = last["id"]
                self._set_packet(u, PacketStatus.PENDING, "to be launched again")
                continue
            if u.status != PacketStatus.RUNNING:
                self._set_packet(u, PacketStatus.RUNNING, "launched by an earlier supervisor")
            u.cancel_requested = status == Status.CANCEL_REQUESTED
            self._start(self._adopt(u, last), u)

    def _find_unrecorded(self) -> None:
        """Attempts whose state dir exists but whose ledger rows a crash cut short (the
        supervisor batches its writes): complete them from the state dir's unit.json."""
        known = {a["id"]: dict(a) for a in self.ledger.attempts(self.run_id)}
        try:
            names = os.listdir(self.paths.state)
        except OSError:
            return
        for name in sorted(names):
            if name.startswith("."):  # the exit-code log, shared copies
                continue
            sd = statedir.StateDir(str(self.paths.state / name))
            unit = sd.unit
            aid = unit.get("attempt_id")
            pid = unit.get("unit_id")
            if not aid or pid not in self.units:
                continue
            row = known.get(aid)
            if row is None:
                self.ledger.record_attempt(
                    aid, "found in its state dir after a crash", run_id=self.run_id,
                    packet_id=pid, seq=int(aid.rsplit(":", 1)[-1]),
                    executor=unit.get("executor"), requested_model=unit.get("requested_model"),
                    model=unit.get("model"), mode=unit.get("mode"),
                    workspace=unit.get("workspace"), state_dir=sd.path,
                    result_path=unit.get("result_file"), continue_from=unit.get("continue_from"),
                    status=Status.DISPATCHED)
            elif not row["state_dir"]:
                self.ledger.update_attempt(aid, "state dir found after a crash",
                                           state_dir=sd.path)

    async def _adopt(self, u: UnitState, row: dict) -> None:
        from .._util.process import AdoptedWorker, same_process_alive
        from ..attempt.dispatch import Request, reopen

        sd = statedir.StateDir(row["state_dir"])
        u.state_dir = sd.path
        unit = sd.unit
        req = Request(executor=row["executor"], prompt_file=sd.file(statedir.PROMPT),
                      result_file=row["result_path"], unit_id=u.packet.id,
                      mode=unit.get("mode") or row["mode"], continue_from=row["continue_from"],
                      command=u.packet.command if row["executor"] == "command" else None,
                      model=row["requested_model"], effort=u.packet.effort,
                      timeout_s=unit.get("timeout_s") or u.packet.timeout_s,
                      workspace=unit.get("workspace"), state_root=str(self.paths.state),
                      env=self.env, attempt_id=row["id"])
        done = sd.outcome
        if done is not None:  # finished and judged; only the ledger missed it
            return self._settle(u, _Judged(sd, unit.get("workspace")), done["outcome"], done,
                                None)
        d = reopen(req, sd.path)
        u.started = d.launched_at
        w = unit.get("worker") or {}
        pid, started = w.get("pid"), w.get("create_time")
        fd = None
        if same_process_alive(pid, started):
            with contextlib.suppress(OSError):
                fd = os.pidfd_open(pid)
            if fd is not None and not same_process_alive(pid, started):
                os.close(fd)
                fd = None
        if fd is not None:
            sd.write(statedir.DISPATCH_PID, str(os.getpid()))
            d.worker = AdoptedWorker(pid, fd)
            self.ledger.update_attempt(row["id"], "re-attached by a resumed supervisor",
                                       status=Status.RUNNING)
            self.emit("reattached", u)
            return await self._watch(u, d)
        from ..attempt.dispatch import recorded_exit

        code = await asyncio.to_thread(recorded_exit, sd, True)  # the keeper may be logging it
        outcome = d.finish(code)
        self._settle(u, d, outcome.outcome, outcome.info, None)


class _Judged:
    """What ``_settle`` needs of a dispatch that finished while no supervisor recorded it."""

    def __init__(self, sd: statedir.StateDir, workspace: str | None):
        self.state = sd
        self.workspace = workspace
        from .. import executors

        self.p = type("P", (), {"executor": executors.get(sd.unit.get("executor", "command"))})


async def _quiesce(pgid: int) -> bool:
    """After the group was ended: confirm no process of it is left (bounded)."""
    deadline = time.monotonic() + QUIESCE_LIMIT_S
    delay = 0.01
    while time.monotonic() < deadline:
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
    return False


EXCERPT_BYTES = 8000


def _excerpt(path: str | None) -> str | None:
    """The start of an earlier attempt's result, for a fresh attempt that carries it on."""
    from .._util.fsutil import read_text

    text = (read_text(path) or "").strip() if path else ""
    if not text:
        return None
    if len(text) > EXCERPT_BYTES:
        text = text[:EXCERPT_BYTES] + f"\n\n[... cut: the whole result is at {path}]"
    return text


def _parse_time(iso: str | None) -> float | None:
    return _epoch(iso) if iso else None


def run_supervisor(run_id: str, emit: Callable[[Event], None], ledger: Ledger | None = None,
                   env: dict[str, str] | None = None, keeper: Keeper | None = None) -> str:
    """Drive the run to its end in this process; returns the run's final status. ``keeper``:
    one launched already (``Keeper.launch``), else the supervisor starts its own."""
    own = ledger is None
    ledger = ledger or Ledger.open()
    try:
        sup = Supervisor(ledger, run_id, emit=emit, env=env, keeper=keeper)
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

    from .render import LineRenderer

    args = sys.argv[1:] if argv is None else argv
    renderer = LineRenderer(sys.stdout, verbose=True)
    status = run_supervisor(args[0], renderer.handle)
    return 0 if status == RunStatus.SUCCEEDED else 1


if __name__ == "__main__":
    raise SystemExit(main())
