"""Packets and plans: what a coordinator hands prun.

A packet is a Markdown file whose YAML front matter holds the machine fields and whose body is
the unit's prompt. A plan is a YAML file with run settings and its packets (inline mappings, or
paths and globs of packet files, relative to the plan). Field names are fixed (see
docs/plans.md and the JSON Schemas in ``prun/plan/schemas``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from .boundary import parse_retention

if TYPE_CHECKING:

    from .boundary import Retention

KINDS = ("read-only", "code")
# The mode a packet gets when it names none, by kind. Both kinds work in a workspace prun made
# for them (a scratch dir, a throwaway clone), where the seed's unattended default applies;
# ``mode: plan`` is the strictly read-only opt-in.
DEFAULT_MODE = {"read-only": "accept-edits", "code": "accept-edits"}

__all__ = ["DEFAULT_MODE", "KINDS", "Budget", "DataBoundary", "Packet", "Plan", "Prime", "Resources"]



@dataclass(frozen=True)
class Budget:
    """What a run may spend (``budget:``, ``--budget-usd``, ``--budget-tokens``): US dollars
    and/or tokens (in + out) for the whole run, and optionally per executor (``executors``:
    executor name -> its own limit). None: no limit of that kind."""

    usd: float | None = None
    tokens: int | None = None
    executors: tuple[tuple[str, Budget], ...] = ()
    hard: bool = False            # reached: the running units are cancelled too

    @property
    def limited(self) -> bool:
        return self.usd is not None or self.tokens is not None or bool(self.executors)

    def of(self, executor: str) -> Budget | None:
        """The executor's own limit, if the budget gives one."""
        return dict(self.executors).get(executor)

    def given(self, usd: float | None, tokens: int | None, hard: bool) -> Budget:
        """This budget with the command line's limits (``--budget-usd``, ``--budget-tokens``
        replace the plan's run-wide ones) and ``--budget-hard``."""
        return Budget(self.usd if usd is None else usd,
                      self.tokens if tokens is None else tokens, self.executors,
                      self.hard or hard)

    def to_json(self) -> dict[str, object]:
        return {"usd": self.usd, "tokens": self.tokens, "hard": self.hard,
                "executors": {name: {"usd": b.usd, "tokens": b.tokens}
                              for name, b in self.executors}}

    @classmethod
    def from_json(cls, obj: dict[str, object]) -> Budget:
        """A budget as ``to_json`` wrote it (the run's frozen record)."""
        def limits(o: object) -> tuple[float | None, int | None]:
            d = o if isinstance(o, dict) else {}
            usd, tokens = d.get("usd"), d.get("tokens")
            return (float(usd) if isinstance(usd, int | float) else None,
                    int(tokens) if isinstance(tokens, int) else None)

        per = obj.get("executors")
        return cls(*limits(obj), executors=tuple(
            (str(name), cls(*limits(v))) for name, v in (per.items() if isinstance(per, dict)
                                                         else ())), hard=obj.get("hard") is True)


@dataclass(frozen=True)
class DataBoundary:
    """A packet's ``data``: what it may reach, where its data may go (executors or provider
    families), what is prohibited, and how its evidence is retained (see ``prun.plan.boundary``)."""

    reachable: tuple[str, ...] = ()
    may_go_to: tuple[str, ...] = ()
    prohibited: tuple[str, ...] = ()
    retention: str | None = None

    @property
    def retention_rule(self) -> Retention:
        """``retention`` parsed: keep, keep <duration>, delete, or a note."""
        return parse_retention(self.retention)


@dataclass(frozen=True)
class Resources:
    """A packet's ``resources``: what its whole process tree is held to (None: no limit)."""

    memory: int | None = None       # bytes
    pids: int | None = None         # processes at once
    cpus: float | None = None       # cores, may be fractional

    def __bool__(self) -> bool:
        return any(v is not None for v in (self.memory, self.pids, self.cpus))


@dataclass(frozen=True)
class Packet:
    id: str
    prompt: str
    scope: str | None = None                # one line: what the unit does and where it stops
    kind: str = "read-only"                 # read-only | code
    executor: str = "auto"                  # a registered executor's name (prun.executors)
    command: tuple[str, ...] | str | None = None
    model: str | None = None
    effort: str | None = None
    mode: str | None = None                 # accept-edits | plan (default from kind)
    owns: tuple[str, ...] = ()              # globs, relative to the repository root
    generates: tuple[str, ...] = ()         # outputs its commands regenerate (count as owned)
    reads: tuple[str, ...] = ()             # paths whose content it consumes
    shared: dict[str, str] = field(default_factory=dict)  # path -> integration owner id
    state: tuple[str, ...] = ()             # e.g. port:8080, db:orders, fixture:users
    after: tuple[str, ...] = ()             # packet ids this one comes after
    base: str | None = None                 # base revision (defaults to the plan's)
    timeout_s: float | None = None
    accept: str | None = None               # its acceptance check, as shell words (or the plan's)
    accept_timeout_s: float | None = None   # seconds (None: prun.git.accept's default)
    followup: str | None = None             # auto: prun follows a failed check up itself | off
    followup_max: int = 1                   # the most automatic follow-up turns in a run
    candidates: tuple[str, ...] = ()        # one executor per candidate (none: one attempt)
    candidate: int | None = None            # a candidate's number (1..N) in a run (plan.candidates)
    candidate_of: str | None = None         # ... and the packet it is a candidate of
    data: DataBoundary = field(default_factory=DataBoundary)
    resources: Resources = field(default_factory=Resources)
    requires: tuple[str, ...] = ()          # result sections the result must carry
    session_tools: bool = False
    subdispatch: bool = False
    snapshot: bool = True                   # read-only units read the code through a snapshot
    sandbox: str | None = None              # auto | on | off (None: the plan's, else auto)
    source: str | None = None               # file the packet came from
    line: int | None = None                 # line of its front matter / mapping
    lines: dict[str, int] = field(default_factory=dict, compare=False, repr=False)  # field -> line
    # ``file:line: field ...``: each placeholder of the packet template it still holds
    placeholders: tuple[str, ...] = field(default=(), compare=False, repr=False)

    def where(self, field_name: str | None = None) -> str:
        """``file:line`` of the packet, or of one of its fields."""
        line = self.lines.get(field_name, self.line) if field_name else self.line
        return f"{self.source}:{line}" if self.source else f"packet {self.id}"

    @property
    def writes_code(self) -> bool:
        return self.kind == "code"

    @property
    def auto_followup(self) -> bool:
        """Whether prun starts this packet's follow-up itself (``followup: auto``)."""
        return self.followup == "auto"

    @property
    def effective_mode(self) -> str:
        return self.mode or DEFAULT_MODE.get(self.kind, "accept-edits")


@dataclass(frozen=True)
class Prime:
    """A plan's ``workspace:``: the command that installs the dependencies (shell words), the
    files whose content decides whether its template is reused, and the untracked paths every
    code unit gets copy-on-write (``prun.git.template``)."""

    command: str
    key: tuple[str, ...] = ()
    share: tuple[str, ...] = ()

    def to_json(self) -> str:
        return json.dumps({"prime": self.command, "key": list(self.key),
                           "share": list(self.share)})

    @classmethod
    def from_json(cls, text: str | None) -> Prime | None:
        """The section as the run froze it (``to_json``), or None."""
        if not text:
            return None
        data = json.loads(text)
        return cls(data["prime"], tuple(data["key"]), tuple(data["share"]))


@dataclass(frozen=True)
class Plan:
    packets: tuple[Packet, ...]
    path: str | None = None
    name: str | None = None
    deadline: str | None = None             # a duration ("2h") or an ISO time
    cancel_owner: str | None = None
    cancel_action: str = "cancel"
    check: str | None = None                # the combined check command
    parallel: int | str | None = None       # a count, or "auto" (from the machine)
    on_event: str | None = None
    setup: str | None = None                # runs in each fresh workspace before its unit
    workspace: Prime | None = None          # primed templates for the code units
    base: str | None = None                 # default base revision
    sandbox: str | None = None              # auto | on | off for every packet that names none
    cluster: str | None = None              # a Dask scheduler's address (docs/cluster.md)
    worker_lost: str = "fail"               # fail | retry: after a cluster worker died mid-unit
    budget: Budget | None = None            # what the run may spend (docs/run.md, "Budget")
    lines: dict[str, int] = field(default_factory=dict, compare=False, repr=False)  # key -> line

    def where(self, key: str | None = None) -> str:
        """``file:line`` of the plan, or of one of its keys."""
        line = self.lines.get(key, 1) if key else 1
        return f"{self.path}:{line}" if self.path else "the plan"

    def packet(self, packet_id: str) -> Packet | None:
        return next((p for p in self.packets if p.id == packet_id), None)

    @property
    def root(self) -> Path:
        return Path(self.path).parent if self.path else Path.cwd()

    @cached_property
    def shared(self) -> dict[str, str]:
        """Every shared path any packet declares -> its integration owner (read-only)."""
        return {path: owner for p in self.packets for path, owner in p.shared.items()}

    @cached_property
    def _shared_by_owner(self) -> dict[str, tuple[str, ...]]:
        out: dict[str, list[str]] = {}
        for p in self.packets:
            for path, owner in p.shared.items():
                out.setdefault(owner, []).append(path)
        return {owner: tuple(paths) for owner, paths in out.items()}

    def may_write(self, packet: Packet) -> tuple[str, ...]:
        """Every glob ``packet`` may change: its ``owns``, its ``generates``, and the shared
        paths (declared by any packet) whose integration owner it is. A diff touching anything
        else is a scope leak."""
        mine = self._shared_by_owner.get(packet.id, ())
        return tuple(dict.fromkeys((*packet.owns, *packet.generates, *mine)))

    def base_of(self, packet: Packet) -> str | None:
        """The revision ``packet`` starts from as written (its own, else the plan's)."""
        return packet.base or self.base

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(p.id for p in self.packets)
