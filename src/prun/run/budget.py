"""A run's budget: what its units spent, what the running ones are projected to spend, and
the launch gate that keeps the two within the plan's ``budget:`` (docs/run.md, "Budget").

A unit's projection (tokens in + out, and US dollars) is the median of what the finished
attempts of the same executor and model reported in this run, else in the ledger's whole
history, else the executor's documented default (``Executor.usage_default``). A finished
attempt that did not report a figure counts as its projection, never as zero. A unit starts
only while spent + the projections of the running units + its own projection stays within
every limit that applies to it (the run's, its executor's); otherwise ``admit`` says why.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .. import executors
from ..errors import PrunError
from ..ledger import Ledger, PacketStatus
from ..plan import Budget, Packet
from . import control
from .freeze import packet_from_spec
from .state import RunState
from .unit import UnitState


@dataclass(frozen=True)
class Projection:
    """What one unit of ``executor`` running ``model`` is expected to use (None: unknown),
    from ``samples`` finished attempts of ``source`` (run, history or default)."""

    executor: str
    model: str | None
    tokens: int | None
    usd: float | None
    samples: int
    source: str
    tokens_range: tuple[int, int] | None = None
    usd_range: tuple[float, float] | None = None


@dataclass(frozen=True)
class Standing:
    """Spent by finished attempts, projected for the running units, and the limit (None:
    none) of one scope: the whole run (``executor`` None) or one executor."""

    executor: str | None
    spent_tokens: int
    spent_usd: float
    projected_tokens: int
    projected_usd: float
    limit: Budget

    def to_json(self) -> dict[str, object]:
        return {"spent": {"tokens": self.spent_tokens, "usd": round(self.spent_usd, 6)},
                "projected": {"tokens": self.projected_tokens,
                              "usd": round(self.projected_usd, 6)},
                "budget": {"tokens": self.limit.tokens, "usd": self.limit.usd}}


def model_of(p: Packet, executor: str, env: Mapping[str, str]) -> str | None:
    """The model ``executor`` runs for ``p`` (what its attempts record as asked for)."""
    try:
        return executors.get(executor).settings(env, model=p.model, effort=p.effort,
                                                timeout_s=p.timeout_s).model
    except PrunError:
        return p.model


def project(ledger: Ledger, executor: str, model: str | None,
            run_id: str | None = None) -> Projection:
    """The projection of one unit of ``executor`` running ``model`` (``run_id``: this run's
    finished attempts first)."""
    for source, rows in (("run", ledger.usage(executor, model, run_id) if run_id else []),
                         ("history", ledger.usage(executor, model))):
        if rows:
            tokens = [int(r["tokens"]) for r in rows if r["tokens"] is not None]
            usd = [float(r["cost_usd"]) for r in rows if r["cost_usd"] is not None]
            default = _default(executor)
            return Projection(
                executor, model,
                int(statistics.median(tokens)) if tokens else default[0],
                float(statistics.median(usd)) if usd else default[1], len(rows), source,
                (min(tokens), max(tokens)) if tokens else None,
                (min(usd), max(usd)) if usd else None)
    default = _default(executor)
    return Projection(executor, model, default[0], default[1], 0, "default")


def _default(executor: str) -> tuple[int | None, float | None]:
    found = executors.lookup(executor)
    return found.usage_default if found is not None else (None, None)


def gate_of(run: Mapping[str, object], ledger: Ledger,
            env: Mapping[str, str]) -> BudgetGate | None:
    """The gate of the budget a run was frozen with (its ledger row), or None."""
    frozen = run.get("budget")
    if not isinstance(frozen, str) or not frozen:
        return None
    found = Budget.from_json(json.loads(frozen))
    return BudgetGate(found, ledger, str(run["id"]), env) if found.limited else None


def standings_of(run: Mapping[str, object], ledger: Ledger,
                 env: Mapping[str, str]) -> list[Standing]:
    """Where a run stands against its budget, read back from the ledger (``prun status``):
    empty when it has none."""
    gate = gate_of(run, ledger, env)
    if gate is None:
        return []
    running = [(packet_from_spec(r["spec"], r), str(r["executor"]))
               for r in ledger.packets(str(run["id"])) if r["status"] == PacketStatus.RUNNING]
    return gate.standings(running)


def running_units(state: RunState) -> list[tuple[Packet, str]]:
    """The run's running units, as (packet, executor)."""
    return [(u.packet, u.executor) for u in state.order if u.status == PacketStatus.RUNNING]


def cancel_running(state: RunState) -> None:
    """``--budget-hard``: the budget is reached, so the running units are cancelled too."""
    for u in state.order:
        if u.status == PacketStatus.RUNNING and not u.cancel_requested:
            control.cancel_unit(state, u, f"the budget is reached (--budget-hard): "
                                          f"{state.budget_reached}")


class BudgetGate:
    """The launch gate of one run's budget, asked by the scheduler for each unit it would
    start (``admit``) and by ``prun status`` for where the run stands (``standings``)."""

    def __init__(self, budget: Budget, ledger: Ledger, run_id: str, env: Mapping[str, str]):
        self.budget, self.ledger, self.run_id, self.env = budget, ledger, run_id, env
        # what the ledger said, kept until ``refresh``: one read per launch pass, not one per
        # unit asked about and running unit
        self._projections: dict[tuple[str, str | None], Projection] = {}
        self._spent: dict[str, tuple[int, float]] | None = None

    def refresh(self) -> None:
        """Read the ledger again at the next question (the run loop calls it before each
        launch pass: no attempt finishes within one)."""
        self._projections.clear()
        self._spent = None

    def projection(self, p: Packet, executor: str) -> Projection:
        return self._project(executor, model_of(p, executor, self.env))

    def _project(self, executor: str, model: str | None) -> Projection:
        key = (executor, model)
        if key not in self._projections:
            self._projections[key] = project(self.ledger, executor, model, self.run_id)
        return self._projections[key]

    def spent(self) -> dict[str, tuple[int, float]]:
        """What the run's finished attempts spent, per executor (an unreported figure counts
        as the attempt's projection)."""
        if self._spent is None:
            self._spent = self._read_spent()
        return self._spent

    def _read_spent(self) -> dict[str, tuple[int, float]]:
        out: dict[str, tuple[int, float]] = {}
        for a in self.ledger.attempts(self.run_id):
            if not a["finished_at"] or not a["dispatched_at"] or not a["executor"]:
                continue
            tokens = (a["tokens_in"] or 0) + (a["tokens_out"] or 0) \
                if a["tokens_in"] is not None or a["tokens_out"] is not None else None
            usd = a["cost_usd"]
            if tokens is None or usd is None:
                guess = self._project(a["executor"], a["requested_model"])
                tokens = guess.tokens or 0 if tokens is None else tokens
                usd = guess.usd or 0.0 if usd is None else usd
            was = out.get(a["executor"], (0, 0.0))
            out[a["executor"]] = (was[0] + tokens, was[1] + float(usd))
        return out

    def standings(self, running: Iterable[tuple[Packet, str]]) -> list[Standing]:
        """The run's standing, then each executor's that has a limit of its own."""
        spent = self.spent()
        projected: dict[str, tuple[int, float]] = {}
        for p, executor in running:
            guess = self.projection(p, executor)
            was = projected.get(executor, (0, 0.0))
            projected[executor] = (was[0] + (guess.tokens or 0), was[1] + (guess.usd or 0.0))

        def standing(name: str | None, limit: Budget) -> Standing:
            names = [name] if name else sorted({*spent, *projected})
            return Standing(name, sum(spent.get(n, (0, 0.0))[0] for n in names),
                            sum(spent.get(n, (0, 0.0))[1] for n in names),
                            sum(projected.get(n, (0, 0.0))[0] for n in names),
                            sum(projected.get(n, (0, 0.0))[1] for n in names), limit)

        return [standing(None, self.budget),
                *(standing(name, limit) for name, limit in self.budget.executors)]

    def admit(self, p: Packet, executor: str, running: Iterable[tuple[Packet, str]]) -> str | None:
        """None: ``p`` (run by ``executor``) may start beside the ``running`` units; else why
        not, in one line."""
        own = self.projection(p, executor)
        for s in self.standings(running):
            if s.executor is not None and s.executor != executor:
                continue
            scope = f"the {s.executor} budget" if s.executor else "the budget"
            for limit, spent, projected, mine, unit, fmt in (
                    (s.limit.tokens, s.spent_tokens, s.projected_tokens, own.tokens or 0,
                     "tokens", "d"),
                    (s.limit.usd, s.spent_usd, s.projected_usd, own.usd or 0.0, "USD", ".4f")):
                if limit is not None and spent + projected + mine > limit:
                    return (f"{scope} of {limit:{'d' if unit == 'tokens' else 'g'}} {unit} "
                            f"would be passed: {spent:{fmt}} spent + {projected:{fmt}} projected "
                            f"for the running units + {mine:{fmt}} for this one")
        return None

    def admit_unit(self, state: RunState, u: UnitState) -> str | None:
        """``admit`` for a unit of ``state`` beside its running units."""
        return self.admit(u.packet, u.executor, running_units(state))
