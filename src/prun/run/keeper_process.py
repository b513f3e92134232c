"""The worker keeper: one small process per run supervisor that starts the run's workers, reaps
them, and records every exit code in the run's exit-code log (``python -m
prun.run.keeper_process``; the supervisor's handle on it is ``keeper.Keeper``).

Why a separate process: a worker's exit code can only be collected by its parent. If the
supervisor were the parent and died (``kill -9``), the codes of workers that end before
``prun resume`` would be lost. The keeper is the parent instead; it runs in its own session, so a
terminal's Ctrl-C does not reach it, and after the supervisor is gone it keeps reaping until its
last worker has ended, then exits. It also takes the forks off the supervisor: a fork holds the
supervisor's interpreter lock until the child has exec'd.

A run's worker is a unit under its monitor (``attempt.monitor``: bwrap, or a small ``sh``),
which the keeper starts with the unit's ``exit-status`` file open at its ``STATUS_FD``
(``status``): if the keeper is killed too, the units run on to their end and their monitors
record how each ended. What the keeper reaps and logs is the monitor, whose exit code is the
unit's.

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

The attempt's opening files. A spawn request carries the files of the worker's state dir that
it needs before it starts (``files``: its one-value files; ``copies``: its prompt, copied from
the run's frozen brief; all written first) and its record
(``record``: ``unit.json``, written once it runs, with its ``worker``: pid, process group,
start time, and this keeper), so that the supervisor's thread does not make them. A spawn
that fails has its record written without a worker.

Protocol: one JSON object per line on the keeper's stdin; one line of words on its stdout.

    {"op": "env", "env": {...}}                  the base environment of later spawns
    {"op": "spawn", "id": N, "argv": [...], "cwd": D, "set": {...}, "unset": [...],
     "stdin": F|null, "stdout": F, "stderr": F, "name": S, "log": F,
     "files": [[F, text], ...], "copies": [[from, F], ...], "record": [F, {...}]|null,
     "status": [FD, F]|null,                     F made empty, open at FD in the worker
     "limits": {"memory": B, "pids": N}|null}    its tree measured against them (``limits``)
    {"op": "signal", "pid": P, "sig": S}         signal P's group while P is unreaped

    spawned <id> <pid> <start time>              started (its own session and process group),
                                                 after ``<name> spawned <pid> <start>`` went to
                                                 its log and its record was written
    failed <id> <errno> <JSON message>           could not start (EEXIST: an attempt id, from
                                                 PRUN_ATTEMPT_ID, that it launched already;
                                                 or a file of ``files`` could not be written)
    escaped <pid> <escape pid> <JSON argv>       a process that escaped worker <pid> (0: none
                                                 could be named) is being ended
    limit <pid> <JSON breach>                    worker <pid>'s tree passed a limit
                                                 (``{"limit", "peak", "max", "how"}``): its
                                                 group is being ended (SIGTERM, the kill
                                                 grace, SIGKILL)
    exit <pid> <code>                            ended (after ``<name> <code>`` went to its log)

A code is the exit status, or 128+N for death by signal N.
"""

from __future__ import annotations

import errno
import json
import os
import selectors
import signal
import sys
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from .._util.fsutil import atomic_write, atomic_write_json, write_all
from .._util.process import become_subreaper, children, create_time, proc_info, signal_escape, spawn_session
from ..attempt.statedir import worker_entry
from ..settings import current
from .limits import INTERVAL_S, Watch

if TYPE_CHECKING:
    from .._util.escapes import ProcInfo

LINEAGE_LIMIT = 10_000   # descendants of escapes remembered at most
# dispositions the keeper changes (or Python does) that a worker must not inherit
_RESET_SIGNALS = (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE, signal.SIGXFSZ)
_APPEND = os.O_WRONLY | os.O_APPEND | os.O_CREAT


@dataclass(frozen=True, slots=True)
class _Kid:
    """A worker the keeper started."""

    rid: int
    pid: int
    name: str
    log: str
    attempt: str | None


@dataclass(slots=True)
class _Escape:
    """A process that left a worker's group and was reparented to the keeper."""

    pid: int
    start: float
    cmdline: list[str]
    owners: set[int]                  # the spawn ids of the workers it may descend from
    ended: bool = False               # SIGTERM sent
    held_by: int | None = None        # the worker whose exit line waits for it to go
    kill_at: float | None = None      # when SIGKILL is due (None: not yet, or sent)

    @classmethod
    def of(cls, info: ProcInfo, owners: set[int]) -> _Escape:
        return cls(info["pid"], info["start"], info["cmdline"], owners)


class _Server:
    def __init__(self, inp: int, out: int):
        self.grace = current().kill_grace_s  # escapes get this long between SIGTERM and SIGKILL
        # this keeper, as each worker's record names it (``keeper.Keeper.ident``)
        self.ident = {"pid": os.getpid(), "create_time": create_time(os.getpid())}
        self.inp, self.out = inp, out
        self.kids: dict[int, _Kid] = {}      # pid -> an unreaped worker
        self.base_env: dict[str, str] = {}
        self.logs: dict[str, int] = {}
        self.out_ok = True
        self.subreaper = become_subreaper()
        self.workers: dict[int, _Kid] = {}   # spawn id -> every worker started
        self.by_attempt: dict[str, int] = {}
        self.spawned: set[str] = set()       # every attempt id launched: never a second time
        self.by_session: dict[int, int] = {}
        self.finished: set[int] = set()      # spawn ids of workers whose leader was reaped
        self.held: dict[int, int] = {}       # spawn id -> exit code not yet sent
        self.escapes: dict[int, _Escape] = {}
        self.lineage: dict[tuple[int, float], set[int]] = {}   # (pid, start) below an escape
        self.swept: set[int] = set()         # groups killed whose members may still be dying
        self.watches: dict[int, Watch] = {}  # pid -> the limits of a limited worker
        self.limit_kill: dict[int, float] = {}   # pid -> when SIGKILL is due to its group
        self.next_watch = 0.0

    def reply(self, line: str) -> None:
        if not self.out_ok:
            return

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

    def spawn(self, req: dict[str, Any]) -> None:
        attempt = (req.get("set") or {}).get("PRUN_ATTEMPT_ID") or None
        if attempt and attempt in self.spawned:  # exactly once: never a second launch
            return self.reply(f"failed {req['id']} {errno.EEXIST} "
                              f"{json.dumps(f'attempt {attempt} was launched already')}")
        env = dict(self.base_env)
        env.update(req.get("set") or {})
        for k in req.get("unset") or ():
            env.pop(k, None)
        try:
            _write_files(req.get("files") or (), req.get("copies") or ())
            os.chdir(req["cwd"])     # this process has one thread: its cwd is the child's
            status = req.get("status")
            pid = spawn_session(req["argv"], env, stdin=req.get("stdin") or os.devnull,
                                stdout=req["stdout"], stderr=req["stderr"],
                                reset_signals=_RESET_SIGNALS,
                                status=(int(status[0]), status[1]) if status else None)
        except OSError as e:
            self.write_record(req, None)
            what = f"{e.strerror or e}: {e.filename}" if e.filename else (e.strerror or str(e))
            return self.reply(f"failed {req['id']} {e.errno or 0} {json.dumps(what)}")
        except (ValueError, TypeError) as e:
            self.write_record(req, None)
            return self.reply(f"failed {req['id']} 0 {json.dumps(str(e))}")
        kid = _Kid(req["id"], pid, req["name"], req["log"], env.get("PRUN_ATTEMPT_ID") or None)
        start = create_time(pid) or 0
        if kid.attempt:
            self.spawned.add(kid.attempt)
        self.write_log(kid, f"spawned {pid} {start}")  # before anyone is told it runs
        self.write_record(req, (pid, start or None))
        self.kids[pid] = self.workers[kid.rid] = kid
        self.by_session[pid] = kid.rid
        if kid.attempt:
            self.by_attempt[kid.attempt] = kid.rid
        limits = req.get("limits") or {}
        if limits.get("memory") or limits.get("pids"):
            self.watches[pid] = Watch(limits.get("memory"), limits.get("pids"))
        self.reply(f"spawned {req['id']} {pid} {start}")

    def write_record(self, req: dict[str, Any], worker: tuple[int, float | None] | None) -> None:
        """The spawn's ``unit.json``: with its ``worker`` once it runs, else as it was sent."""
        if not req.get("record"):
            return
        path, record = req["record"]
        if worker is not None:
            record["worker"] = worker_entry(worker[0], worker[1], time.time(), self.ident)
        try:
            atomic_write_json(path, record, durable=False)
        except OSError as e:   # a full disk: the worker runs all the same, its start logged
            print(f"prun keeper: cannot write {path}: {e.strerror or e}", file=sys.stderr)

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
                self.watches.pop(pid, None)
                self.limit_kill.pop(pid, None)
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

        groups: set[int] = set()
        for pid in children():
            if pid in self.kids or pid in self.escapes:
                continue
            try:
                pgid = os.getpgid(pid)
            except ProcessLookupError:
                continue
            if pgid in self.kids or pgid in self.swept:  # its worker's group signals reach
                groups.add(pgid)                          # it: no need to look closer
                continue
            info = proc_info(pid)
            if info is None or info["zombie"]:
                continue
            groups.add(info["pgid"])
            if info["pgid"] in self.kids or info["pgid"] in self.swept:
                continue                     # its worker's group signals reach it
            esc = self.escapes[pid] = _Escape.of(info, self._owners(info))
            if esc.owners <= self.finished:  # its workers have all ended already
                self.end(esc, max(esc.owners, default=None))
        self.swept &= groups
        # added to, not replaced: a process seen below an escape that is being ended comes
        # here only once that escape has died, when it is no longer below it
        self.lineage.update(self._lineage())
        for key in list(self.lineage)[:max(0, len(self.lineage) - LINEAGE_LIMIT)]:
            del self.lineage[key]            # the oldest first

    def _owners(self, info: ProcInfo) -> set[int]:
        if info["attempt"] in self.by_attempt:
            return {self.by_attempt[info["attempt"]]}
        if info["sid"] != info["pid"] and info["sid"] in self.by_session:
            return {self.by_session[info["sid"]]}     # it left the group, not the session
        seen = self.lineage.pop((info["pid"], info["start"]), None)
        if seen is not None:
            return set(seen)
        return {k.rid for k in self.kids.values()} | set(self.held)

    def _lineage(self) -> dict[tuple[int, float], set[int]]:
        """Every process below an escape, with that escape's workers."""
        found: dict[tuple[int, float], set[int]] = {}
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

    def watch(self) -> float | None:
        """Measure each limited worker's tree when due; end the group of one past a limit
        (SIGTERM now, SIGKILL after the grace). Seconds until the next measure or kill."""
        now = time.monotonic()
        for pid, at in list(self.limit_kill.items()):
            if at <= now:
                del self.limit_kill[pid]
                if pid in self.kids:         # unreaped: the group id is still ours
                    _killpg(pid, signal.SIGKILL)
        if self.watches and now >= self.next_watch:
            self.next_watch = now + INTERVAL_S
            strays = self._strays()
            for pid, w in self.watches.items():
                breach = w.measure([pid, *strays.get(pid, ())])
                if breach is not None:
                    self.reply(f"limit {pid} {json.dumps(asdict(breach))}")
                    _killpg(pid, signal.SIGTERM)
                    self.limit_kill[pid] = now + self.grace
        waits = [at - now for at in self.limit_kill.values()]
        if self.watches:
            waits.append(self.next_watch - now)
        return max(0.0, min(waits)) if waits else None

    def _strays(self) -> dict[int, list[int]]:
        """The keeper's children that are not its workers, by the limited worker whose session
        they are in (orphans that came back to the subreaper) or that they escaped from."""
        found: dict[int, list[int]] = {}
        for pid in children():
            if pid in self.kids:
                continue
            esc = self.escapes.get(pid)
            owner = (self.workers[min(esc.owners)].pid if esc is not None and len(esc.owners) == 1
                     else _session(pid))
            if owner in self.watches:
                found.setdefault(owner, []).append(pid)
        return found

    def release(self) -> None:
        """Send each held exit line whose worker's escapes are gone."""
        waiting = {e.held_by for e in self.escapes.values()}
        for rid in [r for r in self.held if r not in waiting]:
            self.reply(f"exit {self.workers[rid].pid} {self.held.pop(rid)}")

    def log(self, kid: _Kid, code: int) -> None:
        self.write_log(kid, str(code))

    def write_log(self, kid: _Kid, what: str) -> None:
        """``<state dir name> <what>`` in the worker's exit-code log: ``spawned <pid> <start>``
        once it runs, its code once it is reaped."""
        try:
            fd = self.logs.get(kid.log)
            if fd is None:
                fd = self.logs[kid.log] = os.open(kid.log, _APPEND | os.O_CLOEXEC, 0o644)
            write_all(fd, f"{kid.name} {what}\n".encode())
        except OSError as e:
            print(f"prun keeper: cannot record {kid.name}'s {what} in {kid.log}: {e}",
                  file=sys.stderr)

    def serve(self) -> int:
        wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        sel = selectors.DefaultSelector()
        sel.register(self.inp, selectors.EVENT_READ)
        sel.register(wake_r, selectors.EVENT_READ)
        buf, listening = b"", True
        while listening or self.kids or self.held or self.escapes:
            timeout = _sooner(self.expire(), self.watch())
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


def _write_files(files: Any, copies: Any) -> None:
    """A spawn's opening files, each whole or not at all (not synced: see ``statedir``)."""
    for path, text in files:
        atomic_write(path, text, durable=False)
    for source, path in copies:
        with open(source, "rb") as f:
            atomic_write(path, f.read(), durable=False)


def _request_id(line: bytes) -> int | None:
    try:
        rid = json.loads(line).get("id")
    except (ValueError, AttributeError):
        return None
    return rid if isinstance(rid, int) else None


def _session(pid: int) -> int | None:
    try:
        return os.getsid(pid)
    except OSError:
        return None


def _sooner(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def main() -> int:
    """``python -m prun.run.keeper_process``: serve the supervisor on stdin/stdout."""
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)    # only the supervisor's requests end workers
    return _Server(0, 1).serve()


if __name__ == "__main__":
    raise SystemExit(main())
