"""Show a run: one RUN line, one UNIT line per packet that is not (yet) succeeded, and
where the results are. Without RUN: the latest run of this repository.

    RUN <run-id> status=<s> packets=<n> <status>=<count>... elapsed=<d> supervisor=<alive|gone>
    UNIT <packet> <status> attempt=<id> executor=<x> elapsed=<d> [reason=..] [result=..]
    RESULTS <folder>

`--all` prints every packet; `--json` prints the run, its units and their attempts.
A run whose status is running while its supervisor is gone needs `prun resume RUN`.

exit codes: 0 shown; 2 no such run.
"""

from __future__ import annotations

import argparse
import json
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..run.view import Spend


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_id", nargs="?", metavar="RUN", help="run id or unique prefix")
    p.add_argument("--all", action="store_true", help="a line for every packet")
    p.add_argument("--json", action="store_true", help="the whole state as JSON")


def run(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from ..ledger import Ledger
    from ..run.render import summary_lines
    from ..run.view import find_run, view

    with Ledger.open(create=False) as ledger:
        row = find_run(ledger, args.run_id)
        v = view(ledger, row["id"])
        if args.json:
            json.dump({"run": v.run, "supervisor_alive": v.supervisor_alive,
                       "counts": v.counts(), "units": [asdict(u) for u in v.units],
                       "attempts": [dict(a) for a in ledger.attempts(row["id"])],
                       "cost": {s.executor: cost_json(s) for s in v.spend()}},
                      sys.stdout, indent=1, default=str)
            sys.stdout.write("\n")
            return 0
        for line in summary_lines(v, everything=args.all):
            print(line)
    return 0


def cost_json(s: Spend) -> dict[str, object]:
    """One executor's totals as ``--json`` carries them (names as in ``outcome.json``)."""
    return {"attempts": s.attempts,
            "tokens": {"in": s.tokens_in, "out": s.tokens_out, "cached": s.tokens_cached},
            "cost_usd": s.cost_usd, "unknown": s.unknown}
