"""A standalone unit after its dispatcher is gone (``kill -9``, a crash, a closed terminal):
``cancel`` ends what still runs of it through its recorded identity, ``settle`` judges it
from what it left, publishes its result or FALLBACK and closes its ledger row, so that
monitor, gather and the ledger see it finished.

Only processes whose pid and start time the dispatcher recorded beside the state dir
(``identity``) are ever signalled, and the result is published at the path it recorded there:
nothing the unit wrote in its state dir (``unit.json``) chooses a process or a path.
"""

from __future__ import annotations

import os
import shlex
import signal
import time
from typing import TYPE_CHECKING

from .._util.process import same_process_alive
from ..errors import StateError, UsageError
from . import identity, recording, statedir
from .core import Dispatch
from .finishing import finish
from .local import LocalLauncher
from .outcome import Outcome
from .request import Request, prepare

if TYPE_CHECKING:
    from .outcome import Outcome
    from .request import Prepared



def standalone(path: str) -> statedir.StateDir:
    """The state dir of a standalone unit: one whose dispatcher kept its record beside it
    (one of a run is its supervisor's to settle)."""
    sd = statedir.open_existing(path)
    if identity.facts(sd).get("result_file"):
        return sd
    attempt = sd.unit.get("attempt_id")
    if attempt:
        raise UsageError(f"{path} is an attempt of a run ({attempt!r})",
                         hint="a run's units are settled by its supervisor: `prun resume RUN`, "
                         "`prun cancel RUN:PACKET:N`")
    why = sd.problem(statedir.UNIT) or "the unit never began"
    raise UsageError(f"{path} has no record of its dispatcher ({why})",
                     hint="nothing prun launched can be settled from it; look at its files "
                     "by hand, then remove the folder")


def cancel(sd: statedir.StateDir, grace: float, wait: float) -> str:
    """End a standalone unit: its live dispatcher is told (SIGTERM: it ends its worker and
    judges it); else a live worker's group is ended (SIGTERM, ``grace``, SIGKILL) and the
    unit settled. Returns the outcome's kind."""
    if (done := _outcome(sd)) is not None:
        return done
    if identity.alive(dispatcher := identity.dispatcher(sd)):
        assert dispatcher is not None  # alive() says so
        os.kill(dispatcher[0], signal.SIGTERM)
        end = time.monotonic() + wait
        while time.monotonic() < end:
            if (done := _outcome(sd)) is not None:
                return done
            time.sleep(0.05)
        raise StateError(f"the dispatcher of {sd.path} did not finish within {wait:g} s",
                         hint="run `prun cancel` again, or wait")
    worker = identity.standalone_worker(sd)
    ended = identity.alive(worker)
    if ended:
        assert worker is not None
        _end_group(worker[0], worker[1], grace)
    return settle(sd, cancelled=ended).kind.value


def _outcome(sd: statedir.StateDir) -> str | None:
    """The kind of outcome the dispatcher wrote, or None before it finished."""
    done = sd.outcome
    return str(done.get("outcome")) if done is not None else None


def _end_group(pid: int, start: float, grace: float) -> None:
    """SIGTERM the group the recorded worker leads, ``grace`` seconds, then SIGKILL; only
    while that very process (its start time) still leads it."""
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
    """Judge a standalone unit whose dispatcher is gone: its result or FALLBACK published at
    the path its dispatcher recorded, ``outcome.json`` written (its exit code unknown: it was
    its dispatcher's to see), its ledger row closed. Refused while its dispatcher or worker
    still runs."""
    if (done := sd.outcome) is not None:
        return Outcome.from_json(done)
    for who, proc in (("dispatcher", identity.dispatcher(sd)),
                      ("worker", identity.standalone_worker(sd))):
        if identity.alive(proc):
            assert proc is not None
            raise StateError(f"the {who} of {sd.path} still runs (pid {proc[0]})",
                             hint=f"`prun cancel {sd.path}` ends it")
    d = Dispatch(_request(sd), LocalLauncher(), sd, dispatcher_pid=os.getpid())
    worker = identity.standalone_worker(sd)
    d.launched_at = worker[1] if worker else None
    d.receipt = f"pid:{worker[0]}@{worker[1]:.3f}" if worker else None
    outcome = finish(d, None, cancelled=cancelled)
    recording.finished(d)
    return outcome


def _request(sd: statedir.StateDir) -> Prepared:
    """The unit's request as its dispatcher recorded it beside the state dir (the model
    from its ``unit.json``: it only names what ran)."""
    known, unit, argv = identity.facts(sd), sd.unit, identity.command(sd)
    model = unit.get("requested_model")
    executor = known.get("executor") or "command"
    req = Request(executor=executor, prompt_file=sd.file(statedir.PROMPT),
                  result_file=known["result_file"], unit_id=known.get("unit_id") or "unit",
                  mode=known.get("mode") or "accept-edits",
                  command=shlex.join(argv) if executor == "command" else None,
                  model=model if isinstance(model, str) else None,
                  workspace=known.get("workspace"), state_root=os.path.dirname(sd.path))
    return prepare(req, reopen=True)
