"""Dependents start from their predecessors.

The seed's Base rule allows "an explicitly ordered dependency revision": a code packet with
``after: [a, ...]`` starts from its base plus the accepted change of every code packet it
comes after (directly or through a chain), applied in order and committed as a base commit
prun made. The commit is made in an object store of its own (``prun.git.store.building``,
beside the run's store of the base: no git runs in a unit's clone, and no unit can rewrite
the objects of its base), and the dependent's clone is made from it. Its own diff is then
measured from that commit, so reconciliation judges each unit against its own recorded base
and integration applies predecessors and dependents in order without applying anything
twice.

Before that, each packet it comes after is judged as ``prun reconcile`` would judge it; a
rejected one (scope leak, missing section, not succeeded) blocks the dependent with that
reason, and so does one whose acceptance check failed in the run, so nothing starts on a
wrong base. A read-only dependent is told where its predecessors' results are.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .._util.quoting import quote
from ..errors import Blocked
from ..git import store
from ..git.integrate import order
from ..git.reconcile import REJECTED, UnitInput, judge
from ..plan import Packet, Plan


@dataclass(frozen=True)
class Start:
    """Where a dependent starts: the results of the packets it comes after, and the changes
    of its code ancestors, in the order they apply."""

    predecessors: dict[str, str]        # direct predecessor id -> its result file
    applied: tuple[str, ...] = ()       # code ancestors whose changes the clone starts with
    patches: tuple[bytes, ...] = ()


def start(plan: Plan, packet: Packet, latest: Mapping[str, UnitInput],
          ancestors: Mapping[str, set[str]]) -> Start:
    """Judge every packet ``packet`` of ``plan`` comes after (``latest``: each one's deciding
    attempt) and collect what it starts from. Raises ``Blocked`` for a rejected one."""
    before = ancestors.get(packet.id, set())
    wanted = [pid for pid in order(p for p in plan.packets if p.id in before)]
    results: dict[str, str] = {}
    applied, patches = [], []
    for pid in wanted:
        unit = latest.get(pid)
        if unit is None:
            raise Blocked(f"{pid} has no attempt to start from")
        verdict = judge(unit, with_patch=unit.packet.writes_code)
        if verdict.verdict == REJECTED:
            why = "; ".join(r.text() for r in verdict.reasons if r.code) or "rejected"
            raise Blocked(f"{pid} was rejected ({why})")
        if unit.accept is not None and unit.accept.status == "failed":
            raise Blocked(f"{pid} was rejected (reason=accept-failed log={quote(unit.accept.log)})")
        if pid in packet.after and verdict.result_file:
            results[pid] = verdict.result_file
        change = verdict.change
        if unit.packet.writes_code and change is not None and not change.empty:
            applied.append(pid)
            patches.append(change.patch or b"")
    return Start({pid: results[pid] for pid in packet.after if pid in results},
                 tuple(applied), tuple(patches))


def start_commit(folder: str, repo_root: str, base: str, start: Start) -> str | None:
    """Apply the start's patches on top of ``base`` and commit them as the dependent's base,
    in a store of its own in ``folder`` (the run's folder of workspaces), ready for
    ``workspace.make_clone``. Returns the new commit id, or None when there was nothing to
    apply. Raises ``Blocked`` when a patch does not apply."""
    if not start.patches:
        return None

    with store.building(folder, repo_root, base) as b:
        for pid, patch in zip(start.applied, start.patches, strict=True):
            done = b.git(["apply", "--cached", "--binary", "-"], input=patch, check=False)
            if done.returncode != 0:
                last = (done.stderr.strip().splitlines() or ["patch does not apply"])[-1]
                raise Blocked(f"the accepted change of {pid} does not apply: {last}")
        return b.commit("prun: start from the accepted changes of " + ", ".join(start.applied))
