"""Remove a run's workspaces (its throwaway clones, scratch dirs and snapshots), as each
packet's `data.retention` allows.

    prun clean [RUN] [--dry-run] [--json]

RUN defaults to the latest run of this repository. Only folders recorded as an attempt's
workspace (or that workspace moved aside as `<path>.quarantined` when its attempt was cancelled
or superseded) *and* carrying prun's workspace marker are removed; anything else is named and
kept. A packet's retention decides the rest:

    keep              its workspaces are kept, always
    keep <duration>   kept until that long after the run finished, then removed
    delete            its workspaces and its evidence in the run dir are removed: result files
                      and the responses beside them, state dirs, quarantined output, prompts
    anything else     a note for people: its workspaces are removed, its evidence kept

Refused while a unit of the run still runs (its recorded worker is alive, or the run's
supervisor is alive with unfinished attempts). Reconcile and integrate first: a removed
clone's change is gone.

    REMOVED <packet> <path>            (`-` for the run's read-only snapshot, which its
    KEPT <packet> <path> reason=not-a-workspace     read-only units share)
    KEPT <packet> <path> reason=retention [until=<ISO time>]
    KEPT <packet> <path> reason=outside-run-dir
    CLEAN run=<id> removed=<n> kept=<n>

`--json` adds each packet's retention and the run's cancel owner (who decides about it).

exit codes: 0 done; 1 refused (a unit still runs); 2 bad usage or no such run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil

from .._util.quoting import quote, word
from . import options

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import TypeAlias

    from ..plan import Packet
    from ..plan.boundary import Retention
    from ..views.model import RunView

    # one path swept: (REMOVED|KEPT, packet or "-", path, reason, until)
    Swept: TypeAlias = tuple[str, str, str, str | None, str | None]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_id", nargs="?", metavar="RUN", type=options.run_id,
                   help="a run id or prefix (default: latest)")
    p.add_argument("--dry-run", action="store_true", help="say what would be removed")
    p.add_argument("--json", action="store_true", help="the result as JSON")


def running_units(view: RunView) -> list[str]:
    """Packets of the run with a unit still running (or about to, under a live supervisor).
    A worker is known by its ledger receipt (else its keeper's log), never by its state dir."""
    from .._util.process import same_process_alive
    from ..attempt import identity
    from ..attempt.statedir import StateDir
    from ..ledger import TERMINAL

    supervisor = same_process_alive(view.run.get("supervisor_pid"),
                                    view.run.get("supervisor_started"), unproven=True)
    busy = []
    for pid, attempts in sorted(view.attempts.items()):
        for a in attempts:
            worker = (identity.worker(StateDir(a["state_dir"]), a.get("receipt"))
                      if a.get("state_dir") else None)
            if identity.alive(worker) or (supervisor and a["status"] not in
                                          {str(s) for s in TERMINAL}):
                busy.append(pid)
                break
    return busy


def retention(packet: Packet | None) -> Retention:
    """The packet's parsed retention. A packet frozen by an older prun may hold a value the
    grammar refuses now: it counts as a note."""
    from ..errors import UsageError
    from ..plan.boundary import NONE, NOTE, Retention

    if packet is None:
        return Retention(NONE)
    try:
        return packet.data.retention_rule
    except UsageError:
        return Retention(NOTE, text=packet.data.retention)


def finished_at(view: RunView) -> float:
    """When the run finished: its own end, else its last attempt's, else its start."""
    import time

    from .._util.timeparse import epoch as _epoch

    ends = [_epoch(a.get("finished_at") or a.get("updated_at"))
            for attempts in view.attempts.values() for a in attempts]
    return (_epoch(view.run.get("finished_at")) or max((e for e in ends if e), default=None)
            or _epoch(view.run.get("created_at")) or time.time())


def evidence(view: RunView, packet_id: str) -> list[str]:
    """The packet's evidence, as recorded: each attempt's result file and the response beside
    it, its state dir, its quarantined output, and the prompts frozen for it."""
    from ..attempt.statedir import StateDir

    prompts = os.path.join(view.run["run_dir"], "prompts")
    paths: list[str | None] = [os.path.join(prompts, f"{packet_id}.md")]
    for a in view.attempts.get(packet_id, []):
        outcome = StateDir(a["state_dir"]).outcome if a.get("state_dir") else None
        response = outcome.get("response_file") if isinstance(outcome, dict) else None
        paths += [a.get("result_path"), response, a.get("state_dir"), a.get("quarantine"),
                  os.path.join(prompts, f"{packet_id}.{a.get('seq')}.md")]
    return [p for p in dict.fromkeys(paths) if p and os.path.lexists(p)]


def until_text(until: float | None) -> str | None:
    """The end of a ``keep <duration>`` in UTC, rounded up to the second."""
    import math
    import time

    return None if until is None else time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                    time.gmtime(math.ceil(until)))


def _inside(path: str, folder: str) -> bool:
    real, root = os.path.realpath(path), os.path.realpath(folder)
    return real != root and real.startswith(root + os.sep)


def _delete(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        os.unlink(path)


def sweep(view: RunView, *, dry_run: bool, now: float) -> list[Swept]:
    """Remove (unless ``dry_run``) what each packet's retention lets go; one row per path:
    ``(word, packet, path, reason, until)``."""
    from ..git.workspace import made_by_prun, remove
    from ..plan.boundary import DELETE

    finished = finished_at(view)
    rules = {p.id: retention(p) for p in view.packets}
    rows: list[Swept] = []
    seen: set[str] = set()
    for pid, attempts in sorted(view.attempts.items()):
        rule = rules.get(pid) or retention(None)
        until = rule.until(finished)
        keep = _keeps(rule, finished, now)
        until_iso = until_text(until) if keep and until is not None else None
        for a in attempts:
            base_path = a.get("workspace")
            # a cancelled or superseded unit's clone was moved aside by the supervisor
            for path in (base_path, f"{base_path}.quarantined" if base_path else None):
                if not path or path in seen or not os.path.lexists(path):
                    continue
                seen.add(path)
                if not made_by_prun(path):
                    rows.append(("KEPT", pid, path, "not-a-workspace", None))
                elif keep:
                    rows.append(("KEPT", pid, path, "retention", until_iso))
                else:
                    if not dry_run:
                        remove(path)
                    rows.append(("REMOVED", pid, path, None, None))
        if rule.rule != DELETE or not view.run.get("run_dir"):
            continue
        for path in evidence(view, pid):
            if not _inside(path, view.run["run_dir"]):
                rows.append(("KEPT", pid, path, "outside-run-dir", None))
                continue
            if not dry_run:
                _delete(path)
            rows.append(("REMOVED", pid, path, None, None))
    rows += _snapshots(view, rows, rules, finished, now, dry_run)
    rows += _stores(view, rules, finished, now, dry_run)
    return rows


def _keeps(rule: Retention, finished: float, now: float) -> bool:
    """Whether ``rule`` keeps a workspace now, for a run that finished at ``finished``."""
    from ..plan.boundary import KEEP

    until = rule.until(finished)
    return rule.rule == KEEP and (until is None or now < until)


def _snapshots(view: RunView, rows: list[Swept], rules: Mapping[str, Retention],
               finished: float, now: float, dry_run: bool) -> list[Swept]:
    """The run's read-only snapshots (beside its workspaces), shared by its read-only units:
    kept while a read-only packet's retention keeps its workspace, else removed."""
    from ..git.snapshot import remove_snapshot
    from ..git.workspace import marker

    folders = {os.path.dirname(a["workspace"]) for attempts in view.attempts.values()
               for a in attempts if a.get("workspace")}
    kept = any(_keeps(rules[p.id], finished, now) for p in view.packets if not p.writes_code)
    out: list[Swept] = []
    for folder in sorted(folders):
        if os.path.basename(folder) != view.id or not os.path.isdir(folder):
            continue
        for name in sorted(os.listdir(folder)):
            path = os.path.join(folder, name)
            if not name.startswith("snapshot-") or (marker(path) or {}).get("kind") != "snapshot":
                continue
            if kept:
                out.append(("KEPT", "-", path, "retention", None))
                continue
            if not dry_run:
                remove_snapshot(path)
            out.append(("REMOVED", "-", path, None, None))
    return out


def _stores(view: RunView, rules: Mapping[str, Retention], finished: float, now: float,
            dry_run: bool) -> list[Swept]:
    """The run's object stores (beside its clones, which borrow their objects from them):
    kept while a code packet's retention keeps its workspace, else removed."""
    from ..git.store import discard, stores_in

    folders = {os.path.dirname(a["workspace"]) for attempts in view.attempts.values()
               for a in attempts if a.get("workspace")}
    kept = any(_keeps(rules[p.id], finished, now) for p in view.packets if p.writes_code)
    out: list[Swept] = []
    for folder in sorted(folders):
        if os.path.basename(folder) != view.id:
            continue
        for path in stores_in(folder):
            if not kept and not dry_run:
                discard(path)
            out.append(("KEPT", "-", path, "retention", None) if kept
                       else ("REMOVED", "-", path, None, None))
    return out


def _drop_empty_run_folders(view: RunView, rows: list[Swept]) -> None:
    """The run's own folder of workspaces, once the workspaces in it are gone."""
    run_dir = view.run.get("run_dir")
    for parent in {os.path.dirname(r[2]) for r in rows if r[0] == "REMOVED"}:
        evidence_folder = bool(run_dir and (
            _inside(parent, run_dir) or os.path.realpath(parent) == os.path.realpath(run_dir)))
        if os.path.basename(parent) == view.id and not evidence_folder:
            with contextlib.suppress(OSError):
                os.rmdir(parent)


def run(args: argparse.Namespace) -> int:
    import time

    from ..errors import StateError
    from ..ledger import Ledger
    from ..views.model import open_run

    with Ledger.open(create=False) as ledger:
        view = open_run(ledger, args.run_id)
        busy = running_units(view)
        if busy:
            raise StateError(f"run {view.id} still has units running: {', '.join(busy)}",
                             hint=f"wait for them, or `prun cancel {view.id}` first")
        rows = sweep(view, dry_run=args.dry_run, now=time.time())
        removed = sum(r[0] == "REMOVED" for r in rows)
        if not args.dry_run and removed:
            _drop_empty_run_folders(view, rows)
            ledger.record_event("clean", run_id=view.id, cause="prun clean",
                                data={"removed": [r[2] for r in rows if r[0] == "REMOVED"]})
    kept = len(rows) - removed
    if args.json:
        finished = finished_at(view)
        rules = {p.id: retention(p) for p in view.packets}
        print(json.dumps({
            "run": view.id, "dry_run": args.dry_run, "owner": view.run.get("cancel_owner"),
            "retention": {pid: {**rule.as_dict(), "until": until_text(rule.until(finished))}
                          for pid, rule in rules.items()},
            "removed": [{"packet": r[1], "path": r[2]} for r in rows if r[0] == "REMOVED"],
            "kept": [{"packet": r[1], "path": r[2], "reason": r[3], "until": r[4]}
                     for r in rows if r[0] == "KEPT"]}, indent=2, sort_keys=True))
        return 0
    for first, pid, path, reason, until in rows:
        print(f"{first} {quote(pid)} {quote(path)}" + (f" reason={reason}" if reason else "")
              + (f" {word('until', until)}" if until else ""))
    print(f"CLEAN run={view.id} removed={removed} kept={kept}"
          + (" dry-run=yes" if args.dry_run else ""))
    return 0
