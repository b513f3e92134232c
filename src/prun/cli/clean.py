"""Remove a run's workspaces (its throwaway clones, scratch dirs and snapshots), nothing else.

    prun clean [RUN] [--dry-run] [--json]

RUN defaults to the latest run of this repository. Only folders recorded as an attempt's
workspace (or that workspace moved aside as `<path>.quarantined` when its attempt was cancelled
or superseded) *and* carrying prun's workspace marker are removed; anything else is named and
kept.
Refused while a unit of the run still runs (its recorded worker is alive, or the run's
supervisor is alive with unfinished attempts). Reconcile and integrate first: a removed
clone's change is gone.

    REMOVED <packet> <path>
    KEPT <packet> <path> reason=not-a-workspace
    CLEAN run=<id> removed=<n> kept=<n>

exit codes: 0 done; 1 refused (a unit still runs); 2 bad usage or no such run.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil


def add_arguments(p) -> None:
    p.add_argument("run_id", nargs="?", metavar="RUN", help="a run id or prefix (default: latest)")
    p.add_argument("--dry-run", action="store_true", help="say what would be removed")
    p.add_argument("--json", action="store_true", help="the result as JSON")


def running_units(view) -> list[str]:
    """Packets of the run with a unit still running (or about to, under a live supervisor)."""
    from ..ledger import TERMINAL
    from ..process import same_process_alive
    from ..statedir import StateDir

    supervisor = same_process_alive(view.run.get("supervisor_pid"),
                                    view.run.get("supervisor_started"))
    busy = []
    for pid, attempts in sorted(view.attempts.items()):
        for a in attempts:
            worker = StateDir(a["state_dir"]).worker if a.get("state_dir") else None
            alive = isinstance(worker, dict) and same_process_alive(
                worker.get("pid"), worker.get("create_time"))
            if alive or (supervisor and a["status"] not in {str(s) for s in TERMINAL}):
                busy.append(pid)
                break
    return busy


def run(args) -> int:
    from ..errors import StateError
    from ..fsutil import SHARED_DIR
    from ..ledger import Ledger
    from ..runview import open_run
    from ..workspace import marker, remove

    with Ledger.open() as ledger:
        view = open_run(ledger, args.run_id)
        busy = running_units(view)
        if busy:
            raise StateError(f"run {view.id} still has units running: {', '.join(busy)}",
                             hint=f"wait for them, or `prun cancel {view.id}` first")
        rows = []
        seen = set()
        parents = set()
        for pid, attempts in sorted(view.attempts.items()):
            for a in attempts:
                base_path = a.get("workspace")
                # a cancelled or superseded unit's clone was moved aside by the supervisor
                for path in (base_path, f"{base_path}.quarantined" if base_path else None):
                    if not path or path in seen or not os.path.lexists(path):
                        continue
                    seen.add(path)
                    if marker(path) is None or os.path.islink(path):
                        rows.append(("KEPT", pid, path, "not-a-workspace"))
                        continue
                    if not args.dry_run:
                        remove(path)
                        parents.add(os.path.dirname(path))
                    rows.append(("REMOVED", pid, path, None))
        for parent in parents:          # the run's own folder of workspaces, once empty
            if os.path.basename(parent) == view.id:
                with contextlib.suppress(OSError):
                    if set(os.listdir(parent)) <= {SHARED_DIR}:  # the markers' one copy
                        shutil.rmtree(os.path.join(parent, SHARED_DIR), ignore_errors=True)
                    os.rmdir(parent)
        removed = sum(r[0] == "REMOVED" for r in rows)
        if not args.dry_run and removed:
            ledger.record_event("clean", run_id=view.id, cause="prun clean",
                                data={"removed": [r[2] for r in rows if r[0] == "REMOVED"]})
    kept = len(rows) - removed
    if args.json:
        print(json.dumps({"run": view.id, "dry_run": args.dry_run,
                          "removed": [{"packet": r[1], "path": r[2]} for r in rows
                                      if r[0] == "REMOVED"],
                          "kept": [{"packet": r[1], "path": r[2], "reason": r[3]} for r in rows
                                   if r[0] == "KEPT"]}, indent=2, sort_keys=True))
        return 0
    for word, pid, path, reason in rows:
        print(f"{word} {pid} {path}" + (f" reason={reason}" if reason else ""))
    print(f"CLEAN run={view.id} removed={removed} kept={kept}"
          + (" dry-run=yes" if args.dry_run else ""))
    return 0
