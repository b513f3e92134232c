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

Only executors that are here take units: ``missing`` (``prun.executors.missing``: name ->
``not-installed`` or ``not-signed-in``) are passed over wherever routing chooses, and each
decision says which it skipped (``Decision.skipped``, printed ``skipped=agy
reason=not-installed``); a unit that names a missing executor, or whose every allowed choice is
missing, is refused with one line naming what to install.

A group the readings do not report is unknown, and unknown is never empty. A project-local
policy file (``load_policy``) can change the split; see docs/routing.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .. import executors
from .._util.quoting import quote, word
from ..errors import UsageError
from ..executors.base import SONNET
from . import boundary, candidates
from .capacity import Pools, Target
from .model import Packet
from .policy import POLICY_FILE, Policy, find_policy, load_policy, members, pools

if TYPE_CHECKING:
    from typing import TypedDict

    from ..executors.base import Executor

    class Counts(TypedDict):
        units: int
        now: int                    # units that start now
        wait: int                   # units that wait
        executors: dict[str, int]   # executor -> units starting now on it, sorted by name

__all__ = ["POLICY_FILE", "Decision", "Need", "Policy", "check", "counts", "find_policy", "load_policy",
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
    named_at: str | None = None         # file:line of the executor it names, for refusals

    @classmethod
    def of(cls, packet: Packet) -> Need:
        """From a packet."""
        may_go_to = tuple(packet.data.may_go_to or ())
        return cls(id=packet.id, executor=packet.executor or "auto",
                   session_tools=bool(packet.session_tools),
                   kind=packet.kind or "read-only", model=packet.model, may_go_to=may_go_to,
                   source=packet.where("data") if may_go_to and packet.source else None,
                   named_at=packet.where("executor") if packet.source else None)

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
    skipped: tuple[tuple[str, str], ...] = ()   # (executor, why) passed over: it is missing

    @property
    def waits(self) -> bool:
        return self.action == "wait"

    def skip_lines(self) -> list[str]:
        """``SKIP <packet> skipped=agy reason=not-installed``: one per executor passed over."""
        return [f"SKIP {quote(self.packet)} {word('skipped', name)} {word('reason', why)}"
                for name, why in self.skipped]

    def line(self) -> str:
        kind = "WAIT" if self.waits else "ROUTE"
        return (f"{kind} {quote(self.packet)} {word('executor', self.executor)} "
                f"{word('model', self.model or '-')} action={self.action} "
                f"reason={quote(self.reason, always=True)}")

    def as_dict(self) -> dict[str, object]:
        return {"packet": self.packet, "executor": self.executor, "model": self.model,
                "action": self.action, "reason": self.reason, "pool": self.pool,
                "group": self.group, "resets_at": self.resets_at,
                "skipped": [{"executor": name, "reason": why} for name, why in self.skipped]}


def route(needs: Iterable[Need], states: Mapping[str, object] | None = None,
          policy: Policy | None = None, env: Mapping[str, str] | None = None,
          missing: Mapping[str, str] | None = None) -> list[Decision]:
    """One decision per unit, in the order given. ``env`` only supplies default models;
    ``missing``: executor -> why it cannot take a unit here (none by default)."""
    needs = list(needs)
    _check_units(needs)
    return _Batch(needs, states or {}, policy or Policy(), env or {}, missing or {}).route()


def check(packets: Iterable[Packet], env: Mapping[str, str]) -> None:
    """Refuse (UsageError) what routing would refuse, before anything is made: a unit that can
    go only to executors missing here, or outside its data boundary. Routes with the project's
    policy and no quota readings (unknown is never empty), so nothing is probed. A packet
    with candidates is routed as its candidates' units, each on its own executor."""
    packets = [u for p in packets for u in candidates.units(p)]
    if packets:
        route([Need.of(p) for p in packets], {}, load_policy(find_policy(env)), env,
              executors.missing(env))


def _check_units(needs: list[Need]) -> None:
    """Refuse a batch with an id twice, or a unit naming an executor prun refuses (codex)."""
    seen: set[str] = set()
    for n in needs:
        if n.id in seen:
            raise UsageError(f"packet id {n.id!r} appears twice", hint="give every unit its own id")
        seen.add(n.id)
        refused = executors.refusal(n.executor)
        if refused:
            raise UsageError(f"packet {n.id}: {refused.message}", hint=refused.hint)


def _to_ordinary(k: int, share: float) -> bool:
    """Does the ``k``-th ordinary unit of a batch go to the ordinary executor? The share is
    spread evenly through the batch, the ordinary executor first."""
    return int((k + 1) * share + 0.5 + 1e-9) > int(k * share + 0.5 + 1e-9)


class _Batch:
    """One batch being routed: its units, the policy, the pools' health and batch capacity,
    and the decisions made so far (by position in the batch)."""

    def __init__(self, needs: list[Need], states: Mapping[str, object], policy: Policy,
                 env: Mapping[str, str], missing: Mapping[str, str]):
        self.needs = needs
        self.policy = policy
        self.env = env
        self.missing = missing
        self.pools = Pools(states, policy)
        self.decisions: dict[int, Decision] = {}
        self.skipped: dict[int, dict[str, str]] = {}   # unit -> executors passed over

    def route(self) -> list[Decision]:
        # 1. named executors first: they claim their pools' capacity before anything is moved
        for i, n in enumerate(self.needs):
            if n.named is not None:
                self._named(i, n, n.named)
        # the Sonnet executors, asked only when the rules below have units (it loads every
        # executor)
        sonnets = members(SONNET) if len(self.decisions) < len(self.needs) else ()
        # 2. session tools: Sonnet only (the other Sonnet executor when only it is allowed)
        for i, n in self._undecided():
            if n.session_tools:
                self._session_tools(i, n, sonnets)
        # 3. ordinary units: the ordinary executor's share, the rest to Sonnet, overflow
        # crosses over
        for k, (i, n) in enumerate(self._undecided()):
            self._ordinary(k, i, n, sonnets)
        return [self.decisions[i] for i in range(len(self.needs))]

    def _undecided(self) -> list[tuple[int, Need]]:
        return [(i, n) for i, n in enumerate(self.needs) if i not in self.decisions]

    # where a unit would go, and whether its data may go there

    def _model(self, name: str, model: str | None) -> str | None:
        """The model ``name`` runs for a unit asking for ``model`` (None: its default)."""
        return executors.get(name).settings(self.env, model=model).model

    def _target(self, name: str, need: Need) -> Target:
        ex = executors.get(name)
        model = self._model(name, need.model or self.policy.models.get(name))
        return Target(ex, ex.routing_pool(), ex.quota_group(model), model)

    def _may(self, name: str, need: Need) -> bool:
        """The unit's data may go to ``name``: checked for the model routing names and for the
        one the executor picks without the policy's ``[models]`` (what a run launches)."""
        if not need.may_go_to:
            return True
        models = {self._target(name, need).model, self._model(name, need.model)}
        return all(boundary.allowed(need.may_go_to, name, m) for m in models)

    def _here(self, i: int, name: str) -> bool:
        """``name`` can take a unit on this machine; if not, unit ``i`` records it skipped."""
        why = self.missing.get(name)
        if why:
            self.skipped.setdefault(i, {})[name] = why
        return why is None

    def _absent(self, need: Need, names: Iterable[str], at: str | None = None) -> UsageError:
        """The refusal of a unit whose every allowed executor is missing here (``at``: the
        file:line to name, else its data boundary's)."""
        names = list(dict.fromkeys(names))
        what = ", ".join(f"{x} ({self.missing[x]})" for x in names)
        at = at or need.source
        return UsageError((f"{at}: " if at else "") + f"packet {need.id} can go only to "
                          f"{what}, missing on this machine",
                          hint="; ".join(executors.get(x).install_hint() for x in names)
                          + "; `prun doctor` shows what is here")

    def _decide(self, i: int, name: str, action: str, reason: str) -> None:
        need = self.needs[i]
        t = self._target(name, need)
        if action != "wait":
            self.pools.take(t.pool)
        if need.bounded:
            reason = f"{need.bounded}: {reason}"
        resets = self.pools.resets(t.group) if action == "wait" else None
        skipped = tuple(self.skipped.get(i, {}).items())
        self.decisions[i] = Decision(need.id, name, t.model, action, reason, t.pool, t.group,
                                     resets, skipped)

    # the three rules

    def _named(self, i: int, n: Need, name: str) -> None:
        """Rule 1: the executor the packet names, inside its boundary, or the unit waits."""
        t = self._target(name, n)
        if not self._may(name, n):
            raise boundary.outside(f"packet {n.id}", name, t.model, n.may_go_to, n.source)
        if not self._here(i, name):
            raise self._absent(n, [name], n.named_at)
        opening = "named in the packet"
        if n.session_tools and not t.executor.session_tools and t.executor.split_role == SONNET:
            opening = f"needs session tools; the packet allows headless {name}"
        why = self.pools.why_not(t)
        if why:
            self._decide(i, name, "wait", f"{opening}, but {why}: waits")
        elif t.pool is None:
            self._decide(i, name, "assign", opening)
        else:
            self._decide(i, name, "assign", f"{opening}; {self.pools.health(t.executor, t.group)}")

    def _session_tools(self, i: int, n: Need, sonnets: tuple[str, ...]) -> None:
        """Rule 2: a unit needing session tools goes to Sonnet, or waits."""
        allowed = [x for x in (self.policy.session_tools, *sonnets) if self._may(x, n)]
        name = next((x for x in allowed if self._here(i, x)), None)
        if name is None and allowed:
            raise self._absent(n, allowed)
        if name is None:
            raise UsageError(_at(n) + f"packet {n.id} needs session tools, which only Sonnet "
                             f"has ({_reach(sonnets, n)}), but {n.bounded}",
                             hint="let its data go to anthropic (or session), or drop "
                             "session_tools")
        t = self._target(name, n)
        why = self.pools.why_not(t)
        if why:
            self._decide(i, name, "wait",
                         f"needs session tools, which only Sonnet has, but {why}: waits")
            return
        if t.executor.session_tools:
            how = "in-session"
        elif name == self.policy.session_tools:
            how = f"headless {name}, by policy"
        else:
            how = f"headless {name}"
        self._decide(i, name, "assign", f"needs session tools: Sonnet {how}")

    def _ordinary(self, k: int, i: int, n: Need, sonnets: tuple[str, ...]) -> None:
        """Rule 3 for the ``k``-th ordinary unit: among the policy's executors inside its
        boundary, its share's executor, else the other pool's, else it waits."""
        policy = self.policy
        allowed = [x for x in (policy.sonnet, *sonnets) if self._may(x, n)]
        sonnet = next((x for x in allowed if self._here(i, x)), allowed[0] if allowed else
                      policy.sonnet)
        inside = [x for x in (policy.ordinary, sonnet) if self._may(x, n)]
        here = [x for x in inside if self._here(i, x)]
        if inside and not here:
            raise self._absent(n, [*inside, *allowed])
        if len(here) < len(inside):
            gone = next(x for x in inside if x not in here)
            because = f"{gone} is {self.missing[gone]}"
            self._only_inside(i, n, here[0], because, because)
            return
        if not inside:
            raise UsageError(_at(n) + f"packet {n.id}: {n.bounded}, and no executor of the "
                             "routing policy is inside that ("
                             + _reach((policy.ordinary, sonnet), n) + ")",
                             hint="name an executor inside it in the packet, or route with a "
                             "policy whose executors are (docs/routing.md)")
        if len(inside) == 1:
            barred = sonnet if inside[0] == policy.ordinary else policy.ordinary
            self._only_inside(i, n, inside[0], f"its data may not go to {barred}",
                              "the policy's only executor inside it")
        elif _to_ordinary(k, policy.ordinary_share):
            self._split(i, n, policy.ordinary, sonnet, to_ordinary=True)
        else:
            self._split(i, n, sonnet, policy.ordinary, to_ordinary=False)

    def _only_inside(self, i: int, n: Need, only: str, barred: str, chosen: str) -> None:
        """An ordinary unit that only one of the policy's executors may take (its boundary, or
        the other is missing here: ``barred`` says why, ``chosen`` why ``only``): that one,
        or it waits."""
        t = self._target(only, n)
        why = self.pools.why_not(t)
        if why:
            self._decide(i, only, "wait", f"ordinary unit: {why}, and {barred}: waits")
        else:
            self._decide(i, only, "assign", f"ordinary unit: {only}, {chosen}; "
                                            f"{self.pools.health(t.executor, t.group)}")

    def _split(self, i: int, n: Need, first: str, other: str, *, to_ordinary: bool) -> None:
        """An ordinary unit for ``first`` by the policy's split; to ``other`` when ``first``'s
        pool cannot take it, else it waits."""
        t1 = self._target(first, n)
        why1 = self.pools.why_not(t1)
        if not why1:
            self._decide(i, first, "assign", self._share_reason(first, t1, to_ordinary))
            return
        t2 = self._target(other, n)
        why2 = self.pools.why_not(t2)
        if not why2:
            self._decide(i, other, "reroute", f"ordinary unit: {why1}, so it goes to {other} "
                                              f"instead; {self.pools.health(t2.executor, t2.group)}")
        else:
            self._decide(i, first, "wait", f"ordinary unit: {why1}, and {why2}: waits")

    def _share_reason(self, name: str, t: Target, to_ordinary: bool) -> str:
        share = self.policy.ordinary_share
        if not to_ordinary:
            return f"ordinary unit: Sonnet's share ({1 - share:g}) by policy"
        health = self.pools.health(t.executor, t.group)
        if share < 1:
            return f"ordinary unit: {name}'s share ({share:g}) by policy; {health}"
        return f"ordinary unit: {name} takes the larger share; {health}"


def _at(need: Need) -> str:
    return f"{need.source}: " if need.source else ""


def _reach(names: Iterable[str], need: Need) -> str:
    """``agy reaches google; session reaches anthropic``: for a refusal's message."""
    return "; ".join(f"{x} reaches " + ", ".join(boundary.recipients(x, need.model)[1:])
                     for x in names)


def counts(decisions: list[Decision]) -> Counts:
    """How many units start now, on which executors, and how many wait."""
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
