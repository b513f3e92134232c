"""The worker keeper: one small process per run supervisor that starts the run's workers, reaps
them, and records every exit code in the run's exit-code log.

Why a separate process: a worker's exit code can only be collected by its parent. If the
supervisor were the parent and died (``kill -9``), the codes of workers that end before
``prun resume`` would be lost. The keeper is the parent instead; it runs in its own session, so a
terminal's Ctrl-C does not reach it, and after the supervisor is gone it keeps reaping until its
last worker has ended, then exits. It also takes the forks off the supervisor: a fork holds the
supervisor's interpreter lock until the child has exec'd.

The keeper only ever signals a process group whose leader it started and has not yet reaped, so
the group id cannot have been reused. Before it reaps a leader that ended it ends what the
leader left in its group (SIGTERM, then SIGKILL), as ``process.Worker.sweep`` does.

Escapes. On Linux the keeper is its workers' subreaper (``PR_SET_CHILD_SUBREAPER``): a process
that left a worker's group (``setsid``, a double fork) is reparented to the keeper when its
parent dies, instead of to init. The keeper looks at its children each time it wakes; each new
one that is not in a worker's group is an escape, tied to its worker by, in this order: the
``PRUN_ATTEMPT_ID`` in its environment (``/proc/<pid>/environ``); its session, when that is a
worker's (it left the group, not the session); its ancestry, when the keeper saw it below an
escape it already held; else the workers that were running when it appeared. When a worker's
leader has exited, the keeper ends every escape whose workers have all ended: SIGTERM (its group
when it leads one), the kill grace (``PRUN_KILL_GRACE_SECONDS``), SIGKILL, each signal only to a process that
is still the keeper's unreaped child with the start time it had when it was found; and reaps
it. The worker's ``exit`` line is sent once those are gone, after one ``escaped`` line for each.
A process the keeper did not start (nor a descendant of one) is never its child, so never
signalled. An escape that is orphaned while its worker's group is being killed may be found only
after that worker's ``exit`` line: it is ended all the same, its ``escaped`` line comes late.

Protocol: one JSON object per line on the keeper's stdin; one line of words on its stdout.

    {"op": "env", "env": {...}}                  the base environment of later spawns
    {"op": "spawn", "id": N, "argv": [...], "cwd": D, "set": {...}, "unset": [...],
     "stdin": F|null, "stdout": F, "stderr": F, "name": S, "log": F}
    {"op": "signal", "pid": P, "sig": S}         signal P's group while P is unreaped

    spawned <id> <pid> <start time>              started (its own session and process group)
    failed <id> <errno> <JSON message>           could not start
    escaped <pid> <escape pid> <JSON argv>       a process that escaped worker <pid> (0: none
                                                 could be named) is being ended
    exit <pid> <code>                            ended (after ``<name> <code>`` went to its log)

A code is the exit status, or 128+N for death by signal N.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time

SPAWN_WAIT_S = 60.0      # a spawn reply normally takes a millisecond
LINEAGE_LIMIT = 10_000   # descendants of escapes remembered at most
CLOSE_WAIT_S = 5.0
# dispositions the keeper changes (or Python does) that a worker must not inherit
_RESET_SIGNALS = (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE, signal.SIGXFSZ)
_APPEND = os.O_WRONLY | os.O_APPEND | os.O_CREAT


# The keeper process ------------------------------------------------------------------------------

class _Kid:
    """A worker the keeper started."""

    __slots__ = ("attempt", "log", "name", "pid", "rid")

    def __init__(self, rid: int, pid: int, name: str, log: str, attempt: str | None):
        self.rid, self.pid, self.name, self.log, self.attempt = rid, pid, name, log, attempt


class _Escape:
    """A process that left a worker's group and was reparented to the keeper."""

    __slots__ = ("cmdline", "ended", "held_by", "kill_at", "owners", "pid", "start")

    def __init__(self, info: dict, owners: set[int]):
        self.pid, self.start, self.cmdline = info["pid"], info["start"], info["cmdline"]
        self.owners = owners              # the spawn ids of the workers it may descend from
        self.ended = False                # SIGTERM sent
        self.held_by: int | None = None   # the worker whose exit line waits for it to go
        self.kill_at: float | None = None  # when SIGKILL is due (None: not yet, or sent)


class _Server:
    def __init__(self, inp: int, out: int):
        from .._util.process import become_subreaper
        from ..settings import current

        self.grace = current().kill_grace_s  # escapes get this long between SIGTERM and SIGKILL
        self.inp, self.out = inp, out
        self.kids: dict[int, _Kid] = {}      # pid -> an unreaped worker
        self.base_env: dict[str, str] = {}
        self.logs: dict[str, int] = {}
        self.out_ok = True
        self.subreaper = become_subreaper()
        self.workers: dict[int, _Kid] = {}   # spawn id -> every worker started
        self.by_attempt: dict[str, int] = {}
        self.by_session: dict[int, int] = {}
        self.finished: set[int] = set()      # spawn ids of workers whose leader was reaped
        self.held: dict[int, int] = {}       # spawn id -> exit code not yet sent
        self.escapes: dict[int, _Escape] = {}
        self.lineage: dict[tuple[int, int], set[int]] = {}   # (pid, start) below an escape
        self.swept: set[int] = set()         # groups killed whose members may still be dying

    def reply(self, line: str) -> None:
        if not self.out_ok:
            return
        from .._util.fsutil import write_all

        try:
            write_all(self.out, (line + "\n").encode())
        except OSError:
            self.out_ok = False      # the supervisor is gone: keep reaping and logging

    def handle_safely(self, line: bytes) -> None:
        """A request the keeper cannot carry out must not cost it the workers it keeps."""
        try:
            self.handle(line)
        except Exception as e:  # a bug in a request: say so, answer it, keep serving
            print(f"prun keeper: bad request {line[:200]!r}: {type(e).__name__}: {e}",
                  file=sys.stderr)
            rid = _request_id(line)
            if rid is not None:
                self.reply(f"failed {rid} 0 {json.dumps(f'bad request to the keeper: {e}')}")

    def handle(self, line: bytes) -> None:
        req = json.loads(line)
        op = req.get("op")
        if op == "spawn":
            self.spawn(req)
        elif op == "signal":
            if req["pid"] in self.kids:
                _killpg(req["pid"], req["sig"])
        elif op == "env":
            self.base_env = req["env"]

    def spawn(self, req: dict) -> None:
        from .._util.process import create_time

        env = dict(self.base_env)
        env.update(req.get("set") or {})
        for k in req.get("unset") or ():
            env.pop(k, None)
        actions = [(os.POSIX_SPAWN_OPEN, 0, req.get("stdin") or os.devnull, os.O_RDONLY, 0),
                   (os.POSIX_SPAWN_OPEN, 1, req["stdout"], _APPEND, 0o666),
                   (os.POSIX_SPAWN_OPEN, 2, req["stderr"], _APPEND, 0o666)]
        try:
            os.chdir(req["cwd"])     # this process has one thread: its cwd is the child's
            pid = os.posix_spawn(req["argv"][0], req["argv"], env, file_actions=actions,
                                 setsid=True, setsigdef=_RESET_SIGNALS)
        except OSError as e:
            return self.reply(f"failed {req['id']} {e.errno or 0} "
                              f"{json.dumps(e.strerror or str(e))}")
        except (ValueError, TypeError) as e:
            return self.reply(f"failed {req['id']} 0 {json.dumps(str(e))}")
        kid = _Kid(req["id"], pid, req["name"], req["log"], env.get("PRUN_ATTEMPT_ID") or None)
        self.kids[pid] = self.workers[kid.rid] = kid
        self.by_session[pid] = kid.rid
        if kid.attempt:
            self.by_attempt[kid.attempt] = kid.rid
        self.reply(f"spawned {req['id']} {pid} {create_time(pid) or 0}")

    def reap(self) -> None:
        """Collect every child that ended. A worker: sweep its group, see what it left, reap
        it, log its code, end its escapes. An escape: forget it."""
        while True:
            try:
                info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                break
            if info is None:
                break
            pid = info.si_pid
            kid = self.kids.get(pid)
            if kid is not None:              # unreaped: the group id is still ours
                _killpg(pid, signal.SIGTERM)
                _killpg(pid, signal.SIGKILL)
                self.swept.add(pid)
                self.adopt()                 # its children came here as it exited
                del self.kids[pid]
            _, status = os.waitpid(pid, 0)
            code = os.waitstatus_to_exitcode(status)
            code = 128 - code if code < 0 else code
            if kid is not None:
                self.log(kid, code)
                self.finish(kid, code)
            else:
                self.escapes.pop(pid, None)
        self.adopt()
        self.release()

    def adopt(self) -> None:
        """Take note of each new child that is not in a worker's group: an escape."""
        if not self.subreaper:
            return
        from .._util.process import children, proc_info

        groups: set[int] = set()
        for pid in children():
            if pid in self.kids or pid in self.escapes:
                continue
            info = proc_info(pid)
            if info is None or info["zombie"]:
                continue
            groups.add(info["pgid"])
            if info["pgid"] in self.kids or info["pgid"] in self.swept:
                continue                     # its worker's group signals reach it
            esc = self.escapes[pid] = _Escape(info, self._owners(info))
            if esc.owners <= self.finished:  # its workers have all ended already
                self.end(esc, max(esc.owners, default=None))
        self.swept &= groups
        self.lineage = self._lineage()

    def _owners(self, info: dict) -> set[int]:
        if info["attempt"] in self.by_attempt:
            return {self.by_attempt[info["attempt"]]}
        if info["sid"] != info["pid"] and info["sid"] in self.by_session:
            return {self.by_session[info["sid"]]}     # it left the group, not the session
        seen = self.lineage.get((info["pid"], info["start"]))
        if seen is not None:
            return set(seen)
        return {k.rid for k in self.kids.values()} | set(self.held)

    def _lineage(self) -> dict[tuple[int, int], set[int]]:
        """Every process below an escape, with that escape's workers."""
        from .._util.process import children, proc_info

        found: dict[tuple[int, int], set[int]] = {}
        for esc in self.escapes.values():
            todo = children(esc.pid)
            while todo and len(found) < LINEAGE_LIMIT:
                info = proc_info(todo.pop())
                if info is not None:
                    found[(info["pid"], info["start"])] = esc.owners
                    todo.extend(children(info["pid"]))
        return found

    def finish(self, kid: _Kid, code: int) -> None:
        """The worker's leader is reaped: end the escapes that now have no worker left."""
        self.finished.add(kid.rid)
        self.held[kid.rid] = code
        for esc in list(self.escapes.values()):
            if not esc.ended and esc.owners <= self.finished:
                self.end(esc, kid.rid)

    def end(self, esc: _Escape, rid: int | None) -> None:
        """Report ``esc`` under worker ``rid`` and send it SIGTERM; SIGKILL follows."""
        from .._util.process import proc_info, signal_escape

        now = proc_info(esc.pid)
        cmdline = now["cmdline"] if now and now["cmdline"] else esc.cmdline
        worker = self.workers.get(rid) if rid is not None else None
        self.reply(f"escaped {worker.pid if worker else 0} {esc.pid} {json.dumps(cmdline)}")
        esc.ended, esc.held_by = True, rid
        if signal_escape(esc.pid, esc.start, signal.SIGTERM):
            esc.kill_at = time.monotonic() + self.grace
        else:
            del self.escapes[esc.pid]

    def expire(self) -> float | None:
        """SIGKILL the escapes whose grace is over; seconds until the next one's is."""
        from .._util.process import signal_escape

        now, nearest = time.monotonic(), None
        for esc in list(self.escapes.values()):
            if esc.kill_at is None:
                continue
            if esc.kill_at <= now:
                esc.kill_at = None           # reaped when it is gone
                if not signal_escape(esc.pid, esc.start, signal.SIGKILL):
                    del self.escapes[esc.pid]
            elif nearest is None or esc.kill_at - now < nearest:
                nearest = esc.kill_at - now
        return nearest

    def release(self) -> None:
        """Send each held exit line whose worker's escapes are gone."""
        waiting = {e.held_by for e in self.escapes.values()}
        for rid in [r for r in self.held if r not in waiting]:
            self.reply(f"exit {self.workers[rid].pid} {self.held.pop(rid)}")

    def log(self, kid: _Kid, code: int) -> None:
        from .._util.fsutil import write_all

        try:
            fd = self.logs.get(kid.log)
            if fd is None:
                fd = self.logs[kid.log] = os.open(kid.log, _APPEND | os.O_CLOEXEC, 0o644)
            write_all(fd, f"{kid.name} {code}\n".encode())
        except OSError as e:
            print(f"prun keeper: cannot record {kid.name}'s exit code {code} in {kid.log}: {e}",
                  file=sys.stderr)

    def serve(self) -> int:
        import selectors

        wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        sel = selectors.DefaultSelector()
        sel.register(self.inp, selectors.EVENT_READ)
        sel.register(wake_r, selectors.EVENT_READ)
        buf, listening = b"", True
        while listening or self.kids or self.held or self.escapes:
            timeout = self.expire()
            self.release()
            for key, _ in sel.select(timeout):
                if key.fd == wake_r:
                    while True:
                        try:
                            if not os.read(wake_r, 4096):
                                break
                        except BlockingIOError:
                            break
                    continue
                data = os.read(self.inp, 1 << 16)
                if not data:                 # the supervisor closed us or died
                    listening = False
                    sel.unregister(self.inp)
                    continue
                *lines, buf = (buf + data).split(b"\n")
                for line in lines:
                    if line.strip():
                        self.handle_safely(line)
            self.reap()
        return 0


def _request_id(line: bytes) -> int | None:
    try:
        rid = json.loads(line).get("id")
    except (ValueError, AttributeError):
        return None
    return rid if isinstance(rid, int) else None


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def main() -> int:
    """``python -m prun.run.keeper``: serve the supervisor on stdin/stdout."""
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)    # only the supervisor's requests end workers
    return _Server(0, 1).serve()


# The supervisor's side ---------------------------------------------------------------------------

class KeptWorker:
    """A worker the keeper started: the same methods as ``process.Worker``."""

    def __init__(self, keeper: Keeper, pid: int, started: float | None):
        self.keeper = keeper
        self.pid = pid
        self.create_time = started
        self.code: int | None = None
        self.orphan = False       # its keeper died: signalled directly, exit code unknown
        self.escaped: list[dict] = []   # processes that left its group, ended: pid, cmdline
        self._done = threading.Event()
        self._waiters: list = []

    def _ended(self, code: int | None) -> None:     # in the event loop
        self.code = code
        self._done.set()
        for fut in self._waiters:
            if not fut.done():
                fut.set_result(None)
        self._waiters.clear()

    def signal(self, sig: int) -> None:
        if self._done.is_set():
            return
        if self.orphan:
            _killpg(self.pid, sig)
        else:
            self.keeper.signal(self.pid, sig)

    def exited(self) -> bool:
        return self._done.is_set()

    def wait_exit(self, timeout: float | None) -> bool:
        return self._done.wait(timeout)

    async def await_exit(self) -> None:
        import asyncio

        if not self._done.is_set():
            fut = asyncio.get_running_loop().create_future()
            self._waiters.append(fut)
            try:
                await fut
            finally:  # a waiter given up (its wait was cancelled) is not kept
                with contextlib.suppress(ValueError):
                    self._waiters.remove(fut)

    def sweep(self) -> None:
        """Nothing to do: the keeper ended the group before it reaped the leader."""

    def reap(self) -> int | None:
        """The exit code (None if the keeper died before it could tell)."""
        return self.code

    def close(self) -> None:
        pass


class Keeper:
    """The supervisor's handle on its keeper: ``spawn`` from any thread; started and read in
    the event loop."""

    def __init__(self, env: dict[str, str]):
        self.env = dict(env)
        self.proc = None
        self.loop = None
        self._lock = threading.Lock()
        self._next = 0
        self._pending: dict = {}  # request id -> concurrent.futures.Future of its answer
        self.workers: dict[int, KeptWorker] = {}
        self.ident: dict = {}     # the keeper's pid and start time, kept in each unit.json
        self._loop_thread: int | None = None
        self._buf = b""

    # lifecycle ---------------------------------------------------------------------------------
    def launch(self) -> None:
        """Start the keeper process (before the event loop runs, so that its start-up overlaps
        the supervisor's); ``start`` does it if nobody did."""
        import subprocess

        from .._util.process import create_time

        if self.proc is not None:
            return
        here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        self.proc = subprocess.Popen(
            [sys.executable, "-c", f"import sys; sys.path.insert(0, {here!r}); "
             "from prun.run.keeper import main; main()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True,
            close_fds=True)
        self.ident = {"pid": self.proc.pid, "create_time": create_time(self.proc.pid)}
        os.set_blocking(self.proc.stdout.fileno(), False)
        self._send({"op": "env", "env": self.env})

    def start(self, loop) -> None:
        """Attach to the event loop (which reads the keeper's answers)."""
        self.loop = loop
        self._loop_thread = threading.get_ident()
        self.launch()
        loop.add_reader(self.proc.stdout.fileno(), self._readable)

    def close(self) -> None:
        """Let the keeper go: it exits once its last worker has ended."""
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        if self.loop is not None:
            self.loop.remove_reader(proc.stdout.fileno())
        proc.stdin.close()
        import subprocess

        try:
            if not self.workers:
                proc.wait(CLOSE_WAIT_S)
        except subprocess.TimeoutExpired:
            pass
        proc.stdout.close()

    # requests (any thread) -----------------------------------------------------------------------
    def spawn(self, argv: list[str], *, cwd: str, env: dict[str, str], stdout_path: str,
              stderr_path: str, stdin_path: str | None, name: str, log: str) -> KeptWorker:
        """Start ``argv`` (its program a path) through the keeper. Raises ``OSError``."""
        import concurrent.futures

        if threading.get_ident() == self._loop_thread:
            raise RuntimeError("Keeper.spawn waits for the event loop: call it from a thread")
        fut: concurrent.futures.Future = concurrent.futures.Future()
        base = self.env
        with self._lock:
            if self.proc is None:
                raise OSError(0, "the worker keeper is not running")
            self._next += 1
            rid = self._next
            self._pending[rid] = fut
            self._send({"op": "spawn", "id": rid, "argv": argv, "cwd": cwd,
                        "set": {k: v for k, v in env.items() if base.get(k) != v},
                        "unset": [k for k in base if k not in env],
                        "stdin": stdin_path, "stdout": stdout_path, "stderr": stderr_path,
                        "name": name, "log": log})
        try:
            return fut.result(SPAWN_WAIT_S)
        except concurrent.futures.TimeoutError:
            raise OSError(0, f"the worker keeper did not answer in {SPAWN_WAIT_S:.0f} s") \
                from None

    def signal(self, pid: int, sig: int) -> None:
        with self._lock:
            if self.proc is not None:
                self._send({"op": "signal", "pid": pid, "sig": int(sig)})

    def _send(self, req: dict) -> None:
        from .._util.fsutil import write_all

        try:
            write_all(self.proc.stdin.fileno(), (json.dumps(req) + "\n").encode())
        except OSError:
            pass   # the keeper died: its end of the pipe shows EOF, handled in _readable

    # replies (event loop) ------------------------------------------------------------------------
    def _readable(self) -> None:
        try:
            data = os.read(self.proc.stdout.fileno(), 1 << 16)
        except BlockingIOError:
            return
        if not data:
            return self._lost()
        *lines, self._buf = (self._buf + data).split(b"\n")
        for line in lines:
            kind, _, rest = line.decode().partition(" ")
            if kind == "exit":
                pid, code = rest.split()
                w = self.workers.pop(int(pid), None)
                if w is not None:
                    w._ended(int(code))
            elif kind == "escaped":
                pid, escaped, argv = rest.split(" ", 2)
                w = self.workers.get(int(pid))
                if w is not None:
                    w.escaped.append({"pid": int(escaped), "cmdline": json.loads(argv)})
            elif kind == "spawned":
                rid, pid, started = rest.split()
                w = KeptWorker(self, int(pid), float(started) or None)
                self.workers[w.pid] = w
                self._resolve(int(rid), w)
            elif kind == "failed":
                rid, err, msg = rest.split(" ", 2)
                self._resolve(int(rid), OSError(int(err), json.loads(msg)))

    def _resolve(self, rid: int, value) -> None:
        with self._lock:
            fut = self._pending.pop(rid, None)
        if fut is None:
            return
        if isinstance(value, BaseException):
            fut.set_exception(value)
        else:
            fut.set_result(value)

    def _lost(self) -> None:
        """The keeper died. Its workers now belong to init, which reaps them: watch each by
        pidfd (its exit code is lost), fail spawns in flight, start a fresh keeper."""
        import subprocess

        self.loop.remove_reader(self.proc.stdout.fileno())
        with self._lock:  # spawns wait for the new keeper
            old, self.proc = self.proc, None
            pending, self._pending = self._pending, {}
            self.launch()
        self.loop.add_reader(self.proc.stdout.fileno(), self._readable)
        self._buf = b""
        for fut in pending.values():
            fut.set_exception(OSError(0, "the worker keeper died"))
        for w in list(self.workers.values()):
            self._watch_orphan(w)
        self.workers.clear()
        old.stdout.close()
        old.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            old.wait(1.0)
        print(f"prun: the worker keeper (pid {old.pid}) died; exit codes of its running "
              "workers are lost", file=sys.stderr)

    def _watch_orphan(self, w: KeptWorker) -> None:
        w.orphan = True
        try:
            fd = os.pidfd_open(w.pid)
        except OSError:
            return w._ended(None)

        def ended() -> None:
            self.loop.remove_reader(fd)
            os.close(fd)
            w._ended(None)

        self.loop.add_reader(fd, ended)


if __name__ == "__main__":
    raise SystemExit(main())
