"""A run read back from the ledger: what ``status``, ``wait`` and the live view show (each
packet's status and latest attempt), and what reconciliation, integration, clean and pause see
(the frozen packet set and each packet's deciding attempt).

The deciding attempt of a packet is its latest attempt that was not quarantined (a
reassignment's successor supersedes its predecessor). RUN may be a run id or a unique prefix;
left out, it is the latest run of the repository holding the current directory.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._util.timeparse import epoch
from ..attempt import statedir
from ..errors import UsageError
from ..git import candidates
from ..git.reconcile import UnitInput, plan_scope
from ..git.saved import Place, place
from ..git.verdict import AcceptCheck, Candidacy, Report
from ..ledger import Status, repo_root
from ..plan import Packet, Plan
from ..run.admission import held_reason
from ..run.detached import supervisor_alive
from ..run.freeze import packet_from_spec

if TYPE_CHECKING:
    import sqlite3

    from ..ledger import Ledger

QUARANTINED = "quarantined"
SPEND_COLUMNS = ("tokens_in", "tokens_out", "tokens_cached", "cost_usd")  # the attempts'


@dataclass(frozen=True)
class Spend:
    """One executor's totals over a run's finished attempts: each the sum of what the
    attempts that reported it reported (None: none did); ``unknown`` counts, per column, the
    attempts that did not report it (those totals are then lower bounds)."""

    executor: str
    attempts: int
    tokens_in: int | None
    tokens_out: int | None
    tokens_cached: int | None
    cost_usd: float | None
    unknown: dict[str, int] = field(default_factory=dict)


def _sum(rows: list[dict[str, Any]], column: str) -> Any:
    known = [a[column] for a in rows if a.get(column) is not None]
    return sum(known) if known else None


@dataclass
class RunView:
    """A run read from the ledger: its row, its frozen packets, every attempt of each, the
    base each packet starts from, each packet's status and note, and whether its supervisor
    lives."""

    run: dict[str, Any]
    packets: list[Packet]
    attempts: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # by packet, in order
    bases: dict[str, str] = field(default_factory=dict)             # packet id -> base commit
    statuses: dict[str, str] = field(default_factory=dict)          # packet id -> its status
    notes: dict[str, str] = field(default_factory=dict)             # packet id -> its note
    supervisor_alive: bool = False
    marks: dict[str, dict[str, Any]] = field(default_factory=dict)  # its last change's data

    @property
    def units(self) -> list[UnitView]:
        """Each packet as ``prun status`` shows it (its latest attempt, quarantined or not)."""
        return [_unit(p, self.statuses.get(p.id, "pending"), self.attempts.get(p.id, []),
                      self.notes.get(p.id), self.marks.get(p.id) or {})
                for p in self.packets]

    def spend(self) -> list[Spend]:
        """What each executor's finished attempts reported they used, by executor name;
        only executors of which some attempt reported something."""
        by: dict[str, list[dict[str, Any]]] = {}
        for a in (a for rows in self.attempts.values() for a in rows):
            if a.get("finished_at"):
                by.setdefault(a.get("executor") or "?", []).append(a)
        out = []
        for name in sorted(by):
            rows = by[name]
            if any(a.get(c) is not None for a in rows for c in SPEND_COLUMNS):
                tokens_in, tokens_out, cached, cost = (_sum(rows, c) for c in SPEND_COLUMNS)
                out.append(Spend(name, len(rows), tokens_in, tokens_out, cached, cost,
                                 unknown={c: n for c in SPEND_COLUMNS
                                          if (n := sum(a.get(c) is None for a in rows))}))
        return out

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for status in self.statuses.values():
            out[status] = out.get(status, 0) + 1
        return out

    @property
    def id(self) -> str:
        return str(self.run["id"])

    @property
    def repo_root(self) -> str | None:
        return self.run.get("repo_root")

    def accept_checks(self) -> dict[str, AcceptCheck]:
        """Attempt id -> the acceptance check recorded with it (``prun.git.accept``)."""
        return {a["id"]: c for rows in self.attempts.values() for a in rows
                if (c := AcceptCheck.from_row(a)) is not None}

    def choose(self, report: Report, decisions: Iterable[sqlite3.Row]) -> dict[str, Candidacy]:
        """The winner of each packet with candidates in ``report`` (``prun.git.candidates``):
        the one the person picked (``decisions``, the current ones, oldest first: an accept
        or include on a candidate's attempt), else the rule's; the others marked not chosen.
        Returns packet id -> the winner."""
        groups: dict[str, dict[str, int]] = {}
        for p in self.packets:
            if p.candidate_of and p.candidate:
                groups.setdefault(p.candidate_of, {})[p.id] = p.candidate
        if not groups:
            return {}
        finished = {a["id"]: epoch(a["finished_at"]) for rows in self.attempts.values()
                    for a in rows}
        picked = {d["packet_id"]: d["who"] for d in sorted(decisions, key=lambda d: d["id"])
                  if d["decision"] in ("accept", "include")}
        return candidates.choose(report, groups, finished, picked)

    def deciding(self, packet_id: str) -> dict[str, Any] | None:
        live = [a for a in self.attempts.get(packet_id, []) if a.get("status") != QUARANTINED]
        return live[-1] if live else None

    def packet(self, packet_id: str) -> Packet | None:
        return next((p for p in self.packets if p.id == packet_id), None)

    def unit_inputs(self, rescoped: Mapping[str, str] | None = None) -> list[UnitInput]:
        """What reconciliation needs about each packet. Scope is the plan's: a packet may
        change what ``Plan.may_write`` gives it, and a shared path declared by any packet
        belongs to its integration owner (the first declaration of a path wins). Globs read
        as ``prun check`` reads them in the run's repository (``conf.d``, an existing folder,
        is the whole folder)."""
        rescoped = rescoped or {}
        may_write, shared = plan_scope(Plan(packets=tuple(self.packets)), self.repo_root)
        out = []
        for p in self.packets:
            a = self.deciding(p.id) or {}
            where = self.saved(p.id, a)
            out.append(UnitInput(
                packet=p, attempt_id=a.get("id"), status=a.get("status"),
                state_dir=a.get("state_dir"), workspace=a.get("workspace"),
                base=a.get("base") or self.bases.get(p.id) or self.run.get("base"),
                result_file=a.get("result_path"), executor=a.get("executor") or None,
                rescoped=rescoped.get(p.id),
                may_write=may_write[p.id], shared=shared,
                saved=where.record if where else None))
        return out

    def saved(self, packet_id: str, attempt: Mapping[str, Any]) -> Place | None:
        """Where ``prun clean`` saves the change of ``attempt`` (a row of ``packet_id``) when
        it removes its clone; None for a run with no run dir, or no attempt."""
        run_dir = self.run.get("run_dir")
        if not run_dir or not attempt.get("id"):
            return None
        return place(run_dir, packet_id, attempt.get("seq") or 1)


def find_run(ledger: Ledger, run_arg: str | None = None,
             cwd: str | None = None) -> sqlite3.Row:
    """The ledger row of the run named ``run_arg`` (id or unique prefix), else of the latest
    run of the repository holding ``cwd`` (outside a repository: the latest run). A name that
    names no run is bad usage (exit 2)."""
    if run_arg is not None:
        row = ledger.find_run(run_arg) if run_arg.strip() else None
        if row is None:
            raise UsageError(f"no run {run_arg!r} in the ledger {ledger.path}",
                             hint="`prun ledger` lists the runs")
        return row

    root = repo_root(cwd)
    row = ledger.latest_run(str(root) if root is not None else None)
    if row is None:
        where = f" of the repository {root}" if root else ""
        raise UsageError(f"no run{where} in the ledger {ledger.path}",
                         hint="start one with `prun run PLAN`, or name RUN")
    return row


def open_run(ledger: Ledger, run_arg: str | None = None, cwd: str | None = None) -> RunView:
    """The run named ``run_arg`` (see ``find_run``) with its packets, attempts and notes."""
    return view(ledger, find_run(ledger, run_arg, cwd)["id"])


def view(ledger: Ledger, run_id: str) -> RunView:
    """Run ``run_id`` as the ledger has it now."""
    row = ledger.run(run_id)
    if row is None:
        raise UsageError(f"no run {run_id!r} in the ledger {ledger.path}",
                         hint="`prun ledger` lists the runs")
    run = dict(row)
    rows = [dict(r) for r in ledger.packets(run_id)]
    packets = [packet_from_spec(r["spec"], r) for r in rows]
    bases = {}
    for r in rows:
        spec = json.loads(r["spec"]) if (r.get("spec") or "").startswith("{") else {}
        commit = r.get("base") or spec.get("base_commit")
        if commit:
            bases[r["id"]] = commit
    attempts: dict[str, list[dict[str, Any]]] = {}
    for a in ledger.attempts(run_id):
        attempts.setdefault(a["packet_id"], []).append(dict(a))
    return RunView(run, packets, attempts, bases, {r["id"]: r["status"] for r in rows},
                   ledger.packet_notes(run_id), supervisor_alive(run),
                   ledger.packet_data(run_id))


@dataclass
class UnitView:
    """One packet as ``prun status`` shows it: its status and its latest attempt."""

    packet_id: str
    status: str
    executor: str | None
    model: str | None
    attempt_id: str | None
    attempt_status: str | None
    attempts: int
    started: float | None
    finished: float | None
    last_activity: float | None
    result_path: str | None
    reason: str | None
    resets_at: str | None
    note: str | None = None        # the cause of its last status change (why it waits)
    tokens: dict[str, int | None] = field(default_factory=dict)  # in, out, cached: its attempts'
    cost_usd: float | None = None  # ... and their cost (None: none reported)
    parked_until: str | None = None  # parked: when it is launched again
    waiting: str | None = None     # "receipt": handed to the coordinator, no receipt yet;
    #                                "memfree", "load": the machine's room holds it back
    accept: dict[str, Any] | None = None  # its latest attempt's acceptance check, when one ran
    candidate: int | None = None   # a candidate of a packet with candidates: its number (1..N)
    candidate_of: str | None = None  # ... and that packet

    def elapsed(self, now: float) -> float | None:
        if self.started is None:
            return None
        return (self.finished or now) - self.started


def _unit(p: Packet, status: str, attempts: list[dict[str, Any]], note: str | None,
          mark: Mapping[str, Any]) -> UnitView:
    a = attempts[-1] if attempts else None
    activity = None
    if a and a["state_dir"] and Status(a["status"]).live:
        try:
            activity = os.stat(os.path.join(a["state_dir"], "tail")).st_mtime
        except OSError:
            activity = None
    tokens_in, tokens_out, cached, cost = (_sum(attempts, c) for c in SPEND_COLUMNS)
    return UnitView(
        packet_id=p.id, status=status,
        executor=a["executor"] if a else p.executor,
        model=a["model"] if a else p.model, attempt_id=a["id"] if a else None,
        attempt_status=a["status"] if a else None, attempts=len(attempts),
        started=epoch(a["dispatched_at"]) if a else None,
        finished=epoch(a["finished_at"]) if a else None, last_activity=activity,
        result_path=a["result_path"] if a else None, reason=a["reason"] if a else None,
        resets_at=a["resets_at"] if a else None, note=note,
        tokens={"in": tokens_in, "out": tokens_out, "cached": cached}, cost_usd=cost,
        parked_until=(str(mark.get("resets_at") or "") or None) if status == "parked" else None,
        waiting="receipt" if _waits_for_receipt(status, a)
        else held_reason(note) if status == "pending" else None,
        accept=_accept(a), candidate=p.candidate, candidate_of=p.candidate_of)


def _accept(a: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The acceptance check recorded with attempt ``a`` (``prun reconcile`` runs it)."""
    check = AcceptCheck.from_row(a) if a else None
    return check.as_dict() if check else None


def _waits_for_receipt(status: str, a: Mapping[str, Any] | None) -> bool:
    """A unit handed to the coordinator (a handoff file in its state dir) whose receipt has
    not come yet."""
    if status != "running" or a is None or a["receipt"] or not a["state_dir"] \
            or a["status"] != "pending":
        return False
    return (os.path.exists(os.path.join(a["state_dir"], statedir.HANDOFF))
            and not os.path.exists(os.path.join(a["state_dir"], statedir.RECEIPT)))
