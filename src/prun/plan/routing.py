"""Routing: which executor runs each unit, and why (the seed's "Executors" rule).

``route(needs, states, policy)`` is a pure function: the quota readings come in as an argument
(``prun.quota.group_states``' ``GroupState`` values, or anything with ``known``, ``empty``,
``left`` and ``resets_at``), so the same inputs always give the same decisions. The rules, in
order:

1. An executor named in the packet wins (it still waits when its own pool cannot take it).
2. A unit that needs session tools goes to Sonnet: the in-session ``session`` executor (or
   headless ``claude`` when the packet names it or the policy says so). No other pool can
   stand in; when the Claude pool cannot take it, it waits.
3. Everything else goes to agy for the larger share (all of it by default) while agy's Gemini
   group is healthy, else to Sonnet. When the chosen pool cannot take a unit (its group reads
   empty, or its batch capacity from the policy is used up) the unit goes to the other pool, or
   waits when neither can take it. Every unit gets a decision: a batch is never shrunk.

A packet's data boundary (``data.may_go_to``, see ``prun.plan.boundary``) narrows every rule: a
named executor outside it is refused; session tools go only to a Sonnet executor inside it;
an ordinary unit chooses only among the policy's executors inside it, and overflows to the
other pool only when that pool is inside it too (else it waits). A unit no allowed executor
can take is refused, never sent elsewhere; the reason of every bounded decision starts with
``data may go to <boundary> only:``.

Who may take which share is asked of the executors, never decided by their names: an
executor's ``split_role`` (``ordinary``: may carry the ordinary share; ``sonnet``: runs Sonnet
units, the in-session one first), its ``routing_pool()`` (the pool whose health and batch
capacity it takes), its quota group for the model, and its ``model_fallback`` (agy's gate runs
the Gemini default when its Claude-and-GPT group is empty, so that group alone being empty
does not close the pool).

A group the readings do not report is unknown, and unknown is never empty. A project-local
policy file (``load_policy``) can change the split; see docs/routing.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..errors import UsageError
from ..executors.base import SONNET
from . import boundary
from .policy import POLICY_FILE, Policy, find_policy, load_policy, members, pools

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..executors.base import Executor

__all__ = ["POLICY_FILE", "Decision", "Need", "Policy", "counts", "find_policy", "load_policy",
           "members", "pools", "route", "summary", "takes_session_tools"]


def takes_session_tools(executor: Executor) -> bool:
    """A unit that needs session tools may run on ``executor``: it has them (``session``), or
    it runs Sonnet units (headless ``claude``, when the packet or the policy says so)."""
    return executor.session_tools or executor.split_role == SONNET


@dataclass(frozen=True)
class Need:
    """What routing needs to know about one unit (a packet, or flags for one unit)."""

    id: str
    executor: str = "auto"
    session_tools: bool = False
    kind: str = "read-only"
    model: str | None = None
    may_go_to: tuple[str, ...] = ()     # the data boundary; empty: none given
    source: str | None = None           # file:line of the boundary, for refusals

    @classmethod
    def of(cls, packet) -> Need:
        """From a ``prun.plan.Packet`` (or anything with the same fields)."""
        data = getattr(packet, "data", None)
        may_go_to = tuple(getattr(data, "may_go_to", ()) or ())
        return cls(id=packet.id, executor=getattr(packet, "executor", None) or "auto",
                   session_tools=bool(getattr(packet, "session_tools", False)),
                   kind=getattr(packet, "kind", "read-only") or "read-only",
                   model=getattr(packet, "model", None), may_go_to=may_go_to,
                   source=packet.where("data") if may_go_to and getattr(packet, "source", None)
                   else None)

    @property
    def named(self) -> str | None:
        """The executor the packet names, or None when routing chooses (``auto``)."""
        return None if self.executor in (None, "", "auto") else self.executor

    @property
    def bounded(self) -> str | None:
        """``data may go to google only``, or None when the unit has no boundary."""
        return f"data may go to {', '.join(self.may_go_to)} only" if self.may_go_to else None


@dataclass(frozen=True)
class Decision:
    packet: str
    executor: str
    model: str | None
    action: str                          # assign, reroute (went to the other pool), wait
    reason: str
    pool: str | None = None
    group: str | None = None
    resets_at: str | None = None

    @property
    def waits(self) -> bool:
        return self.action == "wait"

    def line(self) -> str:
        import json

        kind = "WAIT" if self.waits else "ROUTE"
        return (f"{kind} {self.packet} executor={self.executor} model={self.model or '-'} "
                f"action={self.action} reason={json.dumps(self.reason, ensure_ascii=False)}")

    def as_dict(self) -> dict:
        return {"packet": self.packet, "executor": self.executor, "model": self.model,
                "action": self.action, "reason": self.reason, "pool": self.pool,
                "group": self.group, "resets_at": self.resets_at}


@dataclass(frozen=True)
class _Target:
    """Where a unit would go on one executor: its pool, its quota group, its model."""

    executor: Executor
    pool: str | None
    group: str | None
    model: str | None


class _Pools:
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

    def why_not(self, t: _Target) -> str | None:
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
        state = self.states.get(group) if group else None
        return getattr(state, "resets_at", None) if state is not None else None


def _known(state) -> bool:
    return bool(getattr(state, "known", True))


def route(needs: Iterable[Need], states: Mapping[str, object] | None = None,
          policy: Policy | None = None, env: Mapping[str, str] | None = None) -> list[Decision]:
    """One decision per unit, in the order given. ``env`` only supplies default models."""
    from .. import executors

    needs = list(needs)
    policy = policy or Policy()
    env = env or {}
    pools = _Pools(states or {}, policy)
    seen: set[str] = set()
    for n in needs:
        if n.id in seen:
            raise UsageError(f"packet id {n.id!r} appears twice", hint="give every unit its own id")
        seen.add(n.id)
        refused = executors.refusal(n.executor)
        if refused:
            raise UsageError(f"packet {n.id}: {refused.message}", hint=refused.hint)

    def resolved(name: str, model: str | None) -> str | None:
        return executors.get(name).settings(env, model=model).model

    def target(name: str, need: Need) -> _Target:
        ex = executors.get(name)
        model = resolved(name, need.model or policy.models.get(name))
        return _Target(ex, ex.routing_pool(), ex.quota_group(model), model)

    def may(name: str, need: Need) -> bool:
        """The unit's data may go to ``name``: checked for the model routing names and for the
        one the executor picks without the policy's ``[models]`` (what a run launches)."""
        if not need.may_go_to:
            return True
        models = {target(name, need).model, resolved(name, need.model)}
        return all(boundary.allowed(need.may_go_to, name, m) for m in models)

    decisions: dict[int, Decision] = {}

    def decide(i: int, name: str, action: str, reason: str) -> None:
        t = target(name, needs[i])
        if action != "wait":
            pools.take(t.pool)
        if needs[i].bounded:
            reason = f"{needs[i].bounded}: {reason}"
        decisions[i] = Decision(needs[i].id, name, t.model, action, reason, t.pool, t.group,
                                pools.resets(t.group) if action == "wait" else None)

    # 1. named executors first: they claim their pools' capacity before anything is moved
    for i, n in enumerate(needs):
        if n.named is None:
            continue
        t = target(n.named, n)
        if not may(n.named, n):
            raise boundary.outside(f"packet {n.id}", n.named, t.model, n.may_go_to, n.source)
        why = pools.why_not(t)
        opening = "named in the packet"
        if n.session_tools and not t.executor.session_tools and t.executor.split_role == SONNET:
            opening = f"needs session tools; the packet allows headless {n.named}"
        if why:
            decide(i, n.named, "wait", f"{opening}, but {why}: waits")
        else:
            decide(i, n.named, "assign",
                   opening if t.pool is None else f"{opening}; {pools.health(t.executor, t.group)}")

    # the Sonnet executors, asked only when the rules below have units (it loads every executor)
    sonnets = members(SONNET) if len(decisions) < len(needs) else ()

    # 2. session tools: Sonnet only (the other Sonnet executor when only it is allowed)
    for i, n in enumerate(needs):
        if i in decisions or not n.session_tools:
            continue
        name = next((x for x in (policy.session_tools, *sonnets) if may(x, n)), None)
        if name is None:
            raise UsageError(_at(n) + f"packet {n.id} needs session tools, which only Sonnet "
                             f"has ({_reach(sonnets, n)}), but {n.bounded}",
                             hint="let its data go to anthropic (or session), or drop "
                             "session_tools")
        t = target(name, n)
        why = pools.why_not(t)
        how = ("in-session" if t.executor.session_tools else f"headless {name}, by policy"
               if name == policy.session_tools else f"headless {name}")
        if why:
            decide(i, name, "wait", f"needs session tools, which only Sonnet has, but {why}: waits")
        else:
            decide(i, name, "assign", f"needs session tools: Sonnet {how}")

    # 3. ordinary units: the ordinary executor's share, the rest to Sonnet, overflow crosses over
    ordinary = [i for i in range(len(needs)) if i not in decisions]
    share = policy.ordinary_share
    for k, i in enumerate(ordinary):
        n = needs[i]
        # spread the share evenly through the batch, the ordinary executor first
        to_ordinary = int((k + 1) * share + 0.5 + 1e-9) > int(k * share + 0.5 + 1e-9)
        sonnet = next((x for x in (policy.sonnet, *sonnets) if may(x, n)), policy.sonnet)
        inside = [x for x in (policy.ordinary, sonnet) if may(x, n)]
        if not inside:
            raise UsageError(_at(n) + f"packet {n.id}: {n.bounded}, and no executor of the "
                             "routing policy is inside that ("
                             + _reach((policy.ordinary, sonnet), n) + ")",
                             hint="name an executor inside it in the packet, or route with a "
                             "policy whose executors are (docs/routing.md)")
        if len(inside) == 1:
            only, = inside
            t = target(only, n)
            why = pools.why_not(t)
            barred = sonnet if only == policy.ordinary else policy.ordinary
            if why:
                decide(i, only, "wait", f"ordinary unit: {why}, and its data may not go to "
                                        f"{barred}: waits")
            else:
                decide(i, only, "assign", f"ordinary unit: {only}, the policy's only executor "
                                          f"inside it; {pools.health(t.executor, t.group)}")
            continue
        first, other = (policy.ordinary, sonnet) if to_ordinary else (sonnet, policy.ordinary)
        t1, t2 = target(first, n), target(other, n)
        why1 = pools.why_not(t1)
        if not why1:
            if to_ordinary:
                health = pools.health(t1.executor, t1.group)
                reason = f"ordinary unit: {first} takes the larger share; {health}"
                if share < 1:
                    reason = f"ordinary unit: {first}'s share ({share:g}) by policy; {health}"
            else:
                reason = f"ordinary unit: Sonnet's share ({1 - share:g}) by policy"
            decide(i, first, "assign", reason)
            continue
        why2 = pools.why_not(t2)
        if not why2:
            decide(i, other, "reroute", f"ordinary unit: {why1}, so it goes to {other} instead; "
                                        f"{pools.health(t2.executor, t2.group)}")
        else:
            decide(i, first, "wait", f"ordinary unit: {why1}, and {why2}: waits")
    return [decisions[i] for i in range(len(needs))]


def _at(need: Need) -> str:
    return f"{need.source}: " if need.source else ""


def _reach(names: Iterable[str], need: Need) -> str:
    """``agy reaches google; session reaches anthropic``: for a refusal's message."""
    return "; ".join(f"{x} reaches " + ", ".join(boundary.recipients(x, need.model)[1:])
                     for x in names)


def counts(decisions: list[Decision]) -> dict:
    """``{"units", "now", "wait", "executors": {name: units starting now}}``."""
    per: dict[str, int] = {}
    for d in decisions:
        if not d.waits:
            per[d.executor] = per.get(d.executor, 0) + 1
    waiting = sum(d.waits for d in decisions)
    return {"units": len(decisions), "now": len(decisions) - waiting, "wait": waiting,
            "executors": dict(sorted(per.items()))}


def summary(decisions: list[Decision]) -> str:
    """``ROUTE-SUMMARY units=N now=a wait=w <executor>=n ...`` (executors sorted by name)."""
    c = counts(decisions)
    parts = [f"units={c['units']}", f"now={c['now']}", f"wait={c['wait']}"]
    parts += [f"{k}={v}" for k, v in c["executors"].items()]
    return "ROUTE-SUMMARY " + " ".join(parts)
