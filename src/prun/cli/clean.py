"""Remove a run's workspaces (its throwaway clones, scratch dirs and snapshots), as each
packet's `data.retention` allows, never losing a change that is not integrated yet.

    prun clean [RUN] [--dry-run] [--force] [--json]
    prun clean --templates [--dry-run] [--json]

RUN defaults to the latest run of this repository. Only folders recorded as an attempt's
workspace (or that workspace moved aside as `<path>.quarantined` when its attempt was cancelled
or superseded) *and* carrying prun's workspace marker are removed; anything else is named and
kept. A packet's retention decides the rest:

    keep              its workspaces are kept, always
    keep <duration>   kept until that long after the run finished, then removed
    delete            its workspaces and its evidence in the run dir are removed: result files
                      and the responses beside them, state dirs, quarantined output, prompts,
                      saved changes
    anything else     a note for people: its workspaces are removed, its evidence kept

The clone of a code packet's deciding attempt whose change is not integrated yet is kept
(`reason=not-integrated`): an accepted or needs-review change, or one the person included or
accepted, unless `prun integrate` applied that very attempt's change (its journal), the person
rejected it, or the change is empty. `--force` removes it all the same, one `LOST` line each.
Before a clone goes, its change is saved in the run dir (`changes/<packet>.<n>.patch` and
`.json`, `SAVED`), so reconcile, review and integrate read it as from the clone. A `delete`
retention is not honoured for a change that is not integrated (its workspace and evidence are
kept, exit 1) unless `--force`, which then deletes the change too.

Refused while a unit of the run still runs (its recorded worker is alive, or the run's
supervisor is alive with unfinished attempts).

    SAVED <packet> <patch path>        (a read-only unit's record: what reconcile found in
                                        its snapshot, saved before the snapshot goes)
    REMOVED <packet> <path>            (`-` for the run's read-only snapshot, which its
    KEPT <packet> <path> reason=not-a-workspace     read-only units share, and object stores)
    KEPT <packet> <path> reason=retention [until=<ISO time>]
    KEPT <packet> <path> reason=not-integrated
    KEPT <packet> <path> reason=not-saved
    KEPT <packet> <path> reason=outside-run-dir
    LOST <packet> <path> reason=not-integrated
    CLEAN run=<id> removed=<n> kept=<n> [saved=<n>] [lost=<n>] [dry-run=yes]

`--json` adds each packet's retention and the run's cancel owner (who decides about it).

`--templates` removes the primed templates instead (a plan's `workspace:`, kept under the
workspace root and reused across runs while their key holds; docs/workspaces.md), each with
its key, its shared paths and when it was primed; and the folders of primes that did not
finish (`reason=not-primed`). A later run primes again.

    REMOVED template <path> key=<key> share=<paths> primed=<ISO time>
    REMOVED template <path> reason=not-primed
    CLEAN templates removed=<n> [dry-run=yes]

exit codes: 0 done; 1 refused (a unit still runs; or done, but a `delete` retention was not
honoured or a change could not be saved, and what it needed is kept); 2 bad usage or no such
run.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import TYPE_CHECKING

from .._util.quoting import word
from ..clean import (
    NOT_INTEGRATED,
    drop_empty_run_folders,
    finished_at,
    holds,
    retention,
    running_units,
    sweep,
    sweep_templates,
    until_text,
)
from ..errors import StateError, UsageError
from ..git.template import templates
from ..ledger import Ledger, now_iso
from ..settings import load
from ..views.model import open_run
from . import options

if TYPE_CHECKING:
    from typing import Any

    from ..clean import Sweep
    from ..views.model import RunView


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_id", nargs="?", metavar="RUN", type=options.run_id,
                   help="a run id or prefix (default: latest)")
    p.add_argument("--dry-run", action="store_true", help="say what would be removed")
    p.add_argument("--force", action="store_true",
                   help="remove the clones of changes not integrated yet too (each named LOST; "
                   "their changes are saved in the run dir, unless retention says delete)")
    p.add_argument("--templates", action="store_true",
                   help="remove the primed templates (the plan's workspace:) instead of a run's "
                   "workspaces; with no run going (live runs are not looked for)")
    p.add_argument("--json", action="store_true", help="the result as JSON")


def run(args: argparse.Namespace) -> int:
    if args.templates:
        return _templates(args)
    with Ledger.open(create=False) as ledger:
        view = open_run(ledger, args.run_id)
        busy = running_units(view)
        if busy:
            raise StateError(f"run {view.id} still has units running: {', '.join(busy)}",
                             hint=f"wait for them, or `prun cancel {view.id}` first")
        done = sweep(view, holds(ledger, view), dry_run=args.dry_run, force=args.force,
                     now=time.time())
        rows = done.rows
        if not args.dry_run and done.count("REMOVED", "LOST", "SAVED"):
            drop_empty_run_folders(view, rows)
            ledger.record_event("clean", run_id=view.id, cause="prun clean", data={
                "removed": [r.path for r in rows if r.word == "REMOVED"],
                **{k: [r.path for r in rows if r.word == w] or None
                   for k, w in (("lost", "LOST"), ("saved", "SAVED"))},
                "not_integrated": [r.path for r in rows if r.reason == NOT_INTEGRATED
                                   and r.word == "KEPT"] or None})
    if args.json:
        print(json.dumps(_as_json(view, done, args.dry_run), indent=2, sort_keys=True))
    else:
        for r in rows:
            print(r.line())
        saved, lost = done.count("SAVED"), done.count("LOST")
        print(f"CLEAN run={view.id} removed={done.count('REMOVED', 'LOST')} "
              f"kept={done.count('KEPT')}" + (f" saved={saved}" if saved else "")
              + (f" lost={lost}" if lost else "") + (" dry-run=yes" if args.dry_run else ""))
    _refusals(view, done)
    return 0


def _templates(args: argparse.Namespace) -> int:
    if args.run_id or args.force:
        raise UsageError("--templates takes no RUN and no --force",
                         hint="prun clean --templates [--dry-run] [--json]")
    root = load().workspace_root
    primed = {t.folder: t for t in templates(root)}
    rows = sweep_templates(root, dry_run=args.dry_run)
    if args.json:
        listed = [{"path": r.path, "reason": r.reason,
                   **({"key": t.key, "share": list(t.share), "prime": t.prime, "base": t.base,
                       "primed": now_iso(t.created)} if (t := primed.get(r.path)) else {})}
                  for r in rows]
        print(json.dumps({"templates": listed, "removed": len(rows), "dry_run": args.dry_run},
                         indent=2, sort_keys=True))
        return 0
    for r in rows:
        t = primed.get(r.path)
        print(r.line() + (f" key={t.key[:12]} {word('share', ','.join(t.share))} "
                          f"primed={now_iso(t.created)}" if t else ""))
    print(f"CLEAN templates removed={len(rows)}" + (" dry-run=yes" if args.dry_run else ""))
    return 0


def _as_json(view: RunView, done: Sweep, dry_run: bool) -> dict[str, Any]:
    finished = finished_at(view)
    rules = {p.id: retention(p) for p in view.packets}

    def rows(w: str, *keys: str) -> list[dict[str, Any]]:
        return [{"packet": r.packet, "path": r.path,
                 **{k: getattr(r, k) for k in keys}} for r in done.rows if r.word == w]

    return {"run": view.id, "dry_run": dry_run, "owner": view.run.get("cancel_owner"),
            "retention": {pid: {**rule.as_dict(), "until": until_text(rule.until(finished))}
                          for pid, rule in rules.items()},
            "removed": rows("REMOVED") + rows("LOST"), "kept": rows("KEPT", "reason", "until"),
            "lost": rows("LOST", "reason"), "saved": rows("SAVED"),
            "refused": done.refused}


def _refusals(view: RunView, done: Sweep) -> None:
    """A ``delete`` retention not honoured, or a change that could not be saved: one line,
    exit 1, after the lines of what was done."""
    if done.unsaved:
        pid, why = done.unsaved[0]
        raise StateError(f"the change of {pid} could not be saved in the run dir ({why}): "
                         "its workspace is kept", hint="free space, then run prun clean again")
    if done.refused:
        names = ", ".join(done.refused)
        raise StateError(f"the retention of {names} is delete, but its change is not "
                         "integrated: its workspace and evidence are kept",
                         hint=f"prun integrate {view.id}, reject it on prun review, or "
                         "prun clean --force to delete it anyway")
