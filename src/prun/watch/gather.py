"""``prun gather``: wait until result files have landed, printing each one the moment it does.

A result file has landed when it exists, is non-empty and is final:

- published: a prun dispatcher published it (or kept the worker's own file after the worker
  exited) and said so in the published-results index (``prun.attempt.result_index``). No waiting.
- stable: anyone else's file (a worker that wrote its own result, a session subagent, a person)
  that has been quiet, unchanged in size and modification time, for the stable window.

``LandingRule`` holds that rule (monitor uses it too); ``gather`` drives it from file-system
events and one timer per settling file, with the watch set up before the first look, so a file
that lands while gather starts is never missed and a file already complete counts at once.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .._util.quoting import quote, rest_of_line
from ..attempt import result_index
from ..errors import ExitCode, UsageError
from .notify import Watch

if TYPE_CHECKING:
    from .notify import Changes, Watch

DEFAULT_TIMEOUT_S = 3600.0
DEFAULT_STABLE_WINDOW_S = 10.0
RESCAN_S = 30.0  # a full look now and then, in case the platform dropped an event


@dataclass(frozen=True)
class FileState:
    """One look at a result file."""

    path: str
    status: str                     # missing, empty, settling, published, stable, changed
    size: int = 0
    ready_at: float | None = None   # settling: wall time when its stable window ends

    @property
    def landed(self) -> bool:
        return self.status in ("published", "stable", "changed")


class LandingRule:
    """Has a file landed? Remembers when each file's current version was first seen, so that a
    file whose modification time lies in the future (clock skew) still settles."""

    def __init__(self, window: float = DEFAULT_STABLE_WINDOW_S, index_folder: str | None = None):
        self.window = window
        self.index_folder = index_folder or result_index.index_dir()
        # path -> (its device, inode, size and mtime, when that version was first seen)
        self._seen: dict[str, tuple[tuple[int, int, int, int], float]] = {}

    def check(self, path: str, now: float | None = None) -> FileState:
        now = time.time() if now is None else now
        try:
            st = os.stat(path)
        except OSError:
            self._seen.pop(path, None)
            return FileState(path, "missing")
        if st.st_size == 0:
            return FileState(path, "empty")
        if result_index.lookup(path, st, self.index_folder) is not None:
            return FileState(path, "published", st.st_size)
        if result_index.rewritten(path, st, self.index_folder):
            return FileState(path, "changed", st.st_size)
        sig = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        seen = self._seen.get(path)
        if seen is None or seen[0] != sig:
            seen = (sig, now)
            self._seen[path] = seen
        quiet_since = st.st_mtime if st.st_mtime <= now + 1.0 else seen[1]
        ready_at = quiet_since + self.window
        if ready_at <= now:
            return FileState(path, "stable", st.st_size)
        return FileState(path, "settling", st.st_size, ready_at)


def watch_point(folder: str) -> str:
    """The folder itself, or its nearest existing ancestor when it does not exist yet."""
    while not os.path.isdir(folder):
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return folder


def gather(paths: Iterable[str], *, emit: Callable[[str], None],
           timeout: float = DEFAULT_TIMEOUT_S, window: float = DEFAULT_STABLE_WINDOW_S,
           mode: str = "native", interval: float = 1.0) -> int:
    """Print ``GATHER-START``, a ``DONE`` line per landed file, then return 0; or print
    ``TIMEOUT remaining=<k>`` and return 2 when ``timeout`` seconds pass first. A published
    result written again in place afterwards lands as ``CHANGED <path> reason=result-changed``
    and the return is 1 once every file has landed."""
    files = list(dict.fromkeys(os.path.abspath(os.path.expanduser(p)) for p in paths))
    for p in files:
        if os.path.isdir(p):
            raise UsageError(f"a result file is a folder: {p}", hint="pass result file paths")
    rule = LandingRule(window)
    started = time.monotonic()
    watch = Watch(mode, interval)
    try:
        waiting = _Waiting(files, rule, watch, emit, polling=mode == "poll", interval=interval)
        waiting.watch_all()
        emit(f"GATHER-START count={len(files)} timeout={_seconds(timeout)}s")
        todo: Iterable[str] = files
        while True:
            now = time.time()
            waiting.look(todo, now)
            if not waiting.pending:
                # every file landed (one written again after it was published: FAILED)
                return ExitCode.FAILED if waiting.rewritten else ExitCode.OK
            left = timeout - (time.monotonic() - started)
            if left <= 0:
                emit(f"TIMEOUT remaining={len(waiting.pending)}")
                return ExitCode.USAGE  # the seed fixes gather's TIMEOUT at 2
            changes = watch.wait(waiting.sleep(left, now))
            todo = waiting.due(changes, time.time())
    finally:
        watch.close(wait=False)  # the answer is out: do not delay the exit


class _Waiting:
    """The result files gather still waits for, and what it knows of them between looks."""

    def __init__(self, files: Iterable[str], rule: LandingRule, watch: Watch,
                 emit: Callable[[str], None], *, polling: bool, interval: float):
        self.pending: dict[str, None] = dict.fromkeys(files)   # in the order given
        self.rule, self.watch, self.emit = rule, watch, emit
        self.polling, self.interval = polling, interval
        self.by_entry = {result_index.entry_name(p): p for p in self.pending}  # index entry -> file
        self.watched: dict[str, str] = {}      # file -> the folder watched for it
        self.ready_at: dict[str, float] = {}   # settling file -> when its stable window ends
        self.rewritten = 0                     # files published, then written again in place
        self.last_full = time.monotonic()

    def watch_all(self) -> None:
        """Watch the published-results index and each file's folder (or its nearest existing
        ancestor), before the first look."""
        if not self.polling:  # polled, a busy index would cost a stat per entry per interval
            try:
                os.makedirs(self.rule.index_folder, exist_ok=True)
                self.watch.add_dir(self.rule.index_folder)
            except OSError:
                pass  # no index to watch: files are looked up when they change or settle
        for p in self.pending:
            self.watched[p] = watch_point(os.path.dirname(p))
            self.watch.add_dir(self.watched[p])

    def look(self, paths: Iterable[str], now: float) -> None:
        """Check each of ``paths`` still pending: print the ones that landed, note when the
        settling ones will be stable."""
        for p in paths:
            if p not in self.pending:
                continue
            state = self.rule.check(p, now)
            if state.landed:
                self._landed(state)
            elif state.ready_at is not None:
                self.ready_at[p] = state.ready_at
            else:
                self.ready_at.pop(p, None)

    def _landed(self, state: FileState) -> None:
        del self.pending[state.path]
        self.ready_at.pop(state.path, None)
        if state.status == "changed":
            self.rewritten += 1
            self.emit(f"CHANGED {quote(state.path)} reason=result-changed")
        else:
            self.emit(f"DONE {rest_of_line(state.path)}")

    def sleep(self, left: float, now: float) -> float:
        """How long to wait for events: until the timeout, the next full look, or the first
        settling file's stable window ends."""
        wake = [left, RESCAN_S, *(t - now for t in self.ready_at.values())]
        if self.polling and self.ready_at:
            wake.append(self.interval)  # a settling file's index entry may appear meanwhile
        return min(wake)

    def due(self, changes: Changes, now: float) -> set[str]:
        """The files to look at again after a wait: those whose window ended (every settling
        one when polling), every one now and then, and those the changes concern."""
        due = (set(self.ready_at) if self.polling
               else {p for p, t in self.ready_at.items() if t <= now})
        if time.monotonic() - self.last_full >= RESCAN_S:
            self.last_full = time.monotonic()
            due.update(self.pending)
        folders_missing = any(self.watched[p] != os.path.dirname(p) for p in self.pending)
        for changed in changes.paths:
            due |= self._concerned(changed, folders_missing)
        return due

    def _concerned(self, changed: str, folders_missing: bool) -> set[str]:
        """The files a changed path concerns: the file itself, the file of an index entry, or
        (a folder appeared) the files whose folder was missing."""
        if changed in self.pending:
            return {changed}
        name = os.path.basename(changed)
        if name in self.by_entry:
            return {self.by_entry[name]}
        if folders_missing and os.path.isdir(changed):
            return self._rewatch_missing_folders()
        return set()

    def _rewatch_missing_folders(self) -> set[str]:
        """Results whose folder was missing may live in a folder that appeared: watch each
        one's nearest existing folder again; those watched somewhere new are due."""
        due = set()
        for p, point in list(self.watched.items()):
            if p in self.pending and point != os.path.dirname(p):
                self.watched[p] = watch_point(os.path.dirname(p))
                if self.watched[p] != point:
                    self.watch.add_dir(self.watched[p])
                    due.add(p)
        return due


def _seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"
