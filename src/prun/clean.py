"""A run's clean (``prun clean``): which of its workspaces and evidence go, which stay and
why, and the change of each code packet's clone saved in the run dir before the clone goes.

Each packet's ``data.retention`` decides what may go (``prun.plan.boundary``); the clone of a
code packet's deciding attempt whose change still waits to be integrated (``prun.git.saved.
waiting``: reconcile's verdict as ``prun integrate`` sees it, the person's decisions, the
integrate journal) stays unless ``force``; before a clone goes, its change is saved
(``prun.git.saved``), so reconcile, review and integrate read it as from the clone. Nothing
here prints: ``sweep`` returns the rows, the command prints them.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ._util.process import same_process_alive
from ._util.quoting import quote, word
from ._util.timeparse import epoch
from .attempt import identity
from .attempt.statedir import StateDir
from .errors import PrunError, UsageError
from .git import template
from .git.changes import Change, read_change
from .git.journal import Journal
from .git.layered import lowers_in
from .git.reconcile import checked_snapshot, given_dirs, reconcile
from .git.saved import Place, save, save_snapshots, waiting
from .git.snapshot import remove_snapshot
from .git.store import discard, stores_in
from .git.verdict import UnitInput, Verdict
from .git.workspace import made_by_prun, marker, remove
from .ledger import TERMINAL
from .ledger.writes import now_iso
from .plan import Packet
from .plan.boundary import DELETE, KEEP, NONE, NOTE, Retention
from .views.model import RunView

if TYPE_CHECKING:
    from .ledger import Ledger

NOT_INTEGRATED = "not-integrated"


@dataclass(frozen=True)
class Row:
    """One path swept: SAVED, REMOVED, KEPT or LOST, its packet ("-" for what packets share),
    the path, why it is kept or lost, and until when a retention keeps it."""

    word: str
    packet: str
    path: str
    reason: str | None = None
    until: str | None = None

    def line(self) -> str:
        return (f"{self.word} {quote(self.packet)} {quote(self.path)}"
                + (f" reason={self.reason}" if self.reason else "")
                + (f" {word('until', self.until)}" if self.until else ""))


@dataclass
class Hold:
    """A code packet's deciding attempt as a clean sees it: its clone (None when it is gone),
    its verdict and the person's decision, whether its change still waits to be integrated,
    and where that change is saved."""

    unit: UnitInput
    workspace: str | None
    verdict: Verdict
    decision: str | None
    waiting: bool
    place: Place | None


@dataclass
class Sweep:
    """What a clean did (or, dry, would do): its rows in order, the ``delete`` packets whose
    retention it did not honour, and the changes it could not save."""

    rows: list[Row] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)        # delete not honoured: not integrated
    unsaved: list[tuple[str, str]] = field(default_factory=list)   # (packet, why)

    def count(self, *words: str) -> int:
        return sum(r.word in words for r in self.rows)


def running_units(view: RunView) -> list[str]:
    """Packets of the run with a unit still running (or about to, under a live supervisor).
    A worker is known by its ledger receipt (else its keeper's log), never by its state dir."""
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
    if packet is None:
        return Retention(NONE)
    try:
        return packet.data.retention_rule
    except UsageError:
        return Retention(NOTE, text=packet.data.retention)


def finished_at(view: RunView) -> float:
    """When the run finished: its own end, else its last attempt's, else its start."""
    ends = [epoch(a.get("finished_at") or a.get("updated_at"))
            for attempts in view.attempts.values() for a in attempts]
    return (epoch(view.run.get("finished_at")) or max((e for e in ends if e), default=None)
            or epoch(view.run.get("created_at")) or time.time())


def evidence(view: RunView, packet_id: str) -> list[str]:
    """The packet's evidence, as recorded: each attempt's result file and the response beside
    it, its state dir, its quarantined output, the prompts frozen for it, and the change a
    clean saved of it."""
    prompts = os.path.join(view.run["run_dir"], "prompts")
    paths: list[str | None] = [os.path.join(prompts, f"{packet_id}.md")]
    for a in view.attempts.get(packet_id, []):
        outcome = StateDir(a["state_dir"]).outcome if a.get("state_dir") else None
        response = outcome.get("response_file") if isinstance(outcome, dict) else None
        where = view.saved(packet_id, a)
        paths += [a.get("result_path"), response, a.get("state_dir"), a.get("quarantine"),
                  os.path.join(prompts, f"{packet_id}.{a.get('seq')}.md"),
                  *((where.patch, where.record) if where else ())]
    return [p for p in dict.fromkeys(paths) if p and os.path.lexists(p)]


def holds(ledger: Ledger, view: RunView) -> dict[str, Hold]:
    """Each code packet's deciding attempt, judged as ``prun integrate`` judges it (reconcile,
    the person's decisions), and whether its change was integrated (the journal of
    ``prun integrate``): by packet id."""
    units = [u for u in view.unit_inputs() if u.packet.writes_code and u.attempt_id]
    if not units:
        return {}
    report = reconcile(view.unit_inputs(), run_id=view.id, with_patch=True, tree=view.repo_root)
    decided = ledger.current_decisions(view.id, {v.packet_id: v.attempt_id
                                                 for v in report.verdicts})
    run_dir = view.run.get("run_dir")
    journal = Journal(os.path.join(run_dir, "integrate", "journal.jsonl")) if run_dir else None
    integrated = journal.integrated() if journal else set()
    out = {}
    for u in units:
        v = report.verdict(u.packet.id)
        assert v is not None   # reconcile judges every packet of the run
        decision = decided[u.packet.id]["decision"] if u.packet.id in decided else None
        a = view.deciding(u.packet.id) or {}
        ws = u.workspace if u.workspace and os.path.lexists(u.workspace) else None
        out[u.packet.id] = Hold(u, ws, v, decision, waiting(v, decision, integrated),
                                view.saved(u.packet.id, a))
    return out


def until_text(until: float | None) -> str | None:
    """The end of a ``keep <duration>`` in UTC, rounded up to the second."""
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


def sweep(view: RunView, held: Mapping[str, Hold], *, dry_run: bool, force: bool,
          now: float) -> Sweep:
    """Remove (unless ``dry_run``) what each packet's retention lets go, keeping the clones of
    changes not integrated yet (``held``: each code packet's deciding attempt) unless
    ``force``, and saving each clone's change before it goes."""
    finished = finished_at(view)
    rules = {p.id: retention(p) for p in view.packets}
    out = Sweep()
    seen: set[str] = set()
    for pid, attempts in sorted(view.attempts.items()):
        rule = rules.get(pid) or retention(None)
        until = rule.until(finished)
        keep = _keeps(rule, finished, now)
        until_iso = until_text(until) if keep and until is not None else None
        hold = held.get(pid)
        waits = hold is not None and hold.waiting and not force and not keep
        for a in attempts:
            base_path = a.get("workspace")
            # a cancelled or superseded unit's clone was moved aside by the supervisor
            for path in (base_path, f"{base_path}.quarantined" if base_path else None):
                if not path or path in seen or not os.path.lexists(path):
                    continue
                seen.add(path)
                if not made_by_prun(path):
                    out.rows.append(Row("KEPT", pid, path, "not-a-workspace"))
                elif keep:
                    out.rows.append(Row("KEPT", pid, path, "retention", until_iso))
                elif hold is not None and path == hold.workspace:
                    _clone(out, pid, hold, path, delete=rule.rule == DELETE,
                           keep=waits, dry_run=dry_run)
                else:
                    if not dry_run:
                        remove(path)
                    out.rows.append(Row("REMOVED", pid, path))
        if rule.rule != DELETE or keep or not view.run.get("run_dir"):
            continue
        if waits:
            out.refused.append(pid)
        _evidence(out, view, pid, hold if hold and hold.waiting else None, keep=waits,
                  dry_run=dry_run)
    _snapshots(view, out, rules, finished, now, dry_run)
    out.rows += _stores(view, out.rows, rules, finished, now, dry_run)
    return out


def _clone(out: Sweep, pid: str, hold: Hold, path: str, *, delete: bool, keep: bool,
           dry_run: bool) -> None:
    """The clone of a code packet's deciding attempt: kept while its change waits to be
    integrated (``keep``); else its change saved in the run dir (unless its retention is
    ``delete``), then removed, ``LOST`` when its change was still waiting."""
    if keep:
        out.rows.append(Row("KEPT", pid, path, NOT_INTEGRATED))
        return
    change = None if delete or hold.place is None else _to_save(hold)
    if change is not None and hold.place is not None:
        if not dry_run:
            try:
                save(hold.place, change, packet=pid, attempt=hold.unit.attempt_id, at=now_iso())
            except OSError as e:
                out.rows.append(Row("KEPT", pid, path, "not-saved"))
                out.unsaved.append((pid, e.strerror or str(e)))
                return
        out.rows.append(Row("SAVED", pid, hold.place.patch))
    if not dry_run:
        remove(path)
    out.rows.append(Row("LOST", pid, path, NOT_INTEGRATED) if hold.waiting
                    else Row("REMOVED", pid, path))


def _to_save(hold: Hold) -> Change | None:
    """The change of the held clone with its patch: as reconcile read it, else (an attempt
    that had not ended) read now. None when it cannot be read."""
    change = hold.verdict.change
    if change is not None and change.saved is None and (change.patch is not None
                                                         or not change.complete):
        return change
    if not hold.unit.base or not hold.workspace:
        return None
    try:
        return read_change(hold.workspace, hold.unit.base, with_patch=True)
    except PrunError:
        return None


def _evidence(out: Sweep, view: RunView, pid: str, waiting: Hold | None, *, keep: bool,
              dry_run: bool) -> None:
    """A ``delete`` packet's evidence in the run dir: kept while its change waits to be
    integrated (``keep``), else removed (its saved change ``LOST`` when it was still
    waiting: ``--force``)."""
    lost = {waiting.place.patch} if waiting and waiting.place else set()
    for path in evidence(view, pid):
        if not _inside(path, view.run["run_dir"]):
            out.rows.append(Row("KEPT", pid, path, "outside-run-dir"))
        elif keep:
            out.rows.append(Row("KEPT", pid, path, NOT_INTEGRATED))
        else:
            if not dry_run:
                _delete(path)
            out.rows.append(Row("LOST", pid, path, NOT_INTEGRATED) if path in lost
                            else Row("REMOVED", pid, path))


def _keeps(rule: Retention, finished: float, now: float) -> bool:
    """Whether ``rule`` keeps a workspace now, for a run that finished at ``finished``."""
    until = rule.until(finished)
    return rule.rule == KEEP and (until is None or now < until)


def _snapshots(view: RunView, out: Sweep, rules: Mapping[str, Retention],
               finished: float, now: float, dry_run: bool) -> None:
    """The run's read-only snapshots (beside its workspaces), shared by its read-only units:
    kept while a read-only packet's retention keeps its workspace, else removed, once what
    reconcile finds in it is saved with each read-only attempt given it."""
    folders = {os.path.dirname(a["workspace"]) for attempts in view.attempts.values()
               for a in attempts if a.get("workspace")}
    kept = any(_keeps(rules[p.id], finished, now) for p in view.packets if not p.writes_code)
    for folder in sorted(folders):
        if os.path.basename(folder) != view.id or not os.path.isdir(folder):
            continue
        for name in sorted(os.listdir(folder)):
            path = os.path.join(folder, name)
            if not name.startswith("snapshot-") or (marker(path) or {}).get("kind") != "snapshot":
                continue
            if kept:
                out.rows.append(Row("KEPT", "-", path, "retention"))
                continue
            if not _save_checks(view, out, rules, path, dry_run):
                out.rows.append(Row("KEPT", "-", path, "not-saved"))
                continue
            if not dry_run:
                remove_snapshot(path)
            out.rows.append(Row("REMOVED", "-", path))


def _save_checks(view: RunView, out: Sweep, rules: Mapping[str, Retention], snapshot: str,
                 dry_run: bool) -> bool:
    """Save what reconcile finds in ``snapshot`` with each read-only deciding attempt that was
    given it (not for a packet whose retention deletes its evidence), one ``SAVED`` row each;
    False when a record could not be written."""
    checks: list[str] | None = None
    for p in view.packets:
        a = view.deciding(p.id)
        where = view.saved(p.id, a) if a and not p.writes_code else None
        if where is None or rules[p.id].rule == DELETE \
                or snapshot not in given_dirs(a.get("state_dir") if a else None):
            continue
        if checks is None:
            checks = checked_snapshot(snapshot)
        if not dry_run:
            try:
                save_snapshots(where, {snapshot: checks}, packet=p.id,
                               attempt=a.get("id") if a else None, at=now_iso())
            except OSError as e:
                out.unsaved.append((p.id, e.strerror or str(e)))
                return False
        out.rows.append(Row("SAVED", p.id, where.record))
    return True


def _stores(view: RunView, rows: list[Row], rules: Mapping[str, Retention], finished: float,
            now: float, dry_run: bool) -> list[Row]:
    """The run's object stores (beside its clones, which borrow their objects from them) and
    its checkouts (below its overlay workspaces, ``prun.git.layered``): kept while a code
    packet's retention keeps its workspace, or a clone is kept because its
    change is not integrated (or could not be saved), else removed."""
    folders = {os.path.dirname(a["workspace"]) for attempts in view.attempts.values()
               for a in attempts if a.get("workspace")}
    code = {p.id for p in view.packets if p.writes_code}
    why = ("retention" if any(_keeps(rules[p], finished, now) for p in code) else
           NOT_INTEGRATED if any(r.word == "KEPT" and r.packet in code
                                 and r.reason in (NOT_INTEGRATED, "not-saved") for r in rows)
           else None)
    out: list[Row] = []
    for folder in sorted(folders):
        if os.path.basename(folder) != view.id:
            continue
        for path in [*stores_in(folder), *lowers_in(folder)]:
            if why is None and not dry_run:
                discard(path)
            out.append(Row("KEPT", "-", path, why) if why else Row("REMOVED", "-", path))
    return out


def drop_empty_run_folders(view: RunView, rows: list[Row]) -> None:
    """The run's own folder of workspaces, once the workspaces in it are gone."""
    run_dir = view.run.get("run_dir")
    for parent in {os.path.dirname(r.path) for r in rows if r.word in ("REMOVED", "LOST")}:
        evidence_folder = bool(run_dir and (
            _inside(parent, run_dir) or os.path.realpath(parent) == os.path.realpath(run_dir)))
        if os.path.basename(parent) == view.id and not evidence_folder:
            with contextlib.suppress(OSError):
                os.rmdir(parent)


def sweep_templates(root: str, *, dry_run: bool) -> list[Row]:
    """Remove the primed templates kept under the workspace root ``root``
    (``prun.git.template``), and the folders of primes that did not finish: one REMOVED row
    each (packet ``template``, reason ``not-primed`` for a leftover)."""
    rows = [Row("REMOVED", "template", t.folder) for t in template.templates(root)]
    rows += [Row("REMOVED", "template", p, "not-primed") for p in template.leftovers(root)]
    if not dry_run:
        for r in rows:
            template.remove(r.path)
    return rows
