"""The verdict of the independence test (``prun.plan.independence``): one ``Failure`` per pair,
rule and path or resource, and the ``Report`` of a plan, as lines or JSON.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from .._util.quoting import quote

RULES = ("base", "files", "state", "order")


@dataclass(frozen=True)
class Failure:
    rule: str           # base | files | state | order
    a: str              # packet ids, in plan order
    b: str
    key: str            # path | resource | base
    value: str
    why: str
    fix: str
    where_a: str = ""
    where_b: str = ""

    def line(self) -> str:
        return (f"FAIL {self.rule} {quote(self.a)} {quote(self.b)} {self.key}={_q(self.value)} "
                f"why={_q(self.why, force=True)} fix={_q(self.fix, force=True)}")


@dataclass
class Report:
    packets: int
    pairs: int
    failures: list[Failure] = field(default_factory=list)
    sequenced: list[tuple[str, str]] = field(default_factory=list)
    bases: dict[str, str | None] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failures

    def lines(self) -> list[str]:
        out = [f.line() for f in self.failures]
        tail = f"pairs={self.pairs} packets={self.packets} sequenced={len(self.sequenced)}"
        out.append(f"OK {tail}" if self.ok else f"FAILED failures={len(self.failures)} {tail}")
        return out

    def to_json(self) -> dict[str, object]:
        return {"ok": self.ok, "packets": self.packets, "pairs": self.pairs,
                "sequenced": [list(p) for p in self.sequenced],
                "failures": [asdict(f) for f in self.failures], "bases": self.bases}


def _q(value: str, *, force: bool = False) -> str:
    """A value as one token (``prun._util.quoting``; also quoted when it holds ``=``)."""
    return quote(value, "=", always=force)
