"""Integration: apply the accepted changes to a working tree, check the exact result, never
commit.

Each unit's change is taken from its clone as a binary patch against its base (untracked files
included), and applied in a deterministic order: packets that come ``after`` others follow
them, ties in packet id order. Each patch is checked first (``git apply --check``); one that
does not apply is skipped and its conflicts are named by file and by the unit that touched the
file before it (or ``working-tree`` when the tree itself differs). Rejected and needs-review
changes are applied only when the person names them (``include``, or a recorded ``accept`` or
``include`` decision); a change the person rejected (a ``reject`` decision) is left out whatever
its verdict. Then the plan's combined check runs on the exact result. Nothing is staged or
committed: the person reads ``git diff`` and commits.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._util import gitcmd
from .._util.quoting import quote
from ..errors import UsageError
from ..plan import Packet
from .changes import Change, FileChange, read_change
from .journal import Journal, Previous
from .verdict import ACCEPTED, Report, Verdict

CHECK_TIMEOUT_DEFAULT = 3600.0


@dataclass
class UnitResult:
    packet_id: str
    verdict: str
    action: str                        # applied, already, skipped, conflict, empty
    files: tuple[FileChange, ...] = ()
    conflicts: list[tuple[str, str]] = field(default_factory=list)   # (path, with unit)
    overlaps: list[tuple[str, str]] = field(default_factory=list)    # applied, same file
    patch: str | None = None           # where its patch was saved
    error: str | None = None
    decision: str | None = None        # the person's recorded decision that applied here

    def lines(self) -> list[str]:
        pid = self.packet_id
        decided = f" decision={self.decision}" if self.decision else ""
        if self.action == "skipped":
            return [f"SKIPPED {pid} verdict={self.verdict}{decided}"]
        if self.action == "empty":
            return [f"EMPTY {pid}"]
        if self.action == "conflict":
            if not self.conflicts:
                return [f"CONFLICT {pid} error={_token(self.error or 'patch does not apply')}"]
            return [f"CONFLICT {pid} path={_token(p)} with={w}" for p, w in self.conflicts]
        added = sum(f.added or 0 for f in self.files)
        deleted = sum(f.deleted or 0 for f in self.files)
        out = [f"APPLIED {pid} files={len(self.files)} +{added} -{deleted}"
               + (f" verdict={self.verdict}" if self.verdict != ACCEPTED else "") + decided
               + (" already=yes" if self.action == "already" else "")]
        if self.action == "already":  # by an earlier integrate: its files were named then
            return out
        for f in self.files:
            size = "binary" if f.binary else f"+{f.added or 0} -{f.deleted or 0}"
            frm = f" from={_token(f.old_path)}" if f.old_path else ""
            out.append(f"CHANGED {pid} {f.status} {_token(f.path)} {size}{frm}")
        out += [f"OVERLAP {pid} path={_token(p)} with={w}" for p, w in self.overlaps]
        return out

    def as_dict(self) -> dict[str, Any]:
        return {"packet": self.packet_id, "verdict": self.verdict, "action": self.action,
                "files": [f.as_dict() for f in self.files],
                "conflicts": [{"path": p, "with": w} for p, w in self.conflicts],
                "overlaps": [{"path": p, "with": w} for p, w in self.overlaps],
                "patch": self.patch, "error": self.error, "decision": self.decision}


@dataclass
class CheckResult:
    command: str | list[str]
    exit_code: int | None
    timed_out: bool
    duration_s: float
    log: str

    @property
    def ok(self) -> bool:
        return not self.timed_out and self.exit_code == 0

    def line(self) -> str:
        state = "passed" if self.ok else "failed"
        code = "timeout" if self.timed_out else f"exit={self.exit_code}"
        return f"CHECK {state} {code} took={self.duration_s:.1f}s log={_token(self.log)}"

    def as_dict(self) -> dict[str, Any]:
        return {"command": self.command, "ok": self.ok, "exit_code": self.exit_code,
                "timed_out": self.timed_out, "duration_s": round(self.duration_s, 3),
                "log": self.log}


@dataclass
class Integration:
    target: str
    units: list[UnitResult]
    check: CheckResult | None = None
    base_note: str | None = None
    interrupted_note: str | None = None

    @property
    def conflicts(self) -> int:
        return sum(u.action == "conflict" for u in self.units)

    @property
    def applied(self) -> int:
        return sum(u.action in ("applied", "already") for u in self.units)

    def notes(self) -> list[str]:
        """The lines that come before the units'."""
        return [n for n in (self.interrupted_note, self.base_note) if n]

    def summary(self) -> str:
        check = "none" if self.check is None else "passed" if self.check.ok else "failed"
        skipped = sum(u.action == "skipped" for u in self.units)
        return (f"INTEGRATE target={_token(self.target)} applied={self.applied} "
                f"conflicts={self.conflicts} skipped={skipped} check={check} committed=no")

    def lines(self) -> list[str]:
        out = self.notes()
        for u in self.units:
            out += u.lines()
        if self.check is not None:
            out.append(self.check.line())
        return [*out, self.summary()]

    def as_dict(self) -> dict[str, Any]:
        return {"target": self.target, "applied": self.applied, "conflicts": self.conflicts,
                "units": [u.as_dict() for u in self.units],
                "check": self.check.as_dict() if self.check else None,
                "base_note": self.base_note, "interrupted": self.interrupted_note,
                "committed": False}


def order(packets: Iterable[Packet]) -> list[str]:
    """Packet ids with every packet after the ones it comes ``after``; ties in id order.
    (A cycle, which the plan check refuses, falls back to id order for what remains.)"""
    by_id = {p.id: p for p in packets}
    waiting = {pid: {a for a in p.after if a in by_id} for pid, p in by_id.items()}
    done: list[str] = []
    while waiting:
        ready = sorted(pid for pid, deps in waiting.items() if not deps)
        if not ready:
            ready = sorted(waiting)[:1]
        pid = ready[0]
        done.append(pid)
        del waiting[pid]
        for deps in waiting.values():
            deps.discard(pid)
    return done


def add_worktree(repo_root: str, path: str, base: str) -> str:
    """A separate integration worktree at ``path`` with ``base`` checked out (detached)."""
    path = os.path.abspath(path)
    if os.path.exists(path) and os.listdir(path):
        raise UsageError(f"integration worktree path is not empty: {path}",
                         hint="give a fresh path")
    gitcmd.git(["worktree", "add", "--quiet", "--detach", path, base], repo_root)
    return path


def integrate(report: Report, packets: Sequence[Packet], target: str, *,
              include: Iterable[str] = (), decisions: Mapping[str, str] | None = None,
              check: str | Sequence[str] | None = None,
              check_timeout: float = CHECK_TIMEOUT_DEFAULT, env: Mapping[str, str] | None = None,
              patch_dir: str | None = None, allow_dirty: bool = False,
              journal: Journal | None = None,
              on_notes: Callable[[list[str]], None] | None = None,
              on_unit: Callable[[UnitResult], None] | None = None) -> Integration:
    """Apply the accepted changes of ``report`` (and those of the packets named in
    ``include``) to the work tree ``target``, then run ``check`` there. ``decisions`` are
    the person's (packet id -> accept, reject or include): accept and include apply a change as
    ``include`` does, reject leaves it out as a rejected verdict is; a packet named in
    ``include`` is applied whatever its decision.

    With a ``journal``, each patch is recorded before and after it is applied, and what an
    earlier integrate into the same target applied is not applied again (it is reported
    ``already``, when the tree still holds it); one it may have applied in part is named and
    not touched. ``on_notes`` hears the lines that come first, ``on_unit`` each unit's result
    as it is known (to print it as it happens)."""
    target = os.path.abspath(target)
    if gitcmd.toplevel(target) is None:
        raise UsageError(f"not a git work tree: {target}", hint="integrate into the repository")
    include = set(include)
    unknown = include - {v.packet_id for v in report.verdicts}
    if unknown:
        raise UsageError(f"no such packet in this run: {', '.join(sorted(unknown))}",
                         hint="name packets by the ids reconcile printed")
    decisions = {pid: d for pid, d in (decisions or {}).items() if pid not in include}
    rejected = {pid for pid, d in decisions.items() if d == "reject"}
    include |= {pid for pid, d in decisions.items() if d in ("accept", "include")}
    verdicts = {v.packet_id: v for v in report.verdicts}
    ids = [pid for pid in order(packets) if pid in verdicts]
    ids += sorted(set(verdicts) - set(ids))
    touched: dict[str, str] = {}       # path -> the unit whose applied patch touched it
    results: list[UnitResult] = []
    head = gitcmd.out(["rev-parse", "HEAD"], target, check=False)
    bases = {v.change.base for v in report.verdicts if v.change}
    note = None
    if bases and head not in bases:
        note = f"BASE target-head={head[:12]} unit-base={','.join(sorted(b[:12] for b in bases))}"
    changes: dict[str, Change] = {}
    for pid in ids:
        v = verdicts[pid]
        if (v.verdict == ACCEPTED or pid in include) and pid not in rejected \
                and v.change is not None:
            changes[pid] = (v.change if v.change.patch is not None
                            else read_change(v.change.clone, v.change.base, with_patch=True))
    prev = journal.previous(target) if journal else Previous()
    held = _held(prev, changes, target)
    every_path = sorted({p for pid, c in changes.items() if pid not in held for p in c.paths})
    dirty = set() if allow_dirty else set(_dirty(target, every_path))
    interrupted = _interrupted_note(prev, held) if prev.interrupted else None
    if on_notes:
        on_notes([n for n in (interrupted, note) if n])
    if journal:
        journal.write("begin", target)
    for pid in ids:
        v, change = verdicts[pid], changes.get(pid)
        if pid in held:
            res = UnitResult(pid, v.verdict, held[pid], change.files if change else ())
            if held[pid] == "conflict":
                res.error = "may be half-applied by an interrupted prun integrate"
                res.conflicts = [(p, "interrupted-integrate") for p in
                                 (change.paths if change else [])]
            else:
                for p in (change.paths if change else []):
                    touched[p] = pid
        else:
            res = _one(v, change, target, include - rejected, touched, patch_dir, dirty,
                       journal, rejected)
        res.decision = decisions.get(pid)
        results.append(res)
        if on_unit:
            on_unit(res)
    ran = None
    if check:
        from .commands import run_bounded

        fd, log = tempfile.mkstemp(prefix="prun-check-", suffix=".log",
                                   dir=patch_dir if patch_dir else None)
        os.close(fd)
        r = run_bounded(check, target, env, check_timeout, log)
        ran = CheckResult(check if isinstance(check, str) else list(check), r.exit_code,
                          r.timed_out, r.duration_s, r.log)
    if journal:
        journal.write("end", target)
    return Integration(target, results, ran, note, interrupted)


def _held(prev: Previous, changes: Mapping[str, Change], target: str) -> dict[str, str]:
    """Of the changes an earlier integrate applied here (or was applying when it was killed),
    those the tree holds (``already``) and the one it holds in part (``conflict``). A change
    the tree no longer holds (the person reverted it) is applied again."""
    held: dict[str, str] = {}
    for pid in [*prev.applied, *([prev.partial] if prev.partial else [])]:
        change = changes.get(pid)
        if change is None or change.empty:
            continue
        patch = change.patch or b""
        back = gitcmd.git(["apply", "--check", "--reverse", "--binary", "-"], target,
                          input=patch, check=False)
        if back.returncode == 0:
            held[pid] = "already"
            continue
        forth = gitcmd.git(["apply", "--check", "--binary", "-"], target, input=patch,
                           check=False)
        if forth.returncode != 0 and pid == prev.partial:
            held[pid] = "conflict"
    return held


def _interrupted_note(prev: Previous, held: Mapping[str, str]) -> str:
    applied = [p for p in prev.applied if held.get(p) == "already"]
    partial = prev.partial if prev.partial and held.get(prev.partial) == "conflict" else None
    return (f"INTERRUPTED applied={','.join(applied) or 'none'} "
            f"partial={partial or 'none'}")


def _one(v: Verdict, change: Change | None, target: str, include: set[str],
         touched: dict[str, str], patch_dir: str | None, dirty: set[str],
         journal: Journal | None = None, rejected: set[str] | None = None) -> UnitResult:
    pid = v.packet_id
    if (v.verdict != ACCEPTED and pid not in include) or pid in (rejected or ()):
        return UnitResult(pid, v.verdict, "skipped")
    if change is None or change.empty:
        return UnitResult(pid, v.verdict, "empty")
    res = UnitResult(pid, v.verdict, "applied", change.files)
    patch = change.patch or b""
    if patch_dir:
        from .._util.fsutil import atomic_write

        os.makedirs(patch_dir, exist_ok=True)
        res.patch = os.path.join(patch_dir, f"{pid}.patch")
        atomic_write(res.patch, patch)
    local = sorted(dirty & set(change.paths))
    if local:
        res.action = "conflict"
        res.error = "uncommitted changes in the target tree"
        res.conflicts = [(p, "working-tree") for p in local]
        return res
    checked = gitcmd.git(["apply", "--check", "--binary", "-"], target, input=patch,
                         check=False)
    if checked.returncode != 0:
        res.action = "conflict"
        res.error = checked.stderr.strip().splitlines()[-1] if checked.stderr.strip() else None
        paths = _failed_paths(checked.stderr) or change.paths
        res.conflicts = [(p, touched.get(p, "working-tree")) for p in paths]
        return res
    if journal:
        journal.write("applying", target, pid)
    gitcmd.git(["apply", "--binary", "-"], target, input=patch)
    if journal:
        journal.write("applied", target, pid)
    for p in change.paths:
        if p in touched:
            res.overlaps.append((p, touched[p]))
        touched[p] = pid
    return res


def _dirty(target: str, paths: Sequence[str]) -> list[str]:
    """Paths among ``paths`` with uncommitted changes (or untracked) in the target tree."""
    if not paths:
        return []
    out = gitcmd.git(["status", "--porcelain", "-z", "--untracked-files=all"],
                     target).stdout.split("\0")
    found = set()
    i = 0
    while i < len(out) and out[i]:
        entry = out[i]
        found.add(entry[3:])
        i += 2 if entry[0] in "RC" else 1
    return sorted(found & set(paths))


def _failed_paths(stderr: str) -> list[str]:
    """The paths ``git apply --check`` complained about."""
    import re

    found = []
    for pattern in (r"^error: patch failed: (.+):\d+$", r"^error: (.+): already exists in",
                    r"^error: (.+): does not exist in", r"^error: (.+): patch does not apply$",
                    r"^error: (.+): does not match index$"):
        for m in re.finditer(pattern, stderr, re.MULTILINE):
            if m.group(1) not in found:
                found.append(m.group(1))
    return found


def _token(value: str) -> str:
    """A value as one token: quoted as ``prun._util.quoting`` says when it is not plain."""
    return quote(value)
