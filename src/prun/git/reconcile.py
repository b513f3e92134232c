"""Reconciliation: judge every packet's outcome before anything is integrated.

The library takes explicit inputs (a ``Packet`` and what its attempt left behind: state dir,
workspace, base, status, result file), so it runs without a ledger; ``prun reconcile`` feeds it
from the ledger. For each packet it returns a ``Verdict``:

    accepted       a success whose change stays inside its owned paths, with every required
                   result section present
    rejected       with every reason: the unit did not succeed, scope leak (file by file), a
                   shared file touched by a unit that is not its integration owner, commits the
                   worker made, required sections missing, no result at all
    needs-review   nothing wrong for certain, but not safe to accept unseen: a hollow success
                   (a code unit with an empty diff; no tool use at all while the result claims
                   work), a result recovered from the state dir's tail, a unit still running

Scope advances only when every packet is accepted or explicitly re-scoped (``Report.complete``).

The verdict types live in ``prun.git.verdict``, the scope rule in ``prun.git.scope`` and the
result sections in ``prun.git.sections``; this module names them all.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

from .._util.fsutil import atomic_write, read_json, read_text, tail_bytes
from .changes import read_change
from .scope import plan_scope, scope_reasons
from .sections import section_reasons, sections
from .verdict import (
    ACCEPTED,
    LINE_WORD,
    NEEDS_REVIEW,
    REJECTED,
    Reason,
    Report,
    UnitInput,
    Verdict,
)

RECOVERED_RESULT = "recovered-result.md"    # written in the state dir by the FALLBACK salvage
TAIL_SALVAGE_BYTES = 200_000
MIN_RESULT_BYTES = 20

# Words by which a result claims work was done (for the no-tool-use hollow success check).
_CLAIMS = re.compile(
    r"\b(ran|tested|tests? pass(?:ed|es)?|verified|implemented|fixed|created|added|"
    r"updated|wrote|written|changed|modified|edited|executed|fetched|measured|refactored|"
    r"installed|removed|deleted|renamed|benchmarked|confirmed)\b", re.IGNORECASE)


# The result and its salvage -----------------------------------------------------------------

def _result_text(path: str | None) -> str | None:
    if not path:
        return None
    text = read_text(path)
    return text if text and text.strip() else None


def salvage(state_dir: str, executor: str | None) -> str | None:
    """The FALLBACK salvage: the response (or the assistant text) read back from the state
    dir's ``tail`` with the executor's own stream reader; the raw tail for a command unit.
    Written to ``<state dir>/recovered-result.md``; returns that path, or None."""
    tail = os.path.join(state_dir, "tail")
    raw = tail_bytes(tail, TAIL_SALVAGE_BYTES).decode("utf-8", "replace")
    if not raw.strip():
        return None
    text = None
    from .. import executors

    ex = executors.lookup(executor)
    if ex is not None and ex.event_stream:
        try:
            reader = ex().reader()
            for line in raw.splitlines():
                reader.feed(line)
            stream = reader.finish(tail)
            text = (stream.response or "").strip() or (stream.text or "").strip() or None
        except Exception:  # a broken stream: nothing to salvage
            text = None
    elif executor and ex is None:  # an executor no longer installed: its stream is unreadable
        text = None
    else:
        text = raw.strip()
    if not text or len(text.encode()) < MIN_RESULT_BYTES:
        return None
    path = os.path.join(state_dir, RECOVERED_RESULT)
    atomic_write(path, f"FALLBACK reason=recovered-from-tail source={tail}\n\n{text}\n")
    return path


def _reports_tool_use(unit: UnitInput) -> bool:
    if unit.reports_tool_use is not None:
        return unit.reports_tool_use
    if not unit.executor:
        return False
    try:
        from .. import executors

        return bool(executors.get(unit.executor).reports_tool_use)
    except Exception:
        return False


# One packet ---------------------------------------------------------------------------------

SUCCESS = ("succeeded",)
LIVE = ("pending", "parked", "dispatched", "running", "cancel-requested")


def judge(unit: UnitInput, *, with_patch: bool = False,
          snapshots: Mapping[str, list[str]] | None = None) -> Verdict:
    """The verdict for one packet, with every reason found. ``with_patch`` keeps the clone's
    binary patch in ``verdict.change.patch`` (for integration); ``snapshots``: what changed in
    each snapshot, when the caller checked them already."""
    p = unit.packet
    v = Verdict(p.id, ACCEPTED, attempt_id=unit.attempt_id, status=unit.status,
                rescoped=unit.rescoped)
    rejected: list[Reason] = []
    review: list[Reason] = []
    outcome = read_json(os.path.join(unit.state_dir, "outcome.json")) if unit.state_dir else None
    outcome = outcome if isinstance(outcome, dict) else {}
    status = unit.status or outcome.get("outcome")
    if status in LIVE and outcome.get("outcome"):
        status = outcome["outcome"]     # the dispatcher finished; the ledger has not caught up
    v.status = status
    if unit.attempt_id is None and unit.state_dir is None:
        rejected.append(Reason("not-dispatched"))
    elif status in LIVE and not outcome:
        review.append(Reason("unfinished", {"status": status}))
    elif status not in SUCCESS:
        rejected.append(Reason("not-succeeded", {"status": status or "unknown"}))

    # the result, or what can be salvaged of it
    result_file = unit.result_file or outcome.get("result_file")
    if not result_file and unit.state_dir:
        result_file = read_text(os.path.join(unit.state_dir, "result-file"), "").strip() or None
    v.result_file = result_file
    text = _result_text(result_file)
    finished = status not in LIVE or bool(outcome)
    if text is None and finished and (unit.attempt_id or unit.state_dir):
        recovered = salvage(unit.state_dir, unit.executor or outcome.get("executor")) \
            if unit.state_dir else None
        if recovered:
            v.recovered = recovered
            text = read_text(recovered, "")
            review.append(Reason("result-recovered", {"path": recovered}))
        else:
            rejected.append(Reason("no-result", {"path": result_file or "unknown"}))
    elif text is not None and text.lstrip().startswith("FALLBACK") and status in SUCCESS:
        review.append(Reason("fallback-result", {"path": result_file}))
    failed_text = bool(text) and v.recovered is None and text.lstrip().startswith("FALLBACK") \
        and status not in SUCCESS
    if text is not None and p.requires and not failed_text:
        rejected.extend(section_reasons(text, p.requires))
    rejected += _published_reasons(outcome)
    for path in _snapshots(unit.state_dir):
        changes = (snapshots.get(path) if snapshots is not None and path in snapshots
                   else _snapshot_changes(path))
        if changes:
            rejected.append(Reason("snapshot-modified", {"snapshot": path, "first": changes[0],
                                                         "changes": len(changes)}))

    # the change of a code-writing unit
    if p.writes_code and finished and (unit.attempt_id or unit.state_dir):
        if not unit.workspace or not os.path.isdir(os.path.join(unit.workspace, ".git")):
            if status in SUCCESS:
                rejected.append(Reason("no-workspace", {"path": unit.workspace or "none"}))
        else:
            from .workspace import clone_base

            base = unit.base or clone_base(unit.workspace)
            if not base:
                rejected.append(Reason("no-base", {"path": unit.workspace}))
            else:
                change = read_change(unit.workspace, base, with_patch=with_patch)
                v.change = change
                for c in change.commits:
                    rejected.append(Reason("worker-committed", {"commit": c[:12]}))
                if change.head_moved:
                    rejected.append(Reason("head-moved", {"head": change.head[:12]}))
                rejected.extend(scope_reasons(p, change.paths, may_write=unit.may_write,
                                              shared=unit.shared))
                if change.empty and status in SUCCESS:
                    review.append(Reason("hollow-empty-diff"))

    # a success that used no tool at all while claiming work
    if status in SUCCESS and _reports_tool_use(unit) and outcome.get("tool_uses", None) == 0:
        claims = bool(text and _CLAIMS.search(text)) or bool(v.change and not v.change.empty)
        if claims:
            review.append(Reason("hollow-no-tool-use", {"tool_uses": 0}))

    v.reasons = rejected + review
    v.verdict = REJECTED if rejected else NEEDS_REVIEW if review else ACCEPTED
    return v


def reconcile(units: Iterable[UnitInput], run_id: str | None = None, *,
              with_patch: bool = False) -> Report:
    """Verdicts for every packet, in packet id order (units are judged concurrently; a
    snapshot the run's read-only units share is checked once)."""
    ordered = sorted(units, key=lambda u: u.packet.id)
    shared = {path for u in ordered for path in _snapshots(u.state_dir)}
    snapshots = {path: _snapshot_changes(path) for path in sorted(shared)}
    if len(ordered) < 2:
        return Report([judge(u, with_patch=with_patch, snapshots=snapshots) for u in ordered],
                      run_id)
    from concurrent.futures import ThreadPoolExecutor

    # Each verdict is mostly waiting on git; units are independent, so judge them at once.
    with ThreadPoolExecutor(max_workers=min(len(ordered), 2 * (os.cpu_count() or 2), 16)) as ex:
        verdicts = list(ex.map(lambda u: judge(u, with_patch=with_patch, snapshots=snapshots),
                               ordered))
    return Report(verdicts, run_id)


def _published_reasons(outcome: Mapping) -> list[Reason]:
    """A published result that changed after publication is never accepted."""
    from ..attempt.published import changed

    ident = outcome.get("result_identity")
    why = changed(ident)
    return [Reason("result-changed", {"path": ident["path"], "why": why})] if why else []


def _snapshots(state_dir: str | None) -> list[str]:
    """The read-only snapshots a unit was given (its extra directories that are snapshots)."""
    if not state_dir:
        return []
    unit = read_json(os.path.join(state_dir, "unit.json"))
    dirs = unit.get("add_dirs") if isinstance(unit, dict) else None
    from .workspace import marker

    return [d for d in dirs or () if isinstance(d, str)
            and (marker(d) or {}).get("kind") == "snapshot"]


def _snapshot_changes(path: str) -> list[str]:
    from ..errors import PrunError
    from .snapshot import snapshot_changes

    try:
        return snapshot_changes(path)
    except PrunError as e:  # its record is gone or was tampered with: that is a change too
        return [e.message]


__all__ = ["ACCEPTED", "LINE_WORD", "NEEDS_REVIEW", "REJECTED", "Reason", "Report", "UnitInput",
           "Verdict", "judge", "plan_scope", "reconcile", "salvage", "scope_reasons",
           "section_reasons", "sections"]
