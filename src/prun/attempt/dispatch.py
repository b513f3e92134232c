"""The dispatcher: run one unit on one executor and never lose or fake its result.

The life of one attempt, readable on one screen:

    prepared = prepare(request)        # validate everything; nothing is created (UsageError: exit 2)
    d = Dispatch(prepared, launcher)   # the state dir exists from here on (STATE-DIR line)
    begin(d); admit(d)                 # prompt copy, result-file, dispatch-pid; gate, unit.json
    launch(d)                          # the launcher starts it, in its own process group
    wait(d)                            # until exit or deadline (then the group is ended)
    outcome = finish(d, ...)           # judge, publish result or FALLBACK, outcome.json last

``run_sync`` strings these together for ``prun dispatch`` (a ``LocalLauncher``); the run's
``drive`` calls the same steps from its event loop (``start_async``, ``wait_async``) with its
keeper's launcher, or the cluster's. Exit codes: 0 succeeded, 1 failed, 2 refused before
a state dir existed, 75 quota gate refused, 124 timeout.

Where each part lives (this module names the dispatcher's API):

    request      Request, Prepared, prepare: what is asked, validated
    core         Dispatch: the attempt's plain state; reopen (``prun resume``)
    launcher     Launcher: the launch seam (how its process is started, followed, stopped)
    beginning    begin, admit: the opening files, the quota gate, unit.json
    launching    plan, launch, start_async; the program's path, the sandbox's mounts
    local        LocalLauncher: the worker as this process's child
    session_launcher   SessionLauncher: a session unit handed to the coordinator
    handoff      HandedOff: a session unit's handle (its receipt, its result landing)
    waiting      wait, wait_async; ``stream``: the Follower that reads the worker's stream
    finishing    finish: judge, quota, publish (``publish``), outcome.json (``outcome``)
    standalone   run_sync: ``prun dispatch`` in one process; ``recording``: its ledger rows
    statedir, exitlog, result_index, sandbox, protocols: the files, logs and types underneath
"""

from __future__ import annotations

from .beginning import admit, begin
from .core import Dispatch, reopen
from .exitlog import recorded_exit
from .finishing import finish
from .handoff import HandedOff
from .launching import launch, plan, start_async
from .local import LocalLauncher
from .request import Prepared, Request, prepare
from .session_launcher import SessionLauncher
from .standalone import run_sync
from .waiting import wait, wait_async

__all__ = ["Dispatch", "HandedOff", "LocalLauncher", "Prepared", "Request", "SessionLauncher",
           "admit", "begin", "finish", "launch", "plan", "prepare", "recorded_exit", "reopen",
           "run_sync", "start_async", "wait", "wait_async"]
