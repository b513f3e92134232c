"""What a plan would spend, before it is launched (``prun estimate``, and ``prun run``'s
one-line warning): per executor and model, the projected tokens and US dollars from the
ledger's history (its samples and their range), beside each quota pool's headroom and reset
from the quota snapshot, and the plan's budget.

With no history for an executor and model nothing is projected for it (null, never a
guess). The snapshot holds each pool's headroom as a fraction of its window, not as tokens,
so a pool is said to be exhausted by the plan only when it reads empty now or the plan puts
more units on it than the routing policy's ``[capacity]`` allows; otherwise whether the plan
fits is unknown (docs/run.md, "Estimate").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .. import executors
from ..ledger import Ledger
from ..plan import Plan, routing
from .budget import model_of, project
from .choices import route_all


@dataclass(frozen=True)
class Entry:
    """The plan's units of one executor and model, and what they are projected to spend
    (None: unknown); the ranges are one unit's, over the ``samples``."""

    executor: str
    model: str | None
    units: int
    samples: int
    tokens: int | None
    usd: float | None
    tokens_range: tuple[int, int] | None
    usd_range: tuple[float, float] | None


@dataclass(frozen=True)
class Pool:
    """One quota pool the plan draws on: its headroom (fraction left, None: unknown), when it
    resets, the plan's units on it, and whether the plan would exhaust it (None: unknown)."""

    group: str
    left: float | None
    resets_at: str | None
    units: int
    exhausts: bool | None
    why: str


@dataclass(frozen=True)
class Estimate:
    entries: tuple[Entry, ...]
    pools: tuple[Pool, ...]
    budget_over: str | None          # why the projection passes the plan's budget, if it does

    @property
    def history(self) -> bool:
        return any(e.samples for e in self.entries)

    def warning(self) -> str | None:
        """``prun run``'s one line before launching: the pools the plan would exhaust and
        the budget its projection passes (None: nothing to warn of)."""
        said = [f"the {p.group} pool: {p.why}" for p in self.pools if p.exhausts]
        if self.budget_over:
            said.append(self.budget_over)
        return "the plan's projection exceeds " + "; ".join(said) if said else None

    def to_json(self) -> dict[str, object]:
        return {"history": self.history,
                "entries": [{"executor": e.executor, "model": e.model, "units": e.units,
                             "samples": e.samples, "tokens": e.tokens, "usd": e.usd,
                             "tokens_range": e.tokens_range, "usd_range": e.usd_range}
                            for e in self.entries],
                "pools": [{"group": p.group, "left": p.left, "resets_at": p.resets_at,
                           "units": p.units, "exhausts": p.exhausts, "why": p.why}
                          for p in self.pools],
                "budget_over": self.budget_over}


def estimate(plan: Plan, ledger: Ledger, env: Mapping[str, str]) -> Estimate:
    """The estimate of ``plan`` from ``ledger``'s history and the quota snapshot."""
    from ..quota import group_states

    routes = route_all(plan.packets, env)
    counts: dict[tuple[str, str | None], int] = {}
    groups: dict[str, int] = {}
    routed: dict[str, str | None] = {}   # quota group -> the routing pool its units take
    for p in plan.packets:
        name = routes[p.id].executor
        model = model_of(p, name, env)
        counts[(name, model)] = counts.get((name, model), 0) + 1
        found = executors.lookup(name)
        group = found().quota_group(model) if found is not None else None
        if found is not None and group:
            groups[group] = groups.get(group, 0) + 1
            routed.setdefault(group, found().routing_pool())
    entries = tuple(_entry(ledger, name, model, n) for (name, model), n in counts.items())
    states = group_states(env, groups, executors.quota_probe) if groups else {}
    capacity = dict(routing.load_policy(routing.find_policy(env)).capacity)
    pools = tuple(_pool(g, states.get(g), n, capacity.get(routed.get(g) or ""))
                  for g, n in groups.items())
    return Estimate(entries, pools, _over_budget(plan, entries))


def _entry(ledger: Ledger, executor: str, model: str | None, units: int) -> Entry:
    seen = project(ledger, executor, model)
    if not seen.samples:   # no history: nothing projected
        return Entry(executor, model, units, 0, None, None, None, None)
    return Entry(executor, model, units, seen.samples,
                 None if seen.tokens is None or seen.tokens_range is None
                 else seen.tokens * units,
                 None if seen.usd is None or seen.usd_range is None else seen.usd * units,
                 seen.tokens_range, seen.usd_range)


def _pool(group: str, state: object, units: int, capacity: int | None) -> Pool:
    left = getattr(state, "left", None)
    resets_at = getattr(state, "resets_at", None)
    if getattr(state, "empty", False):
        return Pool(group, left, resets_at, units, True, "it reads empty now")
    if capacity is not None and units > capacity:
        return Pool(group, left, resets_at, units, True,
                    f"{units} units, its [capacity] is {capacity}")
    why = ("its headroom is not known" if left is None
           else "its headroom is a fraction of its window, not tokens")
    return Pool(group, left, resets_at, units, None, why)


def _over_budget(plan: Plan, entries: tuple[Entry, ...]) -> str | None:
    """Why the projection passes the plan's budget (run-wide or an executor's), or None."""
    budget = plan.budget
    if budget is None or not budget.limited:
        return None
    scopes = [(None, budget), *budget.executors]
    for name, limit in scopes:
        mine = [e for e in entries if name is None or e.executor == name]
        tokens = sum(e.tokens or 0 for e in mine)
        usd = sum(e.usd or 0.0 for e in mine)
        scope = f"the {name} budget" if name else "the budget"
        if limit.tokens is not None and tokens > limit.tokens:
            return f"{scope}: {tokens} tokens projected, {limit.tokens} allowed"
        if limit.usd is not None and usd > limit.usd:
            return f"{scope}: {usd:.4f} USD projected, {limit.usd:g} allowed"
    return None
