"""A finished panel: its panelists, the cross-check, the lines ``prun panel`` prints, the
``--json`` document and the exit code.

    PANEL run=<id> status=<run status> panelists=<n> valid=<n> invalid=<n> fields=<n>
          agree=<n> disagree=<n> split-within=<n> missing=<n> verdict=<agree|review|none>
    PANELIST <id> executor=<x> model=<m> valid=yes|no attempts=<n> answer=<path>
             [errors=<path> error="<first error>"]
    FIELD <field> agree value=<json> <family>=<same>/<valid answers>...
    FIELD <field> disagree <family>=<json>x<n>[,<json>x<n>]...
    FIELD <field> split-within split=<family>[,...] <family>=<json>x<n>,<json>x<n>...
    FIELD <field> missing
    EVIDENCE <run dir>/panel

Exit codes (README, "Exit codes"): 0 every panelist gave a valid answer and they agree on
every field; 10 (needs review) a field is not agreed, or some answer is invalid, with at least
one valid answer; 1 no valid answer at all, or the run was cancelled; 3 the run stopped (a
panelist could not be dispatched); 124 the run's deadline passed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._util.quoting import json_token
from ..errors import ExitCode
from ..ledger import RunStatus
from .answers import Panelist
from .crosscheck import AGREE, VERDICTS, FieldCheck


@dataclass
class Report:
    run_id: str
    status: str                      # the run's final status
    panelists: list[Panelist]
    fields: list[FieldCheck]
    evidence: str                    # the folder of evidence files
    question_file: str | None = None
    schema_file: str | None = None

    @property
    def valid(self) -> int:
        return sum(1 for p in self.panelists if p.valid)

    @property
    def agreed(self) -> bool:
        return bool(self.fields) and all(f.verdict == AGREE for f in self.fields)

    @property
    def verdict(self) -> str:
        """``agree`` (every answer valid, every field agreed), ``review`` (something to look
        at, with at least one valid answer) or ``none`` (no valid answer)."""
        if not self.valid:
            return "none"
        return "agree" if self.agreed and self.valid == len(self.panelists) else "review"

    def counts(self) -> dict[str, int]:
        out = {"panelists": len(self.panelists), "valid": self.valid,
               "invalid": len(self.panelists) - self.valid, "fields": len(self.fields)}
        out.update({v: sum(1 for f in self.fields if f.verdict == v) for v in VERDICTS})
        return out

    def exit_code(self) -> int:
        special = {RunStatus.STOPPED: ExitCode.STOPPED, RunStatus.TIMEOUT: ExitCode.TIMEOUT,
                   RunStatus.CANCELLED: ExitCode.FAILED}
        if self.status in special:
            return special[RunStatus(self.status)]
        return {"agree": ExitCode.OK, "review": ExitCode.NEEDS_REVIEW}.get(self.verdict,
                                                                           ExitCode.FAILED)

    def lines(self) -> list[str]:
        words = [f"{k}={v}" for k, v in self.counts().items()]
        out = [f"PANEL run={self.run_id} status={self.status} " + " ".join(words)
               + f" verdict={self.verdict}"]
        out += [panelist_line(p) for p in self.panelists]
        out += [f.line() for f in self.fields]
        out.append(f"EVIDENCE {self.evidence}")
        return out

    def to_json(self) -> dict[str, Any]:
        return {"run": self.run_id, "status": self.status, "verdict": self.verdict,
                "exit_code": self.exit_code(), "counts": self.counts(),
                "question": self.question_file, "schema": self.schema_file,
                "evidence": self.evidence,
                "panelists": [p.to_json() for p in self.panelists],
                "fields": [f.to_json() for f in self.fields]}


def panelist_line(p: Panelist) -> str:
    words = ["PANELIST", p.id, f"executor={p.executor}", f"model={p.model or 'default'}",
             f"valid={'yes' if p.valid else 'no'}", f"attempts={len(p.attempts)}"]
    if p.evidence.get("answer"):
        words.append(f"answer={p.evidence['answer']}")
    if not p.valid:
        if p.evidence.get("errors"):
            words.append(f"errors={p.evidence['errors']}")
        words.append("error=" + json_token(p.errors[0] if p.errors else "unknown",
                                           spaces=True))   # the line's last value
    return " ".join(words)
