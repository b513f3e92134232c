"""The event source of ``prun monitor`` and ``prun gather``: folder changes and process exits
turned into wake-ups, so that a waiter sleeps until something happened or a deadline came.

Folders are watched one level deep (never recursively) through watchdog:

    native   watchdog's platform observer (inotify on Linux, FSEvents on macOS,
             ReadDirectoryChangesW on Windows). Only creations, moves, deletions and
             closes-after-write are asked for, so an agent appending to its ``tail`` costs
             nothing: growth is read with a stat when a deadline comes, never per write.
    poll     watchdog's polling observer, which compares folder snapshots every
             ``PRUN_WATCH_POLL_INTERVAL`` seconds (default 1). For file systems without
             notifications (some network and FUSE mounts). Chosen by ``PRUN_WATCH=poll`` or a
             command's ``--poll``; also used, folder by folder, when the native observer refuses
             a folder (watch limit reached, unsupported file system).

``PRUN_WATCH`` is ``native`` (the default; ``auto`` and ``inotify`` mean the same) or ``poll``.

Process exits: on Linux a pidfd per watched process becomes readable when it exits, which wakes
the waiter at once. Elsewhere ``add_process`` returns False and the caller checks the process on
a timer.

A watch is set up before the caller's first scan, so nothing that happens during start-up is
missed: a change is either seen by the scan or reported as an event afterwards.
"""

from __future__ import annotations

import atexit
import gc
import os
import selectors
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from watchdog.events import (
    DirCreatedEvent,
    DirMovedEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileMovedEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer

from .._util.process import same_process_alive
from ..errors import UsageError
from ..settings import load

if TYPE_CHECKING:
    import selectors

    from watchdog.events import FileSystemEvent, FileSystemEventHandler
    from watchdog.observers.api import BaseObserver

MODES = ("native", "poll")
ProcessWatch = Literal["watching", "gone", "unsupported"]   # what ``Watch.add_process`` did
DEFAULT_POLL_INTERVAL = 1.0


def resolve_mode(forced_poll: bool = False, env: Mapping[str, str] | None = None) -> str:
    """``poll`` when asked by option or ``PRUN_WATCH`` (``prun.settings``), else ``native``."""
    return "poll" if forced_poll else load(env).watch_mode


def poll_interval(env: Mapping[str, str] | None = None) -> float:
    """``PRUN_WATCH_POLL_INTERVAL`` (``prun.settings``)."""
    return load(env).poll_interval_s


@dataclass
class Changes:
    """What woke a ``Watch.wait``: changed paths (files and folders), exited processes."""

    paths: set[str] = field(default_factory=set)
    exited: set[int] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.paths or self.exited)


class Watch:
    """Folders and processes to wait on. Use as a context manager; ``wait`` blocks."""

    def __init__(self, mode: str = "native", interval: float = DEFAULT_POLL_INTERVAL):
        if mode not in MODES:
            raise UsageError(f"bad watch mode {mode!r}", hint="use native or poll")
        self.mode = mode
        self.interval = interval
        self.degraded: list[str] = []      # folders the native observer refused (polled instead)
        self._observers: dict[str, BaseObserver] = {}   # by kind: native, poll
        self._dirs: set[str] = set()
        self._lock = threading.Lock()
        self._pending: set[str] = set()
        self._pidfds: dict[int, int] = {}  # fd -> pid
        self._exited: set[int] = set()
        self._closed = False
        self._event = threading.Event()
        self._selector: selectors.BaseSelector | None = None
        self._pipe: tuple[int, int] | None = None
        if os.name == "posix":
            import selectors

            r, w = os.pipe()
            os.set_blocking(r, False)
            os.set_blocking(w, False)
            self._pipe = (r, w)
            self._selector = selectors.DefaultSelector()
            self._selector.register(r, selectors.EVENT_READ, None)
        self._handler = _handler(self._on_event)

    # set-up ---------------------------------------------------------------------------------
    def add_dir(self, path: str) -> str:
        """Watch one folder (not recursively). Returns how: ``native`` or ``poll``."""
        path = os.path.abspath(path)
        if path in self._dirs:
            return self.mode
        self._dirs.add(path)
        if self.mode == "native":
            try:
                self._schedule("native", path)
                return "native"
            except OSError:
                self.degraded.append(path)
        self._schedule("poll", path)
        return "poll"

    def _schedule(self, kind: str, path: str) -> None:
        observer = self._observers.get(kind)
        if observer is None:
            observer = _new_observer(kind, self.interval)
            observer.start()
            self._observers[kind] = observer
        observer.schedule(self._handler, path, recursive=False, event_filter=_event_filter())

    def add_process(self, pid: int, create_time: float | None) -> ProcessWatch:
        """Wake when the process exits. Returns ``watching``, ``gone`` (it is not running, or
        the pid now belongs to another process) or ``unsupported`` (check it on a timer)."""
        if self._selector is None or not hasattr(os, "pidfd_open"):
            return "unsupported"
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            return "gone"
        except OSError:
            return "unsupported"
        # The pidfd pins this process; checking its start time now proves it is the right one.
        if not same_process_alive(pid, create_time, unproven=True):
            os.close(fd)
            return "gone"

        self._pidfds[fd] = pid
        self._selector.register(fd, selectors.EVENT_READ, pid)
        return "watching"

    # waiting --------------------------------------------------------------------------------
    def wait(self, timeout: float | None) -> Changes:
        """Block until an event or ``timeout`` seconds (None: no limit); return what changed
        (empty on timeout). Events that arrived before the call are returned at once."""
        if timeout is not None:
            timeout = max(0.0, timeout)
        with self._lock:
            ready = bool(self._pending or self._exited)
        if not ready:
            if self._selector is not None:
                self._select(timeout)
            else:
                self._event.wait(timeout)
        if self._selector is not None:
            self._select(0)
        self._event.clear()
        with self._lock:
            changes = Changes(self._pending, self._exited)
            self._pending, self._exited = set(), set()
        return changes

    def _select(self, timeout: float | None) -> None:
        selector = self._selector
        if selector is None:
            return
        for key, _ in selector.select(timeout):
            if key.data is None:
                try:
                    while os.read(key.fd, 4096):
                        pass
                except (BlockingIOError, InterruptedError):
                    pass
            else:
                selector.unregister(key.fd)
                os.close(key.fd)
                pid = self._pidfds.pop(key.fd)
                with self._lock:
                    self._exited.add(pid)

    def _on_event(self, event: FileSystemEvent) -> None:
        """Runs in the observer's thread."""
        paths = [p for p in (event.src_path, getattr(event, "dest_path", "")) if p]
        with self._lock:
            first = not self._pending
            self._pending.update(os.fsdecode(p) for p in paths)
        if first:
            self._event.set()
            if self._pipe is not None and not self._closed:
                try:
                    os.write(self._pipe[1], b"!")
                except (BlockingIOError, OSError):
                    pass

    # tear-down ------------------------------------------------------------------------------
    def close(self, wait: bool = True) -> None:
        """Stop watching and release everything. ``wait=False`` does it in a background
        (daemon) thread, for a caller that has its answer and must not spend ~10 ms on
        stopping observer threads before it can exit."""
        if self._closed:
            return
        self._closed = True
        if wait:
            self._shutdown()
        else:
            threading.Thread(target=self._shutdown, name="prun-watch-close", daemon=True).start()

    def _shutdown(self) -> None:
        for observer in self._observers.values():
            observer.stop()
        for observer in self._observers.values():
            observer.join(timeout=5)
        if self._selector is not None:
            for fd in list(self._pidfds):
                os.close(fd)
            self._pidfds.clear()
            self._selector.close()
            for fd in self._pipe or ():
                os.close(fd)

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _new_observer(kind: str, interval: float) -> BaseObserver:
    if kind == "poll":
        from watchdog.observers.polling import PollingObserver

        return PollingObserver(timeout=interval)

    return Observer()


def _event_filter() -> list[type[FileSystemEvent]]:
    return [FileCreatedEvent, FileMovedEvent, FileDeletedEvent, FileClosedEvent,
            DirCreatedEvent, DirMovedEvent]


def _handler(callback: Callable[[FileSystemEvent], None]) -> FileSystemEventHandler:
    """A watchdog event handler that passes every event to ``callback``."""
    class _Handler(FileSystemEventHandler):
        def on_any_event(self, event: FileSystemEvent) -> None:
            callback(event)

    return _Handler()


def exit_quickly() -> None:
    """For a command whose caller is woken by its exit: at interpreter exit, skip the final
    garbage collection over every object (``gc.freeze`` in an atexit hook), which otherwise
    adds 10-30 ms after the answer is printed. Does nothing until the process exits."""
    atexit.register(gc.freeze)
