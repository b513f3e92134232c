"""A packet's acceptance check: prun's own proof of a unit's work, never the worker's word.

After a unit succeeds, its packet's ``accept`` command runs in a fresh throwaway clone of the
attempt's base with the attempt's patch applied (the patch ``prun integrate`` would apply;
never the worker's own clone, which the worker could have bent), the plan's ``setup`` first,
in the sandbox wherever its unit would run in one, ended whole past ``accept_timeout``
(default 10 minutes). A read-only packet with an ``accept`` runs it in a clone of its base.
Its end is an ``AcceptCheck`` (``prun.git.verdict``):

    passed   exit 0
    failed   any other exit code
    timeout  ended at its timeout
    error    it could not run: the shell's exit 126 or 127 (no such command, not executable),
             or its clone, the patch or the setup failed; never passed

Its whole output goes to ``<run dir>/accept/<packet>.<seq>.log`` (``seq``: the attempt's
number within its packet). ``run_checks`` runs the checks not recorded yet, up to the run's
``parallel`` at once, and hands each to its caller to record; ``apply`` turns them into
reasons: ``failed`` rejects (``accept-failed``), ``error`` and ``timeout`` send the packet to
review (``accept-error``, ``accept-timeout``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import TYPE_CHECKING

from .._util.fsutil import atomic_write
from ..errors import GitError, PrunError
from . import saved
from .changes import patch_of
from .setup import run_setup, sandboxed
from .store import store_of
from .verdict import ACCEPTED, NEEDS_REVIEW, REJECTED, AcceptCheck, Reason, Report, UnitInput
from .workspace import default_root, is_clone, made_by_prun, make_clone, neutral_git, remove

if TYPE_CHECKING:
    from ..ledger import Ledger

ACCEPT_TIMEOUT_DEFAULT = 600.0
FOLDER = "accept"
NOT_RUNNABLE = (126, 127)        # the shell's "cannot execute" and "command not found"
TAIL_CHARS = 2000                # of its output, kept in the ledger


def log_path(run_dir: str, packet_id: str, seq: object) -> str:
    """Where the check of attempt ``seq`` of ``packet_id`` writes its output."""
    return os.path.join(run_dir, FOLDER, f"{packet_id}.{seq}.log")


def due(unit: UnitInput, status: str | None, known: Mapping[str, AcceptCheck]) -> bool:
    """Whether ``unit``'s attempt needs its check run now: its packet has one, it succeeded,
    and no check of it is recorded yet."""
    return bool(unit.packet.accept and unit.attempt_id and status == "succeeded"
                and unit.attempt_id not in known)


def run_checks(units: Iterable[UnitInput], report: Report, *, known: Mapping[str, AcceptCheck],
               seqs: Mapping[str, object], run_dir: str, repo_root: str | None,
               setup: str | None, parallel: int,
               record: Callable[[str, AcceptCheck], None]) -> dict[str, AcceptCheck]:
    """Attempt id -> its check: those ``known`` and those run now (every ``due`` unit's, up
    to ``parallel`` at once), each handed to ``record`` (in this thread) as it ends."""
    checks = dict(known)
    statuses = {v.packet_id: v.status for v in report.verdicts}
    jobs = [u for u in units if due(u, statuses.get(u.packet.id), known)]
    if not jobs:
        return checks
    with ThreadPoolExecutor(max_workers=max(1, min(parallel, len(jobs)))) as ex:
        running = {ex.submit(check, u, log_path(run_dir, u.packet.id,
                                                seqs.get(u.attempt_id or "", u.attempt_id)),
                             repo_root, setup): u for u in jobs}
        for done in as_completed(running):
            attempt = running[done].attempt_id or ""
            checks[attempt] = done.result()
            record(attempt, checks[attempt])
    return checks


def check(unit: UnitInput, log: str, repo_root: str | None, setup: str | None) -> AcceptCheck:
    """Run ``unit``'s acceptance check once, in a throwaway clone removed afterwards."""
    command = unit.packet.accept or ""
    os.makedirs(os.path.dirname(log), exist_ok=True)
    if not repo_root or not unit.base:
        return _error(log, "no repository or base to check the unit's work against")
    try:
        patch = _patch(unit) if unit.packet.writes_code else b""
    except (GitError, saved.Broken) as e:
        return _error(log, f"its change cannot be read: {e}")
    parent = _parent(unit)
    dest = tempfile.mkdtemp(prefix=f"{unit.packet.id}.accept-", dir=parent)
    try:
        store = store_of(unit.workspace, unit.base) if unit.workspace else None
        make_clone(repo_root, unit.base, dest, store=store, neutral=store is not None)
        if patch:
            applied = neutral_git(dest, ["apply", "--binary", "-"], input=patch, check=False)
            if applied.returncode != 0:
                return _error(log, f"its patch does not apply to its base: {applied.stderr}")
        sandbox = sandboxed(unit.packet.sandbox)
        if setup:
            ready = run_setup(dest, setup, log_path=log[:-len(".log")] + ".setup.log",
                              check=False, sandbox=sandbox, base=unit.base)
            if not ready.ok:
                return _error(log, f"the plan's setup failed (its output: {ready.log})")
        ran = run_setup(dest, command, timeout=unit.packet.accept_timeout_s
                        or ACCEPT_TIMEOUT_DEFAULT, log_path=log, check=False, sandbox=sandbox,
                        base=unit.base)
    except PrunError as e:
        return _error(log, e.message)
    finally:
        if made_by_prun(dest):
            remove(dest)
        else:
            shutil.rmtree(dest, ignore_errors=True)
    status = ("timeout" if ran.timed_out else "passed" if ran.exit_code == 0
              else "error" if ran.exit_code in NOT_RUNNABLE else "failed")
    return AcceptCheck(status, ran.exit_code, ran.duration_s, ran.log, ran.tail[-TAIL_CHARS:])


def record(ledger: Ledger, attempt_id: str, c: AcceptCheck) -> None:
    """Record check ``c`` with its attempt (the ledger's ``accept_*`` columns): whoever ran
    it (``prun run`` as the unit succeeds, else ``prun reconcile``), no one runs it again."""
    ledger.update_attempt(attempt_id, None, accept_status=c.status, accept_exit=c.exit_code,
                          accept_seconds=c.seconds, accept_tail=c.tail, accept_log=c.log)


def _patch(unit: UnitInput) -> bytes:
    """The attempt's change as a binary patch: read from its clone, else from the change
    ``prun clean`` saved."""
    if unit.workspace and is_clone(unit.workspace):
        return patch_of(unit.workspace, unit.base or "")
    if unit.saved and os.path.lexists(unit.saved):
        return saved.load(unit.saved).patch or b""
    raise GitError(["read", unit.workspace or "none"], 128, "no clone and no saved change")


def _parent(unit: UnitInput) -> str:
    """Where the throwaway clone goes: beside the unit's workspace (the run's folder of
    workspaces, its stores), else the workspace root."""
    folder = os.path.dirname(os.path.abspath(unit.workspace)) if unit.workspace else ""
    if not folder or not os.path.isdir(folder):
        folder = os.path.join(default_root(), FOLDER)
        os.makedirs(folder, exist_ok=True)
    return folder


def _error(log: str, why: str) -> AcceptCheck:
    """A check that could not run: why, written to its log."""
    text = f"prun: the acceptance check could not run: {why.strip()}\n"
    try:
        atomic_write(log, text)
    except OSError:
        pass
    return AcceptCheck("error", None, 0.0, log, text)


def apply(report: Report, checks: Mapping[str, AcceptCheck]) -> None:
    """Each verdict with the check of its attempt: ``failed`` rejects it, ``error`` and
    ``timeout`` send an accepted one to review; each with its reason naming the log."""
    for v in report.verdicts:
        found = checks.get(v.attempt_id) if v.attempt_id else None
        if found is None:
            continue
        v.accept = found
        if found.status == "passed":
            continue
        reason = Reason(f"accept-{found.status}", {"log": found.log or "none"})
        if found.status == "failed":
            v.reasons = [reason, *v.reasons]
            v.verdict = REJECTED
        else:
            v.reasons = [*v.reasons, reason]
            if v.verdict == ACCEPTED:
                v.verdict = NEEDS_REVIEW


__all__ = ["ACCEPT_TIMEOUT_DEFAULT", "apply", "check", "due", "log_path", "record", "run_checks"]
