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
                   work), a result recovered from the state dir's tail, a unit still running,
                   a result whose claims what the worker did does not bear out (commands
                   claimed but not run, files claimed but not changed: ``prun.git.claims``)

Scope advances only when every packet is accepted or explicitly re-scoped (``Report.complete``).

The verdict types live in ``prun.git.verdict``, the scope rule in ``prun.git.scope`` and the
result sections in ``prun.git.sections``; this module names them all.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import executors
from .._util.fsutil import atomic_write, read_head, read_json, read_lines, read_text, tail_bytes
from ..attempt.result_index import changed
from ..errors import GitError, PrunError
from . import claims, saved
from .changes import Change, read_change
from .links import reasons as link_reasons
from .scope import plan_scope, scope_reasons
from .sections import section_reasons, sections
from .snapshot import snapshot_changes
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
from .workspace import is_clone, marker

RECOVERED_RESULT = "recovered-result.md"    # written in the state dir by the FALLBACK salvage
TAIL_SALVAGE_BYTES = 200_000
MIN_RESULT_BYTES = 20

# Words by which a result claims work was done (for the no-tool-use hollow success check).
_CLAIMS = re.compile(
    r"\b(ran|tested|tests? pass(?:ed|es)?|verified|implemented|fixed|created|added|"
    r"updated|wrote|written|changed|modified|edited|executed|fetched|measured|refactored|"
    r"installed|removed|deleted|renamed|benchmarked|confirmed)\b", re.IGNORECASE)


# The result and its salvage -----------------------------------------------------------------

@dataclass
class _Read:
    """What reconcile needs of a result, found as its lines are read (never held whole)."""

    text: bool = False            # it holds more than whitespace
    fallback: bool = False        # its first line that is not blank starts with FALLBACK
    claims: bool = False          # it claims work was done (``_CLAIMS``)
    missing: list[Reason] = field(default_factory=list)   # the required sections it lacks

    def see(self, lines: Iterable[str]) -> Iterator[str]:
        """``lines`` passed on, looked at on the way."""
        for line in lines:
            if not self.text and line.strip():
                self.text, self.fallback = True, line.lstrip().startswith("FALLBACK")
            if not self.claims and _CLAIMS.search(line):
                self.claims = True
            yield line


def _read(lines: Iterable[str], required: Sequence[str]) -> _Read:
    read = _Read()
    read.missing = section_reasons(read.see(lines), required)
    return read


def _read_result(path: str | None, required: Sequence[str]) -> _Read | None:
    """The result at ``path``, read a line at a time; None when it is missing, blank,
    unreadable, not a regular file or over the read bound."""
    if not path:
        return None
    try:
        read = _read(read_lines(path), required)
    except OSError:
        return None
    return read if read.text else None


def salvage(state_dir: str, executor: str | None) -> str | None:
    """The FALLBACK salvage: the response (or the assistant text) read back from the state
    dir's ``tail`` with the executor's own stream reader; the raw tail for a command unit.
    Written to ``<state dir>/recovered-result.md``; returns that path, or None."""
    tail = os.path.join(state_dir, "tail")
    raw = tail_bytes(tail, TAIL_SALVAGE_BYTES).decode("utf-8", "replace")
    if not raw.strip():
        return None
    text = None

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
    try:
        atomic_write(path, f"FALLBACK reason=recovered-from-tail source={tail}\n\n{text}\n")
    except OSError:  # a full disk: nothing recovered this time (the tail is still there)
        return None
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


@dataclass
class _Findings:
    """The reasons found against one packet: those that reject it, then those that send it to
    review."""

    rejected: list[Reason] = field(default_factory=list)
    review: list[Reason] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        return REJECTED if self.rejected else NEEDS_REVIEW if self.review else ACCEPTED

    def rejected_for(self, code: str) -> bool:
        return any(r.code == code for r in self.rejected)


def judge(unit: UnitInput, *, with_patch: bool = False,
          snapshots: Mapping[str, list[str]] | None = None) -> Verdict:
    """The verdict for one packet, with every reason found. ``with_patch`` keeps the clone's
    binary patch in ``verdict.change.patch`` (for integration); ``snapshots``: what changed in
    each snapshot, when the caller checked them already."""
    outcome = _outcome(unit.state_dir)
    status = _status(unit, outcome)
    v = Verdict(unit.packet.id, ACCEPTED, attempt_id=unit.attempt_id, status=status,
                rescoped=unit.rescoped)
    # dispatched and over: there is a result to read and, for a code unit, a change
    ended = bool(unit.attempt_id or unit.state_dir) and (status not in LIVE or bool(outcome))
    found = _Findings()
    _status_reasons(unit, status, outcome, found)
    read = _result_reasons(unit, v, status, outcome, ended, found)
    found.rejected += _published_reasons(outcome)
    found.rejected += _snapshot_reasons(unit, snapshots)
    if unit.packet.writes_code and ended:
        v.change = _change_reasons(unit, status, with_patch, found)
    claimed = _claim_reasons(unit, v, status, outcome, found) if read is not None else []
    if (_hollow_no_tool_use(unit, status, outcome, read, v.change)
            and not any(r.code == "no-tool-calls" for r in claimed)):
        found.review.append(Reason("hollow-no-tool-use", {"tool_uses": 0}))
    v.reasons = found.rejected + found.review
    v.verdict = found.verdict
    return v


def _outcome(state_dir: str | None) -> dict[str, Any]:
    """The attempt's ``outcome.json`` (its dispatcher writes it last), {} when there is none."""
    outcome = read_json(os.path.join(state_dir, "outcome.json")) if state_dir else None
    return outcome if isinstance(outcome, dict) else {}


def _status(unit: UnitInput, outcome: Mapping[str, Any]) -> str | None:
    """The attempt's status: the ledger's, or the outcome's when the dispatcher finished and
    the ledger has not caught up."""
    finished: str | None = outcome.get("outcome")
    status = unit.status or finished
    if status in LIVE and finished:
        return finished
    return status


def _status_reasons(unit: UnitInput, status: str | None, outcome: Mapping[str, Any],
                    found: _Findings) -> None:
    """Never dispatched, still running, or ended without success."""
    if unit.attempt_id is None and unit.state_dir is None:
        found.rejected.append(Reason("not-dispatched"))
    elif status in LIVE and not outcome:
        found.review.append(Reason("unfinished", {"status": status}))
    elif status not in SUCCESS:
        found.rejected.append(Reason("not-succeeded", {"status": status or "unknown"}))


def _result_reasons(unit: UnitInput, v: Verdict, status: str | None,
                    outcome: Mapping[str, Any], ended: bool, found: _Findings) -> _Read | None:
    """The result (salvaged from the tail when the attempt ended without one), as read, and
    what is wrong with it: none at all, recovered, a FALLBACK, required sections missing.
    Records the result file and the salvage in ``v``."""
    v.result_file = _result_file(unit, outcome)
    read = _read_result(v.result_file, unit.packet.requires)
    if read is None and ended:
        read = _salvaged(unit, v, outcome, found)
    elif read is not None and read.fallback and status in SUCCESS:
        found.review.append(Reason("fallback-result", {"path": v.result_file}))
    # a failed unit's own FALLBACK says why it failed: it is not held to the required sections
    failed_text = (read is not None and v.recovered is None and read.fallback
                   and status not in SUCCESS)
    if read is not None and not failed_text:
        found.rejected.extend(read.missing)
    return read


def _result_file(unit: UnitInput, outcome: Mapping[str, Any]) -> str | None:
    """Where the result is: as given, else as the outcome or the state dir records it."""
    path: str | None = unit.result_file or outcome.get("result_file")
    if not path and unit.state_dir:
        path = (read_text(os.path.join(unit.state_dir, "result-file")) or "").strip() or None
    return path


def _salvaged(unit: UnitInput, v: Verdict, outcome: Mapping[str, Any],
              found: _Findings) -> _Read | None:
    """The result recovered from the state dir's tail (``v.recovered``; it needs review), or
    None: then there is no result at all."""
    recovered = (salvage(unit.state_dir, unit.executor or outcome.get("executor"))
                 if unit.state_dir else None)
    if not recovered:
        found.rejected.append(Reason("no-result", {"path": v.result_file or "unknown"}))
        return None
    v.recovered = recovered
    found.review.append(Reason("result-recovered", {"path": recovered}))
    return _read_result(recovered, unit.packet.requires) or _read((), unit.packet.requires)


def _change_reasons(unit: UnitInput, status: str | None, with_patch: bool,
                    found: _Findings) -> Change | None:
    """A code unit's change, read from its clone (from the change ``prun clean`` saved when
    the clone is gone), and what is wrong with it: no clone or no base, what its tree holds
    that is never read (special files, links outside it, ...), a clone prun cannot read,
    commits the worker made, a moved HEAD, paths outside its scope, nothing changed. The base
    is the caller's (the ledger's), never the clone's marker."""
    workspace = unit.workspace
    vanished = False
    change = None
    if workspace and is_clone(workspace):
        if not unit.base:
            found.rejected.append(Reason("no-base", {"path": workspace}))
            return None
        try:
            change = read_change(workspace, unit.base, with_patch=with_patch)
        except GitError:   # moved aside or removed since it was found
            vanished = True
    if change is None:
        change = _saved_change(unit, found)
        if change is None:
            if (vanished or status in SUCCESS) and not found.rejected_for("saved-change-broken"):
                found.rejected.append(Reason("no-workspace", {"path": workspace or "none"}))
            return None
    found.rejected += [Reason(f.code, f.facts()) for f in change.findings]
    found.rejected += [Reason("worker-committed", {"commit": c[:12]}) for c in change.commits]
    if change.head_moved:
        found.rejected.append(Reason("head-moved", {"head": change.head[:12]}))
    found.rejected += scope_reasons(unit.packet, change.paths, may_write=unit.may_write,
                                    shared=unit.shared)
    if change.empty and change.complete and status in SUCCESS:
        found.review.append(Reason("hollow-empty-diff"))
    return change


def _saved_change(unit: UnitInput, found: _Findings) -> Change | None:
    """The change ``prun clean`` saved before it removed the clone, None when there is none;
    one that cannot be read back as it was saved (or was read against another base) is a
    ``saved-change-broken`` reason."""
    if not unit.saved or not os.path.lexists(unit.saved):
        return None
    try:
        change = saved.load(unit.saved)
        if unit.base and change.base != unit.base:
            raise saved.Broken(f"it was read against {change.base[:12]}, not the attempt's base")
    except saved.Broken as e:
        found.rejected.append(Reason("saved-change-broken", {"path": unit.saved, "why": e.why}))
        return None
    return change


def _hollow_no_tool_use(unit: UnitInput, status: str | None, outcome: Mapping[str, Any],
                        read: _Read | None, change: Change | None) -> bool:
    """A success that used no tool at all while its result claims work (or its clone
    changed)."""
    if status not in SUCCESS or not _reports_tool_use(unit) or outcome.get("tool_uses") != 0:
        return False
    return bool(read and read.claims) or bool(change and not change.empty)


def _claim_reasons(unit: UnitInput, v: Verdict, status: str | None,
                   outcome: Mapping[str, Any], found: _Findings) -> list[Reason]:
    """A success's result claims checked against its stream and its diff (``prun.git.claims``;
    ``v.claims``): commands claimed under Verification that no run matches, claimed with no
    tool call at all, files claimed changed that the diff does not hold. Only for an
    executor whose stream records tool calls."""
    ex = executors.lookup(unit.executor or outcome.get("executor"))
    path = v.recovered or v.result_file
    if status not in SUCCESS or ex is None or not unit.state_dir or not path:
        return []
    calls = ex().tool_calls(os.path.join(unit.state_dir, "tail"))
    if calls is None:
        return []
    text = read_head(path, claims.CLAIMS_READ).decode("utf-8", "replace")
    changed = v.change.paths if v.change is not None and v.change.complete else None
    checked = claims.check(text, calls, changed, unit.workspace)
    v.claims = checked.as_dict()
    reasons = checked.reasons()
    found.review += reasons
    return reasons


def _snapshot_reasons(unit: UnitInput,
                      snapshots: Mapping[str, list[str]] | None) -> list[Reason]:
    """The read-only snapshots the unit was given that changed since they were made (for a
    snapshot ``prun clean`` removed: what it found there before, saved with the attempt)."""
    reasons: list[Reason] = []
    kept: dict[str, list[str]] | None = None
    for path in given_dirs(unit.state_dir):
        if _is_snapshot(path):
            changes = (snapshots[path] if snapshots is not None and path in snapshots
                       else checked_snapshot(path))
        else:
            if kept is None:
                kept = _saved_checks(unit, reasons)
            changes = kept.get(path, [])
        if changes:
            reasons.append(Reason("snapshot-modified", {"snapshot": path, "first": changes[0],
                                                        "changes": len(changes)}))
    return reasons


def _saved_checks(unit: UnitInput, reasons: list[Reason]) -> dict[str, list[str]]:
    """What ``prun clean`` found in the snapshots it removed, as saved with this read-only
    attempt ({} when nothing was saved); a record that cannot be read adds its reason."""
    if unit.packet.writes_code or not unit.saved or not os.path.lexists(unit.saved):
        return {}
    try:
        return saved.load_snapshots(unit.saved)
    except saved.Broken as e:
        reasons.append(Reason("saved-change-broken", {"path": unit.saved, "why": e.why}))
        return {}


def reconcile(units: Iterable[UnitInput], run_id: str | None = None, *,
              with_patch: bool = False, tree: str | None = None) -> Report:
    """Verdicts for every packet, in packet id order (units are judged concurrently; a
    snapshot the run's read-only units share is checked once). Then the checks across
    packets: a change that writes through a symbolic link another packet's change makes, or
    one ``tree`` (the work tree the changes go to) already holds, is rejected, and so is the
    change that makes that link (``link-through``, ``prun.git.links``)."""
    ordered = sorted(units, key=lambda u: u.packet.id)
    shared = {path for u in ordered for path in _snapshots(u.state_dir)}
    snapshots = {path: checked_snapshot(path) for path in sorted(shared)}
    if len(ordered) < 2:
        verdicts = [judge(u, with_patch=with_patch, snapshots=snapshots) for u in ordered]
    else:
        from concurrent.futures import ThreadPoolExecutor

        # Each verdict is mostly waiting on git; units are independent, so judge them at once.
        with ThreadPoolExecutor(max_workers=min(len(ordered), 2 * (os.cpu_count() or 2),
                                                16)) as ex:
            verdicts = list(ex.map(lambda u: judge(u, with_patch=with_patch,
                                                   snapshots=snapshots), ordered))

    across = link_reasons({v.packet_id: v.change for v in verdicts if v.change}, tree)
    for v in verdicts:
        if v.packet_id in across:
            v.reasons = [*across[v.packet_id], *v.reasons]
            v.verdict = REJECTED
    return Report(verdicts, run_id)


def _published_reasons(outcome: Mapping[str, Any]) -> list[Reason]:
    """A published result that changed after publication is never accepted."""
    ident = outcome.get("result_identity")
    why = changed(ident)
    if not why or not isinstance(ident, dict):  # changed() says why only of a recorded dict
        return []
    return [Reason("result-changed", {"path": ident["path"], "why": why})]


def given_dirs(state_dir: str | None) -> list[str]:
    """The extra directories a unit was given, as its ``unit.json`` names them."""
    unit = read_json(os.path.join(state_dir, "unit.json")) if state_dir else None
    dirs = unit.get("add_dirs") if isinstance(unit, dict) else None
    return [d for d in dirs or () if isinstance(d, str)] if isinstance(dirs, list) else []


def _is_snapshot(path: str) -> bool:
    return (marker(path) or {}).get("kind") == "snapshot"


def _snapshots(state_dir: str | None) -> list[str]:
    """The read-only snapshots a unit was given (its extra directories that are snapshots)."""
    return [d for d in given_dirs(state_dir) if _is_snapshot(d)]


def checked_snapshot(path: str) -> list[str]:
    """What changed in the run's read-only snapshot at ``path`` since it was made."""
    try:
        return snapshot_changes(path)
    except PrunError as e:  # its record is gone or was tampered with: that is a change too
        return [e.message]


__all__ = ["ACCEPTED", "LINE_WORD", "NEEDS_REVIEW", "REJECTED", "Reason", "Report", "UnitInput",
           "Verdict", "checked_snapshot", "given_dirs", "judge", "plan_scope", "reconcile",
           "salvage", "scope_reasons", "section_reasons", "sections"]
