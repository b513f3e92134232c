"""``prun dispatch``: one attempt run whole in this process (``run_sync``), the driver that
calls its steps in order (``beginning``, ``launching``, ``waiting``, ``finishing``) with a
``LocalLauncher`` (a session unit's ``SessionLauncher`` hands it off: nothing to wait for);
its signals turned into a cancel, the processes that escaped its worker's group ended with it.
It records itself: in the ledger (``recording``) and beside its state dir (``identity``)."""

from __future__ import annotations

from collections.abc import Callable

from ..errors import Cancelled, QuotaExhausted
from . import identity, recording
from .beginning import admit, begin
from .core import Dispatch
from .finishing import finish
from .launching import launch
from .local import LocalLauncher
from .request import Request, prepare
from .session_launcher import SessionLauncher
from .waiting import wait

TYPE_CHECKING = False  # typing costs milliseconds on the dispatcher's fast path
if TYPE_CHECKING:
    from types import FrameType
    from typing import NoReturn

    from .outcome import Outcome

def run_sync(req: Request, on_state_dir: Callable[[str], None] | None = None) -> Outcome:
    """``prun dispatch``: prepare, then run the whole attempt in this process."""
    import signal

    prepared = prepare(req)
    # a child of this process; a session unit is handed to the coordinator instead
    d = Dispatch(prepared, LocalLauncher() if prepared.executor.launches_process
                 else SessionLauncher())
    from .._util.process import become_subreaper, is_subreaper

    # what leaves the worker's group comes back here to be ended; a library caller that was no
    # subreaper is none again afterwards (orphans of its other children go to init as before)
    was_reaper = is_subreaper()
    reaper = become_subreaper()
    _on_signals(_cancel)
    at = _Progress()
    try:
        try:
            if on_state_dir:
                on_state_dir(d.state.path)
            _steps(d, at)
        except Cancelled:
            at.cancelled = True
            _stop(d, at)
        _on_signals(signal.SIG_IGN)  # publishing the outcome must not be interrupted
        if reaper:
            _end_escaped(d)
    finally:
        if reaper and not was_reaper:
            become_subreaper(False)
    if d.handed is not None:   # the coordinator runs it: nothing to judge here
        return d.handed.outcome
    outcome = finish(d, at.code, timed_out=at.timed_out, cancelled=at.cancelled,
                     refused=at.refused)
    recording.finished(d)
    return outcome


class _Progress:
    """How far the attempt got: a signal may stop it anywhere."""

    __slots__ = ("cancelled", "code", "refused", "timed_out")

    def __init__(self) -> None:
        self.refused: QuotaExhausted | None = None   # the quota gate refused the launch
        self.code: int | None = None                 # the worker's exit code
        self.timed_out = False
        self.cancelled = False


def _steps(d: Dispatch, at: _Progress) -> None:
    """Begin, then launch and wait (a session unit is handed off: nothing to wait for)."""
    begin(d)
    recording.begun(d)
    try:
        admit(d)
    except QuotaExhausted as e:
        at.refused = e
        return
    p = d.p
    identity.record(d.state, dispatcher=[d.dispatcher_pid, d.dispatcher_started],
                    unit_id=p.request.unit_id, executor=p.executor.name,
                    result_file=p.result_file, workspace=d.workspace, mode=p.mode,
                    command=list(p.command) or None)   # beside the state dir, out of its reach
    if launch(d) and d.worker is not None:
        identity.record(d.state, worker=[d.running().pid, d.worker_started],
                        workspace=d.workspace)
        recording.launched(d)
        at.code, at.timed_out = wait(d)


def _stop(d: Dispatch, at: _Progress) -> None:
    """After a cancel: end the worker's group if the worker (our child) is not reaped yet,
    and reap it."""
    from .._util.process import Worker, end_group

    w = d.worker
    if isinstance(w, Worker) and w.proc.returncode is None:
        end_group(w, d.p.config.kill_grace_s)
        at.code = w.reap()


def _end_escaped(d: Dispatch) -> None:
    """End the processes that left the worker's group (reparented here, a subreaper)."""
    from .._util.process import end_escaped

    if d.worker is None:
        return
    d.escaped = [dict(e) for e in end_escaped(d.worker, d.p.config.kill_grace_s)]
    if d.escaped:
        import sys

        print(f"prun: {len(d.escaped)} process(es) left unit {d.p.request.unit_id}'s process "
              "group and were ended with it", file=sys.stderr)


def _on_signals(handler: Callable[[int, FrameType | None], object] | int) -> None:
    """``handler`` for each signal that cancels the attempt."""
    import signal

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, handler)


def _cancel(signum: int, frame: FrameType | None) -> NoReturn:
    raise Cancelled()
