"""Show a run: one RUN line, one UNIT line per packet that needs attention, what each executor's
units used, and where the results are. Without RUN: the latest run of this repository.

    RUN <run-id> status=<s> packets=<n> <status>=<count>... elapsed=<d> supervisor=<alive|gone>
    UNIT <packet> <status> attempt=<id> executor=<x> elapsed=<d> [reason=..] [resets_at=..]
         [note=..] [result=..] [parked_until=..] [waiting=receipt] [accept=<status>]
    COST <executor> attempts=<n> tokens_in=<n> tokens_out=<n> cached=<n> usd=<x> [<total>_unknown=<k>]...
    RESULTS <folder>
    BUDGET [executor=<x>] spent_tokens=<n> spent_usd=<x> projected_tokens=<n> projected_usd=<x>
           budget_tokens=<n|none> budget_usd=<x|none>     (a run with a budget)

A unit whose acceptance check (run by `prun reconcile`) did not pass is listed too.
`--all` prints every packet; `--json` prints the run, its units (each with its `tokens` and
`cost_usd`), their attempts, each executor's totals (`cost`) and, with a budget, `budget` (spent,
projected and the limit of each scope). A run whose status is running
while its supervisor is gone needs `prun resume RUN`: a line on stderr says so (`next` in
--json).

`--watch` (or `prun top [RUN]`) follows the run until it ends: on a terminal, the live view
`prun run` shows, redrawn at each change; otherwise these lines again at each new event of
the run (never a terminal frame). Ctrl-C stops watching, not the run.

exit codes: 0 shown; 2 no such run, or --watch with --json. With --watch, the run's own once it
ended (0 every packet succeeded, 1 otherwise, 3 stopped, 124 its deadline passed), 7 its
supervisor is gone while it runs (`prun resume RUN`), 130 Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from .._util.quoting import word
from ..api import status_document
from ..errors import ExitCode, UsageError
from ..ledger import Ledger
from ..views.follow import follow_lines, follow_live
from ..views.lines import gone_line, summary_lines
from ..views.model import find_run
from . import options
from .foreground import exit_code

if TYPE_CHECKING:
    from ..ledger import Ledger


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_id", nargs="?", metavar="RUN", type=options.run_id, help="run id or unique prefix")
    p.add_argument("--all", action="store_true", help="a line for every packet")
    p.add_argument("--json", action="store_true", help="the whole state as JSON")
    p.add_argument("--watch", "-w", action="store_true",
                   help="follow the run until it ends (the live view on a terminal)")
    p.add_argument("--plain", action="store_true", help="with --watch: lines even on a terminal")


def run(args: argparse.Namespace) -> int:
    watch = args.watch or getattr(args, "command", None) == "top"
    if watch and args.json:
        raise UsageError("--watch and --json do not go together",
                         hint="`prun status RUN --json` once, or --watch for the view")
    if watch:
        with Ledger.open(create=False) as ledger:
            row = find_run(ledger, args.run_id)
            return _watch(ledger, row["id"], everything=args.all, plain=args.plain)
    v, doc = status_document(args.run_id)
    if args.json:
        json.dump(doc, sys.stdout, indent=1, default=str)
        sys.stdout.write("\n")
        return 0
    for line in summary_lines(v, everything=args.all):
        print(line)
    for standing in doc["budget"]:
        print(budget_line(standing))
    if v.run["status"] == "running" and not v.supervisor_alive:
        print(gone_line(v.id), file=sys.stderr)
    return 0


def budget_line(s: dict[str, Any]) -> str:
    """``BUDGET [executor=<x>] spent_tokens=.. spent_usd=.. projected_tokens=..
    projected_usd=.. budget_tokens=.. budget_usd=..`` (``none``: no such limit)."""
    limit = s["budget"]
    words = ["BUDGET", *([word("executor", s["executor"])] if s["executor"] else []),
             word("spent_tokens", s["spent"]["tokens"]),
             word("spent_usd", f"{s['spent']['usd']:.4f}"),
             word("projected_tokens", s["projected"]["tokens"]),
             word("projected_usd", f"{s['projected']['usd']:.4f}"),
             word("budget_tokens", "none" if limit["tokens"] is None else limit["tokens"]),
             word("budget_usd", "none" if limit["usd"] is None else f"{limit['usd']:g}")]
    return " ".join(words)


def _watch(ledger: Ledger, run_id: str, *, everything: bool, plain: bool) -> int:
    def emit(lines: list[str]) -> None:
        sys.stdout.write("\n".join(lines) + "\n")
        sys.stdout.flush()

    if sys.stdout.isatty() and not plain:
        v = follow_live(ledger, run_id)
        emit(summary_lines(v))
    else:
        v = follow_lines(ledger, run_id, emit, everything=everything)
    if v.run["status"] == "running":  # it ended because its supervisor is gone
        print(gone_line(run_id), file=sys.stderr)
        return ExitCode.SUPERVISOR_GONE
    return exit_code(str(v.run["status"]))
