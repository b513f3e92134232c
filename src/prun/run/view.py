"""A run as reconciliation, integration, clean and pause see it: its frozen packet set and
each packet's deciding attempt, read from the ledger.

The deciding attempt of a packet is its latest attempt that was not quarantined (a
reassignment's successor supersedes its predecessor). RUN may be a run id or a unique prefix;
left out, it is the latest run of the repository holding the current directory.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields

from ..errors import StateError, UsageError
from ..git.reconcile import UnitInput, plan_scope
from ..plan import DataBoundary, Packet, Plan

QUARANTINED = "quarantined"


@dataclass
class RunView:
    run: dict
    packets: list[Packet]
    attempts: dict[str, list[dict]] = field(default_factory=dict)   # packet id -> in order
    bases: dict[str, str] = field(default_factory=dict)             # packet id -> base commit

    @property
    def id(self) -> str:
        return self.run["id"]

    @property
    def repo_root(self) -> str | None:
        return self.run.get("repo_root")

    def deciding(self, packet_id: str) -> dict | None:
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
            out.append(UnitInput(
                packet=p, attempt_id=a.get("id"), status=a.get("status"),
                state_dir=a.get("state_dir"), workspace=a.get("workspace"),
                base=a.get("base") or self.bases.get(p.id) or self.run.get("base"),
                result_file=a.get("result_path"), executor=a.get("executor") or None,
                rescoped=rescoped.get(p.id),
                may_write=may_write[p.id], shared=shared))
        return out


def packet_from_spec(spec, row: Mapping | None = None) -> Packet:
    """A frozen packet back from the ledger: its JSON (the packet's fields) or the path of its
    packet file; the row's own columns fill what the JSON lacks."""
    row = dict(row or {})
    if isinstance(spec, str):
        text = spec.strip()
        if text.startswith("{"):
            spec = json.loads(text)
        elif text and os.path.isfile(text):
            from ..plan import load_packet

            return load_packet(text)
        else:
            spec = {}
    spec = dict(spec or {})
    for key in ("id", "kind", "executor", "model", "mode", "timeout_s"):
        if spec.get(key) is None and row.get(key) is not None:
            spec[key] = row[key]
    if "after" not in spec and row.get("after"):
        spec["after"] = json.loads(row["after"])
    if "timeout_s" not in spec and "timeout" in spec:
        spec["timeout_s"] = spec.pop("timeout")
    known = {f.name for f in fields(Packet)}
    kw = {k: v for k, v in spec.items() if k in known}
    for key in ("owns", "generates", "reads", "state", "after", "requires"):
        if key in kw and kw[key] is not None:
            kw[key] = (kw[key],) if isinstance(kw[key], str) else tuple(kw[key])
    if isinstance(kw.get("data"), Mapping):
        d = kw["data"]
        kw["data"] = DataBoundary(**{k: (tuple(v) if isinstance(v, list) else v)
                                     for k, v in d.items()
                                     if k in {f.name for f in fields(DataBoundary)}})
    if isinstance(kw.get("command"), list):
        kw["command"] = tuple(kw["command"])
    kw.pop("lines", None)
    kw.setdefault("prompt", "")
    if not kw.get("id"):
        raise StateError("a frozen packet in the ledger has no id",
                         hint="the ledger may come from another prun version")
    return Packet(**kw)


def open_run(ledger, run_arg: str | None = None, cwd: str | None = None) -> RunView:
    """The run named ``run_arg`` (id or unique prefix), else the latest run of the repository
    holding ``cwd``, with its packets and attempts."""
    if run_arg:
        row = ledger.find_run(run_arg)
        if row is None:
            raise UsageError(f"no run {run_arg!r} in the ledger {ledger.path}",
                             hint="`prun ledger` lists the runs")
    else:
        from ..ledger import repo_root

        root = repo_root(cwd)
        row = ledger.latest_run(str(root)) if root is not None else None
        if row is None:
            row = ledger.latest_run(None) if root is None else None
        if row is None:
            where = f" of the repository {root}" if root else ""
            raise UsageError(f"no run{where} in the ledger {ledger.path}",
                             hint="start one with `prun run PLAN`, or name RUN")
    run = dict(row)
    rows = [dict(r) for r in ledger.packets(run["id"])]
    packets = [packet_from_spec(r["spec"], r) for r in rows]
    bases = {}
    for r in rows:
        spec = json.loads(r["spec"]) if (r.get("spec") or "").startswith("{") else {}
        commit = r.get("base") or spec.get("base_commit")
        if commit:
            bases[r["id"]] = commit
    attempts: dict[str, list[dict]] = {}
    for a in ledger.attempts(run["id"]):
        attempts.setdefault(a["packet_id"], []).append(dict(a))
    return RunView(run, packets, attempts, bases)
