"""A run's unit under a monitor of its own: what records the unit's end when the keeper that
started it is gone.

Only a process's parent learns its exit status. A run's keeper (``prun.run.keeper_process``)
starts the run's units, so a keeper killed with its supervisor (``kill -9``, the OOM killer,
a closed terminal) would take every unit's exit with it. So the keeper starts each unit under
a monitor, a process far smaller than itself, that stays the unit's parent whatever becomes of
the keeper, waits for it and writes how it ended to the state dir's ``exit-status``
(``statedir.EXIT_STATUS``), through descriptor ``STATUS_FD``, which the keeper opens on that
file for the monitor before the spawn. The monitor is a POSIX ``sh`` (``wrap``; its memory:
``bench/bench_monitor.py``, quoted in docs/reliability.md). It ignores SIGTERM, SIGINT and
SIGHUP and runs the unit with them at their defaults (so SIGTERM to the group is the unit's,
with its grace, as before), waits for it, writes its exit and exits with the same code. Its
own notes (``sh`` says "Segmentation fault" of a child) go nowhere; the unit keeps its stderr,
and has neither the status descriptor nor the copy of stderr.

Sandboxed, what the monitor runs is bubblewrap, with ``--die-with-parent`` as for any sandboxed
worker: bwrap's parent is now the monitor, which outlives the keeper, so the unit runs on; when
the unit's main process ends, bwrap exits and everything left inside its PID namespace is
killed with it (``sandbox``); SIGKILL to the group kills the monitor and so everything inside.
Unsandboxed, what left the unit's group is ended by the keeper while one runs, else by the
supervisor that re-attaches the unit (``process.end_marked``: each process that carries the
unit's ``PRUN_STATE_DIR``).

Either way the monitor leads the unit's session and process group: the ledger's receipt, the
keeper's ``spawned`` line and ``unit.json``'s ``worker`` name it, so ``prun cancel``, ``prun
pause`` and a resumed supervisor signal the unit's group and re-attach to it as they did to a
worker. The state dir's records are read-only to a sandboxed unit and the descriptor is not
passed on to the unit: a sandboxed unit cannot write its own exit.

The file holds one JSON object a line; the unit's exit is ``{"exit-code": N}``: its exit
status, or 128+N for its death by signal N (bwrap's own failure to set up is its exit 1). No
such line (the monitor was killed itself, by SIGKILL to the whole group) is no exit code:
it is never made up (``exit_status`` gives None).
"""

from __future__ import annotations

import json

from .._util.fsutil import read_text

STATUS_FD = 3
SH = "/bin/sh"
STATUS_LIMIT = 64 << 10    # the monitor writes one short line
NAME = "prun-monitor"      # the monitor's $0, as ``ps`` shows it
# in the environment of every process of a unit (its state dir): what a unit left outside
# its group while no keeper ran is found by it (``process.end_marked``)
STATE_DIR_VAR = "PRUN_STATE_DIR"

# $@ is the unit's argv; fd 3 the status file. The unit runs in a subshell that puts back the
# signals the monitor ignores (ignored only after its own start: ``sh`` could not undo an
# ignore it inherited), with its own stderr (4) and without 3 and 4.
_SCRIPT = """trap '' TERM INT HUP
exec 4>&2 2>/dev/null
(trap - TERM INT HUP; exec "$@" 2>&4 4>&-) 3>&-
code=$?
printf '{"exit-code": %d}\\n' "$code" >&3
exit "$code"
"""


def wrap(argv: list[str]) -> list[str]:
    """``argv`` (its program a path) under the ``sh`` monitor, which writes the unit's exit to
    descriptor ``STATUS_FD`` (the caller opens it: ``process.spawn_session``'s ``status``)."""
    return [SH, "-c", _SCRIPT, NAME, *argv]


def exit_status(path: str) -> int | None:
    """The unit's exit as its monitor wrote it to ``path`` (an ``exit-status`` file), or None
    when it wrote none, or the file is missing, not a regular file or holds no such line."""
    code = None
    for line in (read_text(path, limit=STATUS_LIMIT) or "").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        value = entry.get("exit-code") if isinstance(entry, dict) else None
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 255:
            code = value
    return code

