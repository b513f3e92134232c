"""Integration: apply the accepted changes to a working tree, check the exact result, never
commit.

Each unit's change is taken from its clone as a binary patch against its base (untracked files
included; once ``prun clean`` removed the clone, the patch it saved, ``prun.git.saved``), and
applied in a deterministic order: packets that come ``after`` others follow
them, ties in packet id order. Each patch is checked first (``git apply --check``); one that
does not apply is skipped and its conflicts are named by file and by the unit that touched the
file before it (or ``working-tree`` when the tree itself differs). Rejected and needs-review
changes are applied only when the person names them (``include``, or a recorded ``accept`` or
``include`` decision); a change the person rejected (a ``reject`` decision) is left out whatever
its verdict. Then the plan's combined check runs on the exact result. Nothing is staged or
committed: the person reads ``git diff`` and commits.

A patch never writes through a symbolic link: before each one is applied, each of its paths is
checked against the target as it is then (links earlier patches made included); one that would
is refused whole, the link named (``prun.git.links``). And a patch is applied whole or not at
all: the pre-image of every path it touches is saved first (``prun.git.backup``), and put back
at once when the apply fails (a full disk, an I/O error), or by the next integrate when this one
was killed in the middle of it.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._util import gitcmd
from .._util.quoting import quote
from ..errors import PrunError, UsageError
from ..plan import Packet
from . import backup, culprit, links
from .changes import Change, FileChange, read_change
from .commands import run_bounded
from .culprit import Bisection
from .journal import Journal, Previous
from .patchfile import blocks
from .verdict import ACCEPTED, Report, Verdict

CHECK_TIMEOUT_DEFAULT = 3600.0
NOT_TRIED = "not-tried"              # a unit left alone after an earlier one failed to apply
CHECK_CULPRIT = "check-culprit"      # a unit taken out again: it made the combined check fail


@dataclass
class UnitResult:
    packet_id: str
    verdict: str
    action: str                        # applied, already, skipped, conflict, empty, failed
    files: tuple[FileChange, ...] = ()
    conflicts: list[tuple[str, str]] = field(default_factory=list)   # (path, with unit)
    overlaps: list[tuple[str, str]] = field(default_factory=list)    # applied, same file
    patch: str | None = None           # where its patch was saved
    error: str | None = None
    decision: str | None = None        # the person's recorded decision that applied here
    links: dict[str, str] = field(default_factory=dict)   # conflicting path -> the link above
    reason: str | None = None          # failed: disk-full, io-error, write-failed, not-tried
    tree: str | None = None            # failed: unchanged, restored, partial (rerun restores)
    after: str | None = None           # not-tried: the unit whose failure stopped integration
    held: str | None = None            # applied, then taken out again: check-culprit

    def lines(self) -> list[str]:
        pid = self.packet_id
        decided = f" decision={self.decision}" if self.decision else ""
        if self.action == "skipped":
            return [f"SKIPPED {pid} verdict={self.verdict}{decided}"]
        if self.action == "empty":
            return [f"EMPTY {pid}"]
        if self.action == "failed":
            if self.reason == NOT_TRIED:
                return [f"FAILED {pid} reason={NOT_TRIED} after={self.after}"]
            return [f"FAILED {pid} reason={self.reason} tree={self.tree}"]
        if self.action == "conflict":
            if not self.conflicts:
                return [f"CONFLICT {pid} error={_token(self.error or 'patch does not apply')}"]
            return [f"CONFLICT {pid} path={_token(p)} with={w}"
                    + (f" link={_token(self.links[p])}" if p in self.links else "")
                    for p, w in self.conflicts]
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
                "conflicts": [{"path": p, "with": w,
                               **({"link": self.links[p]} if p in self.links else {})}
                              for p, w in self.conflicts],
                "overlaps": [{"path": p, "with": w} for p, w in self.overlaps],
                "patch": self.patch, "error": self.error, "decision": self.decision,
                "reason": self.reason, "tree": self.tree, "after": self.after,
                "held": self.held}


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
    bisection: Bisection | None = None     # the culprits of a failed check
    recheck: CheckResult | None = None     # the check again, once the culprits are held

    @property
    def conflicts(self) -> int:
        return sum(u.action == "conflict" for u in self.units)

    @property
    def applied(self) -> int:
        return sum(u.action in ("applied", "already") and not u.held for u in self.units)

    @property
    def held(self) -> list[str]:
        return [u.packet_id for u in self.units if u.held]

    @property
    def failed(self) -> int:
        return sum(u.action == "failed" for u in self.units)

    def notes(self) -> list[str]:
        """The lines that come before the units'."""
        return [n for n in (self.interrupted_note, self.base_note) if n]

    def summary(self) -> str:
        check = "none" if self.check is None else "passed" if self.check.ok else "failed"
        skipped = sum(u.action == "skipped" for u in self.units)
        failed = f" failed={self.failed}" if self.failed else ""
        held = f" held={len(self.held)}" if self.held else ""
        recheck = ("" if self.recheck is None else
                   f" recheck={'passed' if self.recheck.ok else 'failed'}")
        return (f"INTEGRATE target={_token(self.target)} applied={self.applied} "
                f"conflicts={self.conflicts} skipped={skipped}{failed}{held} check={check}"
                f"{recheck} committed=no")

    def closing(self) -> list[str]:
        """The lines that come after the units': the check, its culprits, what was held and
        the check again, the summary."""
        out = [self.check.line()] if self.check is not None else []
        if self.bisection is not None:
            out += [c.line() for c in self.bisection.culprits] + [self.bisection.line()]
        out += [f"HELD {_token(pid)} reason={CHECK_CULPRIT}" for pid in self.held]
        if self.recheck is not None:
            out.append(self.recheck.line())
        return [*out, self.summary()]

    def lines(self) -> list[str]:
        out = self.notes()
        for u in self.units:
            out += u.lines()
        return out + self.closing()

    def as_dict(self) -> dict[str, Any]:
        return {"target": self.target, "applied": self.applied, "conflicts": self.conflicts,
                "failed": self.failed, "units": [u.as_dict() for u in self.units],
                "check": self.check.as_dict() if self.check else None,
                "base_note": self.base_note, "interrupted": self.interrupted_note,
                "bisection": self.bisection.as_dict() if self.bisection else None,
                "held": self.held,
                "recheck": self.recheck.as_dict() if self.recheck else None,
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
              journal: Journal | None = None, culprits: bool = True,
              culprit_dir: str | None = None, parallel: int | None = None,
              on_notes: Callable[[list[str]], None] | None = None,
              on_unit: Callable[[UnitResult], None] | None = None) -> Integration:
    """Apply the accepted changes of ``report`` (and those of the packets named in
    ``include``) to the work tree ``target``, then run ``check`` there. ``decisions`` are
    the person's (packet id -> accept, reject or include): accept and include apply a change as
    ``include`` does, reject leaves it out as a rejected verdict is; a packet named in
    ``include`` is applied whatever its decision.

    With a ``journal``, each patch is recorded before and after it is applied, and what an
    earlier integrate into the same target applied is not applied again (it is reported
    ``already``, when the tree still holds it); the one it was applying when it was killed is
    put back as it was before (its saved pre-images) and applied again. A patch that fails to
    apply (a full disk) is put back at once, and the units after it are not tried, nor the
    check run. ``on_notes`` hears the lines that come first, ``on_unit`` each unit's result as
    it is known (to print it as it happens).

    When the check fails (and ``culprits``), the units that make it fail are found by
    bisection (``prun.git.culprit``: at most ``parallel`` check runs at once, by default one
    per core; their failing outputs kept in ``culprit_dir``) and taken out of the tree again,
    each whole or not at all and journaled as it is applied (``holding``, ``held``); then the
    check runs again on what is left."""
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
    restored = _restore_interrupted(prev, target, journal) if journal else None
    held = _held(prev, changes, target)
    every_path = sorted({p for pid, c in changes.items() if pid not in held for p in c.paths})
    into = _Target(target, set() if allow_dirty else set(_dirty(target, every_path)), journal,
                   patch_dir)
    interrupted = (_interrupted_note(prev, held, restored)
                   if prev.interrupted or restored else None)
    if on_notes:
        on_notes([n for n in (interrupted, note) if n])
    if journal:
        into.integrated = journal.integrated()
        _begin(journal, target)
    before = culprit.before(target) if check and culprits else None
    stopped: str | None = None        # the unit whose patch failed to apply
    ran = None
    try:
        for pid in ids:
            v, change = verdicts[pid], changes.get(pid)
            if pid in held:
                res = _held_result(v, held[pid], change, into)
            elif stopped and pid in changes and not changes[pid].empty:
                res = UnitResult(pid, v.verdict, "failed", reason=NOT_TRIED, after=stopped)
            else:
                res = _one(v, change, into, include - rejected, rejected)
                if res.action == "failed":
                    stopped = pid
            res.decision = decisions.get(pid)
            results.append(res)
            if on_unit:
                on_unit(res)
        ran = _check(check, target, env, check_timeout, patch_dir) if check and not stopped \
            else None
        bisection, recheck = _culprits(before, ran, results, changes, verdicts, into, env,
                                       check_timeout, culprit_dir, parallel)
    finally:
        into.close()
    if journal:
        try:
            journal.write("end", target)
        except OSError:      # a full disk: the next integrate says INTERRUPTED, nothing more
            pass
    return Integration(target, results, ran, note, interrupted, bisection, recheck)


def _culprits(before: str | None, failed: CheckResult | None, results: Sequence[UnitResult],
              changes: Mapping[str, Change], verdicts: Mapping[str, Verdict], into: _Target,
              env: Mapping[str, str] | None, timeout: float, culprit_dir: str | None,
              parallel: int | None) -> tuple[Bisection | None, CheckResult | None]:
    """When the check ``failed``, its culprits among the units applied (tested on the tree
    ``before``), held out of the tree, and the check again."""
    if before is None or failed is None or failed.ok:
        return None, None
    bisection = culprit.bisect(
        into.path, before, [(r.packet_id, changes[r.packet_id].patch or b"")
                            for r in results if r.action == "applied"],
        failed.command, env, timeout, failing_log=failed.log,
        culprit_dir=culprit_dir or tempfile.mkdtemp(prefix="prun-culprits-"),
        parallel=parallel or os.cpu_count() or 1)
    return bisection, _hold_and_check(bisection, results, changes, verdicts, into,
                                      failed.command, env, timeout)


def _hold_and_check(bisection: Bisection, results: Sequence[UnitResult],
                    changes: Mapping[str, Change], verdicts: Mapping[str, Verdict],
                    into: _Target, check: str | Sequence[str], env: Mapping[str, str] | None,
                    timeout: float) -> CheckResult | None:
    """Take the changes of the culprits to hold out of the tree again (the last applied
    first), each whole or not at all (one that no longer comes out cleanly stays); then the
    check again, when any was taken out."""
    held, out = {c.held for c in bisection.culprits}, False
    for res in reversed(results):
        pid = res.packet_id
        if pid not in held or res.action != "applied":
            continue
        patch = changes[pid].patch or b""
        if gitcmd.git(["apply", "--check", "--reverse", "--binary", "-"], into.path, input=patch,
                      check=False).returncode != 0:
            continue
        trial = UnitResult(pid, res.verdict, "applied")
        paths = [p for b in blocks(patch) for p in b.paths]
        if _apply_whole(trial, patch, paths, into, verdicts[pid].attempt_id, reverse=True):
            res.held, out = CHECK_CULPRIT, True
            for p in changes[pid].paths:
                into.touched.pop(p, None)
    return _check(check, into.path, env, timeout, into.patch_dir) if out else None


def _begin(journal: Journal, target: str) -> None:
    try:
        journal.write("begin", target)
    except OSError as e:
        raise PrunError(f"cannot write the integrate journal {journal.path}: "
                        f"{e.strerror or e}; nothing was applied",
                        hint="free space, then run prun integrate again") from None


def _held_result(v: Verdict, held: str, change: Change | None, into: _Target) -> UnitResult:
    """A unit an earlier integrate applied (``already``), or may have applied in part."""
    res = UnitResult(v.packet_id, v.verdict, held, change.files if change else ())
    if held == "conflict":
        res.error = "may be half-applied by an interrupted prun integrate"
        res.conflicts = [(p, "interrupted-integrate") for p in (change.paths if change else [])]
    else:
        for p in (change.paths if change else []):
            into.touched[p] = v.packet_id
        _record_held(into, v)
    return res


def _record_held(into: _Target, v: Verdict) -> None:
    """Journal that the tree holds this attempt's change (applied by an earlier integrate of
    an earlier attempt with the same change, or by one from before attempts were journaled),
    so that ``prun clean`` counts it as integrated."""
    if into.journal and v.attempt_id and (v.packet_id, v.attempt_id) not in into.integrated:
        try:
            into.journal.write("applied", into.path, v.packet_id, attempt=v.attempt_id)
        except OSError:      # a full disk: prun clean keeps its workspace, nothing worse
            pass


def _check(check: str | Sequence[str], target: str, env: Mapping[str, str] | None,
           timeout: float, patch_dir: str | None) -> CheckResult:
    """The plan's combined check, run on the result."""
    fd, log = tempfile.mkstemp(prefix="prun-check-", suffix=".log",
                               dir=patch_dir if patch_dir else None)
    os.close(fd)
    r = run_bounded(check, target, env, timeout, log)
    return CheckResult(check if isinstance(check, str) else list(check), r.exit_code,
                       r.timed_out, r.duration_s, r.log)


@dataclass
class _Target:
    """The tree being integrated into, and what this integrate did to it so far."""

    path: str
    dirty: set[str]                    # paths with uncommitted changes there
    journal: Journal | None
    patch_dir: str | None
    touched: dict[str, str] = field(default_factory=dict)  # path -> the unit whose patch did
    integrated: set[tuple[str, str]] = field(default_factory=set)  # (packet, attempt) journaled
    _scratch: str | None = None        # pre-images' folder when there is no journal

    def backup_dir(self, pid: str) -> str:
        if self.journal:
            return self.journal.backup_dir(self.path, pid)
        if self._scratch is None:
            self._scratch = tempfile.mkdtemp(prefix="prun-integrate-")
        return os.path.join(self._scratch, pid)

    def close(self) -> None:
        if self._scratch:
            shutil.rmtree(self._scratch, ignore_errors=True)


def _restore_interrupted(prev: Previous, target: str, journal: Journal) -> str | None:
    """Put back the paths of the patch an earlier integrate was applying when it stopped (a
    kill, or a restore that itself failed), from the pre-images it saved; its packet, or None
    when there is nothing to put back (or no saved pre-images: then ``_held`` judges it)."""
    if not prev.partial or not prev.backup or not backup.saved(prev.backup):
        return None
    pid = prev.partial
    try:
        backup.restore(target, prev.backup)
        journal.write("restored", target, pid)
    except OSError as e:
        raise PrunError(f"cannot put back the files of {pid}, which an interrupted prun "
                        f"integrate was applying: {_failure(e)} ({e.strerror or e})",
                        hint="free space, then run prun integrate again") from None
    backup.discard(prev.backup)
    prev.partial = prev.backup = None
    return pid


def _held(prev: Previous, changes: Mapping[str, Change], target: str) -> dict[str, str]:
    """Of the changes an earlier integrate applied here (or was applying when it was killed,
    with no pre-images saved to put back), those the tree holds (``already``) and the one it
    holds in part (``conflict``). A change the tree no longer holds (the person reverted it) is
    applied again."""
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


def _interrupted_note(prev: Previous, held: Mapping[str, str], restored: str | None) -> str:
    applied = [p for p in prev.applied if held.get(p) == "already"]
    partial = prev.partial if prev.partial and held.get(prev.partial) == "conflict" else None
    if restored:
        return (f"INTERRUPTED applied={','.join(applied) or 'none'} partial={restored} "
                "restored=yes")
    return (f"INTERRUPTED applied={','.join(applied) or 'none'} "
            f"partial={partial or 'none'}")


def _one(v: Verdict, change: Change | None, into: _Target, include: set[str],
         rejected: set[str]) -> UnitResult:
    pid = v.packet_id
    if (v.verdict != ACCEPTED and pid not in include) or pid in rejected:
        return UnitResult(pid, v.verdict, "skipped")
    if change is None or change.empty:
        return UnitResult(pid, v.verdict, "empty")
    res = UnitResult(pid, v.verdict, "applied", change.files)
    patch = change.patch or b""
    target, touched = into.path, into.touched
    if into.patch_dir:
        from .._util.fsutil import atomic_write

        res.patch = os.path.join(into.patch_dir, f"{pid}.patch")
        try:
            os.makedirs(into.patch_dir, exist_ok=True)
            atomic_write(res.patch, patch)
        except OSError as e:
            return _failed(res, _failure(e), "unchanged", e)
    local = sorted(into.dirty & set(change.paths))
    if local:
        res.action = "conflict"
        res.error = "uncommitted changes in the target tree"
        res.conflicts = [(p, "working-tree") for p in local]
        return res
    parts = blocks(patch)
    if {b.path for b in parts} != set(_listed(patch, target)):
        res.action, res.error = "conflict", "its patch could not be read"
        return res
    through = links.through(links.Tree(target), parts)
    if through:
        made = {b.path for b in parts if b.makes_link}
        res.action, res.error = "conflict", "it would write through a symbolic link"
        res.conflicts = [(p, pid if link in made else touched.get(link, links.WORKING_TREE))
                         for p, link in through]
        res.links = dict(through)
        return res
    checked = gitcmd.git(["apply", "--check", "--binary", "-"], target, input=patch,
                         check=False)
    if checked.returncode != 0:
        res.action = "conflict"
        res.error = checked.stderr.strip().splitlines()[-1] if checked.stderr.strip() else None
        paths = _failed_paths(checked.stderr) or change.paths
        res.conflicts = [(p, touched.get(p, "working-tree")) for p in paths]
        return res
    if not _apply_whole(res, patch, [p for b in parts for p in b.paths], into, v.attempt_id):
        return res
    for p in change.paths:
        if p in touched:
            res.overlaps.append((p, touched[p]))
        touched[p] = pid
    return res


def _apply_whole(res: UnitResult, patch: bytes, paths: list[str], into: _Target,
                 attempt: str | None, *, reverse: bool = False) -> bool:
    """Apply ``patch`` (the change of ``attempt``; ``reverse``: take it out) whole or not at
    all: save the pre-images of ``paths``, journal it, apply it; when the apply fails, put the
    pre-images back at once. False (``res`` failed) when the patch is not applied."""
    pid, target, journal = res.packet_id, into.path, into.journal
    doing, done = ("holding", "held") if reverse else ("applying", "applied")
    folder = into.backup_dir(pid)
    try:
        backup.save(target, paths, folder)
        if journal:
            journal.write(doing, target, pid, attempt=attempt, backup=folder)
    except OSError as e:
        backup.discard(folder)
        _failed(res, _failure(e), "unchanged", e)
        return False
    try:
        ran = gitcmd.git(["apply", *(["--reverse"] if reverse else []), "--binary", "-"],
                         target, input=patch, check=False)
        if ran.returncode != 0:
            why = ran.stderr.strip().splitlines()
            raise _ApplyFailed(_failure_of(ran.stderr), why[-1] if why else "git apply failed")
        if journal:
            journal.write(done, target, pid, attempt=attempt)
    except (_ApplyFailed, OSError, PrunError) as e:
        reason = (e.reason if isinstance(e, _ApplyFailed) else
                  _failure(e) if isinstance(e, OSError) else "write-failed")
        _failed(res, reason, _put_back(pid, target, folder, journal), e)
        return False
    backup.discard(folder)
    return True


class _ApplyFailed(Exception):
    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


def _put_back(pid: str, target: str, folder: str, journal: Journal | None) -> str:
    """Restore a failed patch's pre-images: ``restored``, or ``partial`` when that failed too
    (the pre-images stay, and the next integrate restores them first)."""
    try:
        backup.restore(target, folder)
    except OSError:
        return "partial"
    try:
        if journal:
            journal.write("restored", target, pid)
    except OSError:
        return "restored"             # the next integrate restores the same pre-images again
    backup.discard(folder)
    return "restored"


def _failed(res: UnitResult, reason: str, tree: str, error: BaseException) -> UnitResult:
    res.action, res.reason, res.tree, res.error = "failed", reason, tree, str(error)
    return res


_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


def _failure(e: OSError) -> str:
    """Why a write failed, as a reason word."""
    if e.errno in _DISK_FULL:
        return "disk-full"
    return "io-error" if e.errno == errno.EIO else "write-failed"


def _failure_of(stderr: str) -> str:
    """Why ``git apply`` failed, from the system's error text it printed (prun runs git in
    the C locale, and its messages end with ``strerror``)."""
    for code in (*_DISK_FULL, errno.EIO):
        if os.strerror(code) in stderr:
            return _failure(OSError(code, os.strerror(code)))
    return "write-failed"


def _listed(patch: bytes, target: str) -> list[str]:
    """The paths ``git apply`` reads in ``patch`` (each file's new path, its old one for a
    deletion): what the patch's own reading (``patchfile.blocks``) must agree with."""
    out = gitcmd.git(["apply", "--numstat", "-z", "-"], target, input=patch, check=False)
    if out.returncode != 0:
        return []
    return [entry.split("\t", 2)[2] for entry in out.stdout.split("\0") if entry.count("\t") >= 2]


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
