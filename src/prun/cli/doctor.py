"""What this machine gives prun, one line per fact, with the fix for each missing part.

Each executor's CLI (found, version, signed in where that can be told offline), the sandbox
(bubblewrap), how resource limits would be enforced, the quota snapshot (its age), the ledger,
the optional extras installed, and this project's skill and MCP installs. Given a PLAN (by
default `plan.yaml` in the current folder, when there is one), the parts it needs are marked
`needed=yes`, and a `plan routing` line says whether each of its units goes to an executor
found here.

stdout, one line per fact:
  <topic> <name> status=<ok|missing|warn> detail="<what was found>" [fix="<what to do>"] [needed=yes]
  topics: executor, sandbox, limits, quota, ledger, extra, skill, mcp, plan
--json prints one object instead: {"ok": bool, "plan": path|null, "facts": [...]}.

exit codes: 0 everything the plan needs is here (always, without a plan); 1 something the
plan needs is missing; 2 bad usage (the plan cannot be read).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from ..doctor import doctor
from ..errors import ExitCode
from ..plan import load_plan
from . import options

DEFAULT_PLAN = "plan.yaml"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("plan", metavar="PLAN", nargs="?", type=options.path,
                   help=f"the plan whose needs to check (default: ./{DEFAULT_PLAN} when there "
                   "is one)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of lines")


def run(args: argparse.Namespace) -> int:
    source = args.plan or (DEFAULT_PLAN if os.path.isfile(DEFAULT_PLAN) else None)
    plan = load_plan(source) if source else None
    report = doctor(dict(os.environ), Path.cwd(), plan, source)
    if args.json:
        sys.stdout.write(json.dumps(report.to_json(), sort_keys=True) + "\n")
    else:
        sys.stdout.write("\n".join(report.lines()) + "\n")
    return ExitCode.OK if report.ok else ExitCode.FAILED
