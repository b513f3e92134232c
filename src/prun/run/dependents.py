"""Dependents start from their predecessors.

The seed's Base rule allows "an explicitly ordered dependency revision": a code packet with
``after: [a, ...]`` starts from its base plus the accepted change of every code packet it
comes after (directly or through a chain), applied in order and committed in its own clone as
a base commit prun made. Its own diff is then measured from that commit, so reconciliation
judges each unit against its own recorded base and integration applies predecessors and
dependents in order without applying anything twice.

Before that, each packet it comes after is judged as ``prun reconcile`` would judge it; a
rejected one (scope leak, missing section, not succeeded) blocks the dependent with that
reason, so nothing starts on a wrong base. A read-only dependent is told where its
predecessors' results are.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from .._util import gitcmd
from ..errors import Blocked
from ..git.reconcile import REJECTED, UnitInput, judge
from ..plan import Packet, Plan

AUTHOR = ("-c", "user.name=prun", "-c", "user.email=prun@localhost")


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
    from ..git.integrate import order

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
        if pid in packet.after and verdict.result_file:
            results[pid] = verdict.result_file
        change = verdict.change
        if unit.packet.writes_code and change is not None and not change.empty:
            applied.append(pid)
            patches.append(change.patch or b"")
    return Start({pid: results[pid] for pid in packet.after if pid in results},
                 tuple(applied), tuple(patches))


def commit_start(clone: str, start: Start) -> str | None:
    """Apply the start's patches in ``clone`` and commit them as the dependent's base (prun's
    own commit, made before the worker runs: the clone's refusing hooks are bypassed for it).
    Returns the new commit id, or None when there was nothing to apply."""
    if not start.patches:
        return None
    for pid, patch in zip(start.applied, start.patches, strict=True):
        done = gitcmd.git(["apply", "--index", "--binary", "-"], clone, input=patch,
                          check=False)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["patch does not apply"])[-1]
            raise Blocked(f"the accepted change of {pid} does not apply: {last}")
    message = "prun: start from the accepted changes of " + ", ".join(start.applied)
    gitcmd.git([*AUTHOR, "-c", f"core.hooksPath={os.devnull}", "commit", "--quiet",
                "--no-verify", "--allow-empty", "-m", message], clone)
    return gitcmd.out(["rev-parse", "HEAD"], clone)
