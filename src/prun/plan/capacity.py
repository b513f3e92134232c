"""Per-pool health and batch capacity while routing (``prun.plan.routing``) decides a batch:
where a unit would go on one executor (``Target``), and whether that pool can take one more
unit now (its quota group, and the group its gate falls back to, not read empty; its batch
capacity from the policy not used up). A group the readings do not report is unknown, and
unknown is never empty.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .policy import Policy

if TYPE_CHECKING:
    from ..executors.base import Executor


@dataclass(frozen=True)
class Target:
    """Where a unit would go on one executor: its pool, its quota group, its model."""

    executor: Executor
    pool: str | None
    group: str | None
    model: str | None


class Pools:
    """Per-pool health and batch capacity while a batch is being routed."""

    def __init__(self, states: Mapping[str, object], policy: Policy):
        self.states = states
        self.capacity = dict(policy.capacity)
        self.used: dict[str, int] = {}

    def _empty(self, group: str | None) -> str | None:
        state = self.states.get(group) if group else None
        if state is None or not _known(state) or not getattr(state, "empty", False):
            return None
        resets = getattr(state, "resets_at", None)
        return f"{group} reads empty" + (f" (resets {resets})" if resets else
                                         " (reset time unknown)")

    def why_not(self, t: Target) -> str | None:
        """Why ``t``'s pool cannot take one more unit now, or None when it can."""
        if t.pool is None:
            return None
        why = self._empty(t.group)
        fallback = t.executor.model_fallback.get(t.group) if t.group else None
        if why and fallback:
            other = self._empty(fallback)
            why = f"{why}, and so does {other}" if other else None
        if why:
            return why
        cap = self.capacity.get(t.pool)
        if cap is not None and self.used.get(t.pool, 0) >= cap:
            return f"the {t.pool} pool's batch capacity of {cap} is taken"
        return None

    def take(self, pool: str | None) -> None:
        if pool is not None:
            self.used[pool] = self.used.get(pool, 0) + 1

    def health(self, executor: Executor, group: str | None) -> str:
        """``agy-gemini healthy (left 80%)``: how ``group`` reads, for a decision's reason."""
        fallback = executor.model_fallback.get(group) if group else None
        if fallback and self._empty(group):
            return (f"{self._empty(group)}, so the dispatcher runs {executor.fallback_label} "
                    f"instead (MODEL-FALLBACK); {self.health(executor, fallback)}")
        state = self.states.get(group) if group else None
        if state is None or not _known(state):
            return f"{group} not read (unknown is never empty)"
        left = getattr(state, "left", None)
        if isinstance(left, int | float) and 0 <= left <= 1:
            left = f"{left:.0%}"  # the snapshot's fraction
        return f"{group} healthy" + (f" (left {left})" if left is not None else "")

    def resets(self, group: str | None) -> str | None:
        """When ``group``'s reading says it resets, if it says."""
        state = self.states.get(group) if group else None
        resets = getattr(state, "resets_at", None)
        return resets if isinstance(resets, str) else None


def _known(state: object) -> bool:
    """A reading that does not say it is unknown is known."""
    return bool(getattr(state, "known", True))
