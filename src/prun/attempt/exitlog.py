"""The exit-code log of a run's state root, appended by the run's worker keeper
(``prun.run.keeper_process``): ``<state dir name> spawned <pid> <start time>`` once a worker
runs (before the supervisor is told), and ``<state dir name> <code>`` just after it is reaped.
Read by the supervisor and by recovery: a worker's exit code is known only to its parent (the
unit's monitor, which writes it to the state dir's ``exit-status``: ``monitor``, and the keeper,
which logs the monitor's), and a worker whose launch a crash cut short is known to have started
only from here."""

from __future__ import annotations

import os
import time

from . import statedir

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .._util.worker import WorkerLike as Worker

EXIT_LOG = ".exit-codes"
KEEPER_LOG_WAIT_S = 5.0   # a keeper writes a code just after it reaps the worker


def path(sd: statedir.StateDir) -> str:
    """The exit-code log beside ``sd`` (one per state root)."""
    return os.path.join(os.path.dirname(sd.path), EXIT_LOG)


async def exit_code(worker: Worker, sd: statedir.StateDir) -> int | None:
    """The exit code of a worker that exited: reaped from our child, told by our keeper, or,
    for a worker an earlier supervisor started (whose ``reap`` gives None: it is not our
    child), read from the exit-code log."""
    import asyncio

    code = worker.reap()
    if code is None:
        code = await asyncio.to_thread(recorded_exit, sd, True)
    return code


def recorded_exit(sd: statedir.StateDir, wait: bool = False) -> int | None:
    """The worker's exit code as its monitor recorded it, else as its keeper did, or None.
    With ``wait``, a keeper that still runs gets a moment to write it."""
    from .._util.process import same_process_alive
    from .monitor import exit_status

    code = exit_status(sd.file(statedir.EXIT_STATUS))
    if code is not None:
        return code

    deadline = time.monotonic() + KEEPER_LOG_WAIT_S
    delay = 0.005
    while (code := logged_exit(sd)) is None and wait and time.monotonic() < deadline:
        # unit.json's keeper only bounds this wait (never more than KEEPER_LOG_WAIT_S);
        # nothing is signalled on its word
        keeper = (sd.worker or {}).get("keeper")
        pid, start = (keeper.get("pid"), keeper.get("create_time")) if isinstance(
            keeper, dict) else (None, None)
        if not isinstance(pid, int) or not isinstance(start, float | int | None) \
                or not same_process_alive(pid, start, unproven=True):
            return logged_exit(sd)
        time.sleep(delay)
        delay = min(delay * 2, 0.1)
    return code


def logged_exit(sd: statedir.StateDir) -> int | None:
    """The last code the log records for ``sd``, or None."""
    from .._util.fsutil import read_text

    prefix = os.path.basename(sd.path) + " "
    code = None
    for line in (read_text(path(sd)) or "").splitlines():
        if line.startswith(prefix) and not line.startswith(prefix + "spawned "):
            code = line[len(prefix):].strip()
    try:
        return int(code) if code else None
    except ValueError:
        return None


def logged_spawn(sd: statedir.StateDir) -> tuple[int, float] | None:
    """The worker's pid and start time as its keeper logged its start, or None."""
    from .._util.fsutil import read_text

    prefix = os.path.basename(sd.path) + " spawned "
    for line in (read_text(path(sd)) or "").splitlines():
        if line.startswith(prefix):
            try:
                pid, start = line[len(prefix):].split()
                return int(pid), float(start)
            except ValueError:
                return None
    return None
