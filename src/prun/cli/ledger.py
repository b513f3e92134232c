"""Show the ledger: runs, or one run's packets and attempts, or its event log.

    prun ledger                 the latest runs, one line each
    prun ledger RUN             the run's attempts, one line each
    prun ledger RUN --events    the run's append-only event log
    prun ledger --dispatches    standalone `prun dispatch` attempts

Lines are `key=value` words (a value that is not plain is quoted, docs/reconcile.md#quoting);
`--json` prints the rows as JSON. `--path` prints where the
ledger is. The tables can also be read with any SQLite tool (see docs/ledger.md).

exit codes: 0 shown; 2 bad usage (no such run).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from .._util.quoting import word
from ..errors import UsageError
from ..ledger import Ledger, default_path
from . import options

LIMIT_MAX = 10000  # --limit: runs listed at most


if TYPE_CHECKING:
    from collections.abc import Mapping


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_id", nargs="?", metavar="RUN", type=options.run_id,
                   help="a run id (or a unique prefix)")
    p.add_argument("--events", action="store_true", help="the run's event log")
    p.add_argument("--dispatches", action="store_true", help="standalone dispatch attempts")
    p.add_argument("--limit", type=options.int_in(1, LIMIT_MAX), default=20,
                   help=f"how many runs (default 20, at most {LIMIT_MAX})")
    p.add_argument("--json", action="store_true", help="rows as JSON")
    p.add_argument("--path", action="store_true", help="print the ledger's path and exit")


def run(args: argparse.Namespace) -> int:
    if args.path:
        print(default_path())
        return 0
    with Ledger.open(create=False) as ledger:
        if args.dispatches:
            rows = ledger.attempts(None)
            kind = "ATTEMPT"
        elif args.run_id:
            run = ledger.find_run(args.run_id)
            if run is None:
                raise UsageError(f"no run {args.run_id} in the ledger {ledger.path}",
                                 hint="run `prun ledger` for the list")
            if args.events:
                rows, kind = ledger.events(run["id"]), "EVENT"
            else:
                rows, kind = ledger.attempts(run["id"]), "ATTEMPT"
        else:
            rows, kind = ledger.runs(args.limit), "RUN"
        if args.json:
            json.dump([dict(r) for r in rows], sys.stdout, indent=1)
            sys.stdout.write("\n")
            return 0
        for r in rows:
            print(_line(kind, dict(r)))
    return 0


_COLUMNS = {
    "RUN": ("id", "status", "packet_count", "base", "deadline", "created_at", "finished_at"),
    "ATTEMPT": ("id", "packet_id", "status", "executor", "model", "routing_reason", "receipt",
                "predecessor", "reason", "result_path", "state_dir"),
    "EVENT": ("seq", "at", "kind", "packet_id", "attempt_id", "status", "cause"),
}


def _line(kind: str, row: Mapping[str, object]) -> str:
    words = [kind]
    for k in _COLUMNS[kind]:
        value = row.get(k)
        if value is None or value == "":
            continue
        words.append(word(k, value))
    return " ".join(words)
