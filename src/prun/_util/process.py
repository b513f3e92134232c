"""Worker processes: each in its own session and process group, waited on without polling,
ended group-wide, and never confused with a process prun did not start.

A worker's exit is observed *without reaping it* (pidfd, or ``waitid(WNOWAIT)``), so its PID and
process group id cannot be reused while prun still sends signals to the group. Only then is it
reaped. prun signals only the process groups it created, and checks a recorded PID's start
time before trusting it.

A process that leaves its worker's group (``setsid``, a double fork) is out of reach of the
group's signals: ``escapes.py`` finds and ends those (re-exported here).
"""

from __future__ import annotations

import functools
import os
import select
import signal
import subprocess
import sys
import threading

from .escapes import (
    become_subreaper,
    children,
    end_escaped,
    is_own_child,
    is_subreaper,
    proc_info,
    signal_escape,
)

__all__ = ["GRACE_S", "AdoptedWorker", "Worker", "become_subreaper", "children", "create_time",
           "end_escaped", "end_group", "end_marked", "is_own_child", "is_subreaper", "proc_info",
           "same_process_alive", "signal_escape", "spawn", "spawn_session", "start"]

TYPE_CHECKING = False  # typing stays unimported: this module is on the dispatcher's fast path
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from .worker import WorkerLike

GRACE_S = 5.0
"""How long a bounded command (``bounded.run``) gets between SIGTERM and SIGKILL. A worker's grace is
the user's setting (``Settings.kill_grace_s``), which its caller passes."""


class _GroupLeader:
    """A worker's process group leader, watched without being reaped: through its pidfd when
    the platform has one, else ``waitid(WNOWAIT)``. ``reap`` says how it ended."""

    __slots__ = ("pid", "pidfd")

    def __init__(self, pid: int, pidfd: int | None):
        self.pid, self.pidfd = pid, pidfd

    def _reaped(self) -> bool:
        """True once its exit status was collected here."""
        return False

    def close(self) -> None:
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None

    def signal(self, sig: int) -> None:
        """Signal the worker's process group (created by ``spawn``); a gone group is fine."""
        try:
            os.killpg(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def exited(self) -> bool:
        """True once the worker has exited (it may still be unreaped)."""
        if self._reaped():
            return True
        if self.pidfd is not None:
            r, _, _ = select.select([self.pidfd], [], [], 0)
            return bool(r)
        try:
            info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True
        return info is not None

    def wait_exit(self, timeout: float | None) -> bool:
        """Block until the worker exits or ``timeout`` passes; does not reap. True if it
        exited."""
        if self._reaped():
            return True
        if self.pidfd is not None:
            r, _, _ = select.select([self.pidfd], [], [], timeout)
            return bool(r)
        done = threading.Event()

        def _wait() -> None:
            try:
                os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT)
            except ChildProcessError:
                pass
            done.set()

        threading.Thread(target=_wait, daemon=True).start()
        return done.wait(timeout)

    async def await_exit(self) -> None:
        """Wait in the event loop until the worker exits; does not reap."""
        import asyncio

        loop = asyncio.get_running_loop()
        if self._reaped():
            return
        if self.pidfd is None:
            await loop.run_in_executor(None, self.wait_exit, None)
            return
        fut: asyncio.Future[None] = loop.create_future()
        fd = self.pidfd

        def _ready() -> None:
            loop.remove_reader(fd)
            if not fut.done():
                fut.set_result(None)

        loop.add_reader(fd, _ready)
        try:
            await fut
        finally:
            loop.remove_reader(fd)

    def reap(self) -> int | None:
        """Collect the exit code (after it exited): None when it cannot be had here."""
        raise NotImplementedError

    def sweep(self) -> None:
        """After the leader exited on its own: end any descendants it left in its group."""
        self.signal(signal.SIGTERM)
        self.signal(signal.SIGKILL)


class Worker(_GroupLeader):
    """A started worker (``spawn``): the Popen handle plus its pidfd when the platform has
    one."""

    __slots__ = ("proc",)

    def __init__(self, proc: subprocess.Popen[bytes], pidfd: int | None = None):
        super().__init__(proc.pid, pidfd)
        self.proc = proc

    def _reaped(self) -> bool:
        return self.proc.returncode is not None

    def reap(self) -> int:
        """Collect the exit status (after it exited). Death by signal N gives 128+N."""
        code = self.proc.wait()
        self.close()
        return 128 - code if code < 0 else code


class AdoptedWorker(_GroupLeader):
    """A worker an earlier supervisor started (not our child), watched through its pidfd. It
    cannot be reaped here: ``reap`` gives None, and its exit code is read from the run's
    exit-code log (``attempt.exitlog``)."""

    __slots__ = ()

    def __init__(self, pid: int, pidfd: int):
        super().__init__(pid, pidfd)

    def reap(self) -> None:
        self.close()
        return None


def spawn(argv: list[str], *, cwd: str, env: dict[str, str], stdout_path: str,
          stderr_path: str, stdin_path: str | None = None,
          die_with_parent: bool = False) -> Worker:
    """Start ``argv`` in a new session, stdin closed (or a file), output appended to files.
    ``die_with_parent`` (Linux): it is killed when this process dies (a standalone
    dispatcher's worker, so that a ``kill -9`` of the dispatcher leaves nothing running).

    Raises ``OSError`` (FileNotFoundError, PermissionError) when it cannot be started.
    """
    armed = _armed_by_exec() if die_with_parent else None
    if armed is not None:
        argv = [*armed, *argv]
    stdin = open(stdin_path, "rb") if stdin_path else None
    out = open(stdout_path, "ab")
    err = open(stderr_path, "ab")
    try:
        proc = subprocess.Popen(
            argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL if stdin is None else stdin,
            stdout=out, stderr=err, start_new_session=True, close_fds=True,
            preexec_fn=_death_signal() if die_with_parent and armed is None else None,
        )
    finally:
        out.close()
        err.close()
        if stdin is not None:
            stdin.close()
    return Worker(proc, _pidfd(proc.pid))


def spawn_session(argv: list[str], env: dict[str, str], *, stdin: str, stdout: str,
                  stderr: str, reset_signals: tuple[int, ...] = (),
                  status: tuple[int, str] | None = None) -> int:
    """Start ``argv`` in a new session with ``posix_spawn`` (no fork of this process), stdin
    read from ``stdin``, stdout and stderr appended to their files, the signals in
    ``reset_signals`` back to their defaults; ``status`` (descriptor, path): that file made
    empty and open for writing at that descriptor (a unit's monitor writes its exit there);
    gives its PID. For a single-threaded caller that reaps its children itself (a run's
    keeper): the child starts in this process's current directory. Raises ``OSError`` (or
    ``ValueError`` for a bad argument)."""
    actions = [(os.POSIX_SPAWN_OPEN, 0, stdin, os.O_RDONLY, 0),
               (os.POSIX_SPAWN_OPEN, 1, stdout, _APPEND, 0o666),
               (os.POSIX_SPAWN_OPEN, 2, stderr, _APPEND, 0o666)]
    if status is not None:
        actions.append((os.POSIX_SPAWN_OPEN, status[0], status[1], _STATUS, 0o644))
    return os.posix_spawn(argv[0], argv, env, file_actions=actions, setsid=True,
                          setsigdef=reset_signals)


_APPEND = os.O_WRONLY | os.O_CREAT | os.O_APPEND
_STATUS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)


@functools.cache
def _armed_by_exec() -> list[str] | None:
    """The argv prefix that arms the parent-death signal and then execs the worker:
    util-linux's ``setpriv --pdeathsig KILL`` where it works (checked once per process),
    else None (``_death_signal`` then runs between fork and exec). With the prefix the spawn
    stays a vfork: a ``preexec_fn`` forces a full fork, whose cost grows with this process's
    memory (tens of milliseconds in a Dask worker). Between the start and the arming there
    is a moment in which this process's death is not passed on (``_death_signal`` checks)."""
    import shutil

    setpriv = shutil.which("setpriv") if sys.platform == "linux" else None
    true = shutil.which("true")
    if setpriv is None or true is None:
        return None
    prefix = [setpriv, "--pdeathsig", "KILL", "--"]
    try:
        ok = subprocess.run([*prefix, true], stdin=subprocess.DEVNULL, capture_output=True,
                            timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        ok = False
    return prefix if ok else None


def _death_signal() -> Callable[[], None] | None:
    """What the child runs before exec to be SIGKILLed when its parent dies (Linux
    ``PR_SET_PDEATHSIG``; None elsewhere). Made in the parent: the child only calls it."""
    if sys.platform != "linux":
        return None
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def arm() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the signal was armed
            os.kill(os.getpid(), signal.SIGKILL)

    return arm


PR_SET_PDEATHSIG = 1


def _pidfd(pid: int) -> int | None:
    """A pidfd for ``pid`` where the platform has them (None elsewhere, or on failure)."""
    if not hasattr(os, "pidfd_open"):
        return None
    try:
        return os.pidfd_open(pid)
    except OSError:
        return None


def start(argv: list[str], **popen: Any) -> subprocess.Popen[Any]:
    """Start ``argv`` in a session and process group of its own, no file descriptor leaked
    (the other ``Popen`` arguments as given): for the processes prun starts to outlive a step,
    a detached supervisor or a run's keeper."""
    return subprocess.Popen(argv, start_new_session=True, close_fds=True, **popen)


def end_marked(name: str, value: str, since: float | None) -> list[dict[str, Any]]:
    """End every process whose environment has ``name=value`` and that started at ``since``
    or later (the unit's processes carry its ``PRUN_STATE_DIR``; ``since`` is its monitor's
    start): SIGTERM, then SIGKILL; each signal only to that very process (pid and start
    time). For what a unit left outside its group while no keeper ran to end it. Gives
    ``{"pid", "cmdline"}`` of each one ended. Without ``since``, nothing is ended."""
    import psutil

    if since is None:
        return []
    found = []
    for p in psutil.process_iter(["create_time"]):
        try:
            if p.pid == os.getpid() or p.info["create_time"] + 0.05 < since \
                    or p.environ().get(name) != value or p.status() == psutil.STATUS_ZOMBIE:
                continue
            found.append((p, p.cmdline()))
        except (psutil.Error, OSError):
            continue
    ended = []
    for p, cmdline in found:
        try:
            p.terminate()                # psutil refuses a pid that was reused meanwhile
        except psutil.Error:
            continue
        ended.append({"pid": p.pid, "cmdline": cmdline})
    for p, _ in found:
        try:
            p.kill()
        except psutil.Error:
            pass
    return ended


def end_group(worker: WorkerLike, grace: float) -> None:
    """SIGTERM the group, give the leader ``grace`` seconds, then SIGKILL whatever is left.

    Called while the leader is unreaped, so the group id cannot have been reused.
    """
    worker.signal(signal.SIGTERM)
    worker.wait_exit(grace)
    worker.signal(signal.SIGKILL)
    worker.wait_exit(grace)


# Identity of processes recorded in state dirs ---------------------------------------------------

def create_time(pid: int) -> float | None:
    """The process's start time (seconds since the epoch, as psutil tells it), or None if it
    does not exist."""
    import psutil

    try:
        return psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return None


def same_process_alive(pid: int | None, started: float | None, *,
                       unproven: bool = False) -> bool:
    """True when ``pid`` runs and is the process that started at ``started`` (a reused PID
    has another start time). No recorded start time is no proof: ``unproven`` is returned
    then, False by default, so nothing is ever signalled on a bare PID (a check that only
    keeps something, a lock or a folder, passes True: a live holder is not assumed gone).
    A zombie counts as gone."""
    if not pid:
        return False
    if started is None and not unproven:
        return False
    import psutil

    try:
        p = psutil.Process(pid)
        if p.status() == psutil.STATUS_ZOMBIE:
            return False
        return started is None or abs(p.create_time() - started) < 0.05
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return False
