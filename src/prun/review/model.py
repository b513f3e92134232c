"""What the review page shows of one run, read fresh from the ledger, the state dirs and the
clones (for a clone ``prun clean`` removed, the change it saved in the run dir): every packet
with its executor and model, status, verdict (reconcile's), reasons, result, required
sections, change (file by file, with each file's diff), cost and the person's decisions; the
run's combined check and its log. No web library here: the server renders this, and
``--json`` prints it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._util.fsutil import tail_bytes
from ..errors import PrunError
from ..executors.records import Usage
from ..git import accept
from ..git.changes import FileChange
from ..git.diffs import patch_diffs, text_diffs
from ..git.reconcile import LINE_WORD, Verdict, reconcile
from ..git.sections import section_reasons
from ..git.verdict import NO_ACCEPT, AcceptCheck, Candidacy
from ..plan import Packet
from ..views.model import RunView, view
from .cost import as_dict, cost_of, spent
from .diffview import DIFF_FILES, DIFF_LIMIT

if TYPE_CHECKING:
    from ..ledger import Ledger

RESULT_LIMIT = 500_000     # bytes of a result shown
LOG_LIMIT = 64_000         # bytes of the check log's tail shown


@dataclass
class Decision:
    decision: str                  # accept | reject | include
    who: str
    at: str
    note: str | None
    attempt_id: str | None
    current: bool                  # made on the packet's deciding attempt: it counts

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Section:
    name: str
    state: str                     # found | missing | empty


@dataclass
class PacketPage:
    id: str
    kind: str
    executor: str | None
    model: str | None
    status: str
    verdict: str                   # reconcile's word: ACCEPTED, REJECTED, REVIEW, NOT-CHOSEN
    reasons: list[str]
    attempt_id: str | None
    attempts: int
    result_path: str | None
    result: str | None
    sections: list[Section]
    files: list[FileChange]
    diffs: dict[str, str]          # the shown files' diffs (at most DIFF_FILES), by path
    cost: Usage
    decisions: list[Decision] = field(default_factory=list)   # oldest first
    accept: AcceptCheck | None = None   # its acceptance check (prun reconcile runs it)
    candidate: Candidacy | None = None  # a candidate of a packet with candidates

    @property
    def decision(self) -> Decision | None:
        """The decision that counts: the latest made on the deciding attempt."""
        return next((d for d in reversed(self.decisions) if d.current), None)

    def as_dict(self) -> dict[str, Any]:
        return {"packet": self.id, "kind": self.kind, "executor": self.executor,
                "model": self.model, "status": self.status, "verdict": self.verdict,
                "reasons": self.reasons, "attempt": self.attempt_id, "attempts": self.attempts,
                "result_file": self.result_path,
                "sections": {s.name: s.state for s in self.sections},
                "files": [f.as_dict() for f in self.files], "diffs": self.diffs,
                "diffs_not_shown": len(self.files) - len(self.diffs),
                "cost": as_dict(self.cost),
                "accept": self.accept.as_dict() if self.accept else dict(NO_ACCEPT),
                "decision": self.decision.as_dict() if self.decision else None,
                "decisions": [d.as_dict() for d in self.decisions],
                **_candidacy(self.candidate)}


def _candidacy(c: Candidacy | None) -> dict[str, Any]:
    """A candidate's place as ``prun reconcile --json`` carries it."""
    return {"candidate_of": c.packet if c else None, "candidate": c.number if c else None,
            "of": c.of if c else None, "why": c.why if c else None,
            "reason": c.lost if c else None}


@dataclass
class CheckLog:
    command: str | None
    ok: bool | None                # None: the combined check has not run (prun integrate)
    log_path: str | None
    log: str | None                # its tail

    def as_dict(self) -> dict[str, Any]:
        return {"command": self.command, "ok": self.ok, "log": self.log_path}


@dataclass
class RunPage:
    id: str
    status: str
    base: str | None
    repo_root: str | None
    live: bool                     # the run goes on: the page refreshes itself
    seq: int                       # the run's last event: the page's version
    packets: list[PacketPage]
    check: CheckLog
    cost: Usage

    def counts(self) -> dict[str, int]:
        out = {w: 0 for w in LINE_WORD.values()}
        for p in self.packets:
            out[p.verdict] += 1
        return out

    def as_dict(self) -> dict[str, Any]:
        return {"run": self.id, "status": self.status, "base": self.base, "live": self.live,
                "version": self.seq, "counts": self.counts(), "cost": as_dict(self.cost),
                "check": self.check.as_dict(), "packets": [p.as_dict() for p in self.packets]}


def version(ledger: Ledger, run_id: str) -> int:
    """What changes whenever the page would: the run's last event (a status, a decision)."""
    return ledger.last_event_seq(run_id)


def build(ledger: Ledger, run_id: str) -> RunPage:
    """The review page of run ``run_id`` as things are now."""
    seq = version(ledger, run_id)
    rv = view(ledger, run_id)
    report = reconcile(rv.unit_inputs(), run_id=rv.id, tree=rv.repo_root)
    accept.apply(report, rv.accept_checks())
    rv.choose(report, ledger.current_decisions(
        rv.id, {v.packet_id: v.attempt_id for v in report.verdicts}).values())
    rows = ledger.decisions(rv.id)
    packets = []
    for p in rv.packets:
        v = report.verdict(p.id)
        assert v is not None  # reconcile judges every packet of the run
        decisions = [Decision(r["decision"], r["who"], r["at"], r["note"], r["attempt_id"],
                              r["attempt_id"] == v.attempt_id)
                     for r in rows if r["packet_id"] == p.id]
        packets.append(_packet(rv, p, v, decisions))
    live = rv.run.get("status") == "running" or any(
        p.status in ("pending", "parked", "running") for p in packets)
    return RunPage(rv.id, str(rv.run.get("status")), rv.run.get("base"), rv.repo_root, live,
                   seq, packets, _check(ledger, rv), spent(p.cost for p in packets))


def _packet(rv: RunView, p: Packet, v: Verdict, decisions: list[Decision]) -> PacketPage:
    a = rv.deciding(p.id) or {}
    result_path = v.recovered or v.result_file
    result = _read(result_path, RESULT_LIMIT)
    files = list(v.change.files) if v.change else []
    diffs: dict[str, str] = {}
    if v.change and files and v.change.saved:   # its clone removed by prun clean
        diffs = patch_diffs(v.change.patch or b"", files[:DIFF_FILES], limit=DIFF_LIMIT)
    elif v.change and files:
        try:
            diffs = text_diffs(v.change.clone, v.change.base, files[:DIFF_FILES],
                               limit=DIFF_LIMIT)
        except PrunError:  # the clone went away since reconcile read it: files named only
            diffs = {}
    return PacketPage(
        id=p.id, kind=p.kind, executor=a.get("executor") or p.executor,
        model=a.get("model") or a.get("requested_model") or p.model,
        status=rv.statuses.get(p.id, "pending"), verdict=LINE_WORD[v.verdict],
        reasons=[r.text() for r in v.reasons], attempt_id=v.attempt_id,
        attempts=len(rv.attempts.get(p.id, [])), result_path=result_path, result=result,
        sections=_sections(p, result), files=files, diffs=diffs,
        cost=cost_of(a), decisions=decisions, accept=v.accept, candidate=v.candidate)


def _sections(p: Packet, result: str | None) -> list[Section]:
    """Each required section: found, missing or empty."""
    if not p.requires:
        return []
    wrong = {str(r.detail.get("section")): r.code for r in section_reasons(result or "",
                                                                            p.requires)}
    return [Section(name, "missing" if wrong.get(name) == "missing-section"
                    else "empty" if name in wrong else "found") for name in p.requires]


def _check(ledger: Ledger, rv: RunView) -> CheckLog:
    """The combined check as the latest ``prun integrate`` that ran it left it."""
    command = rv.run.get("check_command")
    for e in reversed(ledger.events(rv.id)):
        if e["kind"] != "integrate" or not e["data"]:
            continue
        data = json.loads(e["data"])
        if data.get("check") is None:
            continue
        path = data.get("check_log")
        return CheckLog(command, bool(data["check"]), path,
                        _read_tail(path) if isinstance(path, str) else None)
    return CheckLog(command, None, None, None)


def _read(path: str | None, limit: int) -> str | None:
    if not path:
        return None
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except OSError:
        return None
    text = data[:limit].decode("utf-8", "replace")
    return text + ("\n\n[cut]\n" if len(data) > limit else "")


def _read_tail(path: str) -> str | None:
    if not os.path.exists(path):
        return None
    return tail_bytes(path, LOG_LIMIT).decode("utf-8", "replace")
