"""The dispatcher: run one unit on one executor and never lose or fake its result.

The life of one attempt, readable on one screen:

    prepared = prepare(request)        # validate everything; nothing is created (UsageError: exit 2)
    d = Dispatch(prepared)             # the state dir exists from here on (STATE-DIR line)
    d.begin()                          # prompt copy, result-file, dispatch-pid, unit.json, gate
    d.launch()                         # spawn in its own process group, stdin closed
    d.wait()                           # until exit or deadline (then the group is ended)
    outcome = d.finish(...)            # judge, publish result or FALLBACK, outcome.json last

``run_sync`` strings these together for ``prun dispatch``; the run supervisor drives the same
steps from its event loop (``wait_async``). Exit codes: 0 succeeded, 1 failed, 2 refused before
a state dir existed, 75 quota gate refused, 124 timeout.

Where each part lives (this module names the dispatcher's API):

    request      Request, Prepared, prepare: what is asked, validated
    core         Dispatch: its state, begin, launch or hand_off; reopen (``prun resume``)
    launching    the program's path, the git wrapper on PATH, the sandbox's mounts
    waiting      wait, wait_async, and the Follower that reads the worker's stream
    finishing    finish: judge, quota, publish (``publish``), outcome.json (``outcome``)
    standalone   run_sync: ``prun dispatch`` in one process
    statedir, exitlog, published, sandbox, shapes: the files, logs and types underneath
"""

from __future__ import annotations

from .core import Dispatch, reopen
from .exitlog import recorded_exit
from .request import Prepared, Request, prepare
from .standalone import run_sync

__all__ = ["Dispatch", "Prepared", "Request", "prepare", "recorded_exit", "reopen",
           "run_sync"]
