"""Print exactly what a unit is told: its brief (the generated contract, then its task).

    prun brief PACKET [--run RUN] [--attempt ATTEMPT]     what an attempt received
    prun brief PACKET --plan PLAN                          what it would receive

For a packet that has run, the brief its latest attempt received (or the named attempt's),
as frozen in the ledger. For a packet of a plan not yet run, or not yet started in its run, a
preview: values fixed only when the unit starts (its result path, the snapshot's folder) are
shown as `<...>` and a note on stderr says so. See docs/run.md "What a worker is told".

exit codes: 0 printed; 2 no such run, packet or attempt, or a bad plan.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from .._util import gitcmd
from ..attempt import statedir
from ..errors import GitError, UsageError
from ..ledger import Ledger, repo_root
from ..plan import Plan
from ..plan.independence import ancestors
from ..run import brief
from ..run.brief import TASK_HEADING
from ..views.model import open_run
from . import options

if TYPE_CHECKING:
    from ..plan import Packet, Plan


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("packet", metavar="PACKET", type=options.packet_id, help="the packet id")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--run", dest="run_id", metavar="RUN", type=options.run_id,
                       help="a run id or prefix (default: the latest run of this repository)")
    where.add_argument("--plan", metavar="PLAN", type=options.path, help="preview the brief from a plan file")
    p.add_argument("--attempt", metavar="ATTEMPT", type=options.attempt_id, help="the brief of this attempt")
    p.add_argument("--json", action="store_true",
                   help="JSON: packet, attempt, preview, contract and task sizes, brief")


def run(args: argparse.Namespace) -> int:
    if args.plan:
        if args.attempt:
            raise UsageError("--attempt names an attempt of a run, not of a plan",
                             hint="give --run RUN with --attempt")
        from ..plan import load_plan

        plan = load_plan(args.plan)
        packet = _packet(plan, args.packet, plan.path or args.plan)
        return _print(args, packet.id, None, _preview(plan, packet, None, None))

    with Ledger.open(create=False) as ledger:
        view = open_run(ledger, args.run_id)
        packet = _packet(Plan(packets=tuple(view.packets)), args.packet, f"run {view.id}")
        attempts = view.attempts.get(packet.id, [])
        if args.attempt:
            attempt = next((a for a in attempts if a["id"] == args.attempt), None)
            if attempt is None:
                raise UsageError(f"packet {packet.id} has no attempt {args.attempt!r} in run "
                                 f"{view.id}", hint="`prun ledger` lists the attempts")
        else:
            attempt = next((a for a in reversed(attempts) if a.get("brief")), None)
        if attempt is not None and attempt.get("brief"):
            return _print(args, packet.id, attempt["id"], attempt["brief"])
        if attempt is not None:
            raise UsageError(f"attempt {attempt['id']} has no brief in the ledger",
                             hint="it ran before prun froze briefs, or never started")
        plan = Plan(packets=tuple(view.packets))
        return _print(args, packet.id, None,
                      _preview(plan, packet, view.run.get("run_dir"),
                               view.bases.get(packet.id) or view.run.get("base")))


def _packet(plan: Plan, packet_id: str, where: str) -> Packet:
    packet = plan.packet(packet_id)
    if packet is None:
        raise UsageError(f"no packet {packet_id!r} in {where}",
                         hint="packets: " + ", ".join(plan.ids))
    return packet


def _preview(plan: Plan, packet: Packet, run_dir: str | None, base: str | None) -> str:
    """What the first attempt of ``packet`` would receive, with launch-time values marked."""
    if base is None and plan.path:
        base = _head(plan)
    # the worker is told its outbox in the attempt's state dir (``statedir.outbox``), made
    # only at launch: its name is marked
    outbox = (f"{run_dir or '<run dir>'}/state/<the attempt's state dir>/{statedir.OUTBOX}/"
              f"{statedir.OUTBOX_RESULT}.md")
    before = ancestors(plan).get(packet.id, set())
    applied = [p.id for p in plan.packets if p.id in before and p.writes_code] \
        if packet.writes_code else []
    snapshot = None
    if not packet.writes_code and packet.snapshot and base:
        snapshot = "<the run's read-only snapshot>"
    ctx = brief.context(plan, packet, workspace="clone" if packet.writes_code else "scratch",
                        result_file=outbox, base=base, applied=applied,
                        snapshot=snapshot,
                        predecessors={pid: f"<the result of {pid}>" for pid in packet.after})
    return brief.render(packet, ctx)


def _head(plan: Plan) -> str | None:
    root = repo_root(plan.root)
    if root is None:
        return None
    try:
        return gitcmd.rev(root, plan.base or "HEAD")
    except GitError:
        return None


def _print(args: argparse.Namespace, packet_id: str, attempt_id: str | None, text: str) -> int:
    preview = attempt_id is None
    if args.json:
        head, _, _ = text.partition(f"\n{TASK_HEADING}\n")
        print(json.dumps({"packet": packet_id, "attempt": attempt_id, "preview": preview,
                          "contract_bytes": len(head.encode()) + 1,
                          "bytes": len(text.encode()), "brief": text}, indent=1))
    else:
        from .._util.quoting import printable

        sys.stdout.write(printable(text, keep="\n\t"))
    if preview:
        print("prun: a preview: values shown as <...> are fixed when the unit starts",
              file=sys.stderr)
    return 0
