"""A unit's guard on a worker: what ends the unit's whole process group when the Dask worker
process that started it dies (``kill -9``, the OOM killer), so that nothing of a lost unit is
left running on the worker's machine.

The unit's leader is killed with its worker already (its parent-death signal), but what it
started stays in its group, and outside a sandbox nothing else would end it. The guard is a
small ``sh`` in a session of its own, reading a pipe whose only writer is the worker process:
when the worker dies the kernel closes the pipe, the read returns, and the guard sends SIGTERM
to the unit's group, then SIGKILL after the kill grace. When the unit ends normally the task
kills the guard first (``Guard.stand_down``), so it never signals a group that has gone.
A sandboxed unit needs none: bubblewrap's PID namespace ends with its first process.
"""

from __future__ import annotations

import contextlib
import os
import subprocess

# $1: the unit's process group, $2: the grace in seconds
SCRIPT = ('read -r _; kill -s TERM -- "-$1" 2>/dev/null && '
          '{ sleep "$2"; kill -s KILL -- "-$1" 2>/dev/null; }; exit 0')


class Guard:
    """The guard of one unit's process group."""

    def __init__(self, pgid: int, grace: float):
        read, self._write = os.pipe()   # both ends close-on-exec: no other child holds one
        try:
            self.proc = subprocess.Popen(
                ["sh", "-c", SCRIPT, "prun-unit-guard", str(pgid), f"{grace:g}"],
                stdin=read, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True, close_fds=True)
        except OSError:
            os.close(self._write)
            raise
        finally:
            os.close(read)

    def stand_down(self) -> None:
        """The unit ended here: end the guard (before its pipe closes), and reap it."""
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        self.proc.wait()
        os.close(self._write)


def guard(pgid: int, grace: float) -> Guard | None:
    """A guard for the group ``pgid``, or None where it cannot be started (no ``sh``)."""
    try:
        return Guard(pgid, grace)
    except OSError:
        return None
