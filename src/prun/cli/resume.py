"""Resume a run whose supervisor died: re-attach to its workers still running (through
their state dirs), judge those that finished meanwhile from what they left, and launch the
packets still pending. Nothing runs twice; nothing is lost.

Prints what `prun run` prints (or only `RUN <run-id>` with `--detach`).

exit codes: as `prun run` (0, 1, 3, 124); 1 also when the run's supervisor is still alive.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import StateError
from ..ledger import Ledger
from ..run.detached import spawn_supervisor, supervisor_alive
from ..run.paths import RunPaths
from ..views.model import find_run
from . import options
from .foreground import supervise


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_id", metavar="RUN", type=options.run_id, help="run id or unique prefix")
    p.add_argument("--detach", action="store_true", help="supervise in the background")
    p.add_argument("--verbose", "-v", action="store_true", help="a line for every unit event")
    p.add_argument("--plain", action="store_true", help="lines even on a terminal")


def run(args: argparse.Namespace) -> int:
    with Ledger.open(create=False) as ledger:
        run = find_run(ledger, args.run_id)
        if supervisor_alive(run):
            raise StateError(f"run {run['id']} still has a live supervisor "
                             f"(pid {run['supervisor_pid']})",
                             hint=f"follow it with `prun wait {run['id']}`")
        if args.detach:
            spawn_supervisor(run["id"], ledger.path, RunPaths(Path(run["run_dir"])).log)
            print(f"RUN {run['id']}")
            return 0
        print(f"RUN {run['id']} resumed", flush=True)
        return supervise(ledger, run["id"], verbose=args.verbose, plain=args.plain)
