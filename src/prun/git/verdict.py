"""What reconciliation says of each packet: a ``Verdict`` (accepted, rejected or
needs-review) with its ``Reason``s, for one ``UnitInput``; a run's verdicts make a ``Report``.
An ``AcceptCheck`` is how its acceptance check ended (``prun.git.accept`` runs it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .._util.quoting import quote
from ..plan import Packet
from .changes import Change

ACCEPTED = "accepted"
REJECTED = "rejected"
NEEDS_REVIEW = "needs-review"
NOT_CHOSEN = "not-chosen"     # a candidate another candidate of its packet won over
LINE_WORD = {ACCEPTED: "ACCEPTED", REJECTED: "REJECTED", NEEDS_REVIEW: "REVIEW",
             NOT_CHOSEN: "NOT-CHOSEN"}


@dataclass(frozen=True)
class Reason:
    """One reason for a verdict: a stable slug and the facts behind it."""

    code: str
    detail: Mapping[str, object] = field(default_factory=dict)

    def text(self) -> str:
        return " ".join([f"reason={self.code}", *(f"{k}={_word(v)}" for k, v in
                                                   self.detail.items())])

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, **self.detail}


ACCEPT_STATUSES = ("passed", "failed", "timeout", "error")   # and "none": no check ran


@dataclass(frozen=True)
class AcceptCheck:
    """How a packet's acceptance check ended on one attempt: ``status`` (``ACCEPT_STATUSES``),
    its exit code (None when it timed out or never started), seconds, the tail of its output
    and the file holding all of it."""

    status: str
    exit_code: int | None = None
    seconds: float | None = None
    log: str | None = None
    tail: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"status": self.status, "exit": self.exit_code,
                "seconds": None if self.seconds is None else round(self.seconds, 3),
                "log": self.log}

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> AcceptCheck | None:
        """The check recorded with an attempt's ledger row, None when none ran."""
        status = row.get("accept_status")
        if status not in ACCEPT_STATUSES:
            return None
        return cls(str(status), row.get("accept_exit"), row.get("accept_seconds"),
                   row.get("accept_log"), row.get("accept_tail") or "")


NO_ACCEPT = {"status": "none", "exit": None, "seconds": None, "log": None}


@dataclass(frozen=True)
class Candidacy:
    """A candidate's place among its packet's (``prun.git.candidates``): the packet, its
    number of ``of``, why it won (the winner) or the reason word it lost by (the others)."""

    packet: str
    number: int
    of: int
    why: str | None = None
    lost: str | None = None


@dataclass(frozen=True)
class UnitInput:
    """What reconciliation needs to know about one packet and its (latest) attempt."""

    packet: Packet
    attempt_id: str | None = None
    status: str | None = None           # the attempt's status (ledger), None: never dispatched
    state_dir: str | None = None
    workspace: str | None = None        # the clone of a code unit
    base: str | None = None             # the declared base commit
    result_file: str | None = None
    executor: str | None = None
    reports_tool_use: bool | None = None  # None: ask the executor class
    rescoped: str | None = None         # a directly approved change of scope (why)
    may_write: tuple[str, ...] | None = None  # the globs it may change (default: see scope_reasons)
    shared: Mapping[str, str] | None = None   # the plan's shared paths -> integration owner
    saved: str | None = None            # the record of its change once prun clean removed its
                                        # clone (``prun.git.saved``): read when the clone is gone
    accept: AcceptCheck | None = None   # its acceptance check, when the run recorded one


@dataclass
class Verdict:
    packet_id: str
    verdict: str
    reasons: list[Reason] = field(default_factory=list)
    attempt_id: str | None = None
    status: str | None = None
    result_file: str | None = None
    recovered: str | None = None        # the salvaged result's path, when one was recovered
    change: Change | None = None
    rescoped: str | None = None
    claims: dict[str, Any] | None = None  # the result's claims checked (``prun.git.claims``)
    accept: AcceptCheck | None = None   # its acceptance check, when one ran
    candidate: Candidacy | None = None  # a candidate of a packet with candidates

    def lines(self) -> list[str]:
        word, c = LINE_WORD[self.verdict], self.candidate
        if c is not None and self.verdict == NOT_CHOSEN:
            return [f"{word} {c.packet} candidate={c.number} reason={c.lost}"]
        head = f"{word} {c.packet} candidate={c.number} of={c.of}" if c else f"{word} {self.packet_id}"
        if not self.reasons:
            extra = f" why={_word(c.why)}" if c and c.why else ""
            if self.change:
                extra += f" files={len(self.change.files)}"
            if self.accept is not None:
                extra += f" accept={self.accept.status}"
            return [f"{head}{extra}"]
        return [f"{head} {r.text()}" for r in self.reasons]

    def as_dict(self) -> dict[str, Any]:
        c = self.candidate
        return {"packet": c.packet if c else self.packet_id, "unit": self.packet_id,
                "candidate": c.number if c else None, "of": c.of if c else None,
                "why": c.why if c else None, "reason": c.lost if c else None,
                "verdict": self.verdict,
                "reasons": [r.as_dict() for r in self.reasons], "attempt": self.attempt_id,
                "status": self.status, "result_file": self.result_file,
                "recovered": self.recovered, "rescoped": self.rescoped,
                "change": self.change.as_dict() if self.change else None,
                "claims": self.claims,
                "accept": self.accept.as_dict() if self.accept else dict(NO_ACCEPT)}


@dataclass
class Report:
    verdicts: list[Verdict]
    run_id: str | None = None

    def count(self, verdict: str) -> int:
        return sum(v.verdict == verdict for v in self.verdicts)

    @property
    def complete(self) -> bool:
        """Every packet accepted or explicitly re-scoped (a candidate not chosen does not
        count): the required scope may advance."""
        return all(v.verdict in (ACCEPTED, NOT_CHOSEN) or v.rescoped for v in self.verdicts)

    def summary(self) -> str:
        run = f" run={self.run_id}" if self.run_id else ""
        packets = len(self.verdicts) - self.count(NOT_CHOSEN)
        return (f"RECONCILE{run} packets={packets} accepted={self.count(ACCEPTED)} "
                f"rejected={self.count(REJECTED)} review={self.count(NEEDS_REVIEW)} "
                f"complete={'yes' if self.complete else 'no'}")

    def lines(self) -> list[str]:
        return [line for v in self.verdicts for line in v.lines()] + [self.summary()]

    def as_dict(self) -> dict[str, Any]:
        return {"run": self.run_id, "complete": self.complete,
                "counts": {k: self.count(k) for k in (ACCEPTED, REJECTED, NEEDS_REVIEW)},
                "packets": [v.as_dict() for v in self.verdicts]}

    def verdict(self, packet_id: str) -> Verdict | None:
        return next((v for v in self.verdicts if v.packet_id == packet_id), None)


def _word(value: object) -> str:
    """A value as one token: quoted as ``prun._util.quoting`` says when it is not plain."""
    return quote(value)
