"""The panel as a plan: one read-only packet per panelist, each on a fixed executor.

Panelist ids are ``panel-<family>-<n>`` (``panel-claude-1``, ``panel-gemini-1``,
``panel-agy-1``); the family is the executor, named in the packet so routing never moves a
panelist to another vendor (the point of a panel is the other model family). Every panelist
gets the same prompt: the question and the answer contract (``prun.panel.contract``), under
the usual brief of a read-only unit (a scratch folder, the code's read-only snapshot).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..errors import UsageError
from ..plan import Packet, Plan
from . import contract as _contract

FAMILIES = ("claude", "gemini", "agy")   # the executors a panel draws on, in this order
DEFAULT_COUNTS = {"claude": 1, "gemini": 1}
PREFIX = "panel"
SCOPE = ("a panelist: answers the panel's question independently, with one JSON document the "
         "answer contract's schema validates; reads the code, changes nothing")


@dataclass(frozen=True)
class Panel:
    """What ``prun panel`` was asked for."""

    contract: _contract.Contract
    counts: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_COUNTS))
    timeout_s: float | None = None
    parallel: int | None = None
    deadline: str | None = None

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def counts(claude: int | None, gemini: int | None, agy: int | None) -> dict[str, int]:
    """The panelists of each family: as given, or one Claude and one Gemini when none is
    given; a panel of none is refused."""
    given = {"claude": claude, "gemini": gemini, "agy": agy}
    if all(n is None for n in given.values()):
        return dict(DEFAULT_COUNTS)
    out = {fam: n or 0 for fam, n in given.items()}
    if any(n < 0 for n in out.values()):
        raise UsageError("a panelist count cannot be negative", hint="give 0 or more")
    if not sum(out.values()):
        raise UsageError("the panel has no panelists",
                         hint="give --claude N, --gemini M or --agy K of 1 or more")
    return {fam: n for fam, n in out.items() if n}


def panelist_id(family: str, n: int) -> str:
    return f"{PREFIX}-{family}-{n}"


def family_of(packet_id: str) -> str:
    """The family in a panelist's id (``panel-gemini-2`` -> ``gemini``)."""
    parts = packet_id.split("-")
    return "-".join(parts[1:-1]) if len(parts) >= 3 and parts[0] == PREFIX else packet_id


def plan(panel: Panel) -> Plan:
    """The plan of ``panel``: its packets in family order, the same prompt for each."""
    text = _contract.prompt(panel.contract)
    packets = tuple(
        Packet(id=panelist_id(fam, i), prompt=text, scope=SCOPE, kind="read-only",
               executor=fam, timeout_s=panel.timeout_s)
        for fam in FAMILIES for i in range(1, panel.counts.get(fam, 0) + 1))
    return Plan(packets=packets, name="panel", deadline=panel.deadline,
                parallel=panel.parallel or len(packets))
