"""The supervisor's side of the worker keeper (``keeper_process``, the process that starts a
run's workers, reaps them and logs their exit codes): ``Keeper``, its handle, which asks it to
start and signal workers and reads its answers in the event loop, ``KeptWorker``, a worker
it started, with the methods of ``process.Worker``, and ``KeeperLauncher``, the way a run's
attempt is launched through it (``attempt.launcher.Launcher``).

A run's worker is a unit under its monitor (``attempt.monitor``), which outlives the keeper.
If the keeper dies, its workers run on: each is watched by pidfd and its exit code read from
what its monitor wrote (``exit-status``); a fresh keeper is started for the spawns that follow.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping
from typing import IO, TYPE_CHECKING, Any, Protocol, TypedDict

from .._util.fsutil import write_all
from .._util.process import create_time, end_marked, start
from ..attempt import monitor, statedir
from ..attempt.launching import build, launch_record, receipt, spawn_files
from ..attempt.monitor import STATE_DIR_VAR, STATUS_FD, exit_status

if TYPE_CHECKING:
    from ..attempt.core import Dispatch
    from ..attempt.launcher import Planned

SPAWN_WAIT_S = 60.0      # a spawn reply normally takes a millisecond
CLOSE_WAIT_S = 5.0
LOST_WAIT_S = 1.0        # a dead keeper is reaped within this


class KeeperIdent(TypedDict, total=False):
    """The keeper process as each unit.json records it (empty: no keeper process)."""

    pid: int
    create_time: float | None


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _fd(pipe: IO[bytes] | None) -> int:
    """The descriptor of one of the keeper's pipes (both are made when it starts)."""
    if pipe is None:
        raise RuntimeError("the worker keeper was started without its pipes")
    return pipe.fileno()


class KeptWorker:
    """A worker the keeper started: the same methods as ``process.Worker``."""

    def __init__(self, keeper: Keeper, pid: int, started: float | None,
                 status: str | None = None):
        self.keeper = keeper
        self.pid = pid
        self.create_time = started
        self.status = status      # where its monitor writes its exit (None: no monitor)
        self.code: int | None = None
        self.orphan = False       # its keeper died: signalled directly, code from its monitor
        # the processes that left its group and were ended with it: pid, cmdline
        self.escaped: list[dict[str, Any]] = []
        # the limit its tree passed, as the keeper measured it (``limits.Breach``'s fields)
        self.limited: dict[str, Any] | None = None
        self._done = threading.Event()
        self._waiters: list[asyncio.Future[None]] = []

    def _ended(self, code: int | None) -> None:     # in the event loop
        self.code = code
        self._done.set()
        for fut in self._waiters:
            if not fut.done():
                fut.set_result(None)
        self._waiters.clear()

    def signal(self, sig: int) -> None:
        """Signal its group through its keeper; an orphan's directly, and with SIGKILL what
        it left outside its group that carries its state dir (no keeper takes those in)."""
        if self.orphan:
            self._signal_orphan(sig)
        elif not self._done.is_set():
            self.keeper.signal(self.pid, sig)

    def _signal_orphan(self, sig: int) -> None:
        _killpg(self.pid, sig)
        if sig == signal.SIGKILL and self.status is not None:
            self.escaped += end_marked(STATE_DIR_VAR, os.path.dirname(self.status),
                                       self.create_time)

    def exited(self) -> bool:
        return self._done.is_set()

    def wait_exit(self, timeout: float | None) -> bool:
        return self._done.wait(timeout)

    async def await_exit(self) -> None:
        if not self._done.is_set():
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(fut)
            try:
                await fut
            finally:  # a waiter given up (its wait was cancelled) is not kept
                with contextlib.suppress(ValueError):
                    self._waiters.remove(fut)

    def sweep(self) -> None:
        """Nothing to do while its keeper lives: the keeper ended the group before it reaped
        the leader. An orphan's is ended here (SIGTERM, SIGKILL)."""
        if self.orphan:
            self._signal_orphan(signal.SIGTERM)
            self._signal_orphan(signal.SIGKILL)

    def reap(self) -> int | None:
        """The exit code (None if the keeper died before it could tell and no monitor wrote
        it)."""
        return self.code

    def close(self) -> None:
        pass


class Keeper:
    """The supervisor's handle on its keeper: started, asked to spawn and read in the event
    loop; ``signal`` from any thread."""

    def __init__(self, env: dict[str, str]):
        self.env = dict(env)
        self.proc: subprocess.Popen[bytes] | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()
        self._next = 0
        self._pending: dict[int, asyncio.Future[KeptWorker]] = {}  # by request id
        self._status: dict[int, str | None] = {}   # by request id: its monitor's status file
        self.workers: dict[int, KeptWorker] = {}
        self.ident: KeeperIdent = {}   # the keeper's pid and start time, in each unit.json
        self._buf = b""

    # lifecycle ---------------------------------------------------------------------------------
    def launch(self) -> subprocess.Popen[bytes]:
        """Start the keeper process (before the event loop runs, so that its start-up overlaps
        the supervisor's); ``start`` does it if nobody did. Returns it."""
        if self.proc is not None:
            return self.proc
        here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        proc = self.proc = start(
            [sys.executable, "-c", f"import sys; sys.path.insert(0, {here!r}); "
             "from prun.run.keeper_process import main; main()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.ident = {"pid": proc.pid, "create_time": create_time(proc.pid)}
        os.set_blocking(_fd(proc.stdout), False)
        self._send({"op": "env", "env": self.env})
        return proc

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Attach to the event loop (which reads the keeper's answers)."""
        self.loop = loop
        loop.add_reader(_fd(self.launch().stdout), self._readable)

    def close(self) -> None:
        """Let the keeper go: it exits once its last worker has ended."""
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        if self.loop is not None:
            self.loop.remove_reader(_fd(proc.stdout))
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            if not self.workers:
                proc.wait(CLOSE_WAIT_S)
        except subprocess.TimeoutExpired:
            pass
        if proc.stdout is not None:
            proc.stdout.close()

    # requests -----------------------------------------------------------------------------
    async def spawn_async(self, argv: list[str], *, cwd: str, env: dict[str, str],
                          stdout_path: str, stderr_path: str, stdin_path: str | None,
                          name: str, log: str, files: list[tuple[str, str]] | None = None,
                          copies: list[tuple[str, str]] | None = None,
                          record: tuple[str, Mapping[str, Any]] | None = None,
                          status: str | None = None,
                          limits: Mapping[str, int] | None = None) -> KeptWorker:
        """Start ``argv`` (its program a path) through the keeper, from the event loop that
        reads its answers: the request sent, the answer awaited. The keeper first writes
        ``files`` (path, text) and ``copies`` (from, to), and once the worker runs, ``record``
        (path, ``unit.json``) with the worker in it. ``status``: the file the worker's monitor
        writes its exit to (``attempt.monitor``), opened by the keeper at the monitor's
        ``STATUS_FD``. ``limits``: the ``memory`` (bytes) and ``pids`` its tree is held to
        (``limits``). Raises ``OSError``."""
        fut: asyncio.Future[KeptWorker] = asyncio.get_running_loop().create_future()
        base = self.env
        with self._lock:
            if self.proc is None:
                raise OSError(0, "the worker keeper is not running")
            self._next += 1
            rid = self._next
            self._pending[rid] = fut
            self._status[rid] = status
            self._send({"op": "spawn", "id": rid, "argv": argv, "cwd": cwd,
                        "set": {k: v for k, v in env.items() if base.get(k) != v},
                        "unset": [k for k in base if k not in env],
                        "stdin": stdin_path, "stdout": stdout_path, "stderr": stderr_path,
                        "name": name, "log": log, "files": files or [],
                        "copies": copies or [], "record": record,
                        "status": [STATUS_FD, status] if status else None,
                        "limits": dict(limits) if limits else None})
        try:
            async with asyncio.timeout(SPAWN_WAIT_S):
                return await fut
        except TimeoutError:
            raise OSError(0, f"the worker keeper did not answer in {SPAWN_WAIT_S:.0f} s") \
                from None

    def signal(self, pid: int, sig: int) -> None:
        with self._lock:
            if self.proc is not None:
                self._send({"op": "signal", "pid": pid, "sig": int(sig)})

    def _send(self, req: dict[str, Any]) -> None:
        if self.proc is None:
            return
        try:
            write_all(_fd(self.proc.stdin), (json.dumps(req) + "\n").encode())
        except OSError:
            pass   # the keeper died: its end of the pipe shows EOF, handled in _readable

    # replies (event loop) ------------------------------------------------------------------------
    def _readable(self) -> None:
        if self.proc is None:
            return
        try:
            data = os.read(_fd(self.proc.stdout), 1 << 16)
        except BlockingIOError:
            return
        if not data:
            return self._lost()
        *lines, self._buf = (self._buf + data).split(b"\n")
        for line in lines:
            self._reply(line.decode())

    def _reply(self, line: str) -> None:
        """One line the keeper sent (see ``keeper_process``)."""
        kind, _, rest = line.partition(" ")
        if kind == "exit":
            pid, code = rest.split()
            w = self.workers.pop(int(pid), None)
            if w is not None:
                w._ended(int(code))
        elif kind == "limit":
            pid, breach = rest.split(" ", 1)
            w = self.workers.get(int(pid))
            if w is not None:
                w.limited = json.loads(breach)
        elif kind == "escaped":
            pid, escaped, argv = rest.split(" ", 2)
            w = self.workers.get(int(pid))
            if w is not None:
                w.escaped.append({"pid": int(escaped), "cmdline": json.loads(argv)})
        elif kind == "spawned":
            rid, pid, started = rest.split()
            w = KeptWorker(self, int(pid), float(started) or None,
                           self._status.get(int(rid)))
            self.workers[w.pid] = w
            self._resolve(int(rid), w)
        elif kind == "failed":
            rid, err, msg = rest.split(" ", 2)
            self._resolve(int(rid), OSError(int(err), json.loads(msg)))

    def _resolve(self, rid: int, value: KeptWorker | OSError) -> None:
        with self._lock:
            fut = self._pending.pop(rid, None)
            self._status.pop(rid, None)
        if fut is None or fut.done():   # an answer nobody waits for any more
            return
        if isinstance(value, OSError):
            fut.set_exception(value)
        else:
            fut.set_result(value)

    def _lost(self) -> None:
        """The keeper died. Its workers (each a unit under its monitor) run on and now belong to
        init, which reaps them: watch each by pidfd (its code is what its monitor wrote), fail
        spawns in flight, start a fresh keeper."""
        loop, old = self.loop, self.proc
        if loop is None or old is None:
            return
        loop.remove_reader(_fd(old.stdout))
        with self._lock:  # spawns wait for the new keeper
            self.proc = None
            pending, self._pending = self._pending, {}
            self._status.clear()
            new = self.launch()
        loop.add_reader(_fd(new.stdout), self._readable)
        self._buf = b""
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(OSError(0, "the worker keeper died"))
        for w in list(self.workers.values()):
            _watch_orphan(loop, w)
        self.workers.clear()
        for pipe in (old.stdout, old.stdin):
            if pipe is not None:
                pipe.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            old.wait(LOST_WAIT_S)
        print(f"prun: the worker keeper (pid {old.pid}) died; its running workers go on, "
              "their exit codes recorded by their monitors", file=sys.stderr)


def _watch_orphan(loop: asyncio.AbstractEventLoop, w: KeptWorker) -> None:
    """A worker whose keeper died: signalled directly from now on, watched by its pidfd, its
    exit code read from what its monitor wrote once it has ended."""
    w.orphan = True

    def code() -> int | None:
        return exit_status(w.status) if w.status else None

    try:
        fd = os.pidfd_open(w.pid)
    except OSError:
        return w._ended(code())

    def ended() -> None:
        loop.remove_reader(fd)
        os.close(fd)
        w._ended(code())

    loop.add_reader(fd, ended)


class Spawner(Protocol):
    """What ``KeeperLauncher`` needs of a keeper (``Keeper``)."""

    @property
    def ident(self) -> Mapping[str, Any]: ...

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None: ...

    async def spawn_async(self, argv: list[str], *, cwd: str, env: dict[str, str],
                          stdout_path: str, stderr_path: str, stdin_path: str | None,
                          name: str, log: str, files: list[tuple[str, str]] | None = None,
                          copies: list[tuple[str, str]] | None = None,
                          record: tuple[str, Mapping[str, Any]] | None = None,
                          status: str | None = None,
                          limits: Mapping[str, int] | None = None) -> Any: ...


class KeeperLauncher:
    """A run's attempt, launched through its keeper (``attempt.launcher.Launcher``): under a
    monitor that outlives the keeper (``attempt.monitor``), its opening files written by the
    keeper as it starts it (``stages``), its ``unit.json`` with its worker too. Followed and
    stopped through ``KeptWorker``. Its result and ``outcome.json`` are synced as they are
    written, before the run records its end: a power loss loses no result the ledger shows."""

    durable = True
    stages = True

    def __init__(self, keeper: Spawner, limits: Mapping[str, int] | None = None):
        self.keeper = keeper
        self.limits = limits     # memory (bytes) and pids its tree is held to

    def plan(self, d: Dispatch) -> Planned:
        planned = build(d)
        assert planned is not None
        launch, argv = planned
        return launch, monitor.wrap(argv)

    def start(self, d: Dispatch, planned: Planned) -> Any:
        """From a thread other than the run's event loop: started there, awaited here."""
        loop = self.keeper.loop
        if loop is None:
            raise OSError(0, "the worker keeper is not running")
        return asyncio.run_coroutine_threadsafe(self.start_async(d, planned),
                                                loop).result(SPAWN_WAIT_S)

    async def start_async(self, d: Dispatch, planned: Planned) -> Any:
        if planned is None:
            raise RuntimeError("a kept launch is planned first")
        launch, argv = planned
        files, copies = d.opening or [], d.copies
        d.opening, d.copies = None, []
        record = (d.state.file(statedir.UNIT), launch_record(d, launch))
        try:
            worker = await self.keeper.spawn_async(
                argv, **spawn_files(d, launch), files=files, copies=copies, record=record,
                status=d.state.file(statedir.EXIT_STATUS), limits=self.limits)
        except OSError:
            d.opening, d.copies = files, copies  # written by finish, unless the keeper
            raise                                # wrote them
        receipt(d, worker)   # the keeper wrote unit.json, its worker in it
        return worker
