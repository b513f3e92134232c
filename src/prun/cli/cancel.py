"""Cancel a whole run, or one attempt (`RUN:PACKET:N`, as printed in `attempt=`), or one
packet of a run (`--packet`), or a standalone unit (its `STATE_DIR`: its dispatcher is told
to stop it; with its dispatcher gone, its worker's group is ended and the unit settled, as
`prun settle` does). A run's units are ended by their supervisor; a standalone unit's
dispatcher and worker are known from the record its dispatcher kept beside the state dir,
never from what the unit could write in it (`unit.json`). The attempt becomes
cancel-requested until its process group is confirmed gone and its partial output
quarantined; then it is recorded as cancelled.

    CANCEL <target> status=<attempt or run status>

With no supervisor running, a detached one is started to carry the request out.

exit codes: 0 cancelled (or already finished); 2 no such run or attempt; 1 not confirmed
within --wait seconds (the request stands).
"""

from __future__ import annotations

import argparse
import os

from .._util.quoting import quote
from ..attempt.orphaned import cancel, standalone
from ..errors import UsageError
from ..ledger import Ledger
from ..run.detached import spawn_supervisor, wait_for, wake_supervisor
from ..run.paths import RunPaths
from ..settings import current
from . import options


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("target", metavar="RUN|ATTEMPT|STATE_DIR", type=options.target,
                   help="a run id, an attempt id, or a standalone unit's state dir")
    p.add_argument("--packet", type=options.packet_id, help="cancel only this packet of the run")
    p.add_argument("--reason", default="", help="why (recorded in the ledger)")
    p.add_argument("--wait", type=options.seconds, default=60.0,
                   help="seconds to wait for confirmation (default 60)")


def run(args: argparse.Namespace) -> int:
    if os.path.isdir(args.target):  # a standalone unit's STATE_DIR
        return _standalone(args)

    with Ledger.open(create=False) as ledger:
        attempt = ledger.attempt(args.target) if ":" in args.target else None
        if attempt is not None:
            run_id, target = attempt["run_id"], attempt["id"]
        else:
            row = ledger.find_run(args.target)
            if row is None:
                raise UsageError(f"no run or attempt {args.target} in the ledger",
                                 hint="see `prun ledger` for run ids, `prun ledger RUN` "
                                 "for attempt ids")
            run_id, target = row["id"], args.packet
            if target and all(p["id"] != target for p in ledger.packets(run_id)):
                raise UsageError(f"no packet {target} in run {run_id}",
                                 hint=f"`prun status {run_id} --all` lists its packets")
        run = ledger.run(run_id)
        assert run is not None  # the run of a recorded attempt, or the one just found
        cause = "cancelled by " + (args.reason or "prun cancel")
        if run["status"] != "running" and not target:
            print(f"CANCEL {quote(run_id)} status={run['status']}")
            return 0
        ledger.add_request(run_id, "cancel", target, cause=cause)
        if not wake_supervisor(run):
            from pathlib import Path

            spawn_supervisor(run_id, ledger.path, RunPaths(Path(run["run_dir"])).log)

        def settled() -> str | None:
            if target and ":" in target:
                a = ledger.attempt(target)
                assert a is not None  # the attempt found above; attempts are never deleted
                s: str = a["status"]
                return s if s not in ("pending", "dispatched", "running",
                                      "cancel-requested") else None
            if target:
                p = next((p for p in ledger.packets(run_id) if p["id"] == target), None)
                if p is None:
                    return "unknown-packet"
                ps: str = p["status"]
                return ps if ps not in ("running", "pending", "parked") else None
            now = ledger.run(run_id)
            assert now is not None  # runs are never deleted
            s = now["status"]
            return s if s != "running" else None

        status = wait_for(settled, args.wait)
        print(f"CANCEL {quote(target or run_id)} status={status or 'cancel-requested'}")
        return 0 if status and status != "unknown-packet" else 1


def _standalone(args: argparse.Namespace) -> int:
    sd = standalone(args.target)
    kind = cancel(sd, current().kill_grace_s, args.wait)
    print(f"CANCEL {quote(sd.path)} status={kind}")
    return 0
