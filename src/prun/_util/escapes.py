"""Escapes: processes that left a worker's process group (``setsid``, a double fork), out of
reach of the group's signals.

On Linux the process that starts workers can become their *subreaper* (``become_subreaper``):
such a process, once its parent dies, is reparented to it instead of to init, so it can be
found among its own children (``children``, ``proc_info``) and ended (``end_escaped``, and the
keeper for a run). Only this process's own children are signalled, each checked by parent and
start time (``signal_escape``).
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time

TYPE_CHECKING = False  # typing stays unimported: the dispatcher's fast path imports this module
if TYPE_CHECKING:
    from typing import TypedDict

    from .worker import WorkerLike

    class ProcInfo(TypedDict):
        """What ``proc_info`` tells of a process."""

        pid: int
        ppid: int
        pgid: int
        sid: int
        start: float                # its start time: with the pid, its identity
        zombie: bool
        cmdline: list[str]
        attempt: str | None         # its PRUN_ATTEMPT_ID

    class Escape(TypedDict):
        """An escape ``end_escaped`` ended."""

        pid: int
        cmdline: list[str]

PR_SET_CHILD_SUBREAPER = 36      # linux/prctl.h
PR_GET_CHILD_SUBREAPER = 37
ESCAPE_ROUNDS = 10               # an escape's own children are reparented when it dies: rescan


def become_subreaper(on: bool = True) -> bool:
    """Make this process the subreaper of its descendants (Linux ``PR_SET_CHILD_SUBREAPER``):
    one whose parent dies is reparented here instead of to init. True if it is now (with
    ``on`` false: stop being one; True if that was done)."""
    if sys.platform != "linux":
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def is_subreaper() -> bool:
    """Whether this process is a subreaper now (``PR_GET_CHILD_SUBREAPER``; False elsewhere)."""
    if sys.platform != "linux":
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        flag = ctypes.c_int(0)
        return bool(libc.prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0) == 0
                    and flag.value)
    except (OSError, AttributeError):
        return False


def children(pid: int | None = None) -> list[int]:
    """The PIDs of the children of ``pid`` (this process by default), from ``/proc`` (Linux;
    [] elsewhere or when it is gone)."""
    me = os.getpid() if pid is None else pid
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{me}/task")
    except OSError:
        return found
    for tid in tasks:
        try:
            with open(f"/proc/{me}/task/{tid}/children", "rb") as f:
                found.extend(int(p) for p in f.read().split())
        except OSError:
            pass
    return found


def proc_info(pid: int) -> ProcInfo | None:
    """What psutil says of a process (None if it is gone): ``ppid``, ``pgid``, ``sid``,
    ``start`` (its start time: with the pid, its identity), ``zombie``, ``cmdline`` (a list)
    and ``attempt`` (its ``PRUN_ATTEMPT_ID``, or None)."""
    import psutil

    try:
        p = psutil.Process(pid)
        with p.oneshot():
            ppid, pgid, sid = p.ppid(), os.getpgid(pid), os.getsid(pid)
            start = p.create_time()
            zombie = p.status() in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)
            try:
                cmdline: list[str] = p.cmdline()
                attempt = p.environ().get("PRUN_ATTEMPT_ID") or None
            except (psutil.AccessDenied, psutil.ZombieProcess):
                cmdline, attempt = [], None
    except (psutil.NoSuchProcess, psutil.AccessDenied, ProcessLookupError, ValueError):
        return None
    return {"pid": pid, "ppid": ppid, "pgid": pgid, "sid": sid, "start": start,
            "zombie": zombie, "cmdline": cmdline, "attempt": attempt}


def is_own_child(pid: int, start: float) -> bool:
    """True when ``pid`` is still this process's child that started at ``start``."""
    info = proc_info(pid)
    return info is not None and info["ppid"] == os.getpid() and info["start"] == start


def signal_escape(pid: int, start: float, sig: int) -> bool:
    """Signal an escaped process (its own group when it leads one), only if it is still this
    process's child that started at ``start``. True if sent."""
    info = proc_info(pid)
    if info is None or info["ppid"] != os.getpid() or info["start"] != start:
        return False
    try:
        if info["pgid"] == pid:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def end_escaped(worker: WorkerLike, grace: float) -> list[Escape]:
    """After ``worker`` exited: end every process that escaped its group and was reparented
    to this process (a subreaper, see ``become_subreaper``): SIGTERM, ``grace`` seconds,
    SIGKILL, reaped; then again for the children those leave behind. Returns one dict per
    escape (``pid``, ``cmdline``).

    An escape is a child of this process, other than the worker, outside this process's
    session (a worker runs in a session of its own; what it starts stays in that session or
    makes a new one). So call it where the worker was the only child started in a session of
    its own: a standalone dispatcher. Only this process's own children are signalled, each
    checked by parent and start time."""
    mine = os.getsid(0)
    ended: list[Escape] = []
    for _ in range(ESCAPE_ROUNDS):
        found = [i for i in map(proc_info, children())
                 if i and i["pid"] != worker.pid and not i["zombie"] and i["sid"] != mine]
        if not found:
            break
        fds: dict[int, int] = {}
        for info in found:
            if signal_escape(info["pid"], info["start"], signal.SIGTERM):
                ended.append({"pid": info["pid"], "cmdline": info["cmdline"]})
                try:
                    fds[info["pid"]] = os.pidfd_open(info["pid"])
                except OSError:
                    pass
        deadline = time.monotonic() + grace
        waiting = dict(fds)
        while waiting and (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select(list(waiting.values()), [], [], left)
            for fd in ready:
                waiting = {p: f for p, f in waiting.items() if f != fd}
        for info in found:
            if info["pid"] in waiting:
                signal_escape(info["pid"], info["start"], signal.SIGKILL)
            if is_own_child(info["pid"], info["start"]):
                try:
                    os.waitpid(info["pid"], 0)
                except ChildProcessError:
                    pass
        for fd in fds.values():
            os.close(fd)
    return ended
