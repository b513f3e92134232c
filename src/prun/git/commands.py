"""A plan's own command in a workspace (its ``setup``: ``prun.git.setup``; the combined check
after integration), run bounded (``run_bounded``): stdin closed, in a process group of its own
that is ended whole past its timeout, its output in a log file.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .._util import process
from .._util.fsutil import tail_bytes


@dataclass(frozen=True)
class Ran:
    """A bounded command's end: exit code (None when it timed out), time taken, its output."""

    exit_code: int | None
    timed_out: bool
    duration_s: float
    log: str
    tail: str

    @property
    def ok(self) -> bool:
        return not self.timed_out and self.exit_code == 0


def shell_argv(command: str | Sequence[str]) -> list[str]:
    """A plan's command: a string is a shell line (``/bin/sh -c``), a list is argv."""
    if isinstance(command, str):
        return ["cmd", "/c", command] if os.name == "nt" else ["/bin/sh", "-c", command]
    return [str(a) for a in command]


def run_bounded(command: str | Sequence[str], cwd: str, env: Mapping[str, str] | None,
                timeout: float, log_path: str | os.PathLike[str]) -> Ran:
    """Run ``command`` in ``cwd`` in its own process group, stdin closed, stdout and stderr to
    ``log_path``; past ``timeout`` seconds its whole group is ended. Leftover processes of the
    group are ended when its leader exits."""
    log_path = os.fspath(log_path)
    full_env = dict(os.environ if env is None else env)
    started = time.monotonic()
    try:
        worker = process.spawn(shell_argv(command), cwd=cwd, env=full_env,
                               stdout_path=log_path, stderr_path=log_path)
    except OSError as e:
        return Ran(127, False, 0.0, log_path, str(e))
    timed_out = not worker.wait_exit(float(timeout))
    if timed_out:
        from ..settings import current

        process.end_group(worker, current().kill_grace_s)
    else:
        worker.sweep()
    code = worker.reap()
    tail = tail_bytes(log_path, 4000).decode("utf-8", "replace")
    return Ran(None if timed_out else code, timed_out, time.monotonic() - started, log_path,
               tail)


