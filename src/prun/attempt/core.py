"""The ``Dispatch``: one attempt of one unit, its state dir's opening files and its launch.

``begin`` writes the state dir's opening files and asks the quota gate (in a run, it hands
most of them to the keeper, which writes them as it starts the worker); ``launch`` starts the
worker in its own process group (``hand_off`` instead, for an executor that launches no
process). Waiting for the worker is in ``waiting``, judging and publishing in ``finishing``;
the methods here that do those delegate to them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from ..errors import QuotaExhausted
from . import identity, statedir
from .exitlog import path as _exit_log
from .request import Prepared, Request, prepare
from .statedir import iso, worker_entry

TYPE_CHECKING = False  # typing costs milliseconds on the dispatcher's fast path
if TYPE_CHECKING:
    import asyncio
    from typing import Any

    from .._util.worker import WorkerLike as Worker
    from ..executors.records import Launch, Unit
    from .outcome import Outcome
    from .protocols import Keeper, RemoteLauncher, UnitRecord
    from .waiting import Follower


class Dispatch:
    """One attempt of one unit, from its state dir to its outcome."""

    def __init__(self, prepared: Prepared, state: statedir.StateDir | None = None,
                 dispatcher_pid: int | None = None, *, record: bool = True,
                 in_run: bool = False, keeper: Keeper | None = None,
                 dispatcher_started: float | None = None, remote: RemoteLauncher | None = None):
        self.p = prepared
        self.record = record              # a standalone dispatch records itself in the ledger
        self.keeper = keeper              # a run's keeper starts the worker and logs its exit
        self.remote = remote              # a cluster run: the attempt runs on a Dask worker
        self.lost: tuple[str, str] | None = None  # its remote worker ended it: (reason, error)
        self.durable = not in_run         # fsync each file; a run's supervisor syncs in groups
        self.in_run = in_run
        self.reopened = False             # an attempt an earlier dispatcher launched
        self.receipt: str | None = None   # "pid:<pid>@<start time>" once the worker runs
        self.outcome: Outcome | None = None
        self.state = state or statedir.create(prepared.request.unit_id,
                                              prepared.request.state_root)
        # where the worker writes its own result: its result path, or (in a run) its outbox in
        # the state dir, copied to the result path when it is published
        self.write_path = (statedir.outbox(self.state, prepared.result_file)
                           if prepared.request.outbox else prepared.result_file)
        if prepared.request.outbox:
            os.makedirs(os.path.dirname(self.write_path), exist_ok=True)
        # the worker's private home, in its state dir; a follow-up's is carried over from the
        # attempt it continues (the one its conversation ran in)
        self.home = self.state.file(statedir.HOME)
        self.earlier_home = prepared.home
        self.sandboxed: bool | None = None  # decided at launch
        self.launch_error: str | None = None  # why the launch failed, kept for finish
        self.escaped: list[dict[str, Any]] = []  # processes that left its group, ended with it
        self.dispatcher_pid = dispatcher_pid or os.getpid()
        # the dispatcher's identity in unit.json: its pid and start time (a run's supervisor
        # knows its own and passes it; asking the system costs a /proc read per unit)
        self.dispatcher_started = dispatcher_started
        self.settings = prepared.settings
        self.requested_model = prepared.settings.model
        self.worker: Worker | None = None
        self.started = time.time()
        self.launched_at: float | None = None
        self.workspace = prepared.workspace     # None: a scratch dir made at the launch
        self.follower: Follower | None = None   # made when the stream is first read
        self.quota_note: str | None = None
        # the opening files a run's keeper writes as it starts the worker, off the
        # supervisor's thread: (path, text); None once written (or when there is no keeper)
        self.opening: list[tuple[str, str]] | None = (
            [] if keeper is not None and remote is None and prepared.executor.launches_process
            else None)
        self.copies: list[tuple[str, str]] = []   # ... and copies: (from, to)

    # 1. the state dir's opening files ------------------------------------------------------------
    def begin(self) -> None:
        """The prompt's copy, the one-value files and ``unit.json``; the quota gate between
        (a refusal raises QuotaExhausted, its attempt's ``unit.json`` written all the same).
        With a run's keeper, they are kept in ``opening`` for it (and ``unit.json`` is
        written once, at the launch)."""
        sd, p = self.state, self.p
        self._copy_prompt()
        self._put(statedir.RESULT_FILE, p.result_file)
        if p.executor.launches_process:  # a session unit has no process, pid or stream
            self._put(statedir.DISPATCH_PID, str(self.dispatcher_pid))
            if self.opening is None:     # (a keeper creates them as it opens them)
                open(sd.file(statedir.TAIL), "ab").close()
                open(sd.file(statedir.STDERR), "ab").close()
        self.record_step("begin")
        try:
            self._gate()
        except QuotaExhausted:   # nothing is launched: every opening file is written here
            if self.opening is None:
                sd.write_json(statedir.UNIT, self._unit_record())
            else:
                self.write_opening()
            raise
        self._put(statedir.MODEL, self.settings.model or p.executor.name)
        if self.opening is None:
            sd.write_json(statedir.UNIT, self._unit_record())
        if not self.in_run:   # beside the state dir, out of its unit's reach
            identity.record(sd, dispatcher=[self.dispatcher_pid, self.dispatcher_started],
                            unit_id=p.request.unit_id, executor=p.executor.name,
                            result_file=p.result_file, workspace=self.workspace, mode=p.mode,
                            command=list(p.command) or None)

    def _copy_prompt(self) -> None:
        """``prompt``, whole or none: with a run's keeper, copied by it from the frozen brief
        (prun's own file, never changed), else written here."""
        from .._util.fsutil import atomic_write

        dest = self.state.file(statedir.PROMPT)
        if self.opening is not None and self.p.request.briefed:
            self.copies.append((self.p.request.prompt_file, dest))
        elif self.opening is not None:
            self.opening.append((dest, self.p.prompt))
        else:
            atomic_write(dest, self.p.prompt, durable=self.durable)

    def _put(self, name: str, text: str) -> None:
        """A one-value opening file: written, or kept for the keeper."""
        if self.opening is None:
            self.state.write(name, text)
        else:
            self.opening.append((self.state.file(name), statedir.value_text(text)))

    def write_opening(self) -> None:
        """The opening files kept for a keeper that did not start the worker, and the
        pre-launch ``unit.json``, written here (a refusal, a launch that failed or never
        came). Nothing to do once written."""
        if self.opening is None:
            return
        from .._util.fsutil import atomic_write

        staged, self.opening = self.opening, None
        if self.copies:
            staged.append((self.state.file(statedir.PROMPT), self.p.prompt))
            self.copies = []
        for path, text in staged:
            atomic_write(path, text, durable=False)
        if not self.state.worker:   # a keeper that started it late wrote its record
            self.state.write_json(statedir.UNIT, self._unit_record())

    def _gate(self) -> None:
        """The quota gate: may swap the model (MODEL-FALLBACK) or raise QuotaExhausted."""
        from ..errors import GateRefusal

        try:
            decision = self.p.executor.gate(self.settings, self.p.env)
        except QuotaExhausted as e:  # exit 75: the refusal is recorded before finish() runs
            self.quota_note = (e.note if isinstance(e, GateRefusal) else None) or e.line()
            self.state.write(statedir.QUOTA_NOTE, self.quota_note)
            raise
        if decision is None:
            return
        if decision.note:
            import sys

            self.quota_note = decision.note
            print(decision.note, file=sys.stderr, flush=True)
            self.state.write(statedir.QUOTA_NOTE, decision.note)
        if decision.settings is not None:
            self.settings = decision.settings

    def _unit_record(self) -> UnitRecord:
        """``unit.json`` before the launch."""
        from .._util.process import create_time

        p = self.p
        if self.dispatcher_started is None:
            self.dispatcher_started = create_time(self.dispatcher_pid)
        return {
            "unit_id": p.request.unit_id, "attempt_id": p.request.attempt_id,
            "executor": p.executor.name, "requested_model": self.requested_model,
            "model": self.settings.model, "effort": self.settings.effort, "mode": p.mode,
            "workspace": self.workspace, "add_dirs": list(p.add_dirs),
            "resume_id": p.resume_id, "continue_from": p.request.continue_from,
            "timeout_s": self.settings.timeout_s, "result_file": p.result_file,
            "dispatcher": {"pid": self.dispatcher_pid, "create_time": self.dispatcher_started},
            "route_reason": p.request.route_reason, "started_at": iso(self.started),
            "home": self.home, "subdispatch": p.request.subdispatch,
        }

    def _workspace(self) -> str:
        """The worker's working folder: the caller's, else a scratch dir made in the state
        dir (``work``)."""
        if self.workspace is None:
            self.workspace = self.state.file("work")
            os.makedirs(self.workspace, exist_ok=True)
        return self.workspace

    def _unit(self) -> Unit:
        from ..executors.records import Unit

        p, sd = self.p, self.state
        return Unit(unit_id=p.request.unit_id, prompt=p.prompt,
                    prompt_file=sd.file(statedir.PROMPT), settings=self.settings, mode=p.mode,
                    workspace=self._workspace(), add_dirs=p.add_dirs, resume_id=p.resume_id,
                    command=p.command, state_dir=sd.path, result_file=self.write_path,
                    briefed=p.request.briefed, subdispatch=p.request.subdispatch)

    # 2. launch, or hand off when the executor launches no process ----------------------------
    def hand_off(self) -> Outcome:
        """Write what the coordinator hands its subagent; nothing is launched or waited for."""
        text, lines = self.p.executor.hand_off(self._unit())
        self.state.write(statedir.HANDOFF, text)
        self.state.write_json(statedir.UNIT, self._unit_record())  # with its workspace
        from ..ledger.statuses import OutcomeKind
        from .outcome import Outcome

        return Outcome(OutcomeKind.HANDED_OFF, "handed-off", unit_id=self.p.request.unit_id,
                       attempt_id=self.p.request.attempt_id, executor=self.p.executor.name,
                       state_dir=self.state.path, lines=tuple(lines))

    def launch(self) -> bool:
        """Start the worker. False (with the reason kept for ``finish``) if it cannot start."""
        if self.remote is not None:
            self._unit()   # its workspace made
            return self._launch_remote(self.remote)
        planned = self.plan_launch()
        if planned is None:
            return False
        try:
            worker = self._spawn(*planned)
        except OSError as e:
            return self._not_started(e)
        return self._started(planned[0], worker)

    def plan_launch(self) -> tuple[Launch, list[str]] | None:
        """The launch's file work (any thread): the executor's launch and the argv that runs
        it. None (with the reason kept for ``finish``) if it cannot be built."""
        from ..errors import LaunchError

        try:
            return self._build(self._unit())
        except LaunchError as e:
            self.launch_error = e.line()
        except OSError as e:
            self._not_started(e)
        return None

    async def launch_kept(self, planned: tuple[Launch, list[str]]) -> bool:
        """The planned worker started by the run's keeper from its event loop: no thread
        waits for the keeper's answer. False (the reason kept) if it did not start."""
        if self.keeper is None:
            raise RuntimeError("launch_kept needs a run's keeper")
        launch, argv = planned
        files, copies = self.opening or [], self.copies
        self.opening, self.copies = None, []
        record = (self.state.file(statedir.UNIT), self._launch_record(launch))
        try:
            worker = await self.keeper.spawn_async(
                argv, **self._spawn_files(launch), files=files, copies=copies, record=record,
                status=self.state.file(statedir.EXIT_STATUS))
        except OSError as e:
            self.opening, self.copies = files, copies  # written by finish, unless the keeper
            return self._not_started(e)                # wrote them
        self.worker = worker
        self._receipt(worker)   # the keeper wrote unit.json, its worker in it
        self.record_step("launch")
        return True

    def _not_started(self, e: OSError) -> bool:
        self.launch_error = f"cannot start {self.p.executor.name}: {e}"
        return False

    def _started(self, launch: Launch, worker: Worker) -> bool:
        self.worker = worker
        self._record_launch(launch, worker)
        self.record_step("launch")
        return True

    def _launch_remote(self, remote: RemoteLauncher) -> bool:
        """Submit the attempt to the cluster: its receipt is the task's key, ``unit.json``
        names the cluster instead of a local worker (no local process to signal)."""
        try:
            self.worker = remote.launch(self)
        except OSError as e:
            self.launch_error = f"cannot send {self.p.executor.name} to the cluster: {e}"
            return False
        self.launched_at = time.time()
        key = getattr(self.worker, "key", "")
        self.receipt = f"dask:{key}"
        record = self._unit_record()
        record["remote"] = {"cluster": remote.address, "key": key,
                            "submitted_at": iso(self.launched_at)}
        self.state.write_json(statedir.UNIT, record)
        self.record_step("launch")
        return True

    def _build(self, unit: Unit) -> tuple[Launch, list[str]]:
        """The executor's launch, with the unit's variables, its own places (``launching.
        Places``: its tmp, private home and guard log) and prun's git wrapper first on
        PATH, and the argv that runs it: its program's path found, in the sandbox when it
        runs in one."""
        from . import monitor
        from .launching import Places, program_path, sandbox_here

        p, sd = self.p, self.state
        env = dict(p.env)
        env.update(p.request.extra_env)
        env.update({"PRUN_UNIT_ID": p.request.unit_id, "PRUN_STATE_DIR": sd.path,
                    "PRUN_RESULT_FILE": self.write_path})
        self.sandboxed = sandbox_here(self)
        places = Places(self, env, sandboxed=self.sandboxed)
        launch = p.executor.build(unit, env)
        argv = [program_path(launch, unit.workspace), *launch.argv[1:]]
        if self.sandboxed:
            launch = places.own_stdin(launch)
            argv = places.wrap(argv, unit.workspace)
        if self.keeper is not None:   # a run's unit: under a monitor that outlives the keeper
            argv = monitor.wrap(argv)
        return launch, argv

    def _spawn(self, launch: Launch, argv: list[str]) -> Worker:
        """Start ``argv`` as this process's child (a run's keeper starts it in
        ``launch_kept``)."""
        from .._util.process import spawn

        if self.keeper is not None:
            raise RuntimeError("a run's worker is started by its keeper: await launch_kept")
        files = self._spawn_files(launch)
        del files["name"], files["log"]
        return spawn(argv, **files, die_with_parent=True)  # a kill -9 of the dispatcher ends it

    def _spawn_files(self, launch: Launch) -> dict[str, Any]:
        """Where the worker runs and what it reads and writes, as ``spawn`` takes them."""
        from .launching import absolute

        sd, workspace = self.state, self._workspace()
        return {"cwd": workspace, "env": launch.env, "stdout_path": sd.file(statedir.TAIL),
                "stderr_path": sd.file(statedir.STDERR),
                "stdin_path": absolute(launch.stdin_path, workspace),
                "name": os.path.basename(sd.path), "log": _exit_log(sd)}

    def _launch_record(self, launch: Launch) -> UnitRecord:
        """``unit.json`` at the launch: with the argv (the prompt redacted) and the sandbox."""
        from .launching import redact_prompt

        record = self._unit_record()
        record["argv"] = redact_prompt(launch.argv, self.p.prompt)
        record["sandbox"] = self.sandboxed
        return record

    def _receipt(self, worker: Worker) -> float | None:
        """The launch's time and receipt; gives the worker's start time."""
        from .._util.process import create_time

        self.launched_at = time.time()
        started: float | None = (getattr(worker, "create_time", None)
                                 or create_time(worker.pid))
        self.receipt = f"pid:{worker.pid}@{started or self.launched_at:.3f}"
        return started

    def _record_launch(self, launch: Launch, worker: Worker) -> None:
        """``unit.json`` with the argv, the sandbox and the worker; the receipt."""
        started = self._receipt(worker)
        if not self.in_run:
            identity.record(self.state, worker=[worker.pid, started], workspace=self.workspace)
        record = self._launch_record(launch)
        record["worker"] = worker_entry(worker.pid, started, self.launched_at or time.time())
        try:
            self.state.write_json(statedir.UNIT, record)
        except OSError as e:  # a full disk: the worker runs all the same and is watched
            import sys

            print(f"prun: warning: {self.state.file(statedir.UNIT)} not updated at launch: "
                  f"{e.strerror or e}", file=sys.stderr)

    def record_step(self, step: str) -> None:
        """A standalone dispatch's step in the ledger (a run's supervisor records its own)."""
        if self.record:
            from ..ledger import record_dispatch

            record_dispatch(step, self)

    @property
    def deadline(self) -> float:
        given = self.p.config.timeout_grace_s
        grace = self.p.executor.timeout_grace_s if given is None else given
        return (self.launched_at or time.time()) + self.settings.timeout_s + grace

    # 3. wait (``waiting``) -------------------------------------------------------------------
    def running(self) -> Worker:
        """The launched worker (a RuntimeError before the launch)."""
        if self.worker is None:
            raise RuntimeError(f"unit {self.p.request.unit_id} has no worker to wait for")
        return self.worker

    def follow(self) -> Follower:
        """The reader of the worker's stream, made on first use (not before STATE-DIR)."""
        if self.follower is None:
            from .waiting import Follower

            self.follower = Follower(self.p.executor.reader(), self.state,
                                     self.p.executor.event_stream)
        return self.follower

    def wait(self) -> tuple[int | None, bool]:
        """Wait for the worker to exit or its deadline. Returns (exit code, timed out)."""
        from . import waiting

        return waiting.wait(self)

    async def wait_async(self, stop: asyncio.Event | None = None,
                         hard_deadline: float | None = None,
                         on_end: Callable[[str], None] | None = None
                         ) -> tuple[int | None, str | None]:
        """The supervisor's wait, in its event loop (``waiting.wait_async``)."""
        from . import waiting

        return await waiting.wait_async(self, stop, hard_deadline, on_end)

    def pump(self) -> None:
        """Feed the stream's new complete lines to the reader (``Follower.pump``)."""
        self.follow().pump()

    # 4. finish (``finishing``) -----------------------------------------------------------------
    def finish(self, exit_code: int | None, *, timed_out: bool = False, cancelled: bool = False,
               refused: QuotaExhausted | None = None) -> Outcome:
        """Judge the run, publish the result (or FALLBACK), write outcome.json last."""
        from . import finishing

        return finishing.finish(self, exit_code, timed_out=timed_out, cancelled=cancelled,
                                refused=refused)


def reopen(req: Request, state_path: str, receipt: str | None = None) -> Dispatch:
    """The Dispatch of an attempt an earlier supervisor launched (``prun resume``):
    ``receipt`` is its ledger receipt (else its keeper's log names its worker)."""
    d = Dispatch(prepare(req, reopen=True), statedir.StateDir(state_path),
                 dispatcher_pid=os.getpid(), record=False, in_run=True)
    d.reopened = True
    worker = identity.worker(d.state, receipt)
    d.launched_at = worker[1] if worker else d.started
    d.receipt = f"pid:{worker[0]}@{d.launched_at:.3f}" if worker else None
    return d
