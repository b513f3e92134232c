"""Who an attempt's processes are, from records its unit cannot write.

prun signals a process, or re-attaches to one, only on the word of a record kept outside the
unit's state dir, and only while that very process (its pid and its start time) still runs:

    a run's worker            the attempt's receipt in the ledger, ``pid:<pid>@<start>``
                              (written by the supervisor from the keeper's answer), else the
                              keeper's ``<state dir> spawned <pid> <start>`` line in the run's
                              exit-code log (``<run dir>/state/.exit-codes``, beside the
                              state dirs, not in one)
    a run's dispatcher        the run's supervisor, as the ledger's run row records it
    a standalone unit's       its dispatcher's record ``<state root>/.records/<state dir
    dispatcher and worker     name>``, one JSON object a line: the dispatcher, the unit id,
                              executor, result path, workspace, mode and command as it
                              begins; the worker (``[pid, start]``) once it runs

A worker leads its own process group (its pid is the group's id), so the group prun ends is
always the recorded worker's own. ``unit.json``'s ``dispatcher`` and ``worker`` stay the
state dir protocol's human record: they are never read to decide what to signal. A
standalone record also keeps what ``prun settle`` publishes where, and where a follow-up runs
(``facts``): a unit that rewrote its ``unit.json`` cannot make prun write a file elsewhere or
give a follow-up another workspace.

What holds where. In the sandbox a run's unit cannot write the repository (the ledger, the run
dir and its exit-code log are under its read-only mount): only its own state dir, which none
of these records is in. A standalone unit's record is beside its state dir, in the state
root, which the sandbox gives the unit no more than any other folder outside its own places.
Without the sandbox a unit runs as the user and could signal the user's processes itself;
what still holds is that nothing it writes in its state dir (the one folder prun hands it)
makes prun signal a process it did not start for that attempt.
"""

from __future__ import annotations

import os

from . import statedir
from .exitlog import logged_spawn

TYPE_CHECKING = False  # typing costs milliseconds on the dispatcher's fast path
if TYPE_CHECKING:
    from typing import TypeAlias

    Proc: TypeAlias = tuple[int, float]   # a process as recorded: pid, start time

RECORDS = ".records"
RECORD_LIMIT = 64 << 10   # a standalone record is a few short lines
FACTS = ("unit_id", "executor", "result_file", "workspace", "mode")


def from_receipt(receipt: object) -> Proc | None:
    """The worker a receipt ``pid:<pid>@<start time>`` names, or None (no receipt, a
    cluster's ``dask:`` key, a malformed one)."""
    if not isinstance(receipt, str) or not receipt.startswith("pid:"):
        return None
    pid, _, start = receipt[4:].partition("@")
    try:
        return _proc([int(pid), float(start)])
    except ValueError:
        return None


def _proc(value: object) -> Proc | None:
    """``[pid, start]`` as a process, or None when it is not one."""
    if not isinstance(value, list | tuple) or len(value) != 2:
        return None
    pid, start = value
    if isinstance(pid, bool) or not isinstance(pid, int) or not 1 < pid < 1 << 31:
        return None
    if isinstance(start, bool) or not isinstance(start, int | float) or not start > 0 \
            or start == float("inf"):
        return None
    return pid, float(start)


def record_path(sd: statedir.StateDir) -> str:
    """Where a standalone dispatcher keeps its record: beside the state dir, not in it."""
    root, name = os.path.split(os.path.normpath(sd.path))
    return os.path.join(root, RECORDS, name)


def record(sd: statedir.StateDir, **entries: object) -> None:
    """Append one line to a standalone dispatcher's record (``dispatcher=[pid, start]``,
    ``worker=[pid, start]``, the ``FACTS``). Never raises: what is not recorded is never
    acted on (a process not signalled, a follow-up given no workspace of the earlier unit's)."""
    import json

    from .._util.fsutil import write_all

    path = record_path(sd)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
    line = json.dumps(entries, sort_keys=True) + "\n"
    try:
        try:
            fd = os.open(path, flags, 0o644)
        except FileNotFoundError:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd = os.open(path, flags, 0o644)
        try:
            write_all(fd, line.encode())
        finally:
            os.close(fd)
    except OSError:
        pass


def recorded(sd: statedir.StateDir) -> dict[str, object]:
    """A standalone unit's record, its lines merged (a later line wins)."""
    import json

    from .._util.fsutil import read_text

    found: dict[str, object] = {}
    for line in (read_text(record_path(sd), limit=RECORD_LIMIT) or "").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            found.update(entry)
    return found


def facts(sd: statedir.StateDir) -> dict[str, str]:
    """What a standalone dispatcher recorded of its unit (``FACTS``, strings only)."""
    rec = recorded(sd)
    return {k: v for k in FACTS if isinstance(v := rec.get(k), str) and v}


def command(sd: statedir.StateDir) -> list[str]:
    """The command a standalone dispatcher recorded it ran (a command unit's argv)."""
    argv = recorded(sd).get("command")
    return argv if isinstance(argv, list) and all(isinstance(a, str) for a in argv) else []


def worker(sd: statedir.StateDir, receipt: object = None) -> Proc | None:
    """A run's attempt's worker: its ledger ``receipt``, else its keeper's ``spawned`` line;
    None when neither names one."""
    return from_receipt(receipt) or logged_spawn(sd)


def standalone_worker(sd: statedir.StateDir) -> Proc | None:
    """A standalone unit's worker, as its dispatcher recorded it."""
    return _proc(recorded(sd).get("worker"))


def dispatcher(sd: statedir.StateDir) -> Proc | None:
    """A standalone unit's dispatcher, as it recorded itself (a run's is its supervisor, in
    the ledger)."""
    return _proc(recorded(sd).get("dispatcher"))


def alive(proc: Proc | None) -> bool:
    """Whether that very process (its pid and start time) still runs."""
    from .._util.process import same_process_alive

    return proc is not None and same_process_alive(proc[0], proc[1])
