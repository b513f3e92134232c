"""``prun dispatch``: one attempt run whole in this process (``run_sync``), its signals
turned into a cancel, the processes that escaped its worker's group ended with it."""

from __future__ import annotations

from collections.abc import Callable

from ..errors import Cancelled, QuotaExhausted
from .core import Dispatch
from .request import Request, prepare

TYPE_CHECKING = False  # typing costs milliseconds on the dispatcher's fast path
if TYPE_CHECKING:
    from .outcome import Outcome


def run_sync(req: Request, on_state_dir: Callable[[str], None] | None = None) -> Outcome:
    """``prun dispatch``: prepare, then run the whole attempt in this process."""
    import signal

    def _cancel(signum, frame):
        raise Cancelled()

    prepared = prepare(req)
    d = Dispatch(prepared)
    from .._util.process import become_subreaper, end_escaped

    reaper = become_subreaper()  # what leaves the worker's group comes back here to be ended
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _cancel)
    refused = handed = None
    code, timed_out, cancelled = None, False, False
    try:
        if on_state_dir:
            on_state_dir(d.state.path)
        try:
            d.begin()
        except QuotaExhausted as e:
            refused = e
        if refused is None and not prepared.executor.launches_process:
            handed = d.hand_off()  # a session unit: the coordinator runs it, nothing to wait for
        elif refused is None and d.launch():
            code, timed_out = d.wait()
    except Cancelled:
        cancelled = True
        if d.worker is not None and d.worker.proc.returncode is None:
            from .._util.process import end_group

            end_group(d.worker, prepared.config.kill_grace_s)
            code = d.worker.reap()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # publishing the outcome must not be interrupted
    if reaper and d.worker is not None:
        d.escaped = end_escaped(d.worker, prepared.config.kill_grace_s)
        if d.escaped:
            import sys

            print(f"prun: {len(d.escaped)} process(es) left unit {req.unit_id}'s process group "
                  "and were ended with it", file=sys.stderr)
    if handed is not None:
        return handed
    return d.finish(code, timed_out=timed_out, cancelled=cancelled, refused=refused)
