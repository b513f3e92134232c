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
    REJECTED <packet> reason=<code> ...     (every unit succeeded, yet `prun reconcile` will
                                             reject it: a scope leak...; a note on stderr too)

A code unit starts from the base commit: uncommitted changes in the working tree are not in
its clone, and a line on stderr says so; `base: worktree` in the plan (or a packet) starts code
units from the tree as it is (docs/plans.md).

`--detach` prints only `RUN <run-id>` and returns at once; follow with `prun wait RUN`.

Before anything is frozen the plan passes the independence test (`prun check`): a plan that
fails it is refused with the same `FAIL ...` lines and exit 1, and nothing is made, unless
`--allow-overlap` is given; the override and the failures it let through are then recorded in
the ledger (an `overlap-allowed` event).

exit codes (README, "Exit codes"): 0 every packet succeeded; 1 some packet did not succeed or
the run was cancelled, or the plan failed the independence test (nothing frozen); 2 bad plan or
usage, a unit outside its data boundary included (nothing frozen); 3 the run stopped: a packet
could not be dispatched (no receipt); 124 the run's deadline passed.

`--memfree SIZE` and `--load N` (a number or a percentage of the cores) hold a unit back while the
machine has no room (it waits, `waiting reason=memfree` or `load`, never fails; alone it always
starts); `--parallel auto` sets all three from the machine. A packet's `resources.cpus` is refused
(exit 2) unless `--allow-unenforced` (recorded): nothing here holds it (docs/run.md).

`--cluster ADDRESS` (or the plan's `cluster:`, or `PRUN_CLUSTER`) runs the units on a Dask
cluster (docs/cluster.md); without prun-agents[dask], or with a scheduler that cannot be
reached, the run is refused in one line with exit 2 before anything is made.
"""

from __future__ import annotations

import argparse
import sys

from .._util.quoting import word
from ..api import freeze_run
from ..api import run_plan as detached
from ..errors import NotIndependent
from ..ledger import Ledger
from ..plan import Budget
from . import options
from .foreground import supervise


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("plan", metavar="PLAN", type=options.path, help="the plan file (YAML)")
    p.add_argument("--parallel", "-j", type=parallel, metavar="N|auto",
                   help="units at once (default: the plan's, else 8); auto: the machine's "
                        "cores, with --memfree and --load set from the machine")
    p.add_argument("--memfree", metavar="SIZE",
                   help="start a unit only while the machine's available memory is above SIZE "
                        "(512M, 4G) and above the unit's resources.memory")
    p.add_argument("--load", metavar="N",
                   help="start a unit only while the one-minute load is under N (a number, or "
                        "a percentage of the cores: 80%%)")
    p.add_argument("--allow-unenforced", action="store_true",
                   help="run packets whose resources.cpus nothing here can hold (recorded)")
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
    p.add_argument("--budget-usd", type=options.usd, metavar="USD",
                   help="the run may spend this many US dollars (over the plan's budget:)")
    p.add_argument("--budget-tokens", type=options.token_count, metavar="N",
                   help="the run may spend this many tokens, in + out")
    p.add_argument("--budget-hard", action="store_true",
                   help="once the budget is reached, cancel the running units too")


def parallel(text: str) -> int | str:
    """``--parallel``: a count of at least 1, or ``auto``."""
    return "auto" if text == "auto" else options.positive_int(text)


def run(args: argparse.Namespace) -> int:
    start = detached if args.detach else freeze_run
    try:
        r = start(args.plan, parallel=args.parallel, deadline=args.deadline,
                  allow_overlap=args.allow_overlap, cluster=args.cluster,
                  memfree=args.memfree, load=args.load,
                  allow_unenforced=args.allow_unenforced,
                  budget=Budget(args.budget_usd, args.budget_tokens, hard=args.budget_hard))
    except NotIndependent as e:
        sys.stdout.write("\n".join(e.lines) + "\n")
        print(f"prun: {e.line()}", file=sys.stderr)
        return 1
    if r.unseen:
        print(f"prun: {r.unseen} uncommitted change{'s' if r.unseen > 1 else ''} in the working "
              "tree will not be seen by code units, which start from the base commit (commit "
              "them first, or set base: worktree in the plan)", file=sys.stderr, flush=True)
    if r.warning:
        print(f"prun: warning: {r.warning}", file=sys.stderr, flush=True)
    if args.detach:
        print(f"RUN {r.run_id}")
        return 0
    print(f"RUN {r.run_id} packets={r.packets} parallel={r.parallel} "
          f"{word('base', r.base or 'none')} {word('deadline', r.deadline or 'none')}",
          flush=True)

    with Ledger.open(r.ledger) as ledger:
        return supervise(ledger, r.run_id, verbose=args.verbose, plain=args.plain)
