"""Apply a run's accepted changes to the working tree, check the exact result, never commit.

    prun integrate [RUN] [--include PACKET]... [--worktree PATH] [--no-check]
                   [--keep-culprits] [--json]

Each code unit's change is taken from its clone as a binary patch against its base (untracked
files included; the patch `prun clean` saved in the run dir once the clone is gone) and
applied in order (packets after those they come `after`, ties by id),
each checked first with `git apply --check`. Rejected and needs-review changes are applied
only when named with --include or when the person recorded an `accept` or `include` decision
on the packet's deciding attempt (`prun review`); a `reject` decision leaves a change out
whatever its verdict (an --include on the command line overrides it). Then the plan's
combined check command runs on the exact result. Nothing is staged or committed. Lines are
printed as each unit is done; a journal in the run's folder records each patch before and
after it is applied, with the pre-image of every path the patch touches saved beside it. A
patch is applied whole or not at all: one that fails (a full disk) is put back at once and the
units after it are not tried; one an integrate was applying when it was killed is put back by
the next integrate, which then applies it again and applies nothing twice (`already=yes`). No
patch is ever applied through a symbolic link (a CONFLICT naming the link).

When the combined check fails, the units that make it fail are found by bisection: sets of
units are tested in throwaway workspaces made from the tree as it was before integrate (its
HEAD plus uncommitted and untracked, not ignored, files; nothing of the person's is touched),
each with that set's patches applied and the same check run there, side by side (at most the
run's --parallel, or one per core, at once), in about 2*log2(units) check runs. A unit that
fails the check alone is named `alone`; two that pass alone and fail together are named
`together`, and the later one in the plan is held. Each held change is taken out of the tree
again (whole or not at all, journaled), the check runs again on what is left, and integrate
exits 1. The failing check output of each culprit is kept in `<run dir>/culprits/<packet>.log`
(`prun followup PACKET --with-check`). `--keep-culprits` leaves every change in, as before.
Lines:

    INTERRUPTED applied=<packet,...|none> partial=<packet|none> [restored=yes]
    APPLIED <packet> files=<n> +<added> -<deleted> [verdict=<v>] [decision=<d>] [already=yes]
    CHANGED <packet> <status> <path> +<a> -<d>|binary [from=<old path>]
    OVERLAP <packet> path=<path> with=<packet>      (applied; an earlier unit touched it too)
    CONFLICT <packet> path=<path> with=<packet>|working-tree [link=<link>]   (not applied)
    FAILED <packet> reason=disk-full|io-error|write-failed tree=unchanged|restored|partial
    FAILED <packet> reason=not-tried after=<packet>
    SKIPPED <packet> verdict=rejected|needs-review|accepted [decision=reject]
    CHECK passed|failed exit=<n>|timeout took=<s> log=<path>
    CULPRIT <packet> check=failed alone
    CULPRIT <packet> <packet> check=failed together
    BISECT runs=<n> took=<s> culprits=<n> [base=failed]
    HELD <packet> reason=check-culprit
    CHECK passed|failed ...                        (again, on the tree without the held)
    INTEGRATE target=<path> applied=<n> conflicts=<n> skipped=<n> [failed=<n>] [held=<n>]
        check=passed|failed|none [recheck=passed|failed] committed=no

exit codes (README, "Exit codes"): 0 every change to apply was applied and the check passed
(or there is none); 1 the combined check failed (culprits held or not), or a patch could not
be written (FAILED: the tree is as it was before it; free space and run it again); 11 a change
conflicted and was not applied; 2 bad usage.
"""

from __future__ import annotations

import argparse
import json

from .._util.timeparse import parse_duration
from ..api import integrate, integrate_exit_code
from ..git.integrate import UnitResult
from . import options


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_id", nargs="?", metavar="RUN", type=options.run_id,
                   help="a run id or prefix (default: latest)")
    p.add_argument("--include", action="append", default=[], metavar="PACKET",
                   type=options.packet_id,
                   help="also apply this rejected or needs-review packet's change (repeatable)")
    p.add_argument("--worktree", metavar="PATH", type=options.path,
                   help="apply in a new integration worktree at PATH (detached at the run's "
                   "base) instead of the repository's working tree")
    p.add_argument("--no-check", action="store_true", help="do not run the combined check")
    p.add_argument("--check-timeout", default="1h", metavar="DURATION", type=options.duration,
                   help="bound on the combined check (default 1h)")
    p.add_argument("--keep-culprits", action="store_true",
                   help="when the check fails, leave every change in (find no culprits)")
    p.add_argument("--allow-dirty", action="store_true",
                   help="apply even over uncommitted local changes to the same files")
    p.add_argument("--json", action="store_true", help="the result as JSON")


def run(args: argparse.Namespace) -> int:
    timeout = parse_duration(args.check_timeout, what="--check-timeout")

    def say(lines: list[str]) -> None:
        if lines and not args.json:
            print("\n".join(lines), flush=True)

    def unit(u: UnitResult) -> None:
        say(u.lines())

    result = integrate(args.run_id, include=args.include, worktree=args.worktree,
                       check=not args.no_check, check_timeout=timeout,
                       allow_dirty=args.allow_dirty, keep_culprits=args.keep_culprits,
                       on_unit=unit, on_notes=say)
    if args.json:
        print(json.dumps(result.as_dict(), indent=2, sort_keys=True))
    else:
        say(result.closing())
    return integrate_exit_code(result)
