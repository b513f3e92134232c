"""The records of ``prun doctor``: one ``Fact`` per line, the ``Context`` every check reads,
and ``examine``, which runs the checks and marks what a plan needs."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .._util.quoting import quote
from ..plan import Plan

OK, MISSING, WARN = "ok", "missing", "warn"


@dataclass(frozen=True)
class Fact:
    """One thing prun uses here: ``topic`` (executor, sandbox, limits, quota, ledger, extra,
    skill, mcp, plan) and ``name``, its ``status`` (ok, missing, warn), what was found and,
    unless it is ok, how to fix it; ``needed``: the plan given needs it."""

    topic: str
    name: str
    status: str
    detail: str
    fix: str | None = None
    needed: bool = False

    @property
    def key(self) -> str:
        return f"{self.topic}:{self.name}"

    def line(self) -> str:
        """``executor agy status=missing detail="..." fix="..." needed=yes``."""
        out = f"{self.topic} {quote(self.name)} status={self.status} " \
              f"detail={quote(self.detail, always=True)}"
        if self.fix:
            out += f" fix={quote(self.fix, always=True)}"
        return out + (" needed=yes" if self.needed else "")

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class Context:
    """What the checks read: the environment, the folder it was asked in, the plan (if any)."""

    env: Mapping[str, str]
    cwd: Path
    plan: Plan | None = None
    needs: frozenset[str] = field(default_factory=frozenset)   # Fact.key of what it needs


Check = Callable[[Context], Iterable[Fact]]


@dataclass(frozen=True)
class Report:
    facts: tuple[Fact, ...]
    plan: str | None = None

    @property
    def ok(self) -> bool:
        """Everything the plan needs is here (always, without a plan)."""
        return not any(f.needed and f.status != OK for f in self.facts)

    def lines(self) -> list[str]:
        return [f.line() for f in self.facts]

    def to_json(self) -> dict[str, object]:
        return {"ok": self.ok, "plan": self.plan, "facts": [f.as_dict() for f in self.facts]}


def examine(ctx: Context, checks: Iterable[Check], plan_source: str | None = None) -> Report:
    """Run ``checks`` in order and mark the facts the plan needs."""
    facts = [f for check in checks for f in check(ctx)]
    marked = tuple(Fact(f.topic, f.name, f.status, f.detail, f.fix,
                        f.needed or f.key in ctx.needs) for f in facts)
    return Report(marked, plan_source)
