"""The dispatcher: run one unit on one executor and never lose or fake its result.

The life of one attempt, readable on one screen:

    prepared = prepare(request)        # validate everything; nothing is created (UsageError: exit 2)
    d = Dispatch(prepared)             # the state dir exists from here on (STATE-DIR line)
    d.begin()                          # prompt copy, result-file, dispatch-pid, unit.json, gate
    d.launch()                         # spawn in its own process group, stdin closed
    d.wait()                           # until exit or deadline (then the group is ended)
    outcome = d.finish(...)            # judge, publish result or FALLBACK, outcome.json last

``run_sync`` strings these together for ``prun dispatch``; the run supervisor drives the same
steps from its event loop. Exit codes: 0 succeeded, 1 failed, 2 refused before a state dir
existed, 75 quota gate refused, 124 timeout.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from ..errors import Cancelled, QuotaExhausted
from . import statedir
from .exitlog import exit_code as _exit_code
from .exitlog import path as _exit_log
from .exitlog import recorded_exit
from .publish import publish
from .request import Prepared, Request, prepare

TYPE_CHECKING = False  # typing costs milliseconds on the dispatcher's fast path
if TYPE_CHECKING:
    from ..executors.records import StreamResult
    from .outcome import Outcome

__all__ = ["Dispatch", "Prepared", "Request", "prepare", "recorded_exit", "reopen",
           "run_sync"]



class Dispatch:
    """One attempt of one unit, from its state dir to its outcome."""

    def __init__(self, prepared: Prepared, state: statedir.StateDir | None = None,
                 dispatcher_pid: int | None = None, *, record: bool = True,
                 in_run: bool = False, keeper=None):
        self.p = prepared
        self.record = record              # a standalone dispatch records itself in the ledger
        self.in_run = in_run              # a run's supervisor: begin and launch back to back
        self.keeper = keeper              # a run's keeper starts the worker and logs its exit
        self.durable = not in_run         # fsync each file; a run's supervisor syncs in groups
        self._unit_pending = in_run       # unit.json is still to be written (in a run)
        self.receipt: str | None = None   # "pid:<pid>@<start time>" once the worker runs
        self.outcome: Outcome | None = None
        self.state = state or statedir.create(prepared.request.unit_id,
                                              prepared.request.state_root)
        # where the worker writes its own result: its result path, or (in a run) its outbox in
        # the state dir, copied to the result path when it is published
        self.write_path = (statedir.outbox(self.state, prepared.result_file)
                           if prepared.request.outbox else prepared.result_file)
        self.sandboxed: bool | None = None  # decided at launch
        self.escaped: list[dict] = []       # processes that left its group, ended with it
        self.dispatcher_pid = dispatcher_pid or os.getpid()
        self.settings = prepared.settings
        self.requested_model = prepared.settings.model
        self.worker = None
        self.started = time.time()
        self.launched_at: float | None = None
        self.workspace = prepared.workspace
        self.reader = None  # made in begin(): its records are not needed before STATE-DIR
        self._tail_offset = 0
        self._tail_rest = b""
        self._session_written = False
        self.quota_note: str | None = None

    # 1. the state dir's opening files ------------------------------------------------------------
    def begin(self) -> None:
        sd, p = self.state, self.p
        self.reader = p.executor.reader()
        if self.in_run:
            return self._begin_in_run()
        with open(sd.file(statedir.PROMPT), "w", encoding="utf-8") as f:
            f.write(p.prompt)
        sd.write(statedir.RESULT_FILE, p.result_file)
        if p.executor.launches_process:  # a session unit has no process, pid or stream
            sd.write(statedir.DISPATCH_PID, str(self.dispatcher_pid))
            open(sd.file(statedir.TAIL), "ab").close()
            open(sd.file(statedir.STDERR), "ab").close()
        self._ledger("begin")
        self._gate()
        sd.write(statedir.MODEL, self.settings.model or p.executor.name)
        sd.write_json(statedir.UNIT, self._unit_record())

    def _begin_in_run(self) -> None:
        """``begin`` for a run's supervisor, which launches at once: the same files in fewer
        file creations. The prompt is linked from the run's frozen copy; the single-value files
        are written in place (the state dir is brand new, and a reader takes an empty file for
        a missing one), those every unit of the run shares as links to one copy; ``tail`` and
        ``stderr`` are made by the launch; ``unit.json`` is written once, complete, by
        ``launch`` (or by ``finish`` if there is no launch)."""
        sd, p = self.state, self.p
        try:
            os.link(p.request.prompt_file, sd.file(statedir.PROMPT))
        except OSError:
            with open(sd.file(statedir.PROMPT), "w", encoding="utf-8") as f:
                f.write(p.prompt)
        sd.write_new(statedir.RESULT_FILE, p.result_file)
        if p.executor.launches_process:
            sd.write_shared(statedir.DISPATCH_PID, str(self.dispatcher_pid))
        else:  # a session unit is handed off, not launched: its record is written now
            self._unit_pending = False
        self._gate()
        sd.write_shared(statedir.MODEL, self.settings.model or p.executor.name)
        if not self._unit_pending:
            sd.write_json(statedir.UNIT, self._unit_record())

    def _gate(self) -> None:
        """The quota gate: may swap the model (MODEL-FALLBACK) or raise QuotaExhausted."""
        try:
            decision = self.p.executor.gate(self.settings, self.p.env)
        except QuotaExhausted as e:  # exit 75: the refusal is recorded before finish() runs
            self.quota_note = getattr(e, "note", None) or e.line()
            self.state.write(statedir.QUOTA_NOTE, self.quota_note)
            raise
        if decision is None:
            return
        if decision.note:
            import sys

            self.quota_note = decision.note
            print(decision.note, file=sys.stderr, flush=True)
            self.state.write(statedir.QUOTA_NOTE, decision.note)
        if decision.settings is not None:
            self.settings = decision.settings

    def _unit_record(self) -> dict:
        from .._util.process import create_time

        p = self.p
        return {
            "unit_id": p.request.unit_id, "attempt_id": p.request.attempt_id,
            "executor": p.executor.name, "requested_model": self.requested_model,
            "model": self.settings.model, "effort": self.settings.effort, "mode": p.mode,
            "workspace": self.workspace, "add_dirs": list(p.add_dirs),
            "resume_id": p.resume_id, "continue_from": p.request.continue_from,
            "timeout_s": self.settings.timeout_s, "result_file": p.result_file,
            "dispatcher": {"pid": self.dispatcher_pid,
                           "create_time": _own_start(self.dispatcher_pid, create_time)},
            "route_reason": p.request.route_reason, "started_at": _iso(self.started),
        }

    def _unit(self):
        from ..executors.records import Unit

        p, sd = self.p, self.state
        if self.workspace is None:
            self.workspace = sd.file("work")
            os.makedirs(self.workspace, exist_ok=True)
        return Unit(unit_id=p.request.unit_id, prompt=p.prompt,
                    prompt_file=sd.file(statedir.PROMPT), settings=self.settings, mode=p.mode,
                    workspace=self.workspace, add_dirs=p.add_dirs, resume_id=p.resume_id,
                    command=p.command, state_dir=sd.path, result_file=self.write_path,
                    briefed=p.request.briefed)

    # 2. launch, or hand off when the executor launches no process ----------------------------
    def hand_off(self) -> Outcome:
        """Write what the coordinator hands its subagent; nothing is launched or waited for."""
        text, lines = self.p.executor.hand_off(self._unit())
        self.state.write(statedir.HANDOFF, text)
        record = self.state.unit
        record["workspace"] = self.workspace
        self.state.write_json(statedir.UNIT, record)
        from ..ledger.statuses import OutcomeKind
        from .outcome import Outcome

        return Outcome(OutcomeKind.HANDED_OFF, "handed-off", unit_id=self.p.request.unit_id,
                       attempt_id=self.p.request.attempt_id, executor=self.p.executor.name,
                       state_dir=self.state.path, lines=tuple(lines))

    def launch(self) -> bool:
        """Start the worker. False (with the reason kept for ``finish``) if it cannot start."""
        from .._util.process import create_time, spawn
        from ..errors import LaunchError

        p, sd = self.p, self.state
        unit = self._unit()
        env = dict(p.env)
        env.update(p.request.extra_env)
        env.update({"PRUN_UNIT_ID": p.request.unit_id, "PRUN_STATE_DIR": sd.path,
                    "PRUN_RESULT_FILE": self.write_path})
        try:
            _git_wrapper_first(env, p.request.git_wrapper, p.config.user_state)
            launch = p.executor.build(unit, env)
            argv = [_program(launch, self.workspace), *launch.argv[1:]]
            self.sandboxed = self._sandbox_here()
            if self.sandboxed:
                argv = self._sandboxed(argv)
            stdin = _absolute(launch.stdin_path, self.workspace)
            if self.keeper is not None:
                self.worker = self.keeper.spawn(
                    argv, cwd=self.workspace, env=launch.env,
                    stdout_path=sd.file(statedir.TAIL), stderr_path=sd.file(statedir.STDERR),
                    stdin_path=stdin, name=os.path.basename(sd.path), log=_exit_log(sd))
            else:
                self.worker = spawn(argv, cwd=self.workspace, env=launch.env,
                                    stdout_path=sd.file(statedir.TAIL),
                                    stderr_path=sd.file(statedir.STDERR), stdin_path=stdin)
        except LaunchError as e:
            self.launch_error = e.line()
            self._write_pending_unit()
            return False
        except OSError as e:
            self.launch_error = f"cannot start {p.executor.name}: {e}"
            self._write_pending_unit()
            return False
        self.launched_at = time.time()
        if self._unit_pending:
            record = self._unit_record()
            self._unit_pending = False
        else:
            record = self.state.unit
        started = getattr(self.worker, "create_time", None) or create_time(self.worker.pid)
        record["workspace"] = self.workspace
        record["argv"] = _redact_prompt(launch.argv, p.prompt)
        record["sandbox"] = self.sandboxed
        record["worker"] = {"pid": self.worker.pid, "pgid": self.worker.pid,
                            "create_time": started, "started_at": _iso(self.launched_at)}
        if self.keeper is not None:
            record["worker"]["keeper"] = self.keeper.ident
        sd.write_json(statedir.UNIT, record)
        self.receipt = f"pid:{self.worker.pid}@{started or self.launched_at:.3f}"
        self._ledger("launch")
        return True

    def _sandbox_here(self) -> bool:
        """Whether this unit runs in the sandbox: ``off`` never; ``on`` always (refused at
        prepare where none can be made); ``auto`` where one can be made, else one line, once."""
        from .sandbox import unavailable

        if self.p.sandbox == "off":
            return False
        why = unavailable()
        if why is None:
            return True
        _say_once(f"prun: units run unsandboxed: {why}")
        return False

    def _sandboxed(self, argv: list[str]) -> list[str]:
        """``argv`` in the sandbox: its workspace, state dir and result folder writable (a
        run's result is written to the outbox in its state dir), the real repository and what
        the caller names read-only; extra directories writable only in accept-edits mode."""
        from .._util.gitcmd import toplevel
        from .sandbox import wrap

        p, req = self.p, self.p.request
        writable = [self.workspace, self.state.path, *req.writable]
        if self.write_path == p.result_file:
            writable.append(os.path.dirname(p.result_file))
        read_only = list(req.read_only)
        (writable if p.mode == "accept-edits" else read_only).extend(p.add_dirs)
        if not req.read_only:  # a standalone dispatch: the repository it was started from
            real = toplevel(os.getcwd())
            if real:
                read_only.append(real)
        return wrap(argv, writable=writable, read_only=read_only)

    def _write_pending_unit(self) -> None:
        if self._unit_pending:
            self._unit_pending = False
            record = self._unit_record()
            record["workspace"] = self.workspace
            self.state.write_json(statedir.UNIT, record)

    def _ledger(self, step: str) -> None:
        if self.record:
            from ..ledger import record_dispatch

            record_dispatch(step, self)

    @property
    def deadline(self) -> float:
        given = self.p.config.timeout_grace_s
        grace = self.p.executor.timeout_grace_s if given is None else given
        return (self.launched_at or time.time()) + self.settings.timeout_s + grace

    # 3. wait (synchronous form; the supervisor awaits the same exit) ----------------------------
    def wait(self) -> tuple[int, bool]:
        """Wait for the worker to exit or its deadline. Returns (exit code, timed out)."""
        from .._util.process import end_group

        w = self.worker
        while True:
            remaining = self.deadline - time.time()
            if remaining <= 0:
                end_group(w, self.p.config.kill_grace_s)
                self.pump()
                return w.reap(), True
            # Short slices only until the conversation id is known, then long ones.
            if w.wait_exit(min(remaining, 5.0 if self._session_written else 0.25)):
                break
            self.pump()
        w.sweep()
        return w.reap(), False

    async def wait_async(self, stop=None, hard_deadline: float | None = None,
                         on_end: Callable[[str], None] | None = None
                         ) -> tuple[int | None, str | None]:
        """The supervisor's wait, in its event loop: until the worker exits, the deadline
        (the unit's, or ``hard_deadline`` if sooner) or ``stop`` (an asyncio.Event) is set.
        ``on_end(why)`` runs before the group is ended. Returns (exit code, why) with why
        None, "timeout" or "cancelled"."""
        import asyncio

        from .._util.process import end_group

        w = self.worker
        limit = min(self.deadline, hard_deadline or float("inf"))
        exit_task = asyncio.ensure_future(w.await_exit())
        stop_task = asyncio.ensure_future(stop.wait()) if stop is not None else None
        waits = {t for t in (exit_task, stop_task) if t is not None}
        why: str | None = "timeout"
        try:
            while (remaining := limit - time.time()) > 0:
                if not self._session_written and self.p.executor.event_stream:
                    remaining = min(remaining, 1.0)  # pick the conversation id up early
                done, _ = await asyncio.wait(waits, timeout=remaining,
                                             return_when=asyncio.FIRST_COMPLETED)
                if exit_task in done:
                    why = None
                    break
                if stop_task is not None and stop_task in done:
                    why = "cancelled"
                    break
                self.pump()
        finally:
            for t in waits:
                t.cancel()
        if why is None:
            w.sweep()
        else:
            if on_end is not None:
                on_end(why)
            await asyncio.to_thread(end_group, w, self.p.config.kill_grace_s)
            self.pump()
        return await _exit_code(w, self.state), why  # it has exited: reaping does not block

    def pump(self) -> None:
        """Feed the stream's new complete lines to the reader; record the session id early.
        (A command's output is not an event stream: it is read whole at the end.)"""
        if not self.p.executor.event_stream:
            return
        try:
            with open(self.state.file(statedir.TAIL), "rb") as f:
                f.seek(self._tail_offset)
                chunk = f.read()
        except OSError:
            return
        self._tail_offset += len(chunk)
        data = self._tail_rest + chunk
        lines = data.split(b"\n")
        self._tail_rest = lines.pop()
        for line in lines:
            self.reader.feed(line.decode("utf-8", "replace"))
        self._record_session()

    def _record_session(self) -> None:
        sid = self.reader.result.session_id
        if sid and not self._session_written:
            self.state.write(statedir.CONVERSATION_ID, sid)
            self._session_written = True

    # 4. finish -----------------------------------------------------------------------------------
    def finish(self, exit_code: int | None, *, timed_out: bool = False, cancelled: bool = False,
               refused: QuotaExhausted | None = None) -> Outcome:
        """Judge the run, publish the result (or FALLBACK), write outcome.json last."""
        from .._util.fsutil import read_text, tail_bytes

        p, sd = self.p, self.state
        self._write_pending_unit()  # a run's attempt the quota gate refused before its launch
        stream = self._final_stream()
        launch_error = getattr(self, "launch_error", None)
        if refused is not None:
            verdict, error = "quota", refused.line()
        elif launch_error:
            verdict, error = "launch-failed", launch_error
        elif timed_out:
            verdict = "timeout"
            error = f"no exit within the {int(self.settings.timeout_s)} s timeout; process group ended"
        elif cancelled:
            verdict, error = "cancelled", "the dispatcher was stopped; the worker's group was ended"
        else:
            j = p.executor.judge(exit_code if exit_code is not None else 1, stream)
            verdict, error = j.reason, j.error
            if j.ok:
                verdict, error = "ok", None
            elif p.resume_id and p.executor.resume_refused(
                    exit_code or 0, stream, tail_bytes(sd.file(statedir.STDERR), 20000)
                    .decode("utf-8", "replace")):
                verdict = "resume-refused"  # the run starts a fresh attempt instead
            elif self.launched_at and time.time() - self.launched_at >= self.settings.timeout_s:
                verdict = "timeout"  # the CLI's own bounded timeout stopped it
        response = stream.response
        if response is None and stream.response_file:
            response = read_text(stream.response_file, "")
        hit = None
        if verdict not in ("ok", "quota", "launch-failed"):
            stderr_tail = tail_bytes(sd.file(statedir.STDERR), 20000).decode("utf-8", "replace")
            hit = p.executor.quota_hit(stream, exit_code or 0, stderr_tail)
            if hit is not None:
                hit.group = hit.group or p.executor.quota_group(self.settings.model)
                from .. import quota

                quota.record_hit(hit, self.p.env)
        if verdict not in ("ok", "quota", "cancelled") and launch_error is None:
            from .. import quota

            quota.after_backend_failure(p.executor, self.p.env)
        published, sibling, verdict, error = publish(self, verdict, error, exit_code, stream,
                                                     response)
        from . import published as index

        landed = index.identity(p.result_file)
        self.outcome = self._outcome(verdict, error, exit_code, published, sibling, stream,
                                     hit, landed)
        sd.write_json(statedir.OUTCOME, self.outcome.to_json(), durable=self.durable)
        if landed is not None:  # waiters treat the result as landed from now on
            index.record(p.result_file, sd.path, outcome=sd.file(statedir.OUTCOME),
                         state_root=p.config.state_root)
        self._ledger("finish")
        return self.outcome

    def _outcome(self, verdict: str, error: str | None, exit_code: int | None,
                 published: str | None, sibling: str | None, stream: StreamResult, hit,
                 landed: dict | None) -> Outcome:
        from ..ledger.statuses import OutcomeKind
        from .outcome import Outcome, Quota

        p = self.p
        kind = {"ok": OutcomeKind.SUCCEEDED, "timeout": OutcomeKind.TIMEOUT,
                "quota": OutcomeKind.QUOTA, "cancelled": OutcomeKind.CANCELLED,
                }.get(verdict, OutcomeKind.FAILED)
        finished = time.time()
        return Outcome(
            kind, verdict, error=error, published=published, worker_exit=exit_code,
            backend_status=stream.status, result_file=p.result_file, response_file=sibling,
            unit_id=p.request.unit_id, attempt_id=p.request.attempt_id,
            executor=p.executor.name, model=self.settings.model,
            requested_model=self.requested_model, session_id=stream.session_id,
            tool_uses=stream.tool_uses, tool_errors=stream.tool_errors,
            denials=tuple(stream.denials or ()), usage=stream.usage,
            quota_note=self.quota_note,
            quota=Quota(hit.group, hit.resets_at, hit.message) if hit else None,
            started_at=_iso(self.started), finished_at=_iso(finished),
            duration_s=round(finished - self.started, 3), state_dir=self.state.path,
            result_identity=landed, sandboxed=self.sandboxed, escaped=tuple(self.escaped))

    def _final_stream(self) -> StreamResult:
        if self.reader is None:
            self.reader = self.p.executor.reader()
        if self.worker is not None or self._tail_offset:
            self.pump()
            if self._tail_rest:
                self.reader.feed(self._tail_rest.decode("utf-8", "replace"))
                self._tail_rest = b""
        stream = self.reader.finish(self.state.file(statedir.TAIL))
        self._record_session()
        return stream

def run_sync(req: Request, on_state_dir: Callable[[str], None] | None = None) -> Outcome:
    """``prun dispatch``: prepare, then run the whole attempt in this process."""
    import signal

    def _cancel(signum, frame):
        raise Cancelled()

    prepared = prepare(req)
    d = Dispatch(prepared)
    from .._util.process import become_subreaper, end_escaped

    reaper = become_subreaper()  # what leaves the worker's group comes back here to be ended
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _cancel)
    refused = handed = None
    code, timed_out, cancelled = None, False, False
    try:
        if on_state_dir:
            on_state_dir(d.state.path)
        try:
            d.begin()
        except QuotaExhausted as e:
            refused = e
        if refused is None and not prepared.executor.launches_process:
            handed = d.hand_off()  # a session unit: the coordinator runs it, nothing to wait for
        elif refused is None and d.launch():
            code, timed_out = d.wait()
    except Cancelled:
        cancelled = True
        if d.worker is not None and d.worker.proc.returncode is None:
            from .._util.process import end_group

            end_group(d.worker, prepared.config.kill_grace_s)
            code = d.worker.reap()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # publishing the outcome must not be interrupted
    if reaper and d.worker is not None:
        d.escaped = end_escaped(d.worker, prepared.config.kill_grace_s)
        if d.escaped:
            import sys

            print(f"prun: {len(d.escaped)} process(es) left unit {req.unit_id}'s process group "
                  "and were ended with it", file=sys.stderr)
    if handed is not None:
        return handed
    return d.finish(code, timed_out=timed_out, cancelled=cancelled, refused=refused)


def reopen(req: Request, state_path: str) -> Dispatch:
    """The Dispatch of an attempt an earlier supervisor launched (``prun resume``)."""
    d = Dispatch(prepare(req, reopen=True), statedir.StateDir(state_path),
                 dispatcher_pid=os.getpid(), record=False, in_run=True)
    unit = d.state.unit
    worker = unit.get("worker") or {}
    d.workspace = unit.get("workspace") or d.workspace
    d.launched_at = worker.get("create_time") or d.started
    d.receipt = f"pid:{worker.get('pid')}@{d.launched_at:.3f}" if worker.get("pid") else None
    return d


_OWN_START: dict[int, float | None] = {}


def _own_start(pid: int, create_time) -> float | None:
    """The dispatcher's start time, asked of the system once per process (a supervisor
    dispatches hundreds of units)."""
    if pid not in _OWN_START:
        _OWN_START[pid] = create_time(pid)
    return _OWN_START[pid]


def _program(launch, workspace: str) -> str:
    """The path of the program a run's keeper starts (it searches no PATH): found once a while,
    since a run starts the same program hundreds of times."""
    import shutil

    from ..errors import LaunchError

    prog = launch.argv[0]
    path = launch.env.get("PATH")
    if "/" in prog:
        found = shutil.which(os.path.join(workspace, prog), path=path)
    else:
        key = (prog, path)
        hit = _FOUND.get(key)
        if hit is not None and time.monotonic() - hit[1] < FOUND_TTL_S:
            found = hit[0]
        else:
            found = shutil.which(prog, path=path)
            if found:
                _FOUND[key] = (found, time.monotonic())
    if not found:
        raise LaunchError(f"{prog} not found" + ("" if "/" in prog else " on PATH"),
                          hint=f"install {prog} or give its full path")
    return found


def _absolute(path: str | None, workspace: str) -> str | None:
    return os.path.join(workspace, path) if path else None


def _git_wrapper_first(env: dict[str, str], folder: str | None, user_state: str) -> None:
    """Put prun's git wrapper (``folder``, else the one made under ``user_state``) first on
    the worker's PATH (every executor): it refuses commit, push and destructive git with one
    line, and passes everything else to the real git."""
    from ..errors import LaunchError
    from ..hooks.git_wrapper import git_wrapper_dir

    try:
        folder = folder or git_wrapper_dir(user_state)
    except LaunchError:
        return  # no git here to misuse
    path = env.get("PATH", os.defpath)
    if not path.startswith(folder + os.pathsep):
        env["PATH"] = folder + os.pathsep + path


_SAID: set[str] = set()


def _say_once(line: str) -> None:
    if line not in _SAID:
        _SAID.add(line)
        import sys

        print(line, file=sys.stderr, flush=True)


_FOUND: dict[tuple[str, str | None], tuple[str, float]] = {}
FOUND_TTL_S = 10.0


def _redact_prompt(argv: list[str], prompt: str) -> list[str]:
    return ["<prompt>" if a == prompt else a for a in argv]


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))
