"""Apply a run's accepted changes to the working tree, check the exact result, never commit.

    prun integrate [RUN] [--include PACKET]... [--worktree PATH] [--no-check] [--json]

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
patch is ever applied through a symbolic link (a CONFLICT naming the link). Lines:

    INTERRUPTED applied=<packet,...|none> partial=<packet|none> [restored=yes]
    APPLIED <packet> files=<n> +<added> -<deleted> [verdict=<v>] [decision=<d>] [already=yes]
    CHANGED <packet> <status> <path> +<a> -<d>|binary [from=<old path>]
    OVERLAP <packet> path=<path> with=<packet>      (applied; an earlier unit touched it too)
    CONFLICT <packet> path=<path> with=<packet>|working-tree [link=<link>]   (not applied)
    FAILED <packet> reason=disk-full|io-error|write-failed tree=unchanged|restored|partial
    FAILED <packet> reason=not-tried after=<packet>
    SKIPPED <packet> verdict=rejected|needs-review|accepted [decision=reject]
    CHECK passed|failed exit=<n>|timeout took=<s> log=<path>
    INTEGRATE target=<path> applied=<n> conflicts=<n> skipped=<n> [failed=<n>] check=...
        committed=no

exit codes (README, "Exit codes"): 0 every change to apply was applied and the check passed
(or there is none); 1 the combined check failed, or a patch could not be written (FAILED: the
tree is as it was before it; free space and run it again); 11 a change conflicted and was not
applied; 2 bad usage.
"""

from __future__ import annotations

import argparse
import json
import os

from ..errors import ExitCode
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
    p.add_argument("--allow-dirty", action="store_true",
                   help="apply even over uncommitted local changes to the same files")
    p.add_argument("--json", action="store_true", help="the result as JSON")


def run(args: argparse.Namespace) -> int:
    from .._util.gitcmd import toplevel
    from .._util.timeparse import parse_duration
    from ..errors import UsageError
    from ..git.integrate import UnitResult, add_worktree, integrate
    from ..git.journal import Journal
    from ..git.reconcile import reconcile
    from ..ledger import Ledger
    from ..views.model import open_run

    timeout = parse_duration(args.check_timeout, what="--check-timeout")
    with Ledger.open(create=False) as ledger:
        view = open_run(ledger, args.run_id)
        root = view.repo_root or toplevel()
        if not root:
            raise UsageError("the run records no repository and this is not one",
                             hint="run prun integrate inside the repository")
        if args.worktree:
            check_worktree_path(root, args.worktree)
        report = reconcile(view.unit_inputs(), run_id=view.id, with_patch=True, tree=root)
        decided = ledger.current_decisions(view.id, {v.packet_id: v.attempt_id
                                                     for v in report.verdicts})
        decisions = {pid: row["decision"] for pid, row in decided.items()}
        unknown = sorted(set(args.include) - {p.id for p in view.packets})
        if unknown:
            raise UsageError(f"no packet {', '.join(unknown)} in run {view.id}",
                             hint=f"--include names packets of the run; `prun status {view.id} "
                             "--all` lists them")
        target = root
        if args.worktree:
            target = add_worktree(root, args.worktree, view.run.get("base") or "HEAD")
        patch_dir = journal = None
        if view.run.get("run_dir"):
            patch_dir = os.path.join(view.run["run_dir"], "integrate")
            journal = Journal(os.path.join(patch_dir, "journal.jsonl"))
        check = None if args.no_check else view.run.get("check_command")

        def say(lines: list[str]) -> None:
            if lines and not args.json:
                print("\n".join(lines), flush=True)

        def unit(u: UnitResult) -> None:
            say(u.lines())

        result = integrate(report, view.packets, target, include=args.include,
                           decisions=decisions, check=check,
                           check_timeout=timeout, patch_dir=patch_dir,
                           allow_dirty=args.allow_dirty, journal=journal, on_notes=say,
                           on_unit=unit)
        ledger.record_event("integrate", run_id=view.id, cause="prun integrate",
                            data={"target": target, "applied": result.applied,
                                  "conflicts": result.conflicts,
                                  "failed": result.failed or None,
                                  "include": args.include or None,
                                  "decisions": decisions or None,
                                  "check": None if result.check is None else result.check.ok,
                                  "check_log": result.check.log if result.check else None})
    if args.json:
        print(json.dumps(result.as_dict(), indent=2, sort_keys=True))
    else:
        say(([result.check.line()] if result.check else []) + [result.summary()])
    if result.conflicts:
        return ExitCode.CONFLICT
    if result.failed or (result.check is not None and not result.check.ok):
        return ExitCode.FAILED
    return ExitCode.OK


def check_worktree_path(repo_root: str, path: str) -> None:
    """Refuse (exit 2) an integration worktree at ``path`` inside any ``.git`` folder, or
    inside the repository's own work tree (symbolic links resolved, also of the parts of
    ``path`` that do not exist yet)."""
    from pathlib import Path

    from ..errors import UsageError

    where = Path(os.path.realpath(os.path.abspath(path)))
    root = Path(os.path.realpath(repo_root))
    git_dirs = [Path(os.path.realpath(d)) for d in _git_dirs(str(root))]
    if any(part.lower() == ".git" for part in where.parts) or \
            any(where == d or d in where.parents for d in git_dirs):
        raise UsageError(f"--worktree {path} is inside a .git folder",
                         hint="give a new folder outside the repository, such as ../integration")
    if where == root or root in where.parents:
        raise UsageError(f"--worktree {path} is inside the repository's work tree {root}",
                         hint="give a new folder outside the repository, such as ../integration")


def _git_dirs(root: str) -> list[str]:
    """The repository's git folders: ``.git``, and the folder a ``.git`` file (a worktree's,
    a submodule's) points at with its ``gitdir:`` line, and that folder's common dir."""
    dot = os.path.join(root, ".git")
    found = [dot]
    try:
        with open(dot, encoding="utf-8", errors="replace") as f:
            first = f.read(4096).splitlines()[:1]
    except OSError:
        return found
    if first and first[0].startswith("gitdir:"):
        gitdir = os.path.join(root, first[0][len("gitdir:"):].strip())
        found.append(gitdir)
        try:
            with open(os.path.join(gitdir, "commondir"), encoding="utf-8") as f:
                found.append(os.path.join(gitdir, f.read(4096).strip()))
        except OSError:
            pass
    return found
