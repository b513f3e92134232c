"""``prun gather``: wait until result files have landed, printing each one the moment it does.

A result file has landed when it exists, is non-empty and is final:

- published: a prun dispatcher published it (or kept the worker's own file after the worker
  exited) and said so in the published-results index (``prun.attempt.published``). No waiting.
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

from ..attempt import published
from ..errors import ExitCode, UsageError

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
        self.index_folder = index_folder or published.index_dir()
        self._seen: dict[str, tuple[tuple, float]] = {}

    def check(self, path: str, now: float | None = None) -> FileState:
        now = time.time() if now is None else now
        try:
            st = os.stat(path)
        except OSError:
            self._seen.pop(path, None)
            return FileState(path, "missing")
        if st.st_size == 0:
            return FileState(path, "empty")
        if published.lookup(path, st, self.index_folder) is not None:
            return FileState(path, "published", st.st_size)
        if published.rewritten(path, st, self.index_folder):
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
    from .notify import Watch

    pending: dict[str, None] = dict.fromkeys(os.path.abspath(os.path.expanduser(p)) for p in paths)
    for p in pending:
        if os.path.isdir(p):
            raise UsageError(f"a result file is a folder: {p}", hint="pass result file paths")
    rule = LandingRule(window)
    by_entry = {published.entry_name(p): p for p in pending}
    started = time.monotonic()
    watch = Watch(mode, interval)
    try:
        polling = mode == "poll"
        if not polling:  # polled, a busy index would cost a stat per entry per interval
            try:
                os.makedirs(rule.index_folder, exist_ok=True)
                watch.add_dir(rule.index_folder)
            except OSError:
                pass  # no index to watch: files are looked up when they change or settle
        watched: dict[str, str] = {}
        for p in pending:
            watched[p] = watch_point(os.path.dirname(p))
            watch.add_dir(watched[p])
        emit(f"GATHER-START count={len(pending)} timeout={_seconds(timeout)}s")
        ready_at: dict[str, float] = {}
        rewritten = 0                # files published, then written again in place
        last_full = time.monotonic()
        todo: Iterable[str] = list(pending)
        missing_folders = any(point != os.path.dirname(p) for p, point in watched.items())
        while True:
            now = time.time()
            for p in todo:
                if p not in pending:
                    continue
                state = rule.check(p, now)
                if state.landed:
                    del pending[p]
                    ready_at.pop(p, None)
                    if state.status == "changed":
                        rewritten += 1
                        emit(f"CHANGED {p} reason=result-changed")
                    else:
                        emit(f"DONE {p}")
                elif state.ready_at is not None:
                    ready_at[p] = state.ready_at
                else:
                    ready_at.pop(p, None)
            if not pending:
                # every file landed (one written again after it was published: FAILED)
                return ExitCode.FAILED if rewritten else ExitCode.OK
            left = timeout - (time.monotonic() - started)
            if left <= 0:
                emit(f"TIMEOUT remaining={len(pending)}")
                return ExitCode.USAGE  # the seed fixes gather's TIMEOUT at 2
            wake = [left, RESCAN_S, *(t - now for t in ready_at.values())]
            if polling and ready_at:
                wake.append(interval)  # a settling file's index entry may appear meanwhile
            changes = watch.wait(min(wake))
            now = time.time()
            due = set(ready_at) if polling else {p for p, t in ready_at.items() if t <= now}
            if time.monotonic() - last_full >= RESCAN_S:
                last_full = time.monotonic()
                due.update(pending)
            for changed in changes.paths:
                name = os.path.basename(changed)
                if changed in pending:
                    due.add(changed)
                elif name in by_entry:
                    due.add(by_entry[name])
                elif missing_folders and os.path.isdir(changed):
                    # A folder appeared: results whose folder was missing may live there now.
                    for p, point in watched.items():
                        if p in pending and point != os.path.dirname(p):
                            watched[p] = watch_point(os.path.dirname(p))
                            if watched[p] != point:
                                watch.add_dir(watched[p])
                                due.add(p)
            missing_folders = any(point != os.path.dirname(p) for p, point in watched.items()
                                  if p in pending)
            todo = due
    finally:
        watch.close(wait=False)  # the answer is out: do not delay the exit


def _seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"
