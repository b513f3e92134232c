"""A run's frozen record: a plan turned into a run in the ledger, and read back.

``freeze`` turns a plan into a run: expected packet ids and count, the base revision as a
commit id (``base: worktree``: a commit of the working tree as it is, made by
``prun._util.worktree``), the terminal deadline as a time, the cancel action and its owner,
the parallelism, each packet's routed executor, and a run dir ``.prun/runs/<run-id>/`` holding
the prompts, state dirs, results, quarantine and logs (``prun.views.model`` reads a run back).
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import executors
from .._util import gitcmd
from .._util.timeparse import deadline_at
from .._util.worktree import WORKTREE, worktree_commit
from ..attempt.sandbox import unavailable
from ..errors import GitError, StateError, UsageError
from ..ledger import Ledger, PacketRecord, RunRecord, now_iso, prun_dir, repo_root
from ..plan import DataBoundary, Packet, Plan, candidates
from ..plan.model import Resources
from ..ports.reserve import port_request
from ..settings import load, parse_sandbox
from . import choices as unitprep
from .admission import Admission, cores
from .paths import RunPaths

DEFAULT_PARALLEL = 8


if TYPE_CHECKING:
    import sqlite3

    from ..cluster.config import ClusterConfig
    from .choices import Route


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + os.urandom(2).hex()


_PACKET_FIELDS = tuple(f.name for f in dataclasses.fields(Packet))
_DATA_FIELDS = tuple(f.name for f in dataclasses.fields(DataBoundary))


def packet_spec(p: Packet) -> dict[str, Any]:
    """The packet as plain data for the ledger (tuples stay tuples: JSON writes them as lists;
    a shallow walk, as ``dataclasses.asdict`` deep-copies every value)."""
    d = {name: getattr(p, name) for name in _PACKET_FIELDS if name != "lines"}
    if isinstance(d.get("data"), DataBoundary):
        d["data"] = {name: getattr(d["data"], name) for name in _DATA_FIELDS}
    d["resources"] = dataclasses.asdict(p.resources)
    return d


def packet_from_spec(spec: str | Mapping[str, Any] | None,
                     row: Mapping[str, Any] | sqlite3.Row | None = None) -> Packet:
    """A frozen packet back from the ledger: its JSON (the packet's fields) or the path of its
    packet file; the row's own columns fill what the JSON lacks."""
    row = dict(row or {})
    if isinstance(spec, str):
        text = spec.strip()
        if text and not text.startswith("{") and os.path.isfile(text):
            from ..plan import load_packet

            return load_packet(text)
        spec = json.loads(text) if text.startswith("{") else {}
    return _packet(dict(spec or {}), row)


def _packet(spec: dict[str, Any], row: dict[str, Any]) -> Packet:
    """The packet of a frozen spec (its JSON, read), the row's columns filling its gaps."""
    for key in ("id", "kind", "executor", "model", "mode", "timeout_s"):
        if spec.get(key) is None and row.get(key) is not None:
            spec[key] = row[key]
    if "after" not in spec and row.get("after"):
        spec["after"] = json.loads(row["after"])
    if "timeout_s" not in spec and "timeout" in spec:
        spec["timeout_s"] = spec.pop("timeout")
    known = {f.name for f in fields(Packet)}
    kw = {k: v for k, v in spec.items() if k in known}
    for key in ("owns", "generates", "reads", "state", "after", "requires", "candidates"):
        if key in kw and kw[key] is not None:
            kw[key] = (kw[key],) if isinstance(kw[key], str) else tuple(kw[key])
    if isinstance(kw.get("data"), Mapping):
        data: dict[str, Any] = {k: (tuple(v) if isinstance(v, list) else v)
                                for k, v in kw["data"].items() if k in _DATA_FIELDS}
        kw["data"] = DataBoundary(**data)
    if isinstance(kw.get("resources"), Mapping):
        kw["resources"] = Resources(**{k: v for k, v in kw["resources"].items()
                                       if k in ("memory", "pids", "cpus")})
    if isinstance(kw.get("command"), list):
        kw["command"] = tuple(kw["command"])
    kw.pop("lines", None)
    kw.setdefault("prompt", "")
    if not kw.get("id"):
        raise StateError("a frozen packet in the ledger has no id",
                         hint="the ledger may come from another prun version")
    return Packet(**kw)


def deadline_of(plan: Plan, given: str | None) -> float | None:
    """The run's deadline (``--deadline``, else the plan's) as seconds since the epoch, or
    None; one that is already past is refused (nothing could run)."""
    text = given if given is not None else plan.deadline
    when = deadline_at(text)
    if when is not None and when <= time.time():
        raise UsageError(f"deadline {text!r} is already past",
                         hint="give a later time, or a duration such as 2h")
    return when


def freeze(plan: Plan, ledger: Ledger, *, parallel: int | str | None = None,
           deadline: str | None = None, env: Mapping[str, str] | None = None,
           cluster: ClusterConfig | None = None,
           admission: Admission | None = None) -> RunRecord:
    """Record the run in the ledger (one transaction) and make its run dir. Returns the run.
    ``parallel`` ``"auto"``: the machine's cores; ``admission``: what a unit needs of the
    machine to start (``prun.run.admission``). A packet with candidates is
    recorded as its candidates' units (``prun.plan.candidates``)."""
    env = os.environ if env is None else env
    plan = candidates.expand(plan)
    root, base, bases = preflight(plan, env)    # a bad base or port entry: nothing made yet
    run_id = new_run_id()
    paths = RunPaths(prun_dir(root or Path.cwd()) / "runs" / run_id)
    when = deadline_of(plan, deadline)
    given = parallel or plan.parallel or DEFAULT_PARALLEL
    n_parallel = cores() if given == "auto" else int(given)
    if n_parallel < 1:
        raise UsageError(f"parallel must be at least 1 (got {n_parallel})")
    packets: list[PacketRecord] = []
    routes = unitprep.route_all(plan.packets, env)  # may refuse a unit: nothing made yet
    sandboxes = _sandboxes(plan, env, routes)        # may refuse sandbox: on: nothing made yet
    paths.make()
    if cluster is not None:   # every supervisor of the run sends its units there
        cluster.write(str(paths.root))
    for p in plan.packets:
        r = routes[p.id]
        pbase = bases[p.id]
        spec = packet_spec(p)
        spec.update({"routed_executor": r.executor, "routing_reason": r.reason,
                     "base_commit": pbase, "sandbox": sandboxes[p.id]})
        packets.append({"id": p.id, "kind": p.kind, "executor": r.executor, "model": p.model,
                        "mode": p.effective_mode, "base": pbase, "after": list(p.after),
                        "timeout_s": p.timeout_s, "spec": spec})
    run: RunRecord = {
           "id": run_id, "repo_root": str(root) if root else None, "plan_path": plan.path,
           "base": base, "deadline": now_iso(when) if when else None,
           "cancel_action": plan.cancel_action or "cancel",
           "cancel_owner": plan.cancel_owner or env.get("USER") or "the coordinator",
           "parallel": n_parallel, "run_dir": str(paths.root),
           "check_command": plan.check, "on_event": plan.on_event, "setup": plan.setup,
           "admission": admission.as_json() if admission else None,
           "workspace": plan.workspace.to_json() if plan.workspace else None,
           "budget": json.dumps(plan.budget.to_json())
           if plan.budget and plan.budget.limited else None}
    ledger.record_run(run, packets)
    if cluster is not None:
        ledger.record_event("cluster", run_id=run_id, cause=f"units run on {cluster.address}",
                            data={"address": cluster.address,
                                  "worker_lost": cluster.worker_lost})
    return run


def preflight(plan: Plan, env: Mapping[str, str] | None = None
              ) -> tuple[Path | None, str | None, dict[str, str | None]]:
    """What ``freeze`` checks before anything is made, callable before the ledger is even
    opened: the plan's repository and base commit, each packet's base commit (its own, else
    the run's) and its ``port:`` entries. Returns (root, run base, packet id -> base);
    UsageError (at the field) for a base that names no commit or a port entry that names no
    port."""
    root = repo_root(plan.root)
    base = None
    if root is not None and plan.base == WORKTREE:
        base = worktree_commit(root)
    elif root is not None:
        try:
            base = gitcmd.rev(root, plan.base or "HEAD")
        except GitError as e:
            if plan.base:
                raise UsageError(f"{plan.where('base')}: base {plan.base!r} is not a commit in "
                                 f"{root}", hint="give a commit id, tag or branch that exists "
                                 "(git log --oneline shows them)") from None
            if any(p.writes_code for p in plan.packets):
                raise UsageError(f"cannot resolve the base revision 'HEAD' in {root}: "
                                 f"{e.message}", hint="commit something first, or name an "
                                 "existing base") from None
    elif any(p.writes_code for p in plan.packets):
        raise UsageError("the plan has code units but is not inside a git repository",
                         hint="run plans with code units from a git repository")
    bases = {p.id: _packet_base(root, plan, p, base) for p in plan.packets}
    for p in plan.packets:
        port_request(p.state, env, where=p.where("state"))
    return root, base, bases


def _packet_base(root: Path | None, plan: Plan, p: Packet, run_base: str | None) -> str | None:
    """The commit packet ``p`` starts from: its own base resolved, else the run's; a base that
    names no commit is refused (UsageError at its line) before anything is made."""
    own = plan.base_of(p)
    if root is None or not own or own == (plan.base or "HEAD"):
        return run_base
    if own == WORKTREE:
        return worktree_commit(root)
    try:
        return gitcmd.rev(root, own)
    except GitError:
        raise UsageError(f"{p.where('base')}: base {own!r} of packet {p.id!r} is not a commit "
                         f"in {root}", hint="give a commit id, tag or branch that exists "
                         "(git log --oneline shows them)") from None


def _sandboxes(plan: Plan, env: Mapping[str, str],
               routes: Mapping[str, Route]) -> dict[str, str]:
    """Each packet's sandbox setting (its own, else the plan's, else ``$PRUN_SANDBOX``, else
    auto). ``on`` where no sandbox can be made refuses the run before anything is frozen."""
    default = parse_sandbox(plan.sandbox) if plan.sandbox else load(env).sandbox
    out = {p.id: p.sandbox or default for p in plan.packets}
    wanted = [p for p in plan.packets
              if out[p.id] == "on" and _launches(routes[p.id].executor)]
    if wanted and (why := unavailable()) is not None:
        p = wanted[0]
        raise UsageError(f"{p.where('sandbox')}: packet {p.id} asks for sandbox: on, but no "
                         f"sandbox can be made here: {why}",
                         hint="install bubblewrap (Debian: bubblewrap), or use sandbox: auto")
    return out


def _launches(name: str) -> bool:
    """Whether units of executor ``name`` run as processes (a session unit does not)."""
    ex = executors.lookup(name)
    return ex is None or ex.launches_process
