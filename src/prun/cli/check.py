"""The independence test: may the plan's packets run at the same time?

Every pair of packets is checked on four rules: base (writers start from the same immutable
revision), files (what they may write is disjoint; a shared path has one integration owner),
state (ports, databases, fixtures disjoint) and order (none reads another's output). Packets
linked through `after` are a sequence and pass. Globs are compared even for files that do not
exist yet.

output: one line per failure, then a summary line
  FAIL <rule> <a> <b> <path|resource|base>=<value> why="..." fix="..."
  OK pairs=<n> packets=<m> sequenced=<k>
  FAILED failures=<f> pairs=<n> packets=<m> sequenced=<k>

Refused before any pair is compared (exit 2, one line naming the file and line): a packet
that still holds the template's placeholders (`TODO:` where `prun packet new` put one, or its
body unchanged), and one that can go only to executors missing on this machine (the line
names what to install; `prun doctor` shows what is here).

exit codes: 0 the packets are independent; 1 a rule failed; 2 the plan could not be read or
was refused, e.g. a packet's executor outside its data boundary (the message names the file
and line).
"""

from __future__ import annotations

import argparse
import json
import sys

from ..api import check
from . import options


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("plan", metavar="PLAN", type=options.path, help="the plan file (YAML)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of lines")
    p.add_argument("--repo", metavar="DIR", type=options.path,
                   help="the repository that bases are resolved in (default: the plan's)")
    p.add_argument("--no-git", action="store_true",
                   help="compare bases as written, without resolving them with git")


def run(args: argparse.Namespace) -> int:
    report = check(args.plan, repo=args.repo, use_git=not args.no_git)
    if args.json:
        sys.stdout.write(json.dumps(report.to_json(), sort_keys=True) + "\n")
    else:
        sys.stdout.write("\n".join(report.lines()) + "\n")
    return 0 if report.ok else 1
