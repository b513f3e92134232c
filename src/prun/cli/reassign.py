"""Reassign a packet: a linked successor attempt, optionally on another executor.

If the packet's attempt is still running it becomes cancel-requested and is ended; whatever
it produces late (its result, the response beside it, its workspace) is rejected and moved
to the run's quarantine, and the attempt is recorded as cancelled (or quarantined, if it
finished first). The successor's `predecessor` names it.

    REASSIGN <packet> run=<run-id> executor=<x> predecessor=<attempt> attempt=<new attempt>

With no supervisor running, a detached one is started to carry the request out.

An --executor outside the packet's data boundary (`data.may_go_to`) is refused before anything
is requested.

exit codes: 0 the successor attempt exists; 1 no successor within --wait seconds (the request
stands); 2 no such run or packet, a bad executor, or one outside the packet's data boundary.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from .. import executors
from .._util.quoting import quote, word
from ..errors import UsageError
from ..ledger import Ledger
from ..plan import boundary
from ..run.detached import spawn_supervisor, wait_for, wake_supervisor
from ..run.freeze import packet_from_spec
from ..run.paths import RunPaths
from ..views.model import find_run
from . import options

if TYPE_CHECKING:
    import sqlite3

    from ..plan import Packet


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("packet", metavar="PACKET", type=options.packet_id, help="the packet id")
    p.add_argument("--run", dest="run_id", metavar="RUN", type=options.run_id,
                   help="the run (default: the latest)")
    p.add_argument("--executor", type=options.name("executor"),
                   help="the successor's executor (default: the same)")
    p.add_argument("--reason", default="", help="why (recorded in the ledger)")
    p.add_argument("--wait", type=options.seconds, default=60.0,
                   help="seconds to wait for the successor attempt (default 60)")


def run(args: argparse.Namespace) -> int:
    if args.executor:
        executors.get(args.executor)  # refuses unknown executors and codex (exit 2)
    with Ledger.open(create=False) as ledger:
        run = find_run(ledger, args.run_id)
        run_id = run["id"]
        row = next((p for p in ledger.packets(run_id) if p["id"] == args.packet), None)
        if row is None:
            raise UsageError(f"run {run_id} has no packet {args.packet}",
                             hint=f"see `prun status {run_id} --all`")
        if args.executor:
            _inside_boundary(packet_from_spec(row["spec"], dict(row)), args.executor)
        before = ledger.attempts(run_id, args.packet)
        old = before[-1]["id"] if before else None
        ledger.add_request(run_id, "reassign", args.packet, executor=args.executor,
                           cause="reassigned" + (f": {args.reason}" if args.reason else ""))
        if not wake_supervisor(run):
            spawn_supervisor(run_id, ledger.path, RunPaths(Path(run["run_dir"])).log)

        def successor() -> sqlite3.Row | None:
            rows = ledger.attempts(run_id, args.packet)
            return next((r for r in rows[len(before):] if r["predecessor"] == old), None)

        new = wait_for(successor, args.wait)
        executor = new["executor"] if new else (args.executor or "same")
        print(f"REASSIGN {quote(args.packet)} run={run_id} {word('executor', executor)} "
              f"{word('predecessor', old or 'none')} "
              f"{word('attempt', new['id'] if new else 'pending')}")
        return 0 if new else 1


def _inside_boundary(packet: Packet, executor: str) -> None:
    """Refuse (UsageError) a successor executor the packet's data may not go to: checked for
    the packet's model and for the model the executor would pick from this environment."""
    bound = packet.data.may_go_to
    model = executors.get(executor).settings(os.environ, model=packet.model).model
    for m in dict.fromkeys((model, packet.model)):
        if not boundary.allowed(bound, executor, m):
            raise boundary.outside(f"packet {packet.id}", executor, m, bound)
