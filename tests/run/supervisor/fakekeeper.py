"""A fake worker keeper for in-process supervisor tests.

It has the interface the supervisor and the dispatcher use of ``prun.run.keeper.Keeper``
(``start``, ``close``, ``ident``, ``spawn_async`` in the loop) and its workers have the
methods of ``KeptWorker`` (``signal``, ``await_exit``, ``wait_exit``, ``reap``, ...), but a
worker runs nothing: the test decides when it ends and with what (what it printed to its
stream, a result it wrote, its exit code, which the fake logs in the run's exit-code log as the
real keeper does). A signal that would end a process ends it, unless the test says otherwise.

Fake pids are far above any real pid (``pid_max`` is at most 2**22), so a process group of
that number never exists: the supervisor's checks and signals on it reach nothing.
"""

from __future__ import annotations

import asyncio
import itertools
import signal
import threading
import time
from collections.abc import Callable

from prun._util.fsutil import atomic_write, atomic_write_json
from prun.attempt.statedir import worker_entry

FAKE_PIDS = itertools.count(2_000_000_000)


class Watchers:
    """Futures waiting for a condition, checked each time something changes (in the loop)."""

    def __init__(self) -> None:
        self._waiting: list[tuple[Callable[[], object], asyncio.Future]] = []

    async def until(self, check: Callable[[], object]):
        """Wait until ``check()`` is truthy; returns its value."""
        got = check()
        if got:
            return got
        fut = asyncio.get_running_loop().create_future()
        self._waiting.append((check, fut))
        try:
            await fut
        finally:
            self._waiting = [(c, f) for c, f in self._waiting if f is not fut]
        return check()

    def changed(self) -> None:
        for check, fut in self._waiting:
            if not fut.done() and check():
                fut.set_result(None)


class FakeWorker:
    """A worker the fake keeper started: it ends when the test calls ``exit``."""

    def __init__(self, keeper: FakeKeeper, argv: list[str], env: dict[str, str],
                 stdout_path: str, name: str, log: str):
        self.keeper = keeper
        self.loop = keeper.loop
        self.pid = next(FAKE_PIDS)
        self.create_time = time.time()
        self.argv, self.env = argv, env
        self.packet = env.get("PRUN_UNIT_ID")
        self.attempt = env.get("PRUN_ATTEMPT_ID")
        self.stdout_path, self.name, self.log = stdout_path, name, log
        self.signals: list[int] = []
        self.on_term: Callable[[FakeWorker], None] | None = None  # else SIGTERM ends it
        self.escaped: list[dict] = []
        self.orphan = False
        self.code: int | None = None
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._waiters: list[asyncio.Future] = []

    @property
    def outbox(self) -> str:
        """Where the worker writes its own result (``PRUN_RESULT_FILE``)."""
        return self.env["PRUN_RESULT_FILE"]

    def exit(self, code: int = 0, *, output: str = "", result: str | None = None) -> None:
        """End it (from any thread): ``output`` goes to its stream, ``result`` to its outbox,
        and its exit code to the run's exit-code log."""
        with self._lock:
            if self._done.is_set():
                return
            if output:
                with open(self.stdout_path, "a", encoding="utf-8") as f:
                    f.write(output)
            if result is not None:
                with open(self.outbox, "w", encoding="utf-8") as f:
                    f.write(result)
            with open(self.log, "a", encoding="utf-8") as f:
                f.write(f"{self.name} {code}\n")
            self.code = code
            self._done.set()
        if not self.loop.is_closed():  # else its supervisor is gone: nobody waits for it
            self.loop.call_soon_threadsafe(self._ended)

    def _ended(self) -> None:
        for fut in self._waiters:
            if not fut.done():
                fut.set_result(None)
        self.keeper.watchers.changed()

    # the KeptWorker interface --------------------------------------------------------------
    def signal(self, sig: int) -> None:
        if self._done.is_set():
            return
        self.signals.append(sig)
        if sig == signal.SIGTERM and self.on_term is not None:
            self.on_term(self)
        elif sig in (signal.SIGTERM, signal.SIGKILL):
            self.exit(128 + sig)

    def exited(self) -> bool:
        return self._done.is_set()

    def wait_exit(self, timeout: float | None) -> bool:
        return self._done.wait(timeout)

    async def await_exit(self) -> None:
        if self._done.is_set():
            return
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await fut
        finally:
            self._waiters.remove(fut)

    def sweep(self) -> None:
        """Nothing to do: it left no process behind."""

    def reap(self) -> int | None:
        return self.code

    def close(self) -> None:
        pass


class FakeKeeper:
    """Starts fake workers; ``await worker(packet, n)`` waits for the n-th of a packet."""

    def __init__(self) -> None:
        self.ident: dict = {}       # no keeper process: a resumed supervisor waits for none
        self.loop: asyncio.AbstractEventLoop | None = None
        self.workers: list[FakeWorker] = []
        self.watchers = Watchers()
        self.failures: dict[str, BaseException] = {}   # packet -> what its spawn raises
        self.closed = False

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.closed = False

    def close(self) -> None:
        self.closed = True

    async def spawn_async(self, argv: list[str], *, cwd: str, env: dict[str, str],
                          stdout_path: str, stderr_path: str, stdin_path: str | None,
                          name: str, log: str, files: list[tuple[str, str]] | None = None,
                          copies: list[tuple[str, str]] | None = None,
                          record: tuple[str, dict] | None = None,
                          status: str | None = None,
                          limits: dict[str, int] | None = None) -> FakeWorker:
        """Awaited in the event loop, as the real keeper's ``spawn_async`` is; it writes the
        opening ``files`` and the ``record`` as the real keeper does."""
        if self.loop is None or self.closed:
            raise OSError(0, "the worker keeper is not running")
        failure = self.failures.pop(env.get("PRUN_UNIT_ID", ""), None)
        if failure is not None:   # as if the keeper died: nothing of it written
            raise failure
        for path, text in files or ():
            atomic_write(path, text, durable=False)
        for source, path in copies or ():
            atomic_write(path, open(source, "rb").read(), durable=False)
        for path in (stdout_path, stderr_path):  # the real keeper opens them for the worker
            open(path, "ab").close()
        w = FakeWorker(self, argv, env, stdout_path, name, log)
        if record is not None:
            path, unit = record
            atomic_write_json(path, {**unit, "worker": worker_entry(
                w.pid, w.create_time, w.create_time, self.ident)}, durable=False)
        self._spawned(w)
        return w

    def _spawned(self, w: FakeWorker) -> None:
        self.workers.append(w)
        self.watchers.changed()

    def of(self, packet: str) -> list[FakeWorker]:
        return [w for w in self.workers if w.packet == packet]

    def live(self) -> list[FakeWorker]:
        return [w for w in self.workers if not w.exited()]

    async def worker(self, packet: str, n: int = 1) -> FakeWorker:
        """The n-th worker started for ``packet``, once it is started."""
        await self.watchers.until(lambda: len(self.of(packet)) >= n)
        return self.of(packet)[n - 1]
