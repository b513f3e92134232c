"""``prun monitor``: watch running units' state dirs and return on the first actionable event.

Events, in the order they win when several hold at once:

    FAILED    any unit failed: its result is a FALLBACK, or its dispatcher is gone (the pid in
              ``dispatch-pid`` no longer runs, or runs with another start time) and it left no
              ``outcome.json``, or the dispatcher finished without a result
    STALLED   any unit's ``tail`` has not grown for the stall threshold
    ALL-DONE  every unit is done
    TIMEOUT   the optional ``--timeout`` passed first

A unit's state:

    done      its result has landed (``prun.watch.gather.LandingRule``): published by the dispatcher,
              or written by the worker and stable for the window. A stable worker-written
              result counts without reading the backend's status; the dispatcher's exit code is
              shown once ``outcome.json`` has one
    failed    see FAILED
    stalled   see STALLED
    running   none of the above
    waiting   a ``session`` unit (a subagent the coordinator spawned; no process, no tail) whose
              result has not landed. Such a unit is never stalled and never has a dead
              dispatcher; it is done when its result file is non-empty and stable

The monitor only observes: it opens a unit's files for reading and never signals, moves or
writes anything of a unit's. It sleeps on file-system events (``prun.watch.notify``), on the exit of
each dispatcher process (a pidfd on Linux; elsewhere a check every ``PID_POLL_S``), and on the
next deadline (a stall threshold or a stable window running out). Its report and the lines
printed of it are in ``prun.watch.report`` (named here too).
"""

from __future__ import annotations

import calendar
import os
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from .. import executors
from .._util.fsutil import read_head
from .._util.process import same_process_alive
from ..attempt import result_index as published
from ..attempt import statedir
from ..attempt.statedir import StateDir
from .gather import DEFAULT_STABLE_WINDOW_S, FileState, LandingRule
from .notify import Watch
from .report import (
    EVENTS,
    STATES,
    STILL_RUNNING,
    Report,
    UnitReport,
    digest_line,
    relaunch_argv,
    summary_line,
)

if TYPE_CHECKING:
    from typing import TypeAlias

    from .notify import Changes, ProcessWatch

    # what the monitor knows of a dispatcher: what ``Watch.add_process`` said, or exited since
    _ProcessState: TypeAlias = ProcessWatch | Literal["exited"]

DEFAULT_STALL_S = 600.0
PID_POLL_S = 2.0      # liveness checks where a process exit cannot wake us
RESCAN_S = 60.0       # a full look now and then, in case the platform dropped an event


class _Unit:
    """What the monitor keeps about one state dir between looks."""

    def __init__(self, sd: StateDir, seen_stalled: bool, started: float):
        self.sd = sd
        self.seen_stalled = seen_stalled
        self.started = started
        self.unit: dict[str, Any] = {}     # its unit.json
        self.result_file: str | None = None
        self.entry_name: str | None = None
        self.first_line: tuple[tuple[int, int, int], str] | None = None  # by the result's stat
        self.report: UnitReport | None = None
        self.next_check: float | None = None
        self.key: tuple[int, float | None] | None = None   # the dispatcher: pid, start time

    @property
    def last(self) -> UnitReport:
        """The report of its latest look (every unit is looked at before the first event)."""
        if self.report is None:
            raise RuntimeError(f"{self.sd.path} has not been looked at yet")
        return self.report

    @property
    def executor(self) -> str:
        return str(self.unit.get("executor") or "")

    def dispatcher(self) -> tuple[int | None, float | None]:
        """The dispatcher as the state dir says (only to observe whether it still runs: the
        monitor never signals anything): ``unit.json``'s, else ``dispatch-pid``."""
        d = self.unit.get("dispatcher")
        pid, start = (d.get("pid"), d.get("create_time")) if isinstance(d, dict) else (None,
                                                                                       None)
        if _pid(pid):
            return pid, float(start) if isinstance(start, int | float) and start > 0 else None
        pid = self.sd.dispatch_pid
        return (pid, None) if _pid(pid) else (None, None)


class Monitor:
    def __init__(self, state_dirs: Sequence[str], *, stall_s: float = DEFAULT_STALL_S,
                 window: float = DEFAULT_STABLE_WINDOW_S, mode: str = "native",
                 interval: float = 1.0, seen_stalled: Sequence[str] = ()):
        seen = {os.path.realpath(os.path.expanduser(p)) for p in seen_stalled}
        now = time.time()
        dirs = list(dict.fromkeys([*state_dirs, *seen_stalled]))
        self.units = [_Unit(statedir.open_existing(p), False, now) for p in dirs]
        for u in self.units:
            u.seen_stalled = u.sd.path in seen
        self.stall_s = stall_s
        self.rule = LandingRule(window)
        self.mode = mode
        self.interval = interval
        self._procs: dict[tuple[int, float | None], _ProcessState] = {}

    # the loop ---------------------------------------------------------------------------------
    def run(self, timeout: float | None = None) -> Report:
        started = time.monotonic()
        watch = self.watch = Watch(self.mode, self.interval)
        try:
            if self.mode != "poll":  # polled, see the settling check in _look instead
                try:
                    os.makedirs(self.rule.index_folder, exist_ok=True)
                    watch.add_dir(self.rule.index_folder)
                except OSError:
                    pass
            for u in self.units:
                watch.add_dir(u.sd.path)
            for u in self.units:
                self._look(u)
            last_full = time.monotonic()
            while True:
                event = self._event()
                if event is None and timeout is not None and time.monotonic() - started >= timeout:
                    event = "TIMEOUT"
                if event:
                    return Report(event, [u.last for u in self.units], self._watch_label())
                now = time.time()
                polled = "unsupported" in self._procs.values()
                wake = [(PID_POLL_S if polled else RESCAN_S) - (time.monotonic() - last_full)]
                wake += [u.next_check - now for u in self.units if u.next_check is not None]
                if timeout is not None:
                    wake.append(timeout - (time.monotonic() - started))
                changes = watch.wait(min(wake))
                now = time.time()
                due = {id(u) for u in self.units
                       if u.next_check is not None and u.next_check <= now}
                polled = "unsupported" in self._procs.values()
                if time.monotonic() - last_full >= (PID_POLL_S if polled else RESCAN_S):
                    last_full = time.monotonic()
                    due = {id(u) for u in self.units}
                for key in [k for k in self._procs if k[0] in changes.exited]:
                    self._procs[key] = "exited"
                due |= self._touched(changes)
                for u in self.units:
                    if id(u) in due:
                        self._look(u)
        finally:
            watch.close(wait=False)  # the answer is ready: do not make the caller wait

    def _touched(self, changes: Changes) -> set[int]:
        """The units an event concerns: a file in its state dir, its result file or index
        entry, or its dispatcher's exit."""
        folders = {os.path.dirname(p) for p in changes.paths}
        names = {os.path.basename(p) for p in changes.paths}
        return {id(u) for u in self.units
                if u.sd.path in folders or u.result_file in changes.paths
                or u.entry_name in names or (u.key is not None and u.key[0] in changes.exited)}

    def _event(self) -> str | None:
        states = [u.last.state for u in self.units]
        if "failed" in states:
            return "FAILED"
        if "stalled" in states:
            return "STALLED"
        if all(s == "done" for s in states):
            return "ALL-DONE"
        return None

    def _watch_label(self) -> str:
        if self.mode == "native" and self.watch.degraded:
            return "native+poll"
        return self.mode

    # one look at one unit ---------------------------------------------------------------------
    def _look(self, u: _Unit) -> None:
        self._learn(u)
        session = _is_session(u.executor)
        alive = session or self._alive(u)   # before reading outcome.json
        # the time of this look, read after the work above: a first look imports modules and
        # starts watches, which under load takes long enough to make a stall seem younger
        now = time.time()
        outcome = u.sd.outcome if u.sd.exists(statedir.OUTCOME) else None
        fs = self.rule.check(u.result_file, now) if u.result_file else None
        u.next_check = None
        state, note = self._state(u, outcome, fs, session, alive, now)
        if u.report is not None and u.report.state == "done" and state != "done":
            state, note = "done", u.report.note  # done stays done (say the result was moved)
            u.next_check = None
        if fs is not None and fs.ready_at is not None and state in STILL_RUNNING:
            # Polling does not watch the published-results index: look again each interval.
            ready = min(fs.ready_at, now + self.interval) if self.mode == "poll" else fs.ready_at
            u.next_check = min(u.next_check or ready, ready)
        exit_code = outcome.get("exit_code") if outcome else None
        exit_code = exit_code if isinstance(exit_code, int) and not isinstance(
            exit_code, bool) else None
        u.report = self._report(u, state, note, exit_code, outcome, session, now)

    def _learn(self, u: _Unit) -> None:
        """Read what a unit's state dir says once: its ``unit.json``, and its result file,
        watched from now on (before it is looked at: no race)."""
        if not u.unit:
            u.unit = u.sd.unit
        if u.result_file is None:
            rf = u.sd.result_file or u.unit.get("result_file")
            if isinstance(rf, str) and rf and "\0" not in rf:
                u.result_file = os.path.abspath(rf)
                u.entry_name = published.entry_name(u.result_file)
                parent = os.path.dirname(u.result_file)
                if os.path.isdir(parent):
                    self.watch.add_dir(parent)

    def _state(self, u: _Unit, outcome: dict[str, Any] | None, fs: FileState | None, session: bool,
               alive: bool, now: float) -> tuple[str, str]:
        """The unit's state and the note that says why (see the module's docstring), in the
        order the reasons win."""
        size = fs.size if fs else 0
        if outcome and published.changed(outcome.get("result_identity")):
            # something wrote the result after it was published: never trust it
            return "failed", "result-changed"
        first = self._first_line(u) if size > 0 else ""
        if first.startswith("FALLBACK"):
            return "failed", "fallback:" + _fallback_reason(first, outcome)
        if outcome:
            return _finished_state(outcome, size)
        if fs is not None and fs.landed:
            return "done", "published" if fs.status == "published" else "worker-result"
        if session:  # no process: waiting for its receipt, then for its result
            return "waiting", _waiting_note(u, fs)
        if not alive:
            return "failed", "dispatcher-dead"
        return self._running_state(u, fs, now)

    def _running_state(self, u: _Unit, fs: FileState | None, now: float) -> tuple[str, str]:
        """Running, or stalled once its tail has been idle for the stall threshold; a running
        unit is looked at again when the threshold would be reached (``u.next_check``)."""
        state, notes = "running", []
        idle = now - self._tail_since(u)
        if idle >= self.stall_s:
            state = "stalled"
            notes.append("tail-idle")
        else:
            u.next_check = now + (self.stall_s - idle)
        if fs is not None and fs.status == "settling":
            notes.append("result-settling")
        if u.key is None:
            notes.append("no-dispatch-pid")
        return state, ",".join(notes)

    def _alive(self, u: _Unit) -> bool:
        pid, ctime = u.dispatcher()
        key = u.key = (pid, ctime) if pid else None
        if key is None:
            return True  # no dispatch-pid yet: nothing to check
        state = self._procs.get(key)
        if state is None:
            state = self._procs[key] = self.watch.add_process(*key)
        if state == "watching":
            return True
        if state in ("unsupported", "exited"):
            if same_process_alive(*key, unproven=True):
                return True
            self._procs[key] = "gone"
            return False
        return False  # gone

    def _tail_since(self, u: _Unit) -> float:
        """When the tail last grew (its modification time), or when the unit started."""
        since = u.sd.tail_mtime() or _started_at(u) or u.started
        return max(since, u.started) if u.seen_stalled else since

    def _first_line(self, u: _Unit) -> str:
        """The result file's first line ("" when it has none or cannot be read), read again
        only when the file changed."""
        if u.result_file is None:
            return ""
        try:
            st = os.stat(u.result_file)
        except OSError:
            return ""
        sig = (st.st_ino, st.st_size, st.st_mtime_ns)
        if u.first_line is None or u.first_line[0] != sig:
            head = read_head(u.result_file, 200).decode("utf-8", "replace").splitlines()
            u.first_line = (sig, head[0] if head else "")
        return u.first_line[1]

    def _report(self, u: _Unit, state: str, note: str, exit_code: int | None,
                outcome: dict[str, Any] | None, session: bool, now: float) -> UnitReport:
        start = _started_at(u)
        elapsed: float | None
        if outcome and isinstance(outcome.get("duration_s"), int | float):
            elapsed = float(outcome["duration_s"])
        else:
            elapsed = now - start if start else None
        tail = None if session else u.sd.tail_size
        tail_m = None if session else u.sd.tail_mtime()
        return UnitReport(
            state_dir=u.sd.path,
            unit_id=str(u.unit.get("unit_id") or os.path.basename(u.sd.path)),
            state=state, executor=u.executor or "-",
            elapsed_s=None if elapsed is None else round(elapsed, 1),
            tail_bytes=tail, idle_s=None if tail_m is None else round(max(0.0, now - tail_m), 1),
            model=u.sd.read(statedir.MODEL) or _text(u.unit.get("model")),
            result_file=u.result_file, exit_code=exit_code, note=note)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _pid(value: object) -> bool:
    """Whether a record's ``value`` can be a process id (a unit may have written anything)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value < 1 << 31


def _started_at(u: _Unit) -> float | None:
    text = u.unit.get("started_at")
    if isinstance(text, str):
        try:
            return float(calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ")))
        except ValueError:
            pass
    for name in (statedir.DISPATCH_PID, statedir.RESULT_FILE, statedir.PROMPT):
        try:
            return os.stat(u.sd.file(name)).st_mtime
        except OSError:
            continue
    return None


def _is_session(executor: str) -> bool:
    """A ``session`` unit: its executor launches no process (a subagent the coordinator
    spawned)."""
    ex = executors.lookup(executor)
    return ex is not None and not ex.launches_process


def _finished_state(outcome: dict[str, Any], size: int) -> tuple[str, str]:
    """Its dispatcher finished (``outcome.json``): done when a result is there, else failed."""
    kind = str(outcome.get("outcome") or "finished")
    if size <= 0:
        return "failed", f"no-result,{kind}"
    how = str(outcome.get("published") or "response")
    return "done", how if kind == "succeeded" else f"{how}-result,{kind}"


def _waiting_note(u: _Unit, fs: FileState | None) -> str:
    if fs and fs.status == "settling":
        return "result-settling"
    if not u.sd.exists(statedir.RECEIPT):
        return "no-receipt"
    return "no-result-yet"


def _fallback_reason(first_line: str, outcome: dict[str, Any] | None) -> str:
    for word in first_line.split():
        if word.startswith("reason="):
            return word[len("reason="):] or "unknown"
    if outcome and outcome.get("reason"):
        return str(outcome["reason"])
    return "unknown"


__all__ = ["DEFAULT_STALL_S", "EVENTS", "PID_POLL_S", "RESCAN_S", "STATES", "STILL_RUNNING",
           "Monitor", "Report", "UnitReport", "digest_line", "relaunch_argv", "summary_line"]
