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
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from .._util.fsutil import atomic_write, read_json, read_text, tail_bytes
from ..plan import Packet, Plan, globs
from ..plan.globs import normalize, resolve_folder
from .changes import Change, read_change

ACCEPTED = "accepted"
REJECTED = "rejected"
NEEDS_REVIEW = "needs-review"
LINE_WORD = {ACCEPTED: "ACCEPTED", REJECTED: "REJECTED", NEEDS_REVIEW: "REVIEW"}

RECOVERED_RESULT = "recovered-result.md"    # written in the state dir by the FALLBACK salvage
TAIL_SALVAGE_BYTES = 200_000
MIN_RESULT_BYTES = 20

# Words by which a result claims work was done (for the no-tool-use hollow success check).
_CLAIMS = re.compile(
    r"\b(ran|tested|tests? pass(?:ed|es)?|verified|implemented|fixed|created|added|"
    r"updated|wrote|written|changed|modified|edited|executed|fetched|measured|refactored|"
    r"installed|removed|deleted|renamed|benchmarked|confirmed)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Reason:
    """One reason for a verdict: a stable slug and the facts behind it."""

    code: str
    detail: Mapping[str, object] = field(default_factory=dict)

    def text(self) -> str:
        return " ".join([f"reason={self.code}", *(f"{k}={_word(v)}" for k, v in
                                                   self.detail.items())])

    def as_dict(self) -> dict:
        return {"code": self.code, **self.detail}


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

    def lines(self) -> list[str]:
        word = LINE_WORD[self.verdict]
        if not self.reasons:
            files = len(self.change.files) if self.change else 0
            extra = f" files={files}" if self.change else ""
            return [f"{word} {self.packet_id}{extra}"]
        return [f"{word} {self.packet_id} {r.text()}" for r in self.reasons]

    def as_dict(self) -> dict:
        return {"packet": self.packet_id, "verdict": self.verdict,
                "reasons": [r.as_dict() for r in self.reasons], "attempt": self.attempt_id,
                "status": self.status, "result_file": self.result_file,
                "recovered": self.recovered, "rescoped": self.rescoped,
                "change": self.change.as_dict() if self.change else None}


@dataclass
class Report:
    verdicts: list[Verdict]
    run_id: str | None = None

    def count(self, verdict: str) -> int:
        return sum(v.verdict == verdict for v in self.verdicts)

    @property
    def complete(self) -> bool:
        """Every packet accepted or explicitly re-scoped: the required scope may advance."""
        return all(v.verdict == ACCEPTED or v.rescoped for v in self.verdicts)

    def summary(self) -> str:
        run = f" run={self.run_id}" if self.run_id else ""
        return (f"RECONCILE{run} packets={len(self.verdicts)} accepted={self.count(ACCEPTED)} "
                f"rejected={self.count(REJECTED)} review={self.count(NEEDS_REVIEW)} "
                f"complete={'yes' if self.complete else 'no'}")

    def lines(self) -> list[str]:
        return [line for v in self.verdicts for line in v.lines()] + [self.summary()]

    def as_dict(self) -> dict:
        return {"run": self.run_id, "complete": self.complete,
                "counts": {k: self.count(k) for k in (ACCEPTED, REJECTED, NEEDS_REVIEW)},
                "packets": [v.as_dict() for v in self.verdicts]}

    def verdict(self, packet_id: str) -> Verdict | None:
        return next((v for v in self.verdicts if v.packet_id == packet_id), None)


# Scope --------------------------------------------------------------------------------------

def plan_scope(plan: Plan, root: str | None = None) -> tuple[dict[str, tuple[str, ...]],
                                                            dict[str, str]]:
    """The scope of every packet of ``plan`` as ``prun check`` reads it: what each may change
    (``Plan.may_write``), and the plan-wide shared paths with their integration owner (the
    first declaration of a path wins); a dotted name that is a folder of ``root`` is the whole
    folder."""
    shared: dict[str, str] = {}
    for p in plan.packets:
        for path, owner in p.shared.items():
            shared.setdefault(normalize(resolve_folder(path, root)), owner)
    may_write = {p.id: tuple(resolve_folder(g, root) for g in plan.may_write(p))
                 for p in plan.packets}
    return may_write, shared


def scope_reasons(packet: Packet, paths: Iterable[str], *,
                  may_write: Iterable[str] | None = None,
                  shared: Mapping[str, str] | None = None) -> list[Reason]:
    """Scope leaks (paths outside the globs ``packet`` may write) and shared files touched by
    a packet that is not their integration owner. Globs are ``prun.plan.globs`` globs, as
    ``prun check`` reads them. ``shared`` maps every shared path of the plan to its integration
    owner (default: the packet's own ``shared``); ``may_write`` defaults to the packet's
    ``owns``, ``generates`` and the paths of ``shared`` it is the integration owner of."""
    shared = dict(packet.shared if shared is None else shared)
    if may_write is None:
        mine = (k for k, owner in shared.items() if owner == packet.id)
        may_write = (*packet.owns, *packet.generates, *mine)
    allowed = tuple(may_write)
    reasons = []
    for path in sorted(set(paths)):
        owner = next((o for key, o in shared.items() if globs.matches(key, path)), None)
        if owner is not None:
            if owner != packet.id:
                reasons.append(Reason("shared-not-owner", {"path": path, "owner": owner}))
        elif not any(globs.matches(g, path) for g in allowed):
            reasons.append(Reason("scope-leak", {"path": path}))
    return reasons


# Result sections ----------------------------------------------------------------------------

_ATX = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_SETEXT = re.compile(r"^\s{0,3}(=+|-+)\s*$")


def sections(text: str) -> dict[str, str]:
    """Markdown headings (ATX ``## Title`` or setext; lower-cased, trailing ':' dropped) ->
    the text under each, subsections included, up to the next heading of the same or a higher
    level. Headings inside code fences do not count."""
    lines = text.splitlines()
    heads: list[tuple[int, int, int, str]] = []   # (first line, body start, level, key)
    fence = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
        elif not fence:
            m = _ATX.match(line)
            if m:
                heads.append((i, i + 1, len(m.group(1)), _heading_key(m.group(2))))
            elif line.strip() and i + 1 < len(lines) and _SETEXT.match(lines[i + 1]):
                level = 1 if lines[i + 1].strip().startswith("=") else 2
                heads.append((i, i + 2, level, _heading_key(line)))
                i += 1
        i += 1
    found: dict[str, str] = {}
    for n, (_, start, level, key) in enumerate(heads):
        end = next((h[0] for h in heads[n + 1:] if h[2] <= level), len(lines))
        found.setdefault(key, "\n".join(lines[start:end]).strip())
    return found


def _heading_key(title: str) -> str:
    title = re.sub(r"[*_`]", "", title).strip().rstrip(":").strip()
    return re.sub(r"\s+", " ", title).lower()


def section_reasons(text: str, required: Sequence[str]) -> list[Reason]:
    """Required sections missing or empty in the result text (a heading starting with the
    required name counts, case-insensitively: "Verification (commands run)")."""
    found = sections(text)
    reasons = []
    for name in required:
        key = _heading_key(name)
        body = next((b for h, b in found.items() if h == key or h.startswith(key + " ")
                     or h.startswith(key + ":") or h.startswith(key + " (")), None)
        if body is None:
            reasons.append(Reason("missing-section", {"section": name}))
        elif not body:
            reasons.append(Reason("empty-section", {"section": name}))
    return reasons


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


def _word(value: object) -> str:
    """A value as one whitespace-free token (paths with spaces are quoted)."""
    s = str(value)
    if not s or any(c.isspace() for c in s) or '"' in s:
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return s
