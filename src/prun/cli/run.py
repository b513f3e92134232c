"""Run a plan: freeze it, then dispatch every packet through one supervisor process.

The run is frozen in the ledger first (expected packet ids and count, base commit, deadline,
cancel action and owner), then units run at most `--parallel` at a time (else the plan's
`parallel`, else 8), each after the packets it names in `after`. On a terminal a live table
shows them; otherwise terse lines (see docs/run.md):

    RUN <run-id> packets=<n> parallel=<p> base=<commit|none> deadline=<time|none>
    UNIT <packet> <event> attempt=<id> executor=<x> cause="..."   (what needs attention)
    STOPPED packet=<id> action="..." need="..."                   (no receipt: run stopped)
    RUN <run-id> status=<s> packets=<n> <status>=<count>... elapsed=<d> supervisor=gone
    UNIT <packet> <status> ...                                    (each unit not succeeded)
    RESULTS <folder>

`--detach` prints only `RUN <run-id>` and returns at once; follow with `prun wait RUN`.

Before anything is frozen the plan passes the independence test (`prun check`): a plan that
fails it is refused with the same `FAIL ...` lines and exit 1, and nothing is made, unless
`--allow-overlap` is given; the override and the failures it let through are then recorded in
the ledger (an `overlap-allowed` event).

exit codes (README, "Exit codes"): 0 every packet succeeded; 1 some packet did not succeed or
the run was cancelled, or the plan failed the independence test (nothing frozen); 2 bad plan or
usage, a unit outside its data boundary included (nothing frozen); 3 the run stopped: a packet
could not be dispatched (no receipt); 124 the run's deadline passed.

`--cluster ADDRESS` (or the plan's `cluster:`, or `PRUN_CLUSTER`) runs the units on a Dask
cluster (docs/cluster.md); without prun-agents[dask], or with a scheduler that cannot be
reached, the run is refused in one line with exit 2 before anything is made.
"""

from __future__ import annotations

import argparse
import sys

from .._util.quoting import word
from . import options

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

    from ..cluster.config import ClusterConfig
    from ..plan import Plan


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("plan", metavar="PLAN", type=options.path, help="the plan file (YAML)")
    p.add_argument("--parallel", "-j", type=options.positive_int,
                   help="units at once (default: the plan's, else 8)")
    p.add_argument("--deadline", type=options.when,
                   help="the run's terminal deadline: a duration (90m) or ISO time")
    p.add_argument("--detach", action="store_true",
                   help="run the supervisor in the background; print the run id and return")
    p.add_argument("--verbose", "-v", action="store_true", help="a line for every unit event")
    p.add_argument("--plain", action="store_true", help="lines even on a terminal")
    p.add_argument("--allow-overlap", action="store_true",
                   help="run a plan that fails the independence test (recorded in the ledger)")
    p.add_argument("--cluster", metavar="ADDRESS", type=options.name("cluster address"),
                   help="run the units on the Dask cluster at ADDRESS (tcp://host:port or "
                        "tls://host:port; default: the plan's cluster:, else $PRUN_CLUSTER); "
                        "needs prun-agents[dask], see docs/cluster.md")


def run(args: argparse.Namespace) -> int:
    from ..attempt.subdispatch import refusal
    from ..ledger import Ledger
    from ..plan import load_plan
    from ..plan.independence import check
    from ..run.detached import spawn_supervisor
    from ..run.freeze import deadline_of, freeze, preflight
    from ..run.paths import RunPaths

    if (refused := refusal()) is not None:   # inside a unit that may not start agents (its
        raise refused                         # dispatches are refused again at prepare)
    plan = load_plan(args.plan)
    deadline_of(plan, args.deadline)  # refused before the ledger is made
    report = check(plan)
    if not report.ok and not args.allow_overlap:
        sys.stdout.write("\n".join(report.lines()) + "\n")
        print("prun: the plan fails the independence test; nothing was run (fix the packets, "
              "or pass --allow-overlap to run it anyway)", file=sys.stderr)
        return 1
    preflight(plan)                          # bases and ports, before the ledger is opened
    cluster = _cluster(args.cluster, plan)   # reached (or refused) before anything is made
    with Ledger.open() as ledger:
        r = freeze(plan, ledger, parallel=args.parallel, deadline=args.deadline,
                   cluster=cluster)
        if not report.ok:
            ledger.record_event("overlap-allowed", run_id=r["id"], cause="prun run "
                                "--allow-overlap", data={"failures": [f.line() for f in
                                                                      report.failures]})
        if args.detach:
            run_dir = r.get("run_dir")
            assert run_dir, "freeze makes every run's folder"
            spawn_supervisor(r["id"], ledger.path, RunPaths(_path(run_dir)).log)
            print(f"RUN {r['id']}")
            return 0
        print(f"RUN {r['id']} packets={len(plan.packets)} parallel={r['parallel']} "
              f"{word('base', r['base'] or 'none')} {word('deadline', r['deadline'] or 'none')}",
              flush=True)
        from .foreground import supervise

        return supervise(ledger, r["id"], verbose=args.verbose, plain=args.plain)


def _cluster(given: str | None, plan: Plan) -> ClusterConfig | None:
    """The run's cluster (``--cluster``, the plan's, ``$PRUN_CLUSTER``), checked reachable."""
    from .. import settings
    from ..cluster.config import resolve

    conf = resolve(given, plan.cluster, plan.worker_lost, settings.current().cluster)
    if conf is not None:
        from ..cluster.connect import probe

        probe(conf.address)
    return conf


def _path(p: str) -> Path:
    from pathlib import Path

    return Path(p)
