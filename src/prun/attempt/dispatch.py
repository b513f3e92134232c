"""The dispatcher: run one unit on one executor and never lose or fake its result.

The life of one attempt, readable on one screen:

    prepared = prepare(request)        # validate everything; nothing is created (UsageError: exit 2)
    d = Dispatch(prepared)             # the state dir exists from here on (STATE-DIR line)
    d.begin()                          # prompt copy, result-file, dispatch-pid, unit.json, gate
    d.launch()                         # spawn in its own process group, stdin closed
    d.wait()                           # until exit or deadline (then the group is ended)
    outcome = d.finish(...)            # judge, publish result or FALLBACK, outcome.json last

``run_sync`` strings these together for ``prun dispatch``; the run supervisor drives the same
steps from its event loop. Exit codes: 0 succeeded, 1 failed, 2 refused before a state dir
existed, 75 quota gate refused, 124 timeout.
"""

from __future__ import annotations

from .core import Dispatch, reopen
from .exitlog import recorded_exit
from .request import Prepared, Request, prepare
from .standalone import run_sync

__all__ = ["Dispatch", "Prepared", "Request", "prepare", "recorded_exit", "reopen",
           "run_sync"]
