"""The ``Dispatch``: one attempt of one unit, as plain state, and what is read off it.

It is given a ``Launcher`` (``launcher``): how its process is started, followed and stopped.
The steps that change it are modules of their own, each importing this one and none the other
back: ``beginning`` (the state dir's opening files, the quota gate), ``launching`` (the
launch), ``waiting`` (until the worker's exit), ``finishing`` (judge, publish, outcome.json).
Its drivers call them in order: ``standalone.run_sync`` for ``prun dispatch``, the run's
``drive`` in a run.
"""

from __future__ import annotations

import os
import time

from . import statedir
from .request import Prepared, Request, prepare
from .statedir import iso

TYPE_CHECKING = False  # typing costs milliseconds on the dispatcher's fast path
if TYPE_CHECKING:
    from typing import Any

    from .._util.worker import WorkerLike as Worker
    from ..executors.records import Launch, Unit
    from .handoff import HandedOff
    from .launcher import Launcher
    from .outcome import Outcome
    from .protocols import UnitRecord
    from .stream import Follower


class Dispatch:
    """One attempt of one unit, from its state dir to its outcome. ``launcher`` None: an
    attempt an earlier dispatcher launched, reopened to be judged (``reopen``)."""

    def __init__(self, prepared: Prepared, launcher: Launcher[Dispatch] | None,
                 state: statedir.StateDir | None = None, *, dispatcher_pid: int | None = None,
                 dispatcher_started: float | None = None):
        self.p = prepared
        self.launcher = launcher
        self.reopened = launcher is None  # an attempt an earlier dispatcher launched
        # each file synced as it is written (a standalone dispatcher), else its run syncs them
        self.durable = launcher.durable if launcher is not None else False
        self.lost: tuple[str, str] | None = None  # its remote worker ended it: (reason, error)
        self.limited: tuple[str, str] | None = None  # its tree passed a limit: (reason, error)
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
        self.handed: HandedOff | None = None  # a session unit's handle, once handed off
        self.worker_started: float | None = None  # the worker's start time, once it runs
        self.started = time.time()
        self.launched_at: float | None = None
        self.workspace = prepared.workspace     # None: a scratch dir made at the launch
        self.follower: Follower | None = None   # made when the stream is first read
        self.quota_note: str | None = None
        self.planned: tuple[Launch, list[str]] | None = None  # the launch and its argv
        # the opening files a launcher that ``stages`` them (a run's keeper) writes as it
        # starts the worker, off the supervisor's thread: (path, text); None once written
        # (or when they are written at once)
        self.opening: list[tuple[str, str]] | None = (
            [] if launcher is not None and launcher.stages else None)
        self.copies: list[tuple[str, str]] = []   # ... and copies: (from, to)

    def unit_record(self) -> UnitRecord:
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

    def work_dir(self) -> str:
        """The worker's working folder: the caller's, else a scratch dir made in the state
        dir (``work``)."""
        if self.workspace is None:
            self.workspace = self.state.file("work")
            os.makedirs(self.workspace, exist_ok=True)
        return self.workspace

    def unit(self) -> Unit:
        """The unit as its executor sees it (its working folder made)."""
        from ..executors.records import Unit

        p, sd = self.p, self.state
        return Unit(unit_id=p.request.unit_id, prompt=p.prompt,
                    prompt_file=sd.file(statedir.PROMPT), settings=self.settings, mode=p.mode,
                    workspace=self.work_dir(), add_dirs=p.add_dirs, resume_id=p.resume_id,
                    command=p.command, state_dir=sd.path, result_file=self.write_path,
                    briefed=p.request.briefed, subdispatch=p.request.subdispatch)

    @property
    def deadline(self) -> float:
        given = self.p.config.timeout_grace_s
        grace = self.p.executor.timeout_grace_s if given is None else given
        return (self.launched_at or time.time()) + self.settings.timeout_s + grace

    def running(self) -> Worker:
        """The launched worker (a RuntimeError before the launch)."""
        if self.worker is None:
            raise RuntimeError(f"unit {self.p.request.unit_id} has no worker to wait for")
        return self.worker

    def follow(self) -> Follower:
        """The reader of the worker's stream, made on first use (not before STATE-DIR)."""
        if self.follower is None:
            from .stream import Follower

            self.follower = Follower(self.p.executor.reader(), self.state,
                                     self.p.executor.event_stream)
        return self.follower


def reopen(req: Request, state_path: str, receipt: str | None = None) -> Dispatch:
    """The Dispatch of an attempt an earlier supervisor launched (``prun resume``):
    ``receipt`` is its ledger receipt (else its keeper's log names its worker)."""
    from . import identity

    d = Dispatch(prepare(req, reopen=True), None, statedir.StateDir(state_path),
                 dispatcher_pid=os.getpid())
    worker = identity.worker(d.state, receipt)
    d.launched_at = worker[1] if worker else d.started
    d.receipt = f"pid:{worker[0]}@{d.launched_at:.3f}" if worker else None
    return d
