"""A standalone unit after its dispatcher is gone (``kill -9``, a crash, a closed terminal):
``cancel`` ends what still runs of it through its recorded identity, ``settle`` judges it
from what it left, publishes its result or FALLBACK and closes its ledger row, so that
monitor, gather and the ledger see it finished.

Only processes whose pid and start time ``unit.json`` recorded are ever signalled.
"""

from __future__ import annotations

import os
import shlex
import signal
import time

from ..errors import StateError, UsageError
from . import statedir

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .outcome import Outcome

SETTLE_WAIT_S = 30.0


def standalone(path: str) -> statedir.StateDir:
    """The state dir of a standalone unit (one of a run is its supervisor's to settle)."""
    sd = statedir.open_existing(path)
    unit = sd.unit
    if not unit:
        raise UsageError(f"{path} has no unit.json: the unit never began",
                         hint="nothing ran; remove the folder")
    if unit.get("attempt_id"):
        raise UsageError(f"{path} is an attempt of a run ({unit['attempt_id']})",
                         hint="a run's units are settled by its supervisor: `prun resume RUN`, "
                         "`prun cancel RUN:PACKET:N`")
    return sd


def _alive(record: object) -> tuple[int, float] | None:
    from .._util.process import same_process_alive

    if not isinstance(record, dict):
        return None
    pid, start = record.get("pid"), record.get("create_time")
    if isinstance(pid, int) and isinstance(start, int | float) and same_process_alive(pid, start):
        return pid, float(start)
    return None


def cancel(sd: statedir.StateDir, grace: float, wait: float) -> str:
    """End a standalone unit: its live dispatcher is told (SIGTERM: it ends its worker and
    judges it); else a live worker's group is ended (SIGTERM, ``grace``, SIGKILL) and the
    unit settled. Returns the outcome's kind."""
    if (done := sd.outcome) is not None:
        return str(done.get("outcome"))
    unit = sd.unit
    if (dispatcher := _alive(unit.get("dispatcher"))) is not None:
        os.kill(dispatcher[0], signal.SIGTERM)
        end = time.monotonic() + wait
        while time.monotonic() < end:
            if (done := sd.outcome) is not None:
                return str(done.get("outcome"))
            time.sleep(0.05)
        raise StateError(f"the dispatcher of {sd.path} did not finish within {wait:g} s",
                         hint="run `prun cancel` again, or wait")
    if (worker := _alive(unit.get("worker"))) is not None:
        _end_group(worker[0], worker[1], grace)
    return settle(sd, cancelled=worker is not None).kind.value


def _end_group(pid: int, start: float, grace: float) -> None:
    """SIGTERM the group the recorded worker leads, ``grace`` seconds, then SIGKILL; only
    while that very process (its start time) still leads it."""
    from .._util.process import same_process_alive

    for sig, pause in ((signal.SIGTERM, grace), (signal.SIGKILL, 0.0)):
        if not same_process_alive(pid, start):
            return
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        end = time.monotonic() + pause
        while time.monotonic() < end and same_process_alive(pid, start):
            time.sleep(0.05)


def settle(sd: statedir.StateDir, *, cancelled: bool = False) -> Outcome:
    """Judge a standalone unit whose dispatcher is gone: its result or FALLBACK published,
    ``outcome.json`` written (its exit code unknown: it was its dispatcher's to see), its
    ledger row closed. Refused while its dispatcher or worker still runs."""
    from .core import Dispatch
    from .outcome import Outcome
    from .request import Request, prepare

    if (done := sd.outcome) is not None:
        return Outcome.from_json(done)
    unit = sd.unit
    for who in ("dispatcher", "worker"):
        if (alive := _alive(unit.get(who))) is not None:
            raise StateError(f"the {who} of {sd.path} still runs (pid {alive[0]})",
                             hint=f"`prun cancel {sd.path}` ends it")
    argv = unit.get("argv") or []
    req = Request(executor=unit.get("executor") or "command",
                  prompt_file=sd.file(statedir.PROMPT), result_file=unit["result_file"],
                  unit_id=unit["unit_id"], mode=unit.get("mode") or "accept-edits",
                  command=shlex.join(argv) if unit.get("executor") == "command" else None,
                  model=unit.get("requested_model"), timeout_s=unit.get("timeout_s"),
                  workspace=unit.get("workspace"), state_root=os.path.dirname(sd.path))
    d = Dispatch(prepare(req, reopen=True), sd, dispatcher_pid=os.getpid(), record=True)
    worker = unit.get("worker") or {}
    d.launched_at = worker.get("create_time")
    d.receipt = f"pid:{worker['pid']}@{d.launched_at or 0:.3f}" if worker.get("pid") else None
    return d.finish(None, cancelled=cancelled)
