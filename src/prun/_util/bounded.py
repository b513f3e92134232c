"""Bounded commands: run one to its end in a process group of its own, its input written and
its output captured, ended group-wide past its timeout or its output limit (``run``)."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import threading
import time

from .process import GRACE_S, Worker, _pidfd, end_group

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO


class Finished:
    """A bounded command's end (``run``): its exit code (None when it was ended: its timeout
    passed or it printed past its limit), what it printed until then, and why it was ended."""

    __slots__ = ("argv", "over_limit", "returncode", "stderr", "stdout", "timed_out")

    def __init__(self, argv: list[str], returncode: int | None, stdout: bytes, stderr: bytes,
                 timed_out: bool, over_limit: bool = False):
        self.argv, self.returncode = argv, returncode
        self.stdout, self.stderr = stdout, stderr
        self.timed_out, self.over_limit = timed_out, over_limit


class Running:
    """The workers of bounded commands still running (``run(..., running=)``), so that another
    thread can end them all at once: a caller interrupted while its threads wait for them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._workers: dict[int, Worker] = {}

    def add(self, worker: Worker) -> None:
        with self._lock:
            self._workers[worker.pid] = worker

    def forget(self, worker: Worker) -> None:
        """Called before ``worker`` is reaped, so a reused pid is never signalled."""
        with self._lock:
            self._workers.pop(worker.pid, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._workers)

    def kill_all(self) -> None:
        """SIGKILL the process group of every worker still running."""
        with self._lock:
            for worker in self._workers.values():
                worker.signal(signal.SIGKILL)


def run(argv: list[str], *, timeout: float, cwd: str | os.PathLike[str] | None = None,
        env: dict[str, str] | None = None, input: bytes | None = None,
        limit: int | None = None, grace: float = GRACE_S,
        running: Running | None = None) -> Finished:
    """Run ``argv`` to its end: in a session and process group of its own, stdin ``input``
    (else closed), stdout and stderr captured. Past ``timeout`` seconds, or once stdout or
    stderr holds more than ``limit`` bytes, its whole group is ended (SIGTERM, ``grace``,
    SIGKILL); a group it leaves behind after its own exit is ended too. While it runs its
    worker is in ``running``. Raises ``OSError`` when it cannot be started.

    If the caller is interrupted meanwhile (an exception in this thread), the command is left
    to finish on its own: a git killed midway would leave its lock files behind."""
    proc = subprocess.Popen(argv, cwd=cwd, env=env, start_new_session=True, close_fds=True,
                            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    worker = Worker(proc, _pidfd(proc.pid))
    if running is not None:
        running.add(worker)
    deadline = time.monotonic() + timeout
    out, err = bytearray(), bytearray()
    try:
        why = _exchange(proc, input, out, err, deadline, limit)
        if why is None and not worker.wait_exit(max(0.0, deadline - time.monotonic())):
            why = "timeout"
        if why is not None:
            end_group(worker, grace)
    except BaseException:
        if running is not None:
            running.forget(worker)
        worker.close()
        _close_pipes(proc)
        raise
    if running is not None:
        running.forget(worker)
    worker.signal(signal.SIGKILL)  # whatever it left in its group (the leader is unreaped)
    if worker.wait_exit(GRACE_S):
        code: int | None = worker.reap()
    else:
        code = None
        worker.close()
    _close_pipes(proc)
    return Finished(list(argv), None if why else code, bytes(out), bytes(err),
                    why == "timeout", why == "limit")


def _exchange(proc: subprocess.Popen[bytes], data: bytes | None, out: bytearray,
              err: bytearray, deadline: float, limit: int | None) -> str | None:
    """Write ``data`` to the command's stdin, and read its stdout and stderr into ``out`` and
    ``err`` until both are closed. Returns None, or why it stopped first: ``timeout`` at the
    deadline, ``limit`` once a stream holds more than ``limit`` bytes."""
    import selectors  # subprocess imported it already

    assert proc.stdout is not None and proc.stderr is not None
    bufs = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
    todo = memoryview(data or b"")
    with selectors.DefaultSelector() as sel:
        for fd in bufs:
            sel.register(fd, selectors.EVENT_READ)
        if proc.stdin is not None:
            if todo:
                sel.register(proc.stdin.fileno(), selectors.EVENT_WRITE)
            else:
                proc.stdin.close()
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                return "timeout"
            for key, _ in sel.select(left):
                if key.fd not in bufs:  # stdin: a pipe that selects writable takes PIPE_BUF
                    try:
                        todo = todo[os.write(key.fd, todo[:select.PIPE_BUF]):]
                    except BrokenPipeError:
                        todo = todo[:0]
                    if not todo:
                        sel.unregister(key.fd)
                        _close(proc.stdin)
                    continue
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fd)
                bufs[key.fd] += chunk
                if limit is not None and len(bufs[key.fd]) > limit:
                    return "limit"
    return None


def _close_pipes(proc: subprocess.Popen[bytes]) -> None:
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        _close(pipe)


def _close(pipe: IO[bytes] | None) -> None:
    if pipe is not None:
        pipe.close()
