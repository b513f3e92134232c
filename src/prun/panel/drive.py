"""Running a panel: its plan frozen as a run, driven by the run supervisor in this process,
an invalid answer sent back once, then the cross-check.

The run is an ordinary run (``prun status``, ``prun ledger``, ``prun cancel`` see it). As
each panelist's attempt succeeds its answer is judged; one that does not pass the schema gets
one follow-up, recorded as a ``followup`` request in the ledger like ``prun followup``'s: a
new attempt linked to its predecessor that resumes the panelist's conversation, asking for a
corrected JSON document only. When the run is over each panelist's last attempt decides, the
evidence is written under ``<run dir>/panel/`` and a ``panel`` event records the outcome.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._util.fsutil import atomic_write, read_json, read_text
from ..errors import UsageError
from ..ledger import Ledger, RunRecord
from ..run.freeze import deadline_of, freeze
from ..run.keeper import Keeper
from ..run.loop import Loop
from . import answers, build, contract, crosscheck
from .report import Report

if TYPE_CHECKING:
    from ..run.events import Event

PANEL_DIR = "panel"
PANEL_FILE = "panel.json"          # what the panel was asked: question, schema, counts
CROSSCHECK_FILE = "crosscheck.json"


def start(panel: build.Panel, ledger: Ledger) -> RunRecord:
    """Freeze the panel's plan as a run and keep what it was asked in its run dir."""
    plan = build.plan(panel)
    deadline_of(plan, panel.deadline)  # a past deadline is refused before anything is made
    run = freeze(plan, ledger, parallel=plan.parallel, deadline=panel.deadline)
    folder = evidence_dir(run)
    folder.mkdir(parents=True, exist_ok=True)
    c = panel.contract
    atomic_write(folder / PANEL_FILE, json.dumps({
        "question_file": c.question_file, "schema_file": c.schema_file,
        "question": c.question, "schema": c.schema, "counts": dict(panel.counts),
        "panelists": [p.id for p in plan.packets]}, indent=2, ensure_ascii=False) + "\n")
    ledger.record_event("panel-started", run_id=run["id"], cause="prun panel: "
                        + ", ".join(f"{fam}={n}" for fam, n in panel.counts.items()),
                        data={"question_file": c.question_file, "schema_file": c.schema_file})
    return run


def evidence_dir(run: RunRecord | Any) -> Path:
    run_dir = run["run_dir"]
    assert run_dir, "freeze makes every run's folder"
    return Path(run_dir) / PANEL_DIR


class FollowUps:
    """Hears the supervisor's events; sends a panelist whose first answer does not validate
    one follow-up. ``say`` is told a line for each (``ANSWER ... followup=yes``)."""

    def __init__(self, run_id: str, schema: dict[str, Any],
                 say: Callable[[str], None] | None = None):
        self.run_id = run_id
        self.schema = schema
        self.say = say
        self.asked: set[str] = set()

    def hear(self, sup: Loop, ev: Event) -> None:
        pid = ev.packet_id
        if ev.kind != "succeeded" or pid is None or pid in self.asked:
            return
        path = ev.data.get("result_file")
        judged = contract.judge(read_text(path) if path else None, self.schema)
        if judged.valid:
            return
        self.asked.add(pid)
        sup.ledger.add_request(self.run_id, "followup", pid, cause="prun panel: the answer "
                               f"does not pass the schema ({len(judged.errors)} error(s))",
                               data=contract.fix_prompt(judged.errors))
        sup.requests_sent()
        if self.say is not None:
            self.say(f"ANSWER {pid} invalid attempt={ev.attempt_id} "
                     f"errors={len(judged.errors)} followup=yes")


def supervise(ledger: Ledger, run_id: str, emit: Callable[[Event], None],
              followups: FollowUps, on_claimed: Callable[[], None] | None = None) -> str:
    """Drive the run to its end in this process (the worker keeper started first, as
    ``prun run`` does); returns the run's final status. ``on_claimed``: told once this
    process holds the run."""
    keeper = Keeper(dict(os.environ))
    keeper.launch()
    try:
        holder: list[Loop] = []

        def hear(ev: Event) -> None:
            emit(ev)
            if holder:
                followups.hear(holder[0], ev)

        sup = Loop(ledger, run_id, emit=hear, keeper=keeper, on_claimed=on_claimed)
        holder.append(sup)
        return asyncio.run(sup.run_until_done())
    finally:
        keeper.close()


def asked(ledger: Ledger, run_id: str) -> tuple[Any, dict[str, Any]]:
    """The run's row and what its panel was asked (``panel.json``); a run that is not a
    panel is a ``UsageError``."""
    run = ledger.run(run_id)
    if run is None:
        raise UsageError(f"no run {run_id} in the ledger", hint="see `prun ledger`")
    found = read_json(evidence_dir(run) / PANEL_FILE)
    if not isinstance(found, dict) or not isinstance(found.get("schema"), dict):
        raise UsageError(f"run {run_id} is not a panel (no {evidence_dir(run) / PANEL_FILE})",
                         hint="give the id of a run `prun panel` made")
    return run, found


def finish(ledger: Ledger, run_id: str, *, record: bool = True) -> Report:
    """The cross-check of a panel run from the ledger and its result files; its evidence
    written, and (``record``) a ``panel`` event in the ledger."""
    run, asked_for = asked(ledger, run_id)
    folder = evidence_dir(run)
    schema: dict[str, Any] = asked_for["schema"]
    people = answers.panelists(ledger, run_id, schema)
    answers.keep(folder, people)
    families = [f for f in build.FAMILIES if any(p.family == f for p in people)]
    families += sorted({p.family for p in people} - set(families))
    voices = [crosscheck.Voice(p.id, p.family, p.answer, p.valid) for p in people]
    report = Report(run_id=run_id, status=run["status"], panelists=people,
                    fields=crosscheck.cross_check(schema, voices, families),
                    evidence=str(folder), question_file=asked_for.get("question_file"),
                    schema_file=asked_for.get("schema_file"))
    doc = report.to_json()
    atomic_write(folder / CROSSCHECK_FILE, json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    if record:
        ledger.record_event("panel", run_id=run_id, status=report.verdict,
                            cause=report.lines()[0],
                            data={"counts": doc["counts"], "exit_code": doc["exit_code"],
                                  "fields": {f.name: f.verdict for f in report.fields},
                                  "evidence": str(folder)})
    return report
