"""Judge every packet of a run before anything is integrated.

    prun reconcile [RUN] [--json] [--rescoped PACKET[=WHY]]...

RUN is a run id or a unique prefix; left out, the latest run of this repository. For each
packet of the frozen set, its deciding attempt (the latest one not quarantined) is checked:
its outcome, its result (recovered from the state dir's tail when missing, and flagged), the
required result sections, and for a code unit its clone's change against the declared base:
files outside the owned globs, shared files it does not own, commits the worker made; and
the packet's acceptance check (`accept:`), which prun runs itself once per attempt on the
base plus the attempt's patch in a throwaway clone (its output in
<run dir>/accept/<packet>.<seq>.log). One line per reason:

    ACCEPTED <packet> files=<n> [accept=passed]
    REJECTED <packet> reason=<slug> [key=value ...]
    REVIEW <packet> reason=<slug> [key=value ...]
    RECONCILE run=<id> packets=<n> accepted=<n> rejected=<n> review=<n> complete=yes|no

--rescoped marks a packet whose change of scope the person approved; it then counts toward
completeness whatever its verdict. Reasons and their meaning: docs/reconcile.md.

exit codes (README, "Exit codes"): 0 every packet accepted (or re-scoped); 1 something was
rejected; 10 nothing rejected, but something needs review or has not finished; 2 bad usage or
no such run.
"""

from __future__ import annotations

import argparse
import json

from ..api import reconcile, reconcile_exit_code, rescoped_map
from . import options


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_id", nargs="?", metavar="RUN", type=options.run_id,
                   help="a run id or prefix (default: latest)")
    p.add_argument("--json", action="store_true", help="the verdicts as JSON")
    p.add_argument("--rescoped", action="append", default=[], metavar="PACKET[=WHY]",
                   type=_rescoped,
                   help="a packet whose change of scope was approved (repeatable)")


def _rescoped(text: str) -> str:
    """An argparse ``type`` for ``--rescoped PACKET[=WHY]``: PACKET an id (see
    ``options.name``), WHY free text."""
    pid, _, _why = text.partition("=")
    options.packet_id(pid.strip() if pid.strip() else pid)
    return text


def run(args: argparse.Namespace) -> int:
    report = reconcile(args.run_id, rescoped=rescoped_map(args.rescoped))
    if args.json:
        print(json.dumps(report.as_dict(), indent=2, sort_keys=True))
    else:
        print("\n".join(report.lines()))
    return reconcile_exit_code(report)
