"""Each panelist's answer, read back from the ledger and its result files, and kept as
evidence under ``<run dir>/panel/``:

    <panelist>.answer.json   the answer document (when one was found), as the panelist gave it
    <panelist>.json          the panelist: executor, model, its attempts (result file, valid,
                             validation errors), whether its answer counts
    <panelist>.errors.txt    the validation errors of its last attempt (only when invalid)

The raw results stay where the run published them (``<run dir>/results/``); each attempt's
path is in ``<panelist>.json``. A panelist's answer is its last attempt's: a follow-up that
fixed an invalid answer counts, one that did not leaves the panelist invalid.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._util.fsutil import atomic_write, atomic_write_json, read_text
from ..ledger import Ledger, Status
from . import contract
from .build import family_of


@dataclass
class AttemptAnswer:
    """One attempt of a panelist and what its result held."""

    id: str
    seq: int
    status: str
    predecessor: str | None
    result: str | None
    judged: contract.Judged

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "seq": self.seq, "status": self.status,
                "predecessor": self.predecessor, "result": self.result,
                "found": self.judged.found, "valid": self.judged.valid,
                "errors": self.judged.errors}


@dataclass
class Panelist:
    """One panelist after the run: its last attempt decides."""

    id: str
    family: str
    executor: str
    model: str | None
    status: str                                 # the packet's status
    attempts: list[AttemptAnswer] = field(default_factory=list)
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def last(self) -> AttemptAnswer | None:
        return self.attempts[-1] if self.attempts else None

    @property
    def valid(self) -> bool:
        return self.last is not None and self.last.judged.valid

    @property
    def answer(self) -> Any:
        return self.last.judged.answer if self.last is not None and self.valid else None

    @property
    def errors(self) -> list[str]:
        if self.last is None:
            return [f"no attempt ran (the packet is {self.status})"]
        return list(self.last.judged.errors)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "family": self.family, "executor": self.executor,
                "model": self.model, "status": self.status, "valid": self.valid,
                "answer": self.answer, "errors": [] if self.valid else self.errors,
                "attempts": [a.to_json() for a in self.attempts], "evidence": self.evidence}


def judge_attempt(row: Any, schema: dict[str, Any]) -> contract.Judged:
    """The answer in one attempt's result; an attempt that did not succeed has none (its
    published result is prun's FALLBACK, not an answer)."""
    if row["status"] != Status.SUCCEEDED:
        why = row["error"] or row["reason"] or "no reason recorded"
        return contract.Judged(errors=[f"the attempt did not succeed ({row['status']}: "
                                       f"{str(why).splitlines()[0][:200]})"])
    path = row["result_path"]
    return contract.judge(read_text(path) if path else None, schema)


def panelists(ledger: Ledger, run_id: str, schema: dict[str, Any]) -> list[Panelist]:
    """Every panelist of the run, its attempts judged, in plan order."""
    out = []
    for row in ledger.packets(run_id):
        rows = ledger.attempts(run_id, row["id"])
        attempts = [AttemptAnswer(id=a["id"], seq=a["seq"], status=a["status"],
                                  predecessor=a["predecessor"], result=a["result_path"],
                                  judged=judge_attempt(a, schema)) for a in rows]
        model = (rows[-1]["model"] or rows[-1]["requested_model"]) if rows else row["model"]
        out.append(Panelist(id=row["id"], family=family_of(row["id"]),
                            executor=row["executor"], model=model, status=row["status"],
                            attempts=attempts))
    return out


def keep(folder: Path, people: list[Panelist]) -> None:
    """Write each panelist's evidence files into ``folder`` (its paths noted on it)."""
    folder.mkdir(parents=True, exist_ok=True)
    for p in people:
        answer = folder / f"{p.id}.answer.json"
        errors = folder / f"{p.id}.errors.txt"
        record = folder / f"{p.id}.json"
        found = p.last is not None and p.last.judged.found
        if found:
            assert p.last is not None
            atomic_write_json(answer, p.last.judged.answer, durable=False)
        if not p.valid:
            atomic_write(errors, "\n".join(p.errors) + "\n", durable=False)
        else:
            errors.unlink(missing_ok=True)
        p.evidence = {"record": str(record), "answer": str(answer) if found else None,
                      "errors": None if p.valid else str(errors),
                      "results": [a.result for a in p.attempts if a.result]}
        atomic_write(record, json.dumps(p.to_json(), indent=2, ensure_ascii=False) + "\n",
                     durable=False)
