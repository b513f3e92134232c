"""The state dir: one folder per attempt, the file protocol of the seed's dispatcher.

Files (all optional until written; ``outcome.json`` is written last and means "finished"):

    tail             the worker's stdout as it ran (the agent's event stream, or a command's output)
    stderr           the worker's stderr
    dispatch-pid     PID of the process that dispatched the unit (dispatcher or supervisor)
    result-file      absolute path of the unit's result file
    conversation-id  the backend's conversation or session id (agy init event, claude/gemini init)
    model            the model that actually ran
    quota-note       the MODEL-FALLBACK line or quota refusal, when the quota gate acted
    prompt           a copy of the unit's prompt (for follow-ups, reassignment and recovery)
    unit.json        what was launched: unit id, executor, models, mode, workspace, argv, timeout,
                     dispatcher pid and start time; once the worker runs, its pid, process
                     group and start time (``worker``)
    outcome.json     outcome, exit code, backend status, error, timestamps (written last)
    exit-status      a run's worker: its monitor's record of the unit's end, ``{"exit-code":
                     N}`` (``prun.attempt.monitor``), written through a descriptor the keeper
                     opened, so it outlives the keeper
    outbox/          units of a run: where the worker writes its own result
                     (``outbox/result.md``); prun publishes a copy at the result path (named in
                     ``result-file``)
    guard.log        one JSON line per command prun's git wrapper or Claude guard refused
    tmp/             the worker's temporary folder (``TMPDIR``; its ``/tmp`` in the sandbox)
    home/            the worker's private home (``HOME``): its agent CLI's configuration,
                     copied (a follow-up reuses the home of the attempt it continues)
    fallback.md      the FALLBACK, when the result path could not be written (a full disk, a
                     folder gone or read-only)
    handoff.md       session units only: the prompt plus the unit contract, for the subagent
    receipt          session units only: the subagent's identifier (``prun receipt``)

A sandboxed worker can write only ``outbox/``, ``guard.log``, ``tmp/`` and ``home/`` here;
everything else in the state dir (``unit.json``, ``outcome.json``, ``dispatch-pid``...) is
read-only to it (``prun.attempt.launching``).

Everything here is plain files so that any later prun command, and any person, can rebuild
the attempt's state after the process that made it is gone.

A unit can write its own state dir (outside the sandbox, or before it ended), so every file
here is read as untrusted (``fsutil.open_regular``): a regular file only (a link, FIFO or
folder in its place reads as missing), the records (``unit.json``, ``outcome.json``, the
one-value files) at most ``RECORD_LIMIT`` bytes. ``unit.json`` is the human record of what was
launched; prun never signals or re-attaches to a process because of what it says: the identity
of a unit's processes comes from records the unit cannot write (``attempt.identity``).

In a run, the worker's keeper writes ``prompt`` (a copy of the attempt's frozen brief,
``prompts/<unit>.<n>.md``), ``result-file``, ``dispatch-pid`` and ``model`` as it starts the
worker, and ``unit.json`` once, with its worker (``Dispatch.opening``); until then the state
dir may be empty.
"""

from __future__ import annotations

import os
import re
import time

from .._util.fsutil import atomic_write, atomic_write_json, file_size, read_json, read_text
from ..errors import UsageError

TYPE_CHECKING = False  # typing costs milliseconds on the dispatcher's fast path
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from .protocols import WorkerRecord

TAIL = "tail"
STDERR = "stderr"
DISPATCH_PID = "dispatch-pid"
RESULT_FILE = "result-file"
CONVERSATION_ID = "conversation-id"
MODEL = "model"
QUOTA_NOTE = "quota-note"
PROMPT = "prompt"
UNIT = "unit.json"
OUTCOME = "outcome.json"
EXIT_STATUS = "exit-status"
HANDOFF = "handoff.md"
FALLBACK = "fallback.md"
OUTBOX = "outbox"
OUTBOX_RESULT = "result"
RECEIPT = "receipt"
GUARD_LOG = "guard.log"
TMP = "tmp"
HOME = "home"

DURABLE = frozenset({OUTCOME, CONVERSATION_ID})

RECORD_LIMIT = 4 << 20   # a record of the state dir larger than this reads as missing

UNIT_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,119}$")


def check_unit_id(unit_id: str) -> str:
    if not unit_id or not UNIT_ID_RE.fullmatch(unit_id) or ".." in unit_id:
        raise UsageError(
            f"bad unit id {unit_id!r}",
            hint="use letters, digits, '.', '_' and '-', starting with a letter or digit",
        )
    return unit_id


def default_root() -> str:
    """Where standalone dispatches keep their state dirs: ``$PRUN_STATE_ROOT``, else the
    user's state folder (``settings.state_root``)."""
    from ..settings import current

    return current().state_root


def create(unit_id: str, root: str | None = None) -> StateDir:
    """Make a fresh, uniquely named state dir for one attempt of ``unit_id``."""
    root = root or default_root()
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    for _ in range(100):
        path = os.path.join(root, f"{unit_id}-{stamp}-{os.urandom(3).hex()}")
        try:
            os.mkdir(path)
            return StateDir(path)
        except FileExistsError:
            continue
        except FileNotFoundError:  # the first state dir under this root
            os.makedirs(root, exist_ok=True)
    raise OSError(f"could not make a unique state dir under {root}")


class StateDir:
    """One attempt's state dir (a plain class: it is made on the dispatcher's fast path)."""

    __slots__ = ("path",)

    def __init__(self, path: str):
        self.path = path

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StateDir) and other.path == self.path

    def __hash__(self) -> int:
        return hash(self.path)

    def __repr__(self) -> str:
        return f"StateDir({self.path!r})"

    def file(self, name: str) -> str:
        return f"{self.path}/{name}" if self.path[-1:] != "/" else self.path + name

    # writing ------------------------------------------------------------------------------
    # Only outcome.json is fsynced: the others are rebuilt from it or re-read at once, and a
    # rename is atomic for readers either way (this halves the cost of a unit's bookkeeping).
    def write(self, name: str, text: str) -> None:
        atomic_write(self.file(name), value_text(text), durable=name in DURABLE)

    def write_json(self, name: str, obj: object, durable: bool | None = None) -> None:
        atomic_write_json(self.file(name), obj,
                          durable=name in DURABLE if durable is None else durable)

    # reading ------------------------------------------------------------------------------
    def read(self, name: str) -> str | None:
        """A one-value file's stripped text, or None when it is missing or empty."""
        text = read_text(self.file(name), limit=RECORD_LIMIT)
        return text.strip() or None if text is not None else None

    def read_json(self, name: str) -> object:
        """A JSON file's value, or None when it is missing, unreadable, not a regular file,
        over ``RECORD_LIMIT`` or not JSON."""
        value: object = read_json(self.file(name), limit=RECORD_LIMIT)
        return value

    def exists(self, name: str) -> bool:
        return os.path.exists(self.file(name))

    def problem(self, name: str) -> str | None:
        """Why the record ``name`` cannot be read, or None (it is missing, or fine): it is
        not a regular file, or it is larger than ``RECORD_LIMIT`` (a unit may leave anything
        in its state dir)."""
        from .._util.fsutil import UnsafeFile, regular_size

        try:
            regular_size(self.file(name), RECORD_LIMIT)
        except UnsafeFile as e:
            return f"{name} is {e.what}"
        except OSError as e:
            return f"{name} cannot be read ({e.strerror or e})"
        return None

    def _object(self, name: str) -> dict[str, Any] | None:
        value = self.read_json(name)
        return value if isinstance(value, dict) else None

    @property
    def unit(self) -> dict[str, Any]:
        """``unit.json`` (``shapes.UnitRecord``), or {} before it is written."""
        return self._object(UNIT) or {}

    @property
    def worker(self) -> dict[str, Any] | None:
        """The launched worker (pid, pgid, create_time, started_at), or None before launch."""
        info = self.unit.get("worker")
        return info if isinstance(info, dict) and info.get("pid") else None

    @property
    def outcome(self) -> dict[str, Any] | None:
        """``outcome.json`` (``Outcome.to_json``), or None before the attempt finished."""
        return self._object(OUTCOME)

    @property
    def result_file(self) -> str | None:
        return self.read(RESULT_FILE)

    @property
    def dispatch_pid(self) -> int | None:
        text = self.read(DISPATCH_PID)
        try:
            return int(text.split()[0]) if text else None
        except ValueError:
            return None

    @property
    def tail_size(self) -> int:
        return file_size(self.file(TAIL))

    def tail_mtime(self) -> float | None:
        try:
            return os.stat(self.file(TAIL)).st_mtime
        except OSError:
            return None


def value_text(text: str) -> str:
    """A one-value file's content: the value and one newline."""
    return text if text.endswith("\n") else text + "\n"


def worker_entry(pid: int, create_time: float | None, started_at: float,
                 keeper: Mapping[str, Any] | None = None) -> WorkerRecord:
    """``unit.json``'s ``worker``: the worker leads its own process group; ``keeper`` is the
    keeper process that started it, in a run."""
    entry: WorkerRecord = {"pid": pid, "pgid": pid, "create_time": create_time,
                           "started_at": iso(started_at)}
    if keeper:
        entry["keeper"] = keeper
    return entry


def iso(ts: float) -> str:
    """A time as the state dir's records give it: UTC, to the second."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def outbox(sd: StateDir, result_file: str) -> str:
    """Where a run's worker writes its result: ``<state dir>/outbox/result<ext of
    result_file>`` (a folder of its own: the only one of the state dir a sandboxed worker may
    write, with ``tmp``, ``home`` and ``guard.log``)."""
    name = os.path.basename(result_file)
    stem, dot, ext = name.rpartition(".")
    return sd.file(f"{OUTBOX}/{OUTBOX_RESULT}" + (f".{ext}" if dot and stem else ""))


def open_existing(path: str) -> StateDir:
    """A state dir given by a person or a coordinator; refused when it is not one."""
    if not path:
        raise UsageError("empty state dir argument", hint="pass the path printed as STATE-DIR")
    p = os.path.expanduser(path)
    if not os.path.isdir(p) or not _looks_made_here(p):
        raise UsageError(f"not a state dir: {path}", hint="pass the path printed as STATE-DIR")
    return StateDir(os.path.realpath(p))


_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*-\d{8}T\d{6}-[0-9a-f]{6}$")


def _looks_made_here(path: str) -> bool:
    """A folder ``create`` made: its name (``<unit>-<UTC time>-<6 hex>``, which it has from
    the first moment), or the protocol's files in it."""
    name = os.path.basename(os.path.normpath(os.path.realpath(path)))
    return bool(_NAME_RE.match(name)) or any(
        os.path.exists(os.path.join(path, f))
        for f in (UNIT, DISPATCH_PID, TAIL, OUTCOME, CONVERSATION_ID, PROMPT))
