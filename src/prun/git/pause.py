"""Pausing one unit: its diff saved as a patch, its own process group stopped.

This is the seed's "a writer discovers a shared file or dependency outside its packet": the
affected unit is paused, its change preserved, and revised packets then run as new attempts
linked to it. prun signals only the process group of the worker that records its unit cannot
write name (the attempt's ledger receipt, its keeper's log: ``attempt.identity``), and only
while that pid is the process that started then; never what its ``unit.json`` says.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import psutil

from .._util.fsutil import atomic_write, atomic_write_json
from .._util.process import same_process_alive
from ..errors import GitError, StateError
from ..settings import current
from .changes import read_change
from .workspace import clone_base, is_clone

if TYPE_CHECKING:
    import psutil

    from ..attempt.identity import Proc

PAUSED_PATCH = "paused.patch"
PAUSED_JSON = "paused.json"


@dataclass
class PauseResult:
    state_dir: str
    stopped: str                       # stopped, gone (already ended), not-started
    patch: str | None = None
    files: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _kill_grace() -> float:
    return current().kill_grace_s


def stop_recorded_group(worker: Proc | None, grace: float | None = None) -> str:
    """End the group ``worker`` leads (pid, start time, from ``identity.worker``): SIGTERM to
    the group, then SIGKILL to members still there after ``grace`` seconds. Returns
    ``stopped``, ``gone`` (it had already ended) or ``not-started`` (no worker recorded)."""
    if worker is None:
        return "not-started"
    pid, started = worker
    if not same_process_alive(pid, started):
        return "gone"
    try:
        actual = os.getpgid(pid)
    except ProcessLookupError:
        return "gone"
    if actual != pid:
        raise StateError(f"process {pid} no longer leads its own process group ({actual})",
                         hint="it was not left alone: stop it by hand if it is yours")
    members = []
    for p in psutil.process_iter():
        try:
            if os.getpgid(p.pid) == pid:
                p.create_time()        # cache the identity psutil checks before signalling
                members.append(p)
        except (ProcessLookupError, psutil.Error, OSError):
            continue
    if not same_process_alive(pid, started):   # it ended while its group was listed
        return "gone"
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return "gone"
    grace = _kill_grace() if grace is None else grace
    left = _wait_gone(members, grace)
    for p in left:
        try:
            p.kill()                   # psutil refuses a pid that was reused meanwhile
        except psutil.Error:
            pass
    _wait_gone(left, grace)
    return "stopped"


def _wait_gone(procs: Iterable[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Bounded wait until every process has exited (a zombie counts as gone)."""
    deadline = time.monotonic() + timeout
    while True:
        left = []
        for p in procs:
            try:
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    left.append(p)
            except psutil.Error:
                pass
        if not left or time.monotonic() >= deadline:
            return left
        psutil.wait_procs(left, timeout=min(0.1, max(0.0, deadline - time.monotonic())))


def _process(worker: Proc | None) -> psutil.Process | None:
    """``worker`` as a psutil process, or None when it is not running any more."""
    if worker is None or not same_process_alive(*worker):
        return None
    try:
        return psutil.Process(worker[0])
    except psutil.Error:
        return None


def _save_patch(result: PauseResult, workspace: str | None, base: str | None) -> bool:
    """Write the clone's change as ``paused.patch``; False when the clone cannot be read
    (gone, or moved to ``<clone>.quarantined`` by the supervisor meanwhile)."""
    for path in (workspace, f"{workspace}.quarantined" if workspace else None):
        if not path or not is_clone(path):
            continue
        try:
            change = read_change(path, base or clone_base(path) or "HEAD", with_patch=True)
        except (GitError, OSError):
            continue
        result.patch = os.path.join(result.state_dir, PAUSED_PATCH)
        atomic_write(result.patch, change.patch or b"")
        result.files = change.paths
        return True
    return False


def pause(state_dir: str, workspace: str | None, base: str | None, *,
          worker: Proc | None, ask_supervisor: Callable[[], bool] | None = None,
          grace: float | None = None, stop: Callable[[], str] | None = None) -> PauseResult:
    """Pause the unit of ``state_dir``: save its clone's change against ``base`` as
    ``<state dir>/paused.patch`` (binary, untracked files included), stop its ``worker``
    (pid and start time, from records its unit cannot write: ``identity.worker``), save the
    change again once it has stopped, and write ``paused.json``.

    ``ask_supervisor`` asks a live supervisor to cancel the attempt (so it records a
    cancellation and quarantines partial output); it returns False when none will. prun then
    stops the recorded process group itself, and also when the supervisor has not within a
    bound. ``stop``: how to stop a unit that has no local process (a cluster's unit; it
    returns ``stopped``, ``gone`` or ``not-started``)."""
    if not os.path.isdir(state_dir):
        raise StateError(f"state dir not found: {state_dir}")
    result = PauseResult(state_dir, "not-started")
    _save_patch(result, workspace, base)            # a first copy while it still runs
    try:
        running = _process(worker)
        if stop is not None:
            result.stopped = stop()
        elif running is None:
            result.stopped = "gone" if worker else "not-started"
        elif ask_supervisor is not None and ask_supervisor() \
                and not _wait_gone([running], 2 * (_kill_grace() if grace is None else grace) + 5):
            result.stopped = "stopped"
        else:
            result.stopped = stop_recorded_group(worker, grace)
            if result.stopped == "gone":
                result.stopped = "stopped"
    finally:
        _save_patch(result, workspace, base)        # the final copy, once it has stopped
        atomic_write_json(os.path.join(state_dir, PAUSED_JSON),
                          {**result.as_dict(), "at": time.time()})
    return result
