"""A run's supervisor as a detached process: starting it (``spawn_supervisor``), its signal
that it holds the run, whether it is alive, and waking it to read its requests."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from .._util.process import same_process_alive, start
from ..errors import StateError

T = TypeVar("T")


if TYPE_CHECKING:
    import sqlite3


def supervisor_alive(run: Mapping[str, Any] | sqlite3.Row) -> bool:
    return same_process_alive(run["supervisor_pid"], run["supervisor_started"])


def spawn_supervisor(run_id: str, ledger_path: str | os.PathLike[str],
                     log: str | os.PathLike[str], *, module: str = "prun.run.supervisor") -> int:
    """Start a detached supervisor for ``run_id`` (its own session; output to ``log``):
    ``python -m <module> RUN``, a module whose supervisor calls ``ready_signal()``'s function
    once it holds the run (``prun.panel.detached`` drives a panel so)."""
    # Return only once the supervisor holds the run, so a `prun wait` right after sees it: it
    # writes one byte on this pipe then (an exit before that closes it with nothing written).
    read_end, write_end = os.pipe()
    env = dict(os.environ)
    env["PRUN_LEDGER"] = str(ledger_path)
    env[READY_FD] = str(write_end)
    try:
        with open(log, "ab") as out:
            proc = start([sys.executable, "-m", module, run_id],
                         stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env,
                         pass_fds=(write_end,))
        os.close(write_end)
        write_end = -1
        ready, _, _ = select.select([read_end], [], [], SUPERVISOR_START_S)
        held = bool(ready) and os.read(read_end, 1) == b"1"
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)
    if not held:
        raise StateError(f"the supervisor of run {run_id} did not start",
                         hint=f"see {log}; then `prun resume {run_id}`")
    return proc.pid


SUPERVISOR_START_S = 30.0
READY_FD = "PRUN_SUPERVISOR_READY_FD"   # the pipe a detached supervisor says it holds the run on


def ready_signal() -> Callable[[], None] | None:
    """What a detached supervisor calls to tell ``spawn_supervisor`` that it holds the run:
    one byte on the pipe it passed (its descriptor in ``PRUN_SUPERVISOR_READY_FD``, taken
    out of the environment so that no worker sees it). None when it was not given one."""
    fd = os.environ.pop(READY_FD, "")
    if not fd.isdigit():
        return None

    def ready() -> None:
        try:
            os.write(int(fd), b"1")
            os.close(int(fd))
        except OSError:
            pass   # the starter has gone: nobody is waiting

    return ready


def wake_supervisor(run: Mapping[str, Any] | sqlite3.Row) -> bool:
    """Tell a live supervisor to read its requests (SIGUSR1). False when none runs."""
    if not supervisor_alive(run):
        return False
    try:
        os.kill(run["supervisor_pid"], signal.SIGUSR1)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def wait_for(check: Callable[[], T], limit: float, interval: float = 0.05) -> T:
    """Poll ``check()`` until it returns something truthy or ``limit`` seconds pass."""
    end = time.monotonic() + limit
    while True:
        got = check()
        if got or time.monotonic() >= end:
            return got
        time.sleep(interval)
        interval = min(interval * 1.5, 0.5)
