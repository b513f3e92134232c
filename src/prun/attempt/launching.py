"""What a launch needs besides the executor's own argv: the program's path, the unit's own
places (its temporary folder, private home, guard log and policy), prun's git wrapper and agent
stubs first on PATH, the sandbox (whether, and what it mounts), the argv as recorded.

A unit writes only its own places: its workspace, its outbox (``<state dir>/outbox/``), its
``guard.log``, its temporary folder (``<state dir>/tmp``: ``TMPDIR``, and ``/tmp`` and
``/var/tmp`` in the sandbox) and its private home (``<state dir>/home``, or the home of the
attempt it continues: ``HOME``). Sandboxed, everything else is read-only, and hidden (an empty
folder) are the state dirs beside its own and every workspace but its own and its run's
snapshot; a unit that may not start other agents (``subdispatch`` off, the default) finds a
refusing stub instead of every other agent CLI and of prun. Without the sandbox the same places
and variables are given, and nothing is enforced.

The launch step: ``plan`` (the launch's file work, any thread: ``build``, the argv), then
``start`` or ``start_async`` (the ``Launcher`` starts it: a worker, or a session unit's
hand-off, ``Dispatch.handed``); ``launch`` is both, blocking.
"""

from __future__ import annotations

import functools
import os
import sys
import time

from .._util.say import say_once
from ..errors import LaunchError
from . import statedir
from .exitlog import path as _exit_log
from .statedir import worker_entry

TYPE_CHECKING = False  # typing costs milliseconds on the dispatcher's fast path
if TYPE_CHECKING:
    from typing import Any

    from .._util.worker import WorkerLike as Worker
    from ..executors.records import Launch
    from .core import Dispatch
    from .launcher import Launcher, Planned, Started
    from .protocols import UnitRecord

NODE_LAUNCHED = (".js", ".mjs", ".cjs", ".exe")   # what an npm launcher links to


def sandbox_here(d: Dispatch) -> bool:
    """Whether this unit runs in the sandbox: ``off`` never; ``on`` always (refused at
    prepare where none can be made); ``auto`` where one can be made, else one line, once."""
    from .sandbox import unavailable

    if d.p.sandbox == "off":
        return False
    why = unavailable()
    if why is None:
        return True
    say_once(f"prun: units run unsandboxed: {why}")
    return False


class Places:
    """The unit's own places, made for its launch, and what its environment says of them.

    Making it writes the state dir's ``tmp/`` and (unless a follow-up reuses the home it
    continues) ``home/`` with the executor's ``home_files``, and, for a sandboxed unit, its
    ``guard.log`` (a file is mounted only once it exists); and sets in ``env``: ``HOME`` (and
    the CLI's config-folder variables, pointed into the copy), ``TMPDIR``,
    ``PRUN_SUBDISPATCH``, the person's ``XDG_*_HOME`` folders and prun's workspace and state
    roots removed (they follow the unit's HOME), the agent stubs (subdispatch off) and the
    git wrapper first on PATH."""

    def __init__(self, d: Dispatch, env: dict[str, str], *, sandboxed: bool):
        from . import home, subdispatch

        p, sd = d.p, d.state
        self.d = d
        self.tmp = sd.file(statedir.TMP)
        os.makedirs(self.tmp, exist_ok=True)
        self.guard_log = sd.file(statedir.GUARD_LOG)
        if sandboxed:
            open(self.guard_log, "ab").close()
        allowed = p.request.subdispatch
        self.policy = subdispatch.policy_file(allowed)
        files = p.executor.home_files()
        if d.earlier_home and not os.path.lexists(d.home):
            home.carry(d.earlier_home, d.home)   # a follow-up: the home its conversation is in
        if not os.path.isdir(d.home):
            os.makedirs(d.home, mode=0o700)
            home.fill(d.home, files, env)
        self.home = d.home
        self.outbox = os.path.dirname(d.write_path) if p.request.outbox else None
        self.path = env.get("PATH", os.defpath)   # as the person has it
        for var in (*home.XDG_FOLDERS, *home.PRUN_PLACES):
            env.pop(var, None)
        env.update(home.environment(self.home, files, env))
        env["TMPDIR"] = self.tmp
        env[subdispatch.ENV] = "on" if allowed else "off"
        self.masked = [] if allowed else masked_programs(d)
        self.prun_dirs: list[str] = []     # the folders prun puts on PATH
        if self.masked:
            from ..hooks.agent_stubs import stub_dir

            stubs = stub_dir(p.config.user_state, self.masked)
            env["PATH"] = stubs + os.pathsep + env.get("PATH", os.defpath)
            self.prun_dirs.append(stubs)
        git = git_wrapper_first(env, p.request.git_wrapper, p.config.user_state)
        if git:
            self.prun_dirs.append(git)

    def own_stdin(self, launch: Launch) -> Launch:
        """``launch`` reading its prompt from a copy in the unit's tmp, not from the state
        dir's ``prompt``: a process can open its own stdin again for writing through
        ``/proc/self/fd/0``, past any read-only mount."""
        if launch.stdin_path != self.d.state.file(statedir.PROMPT):
            return launch
        import dataclasses

        copy = os.path.join(self.tmp, ".prun-prompt")
        with open(copy, "w", encoding="utf-8") as f:
            f.write(self.d.p.prompt)
        return dataclasses.replace(launch, stdin_path=copy)

    def wrap(self, argv: list[str], workspace: str) -> list[str]:
        """``argv`` (its program's path first) in the sandbox: the unit's places writable (and
        a standalone unit's result folder), the rest read-only; the real repository and what
        the caller names read-only; the state dirs beside its own and every workspace hidden
        but for what is bound back; extra directories writable only in accept-edits mode; its
        policy at ``/dev/prun-unit``; other agent CLIs masked when it may not start them; the
        workspace also shown, and the unit started, where its primed template was primed
        (``workspace_at``), its template's shared folders mounted as overlays (``overlays``)."""
        from .._util.gitcmd import toplevel
        from .home import person_home
        from .sandbox import TMP_FOLDERS, wrap
        from .subdispatch import MARKER

        d = self.d
        p, req, sd = d.p, d.p.request, d.state
        writable = [workspace, self.tmp, self.home, self.guard_log, *req.writable,
                    *p.config.sandbox_writable]
        if self.outbox:
            writable.append(self.outbox)
        if d.write_path == p.result_file:   # a standalone unit writes its own result there
            writable.append(os.path.dirname(p.result_file))
        read_only = [sd.path, *req.read_only]
        (writable if p.mode == "accept-edits" else read_only).extend(p.add_dirs)
        if not req.read_only:  # a standalone dispatch: the repository it was started from
            real = toplevel(os.getcwd())
            if real:
                read_only.append(real)
        program = os.path.realpath(argv[0])
        # what stays visible, read-only, wherever it is: prun and its interpreter, the
        # program, and the person's home (where tools are often installed)
        real_writable = [os.path.realpath(w) for w in writable]
        keep = [k for k in (*_real(*_PRUN_ITSELF, person_home(p.env), *self.prun_dirs),
                            os.path.realpath(os.path.dirname(argv[0])), os.path.dirname(program))
                if not any(_within(k, w) for w in real_writable)]
        hidden = [h for h in (os.path.realpath(h) for h in (
                  os.path.dirname(sd.path), p.config.workspace_root, *req.hidden))
                  if not any(_within(k, h) for k in keep)]
        # what a private /tmp or a hidden folder would take away
        gone = (*_real(*TMP_FOLDERS), *hidden)
        read_only += [k for k in keep if any(_within(k, g) for g in gone)]
        covers = [(self.policy, MARKER), *self._masks(program)]
        at = (workspace, req.workspace_at) if req.workspace_at else None
        return wrap(argv, writable=writable, read_only=read_only, hidden=hidden, tmp=self.tmp,
                    covers=covers, alias=at,
                    overlays=[o.paths for o in req.overlays])

    def _masks(self, program: str) -> list[tuple[str, str]]:
        """(stub, file) for each other agent CLI on the person's PATH (or named by its
        executor's variable) and the file its launcher links to: never the unit's own
        program, nor a shared launcher (a version manager's shim) whose path does not name
        the agent."""
        if not self.masked:
            return []
        from .. import executors
        from ..hooks.agent_stubs import STUB

        stub = os.path.join(self.prun_dirs[0], STUB)
        named = tuple(v for ex in executors.all() if ex.bin_env and ex.program in self.masked
                      and (v := self.d.p.env.get(ex.bin_env, "").strip()))
        return [(stub, real) for real in _agent_files(self.path, tuple(self.masked), named)
                if real != program]


@functools.lru_cache(maxsize=16)
def _agent_files(path: str, names: tuple[str, ...], named: tuple[str, ...]) -> tuple[str, ...]:
    """The real path of each agent CLI ``names`` finds on ``path`` (and of each file
    ``named``): the file its launcher links to, unless that is a shared launcher (a version
    manager's shim) whose path does not name the agent. Once per PATH in a process."""
    found = [os.path.join(folder or ".", name) for folder in path.split(os.pathsep)
             for name in names]
    out: list[str] = []
    for file in (*found, *named):
        if not os.path.isfile(file):
            continue
        real = os.path.realpath(file)
        name = os.path.basename(file)
        if real != os.path.abspath(file) and not (
                real.endswith(NODE_LAUNCHED) or name.lower() in real.lower()):
            continue
        out.append(real)
    return tuple(dict.fromkeys(out))


# prun and the interpreter it runs under: what a unit's sandbox must never take away
_PRUN_ITSELF = (sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable)),
                os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@functools.lru_cache(maxsize=64)
def _real(*paths: str) -> tuple[str, ...]:
    """The real paths of folders that do not move while prun runs (cached)."""
    return tuple(os.path.realpath(p) for p in paths)


def masked_programs(d: Dispatch) -> list[str]:
    """The agent CLIs a unit that may not start other agents must not find: every executor's
    program, the refused ones (codex) and prun itself, but its own executor's program (and a
    command unit's own program)."""
    from .. import executors

    names = {ex.program for ex in executors.all() if ex.program} | set(executors.REFUSED)
    names.add("prun")
    own = {d.p.executor.program}
    if d.p.command:
        own.add(os.path.basename(d.p.command[0]))
    return sorted(names - own)


def _within(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder`` or inside it (both real paths)."""
    folder = folder.rstrip("/")
    return not folder or path == folder or path.startswith(folder + "/")


def program_path(launch: Launch, workspace: str) -> str:
    """The path of the program to start (a run's keeper searches no PATH): a relative path
    is taken in the workspace, a bare name is looked up on the launch's PATH."""
    import shutil

    prog = launch.argv[0]
    path = launch.env.get("PATH")
    found = shutil.which(os.path.join(workspace, prog) if "/" in prog else prog, path=path)
    if not found:
        raise LaunchError(f"{prog} not found" + ("" if "/" in prog else " on PATH"),
                          hint=f"install {prog} or give its full path")
    return found


def absolute(path: str | None, workspace: str) -> str | None:
    return os.path.join(workspace, path) if path else None


def git_wrapper_first(env: dict[str, str], folder: str | None, user_state: str) -> str | None:
    """Put prun's git wrapper (``folder``, else the one made under ``user_state``) first on
    the worker's PATH (every executor): it refuses commit, push and destructive git with one
    line, and passes everything else to the real git. Returns its folder (None: no git)."""
    from ..hooks.git_wrapper import git_wrapper_dir

    try:
        folder = folder or git_wrapper_dir(user_state)
    except LaunchError:
        return None  # no git here to misuse
    path = env.get("PATH", os.defpath)
    if not path.startswith(folder + os.pathsep):
        env["PATH"] = folder + os.pathsep + path
    return folder


def redact_prompt(argv: list[str], prompt: str) -> list[str]:
    return ["<prompt>" if a == prompt else a for a in argv]


# the launch step -------------------------------------------------------------------------------
def plan(d: Dispatch) -> bool:
    """The launch's file work (any thread), by its launcher: ``d.planned``. False (with the
    reason kept for ``finish``) if it cannot be built."""
    try:
        d.planned = _launcher(d).plan(d)
    except (LaunchError, OSError) as e:
        return _failed(d, e)
    return True


def launch(d: Dispatch) -> bool:
    """Plan and start the worker, blocking. False (the reason kept) if it cannot start."""
    if not plan(d):
        return False
    return start(d)


def start(d: Dispatch) -> bool:
    """Start the planned worker (blocking, any thread). False (the reason kept) if it did
    not start."""
    try:
        _started(d, _launcher(d).start(d, d.planned))
    except (LaunchError, OSError) as e:
        return _failed(d, e)
    return True


async def start_async(d: Dispatch) -> bool:
    """``start``, from the run's event loop: no thread waits for a keeper's answer."""
    try:
        _started(d, await _launcher(d).start_async(d, d.planned))
    except (LaunchError, OSError) as e:
        return _failed(d, e)
    return True


def _launcher(d: Dispatch) -> Launcher[Dispatch]:
    if d.launcher is None:
        raise RuntimeError(f"attempt {d.p.request.attempt_id} has no launcher")
    return d.launcher


def _failed(d: Dispatch, e: LaunchError | OSError) -> bool:
    """Keep why the launch failed, for ``finish``: a launcher's own line, or the system's."""
    if isinstance(e, LaunchError):
        d.launch_error = e.line()
    else:
        d.launch_error = f"cannot start {d.p.executor.name}: {e}"
    return False


def _started(d: Dispatch, handle: Started) -> None:
    """Keep what the launcher started: its worker, or a session unit's hand-off."""
    from .handoff import HandedOff

    if isinstance(handle, HandedOff):
        d.handed = handle
    else:
        d.worker = handle


def build(d: Dispatch) -> Planned:
    """The executor's launch, with the unit's variables, its own places (``Places``: its tmp,
    private home and guard log) and prun's git wrapper first on PATH, and the argv that runs
    it: its program's path found, in the sandbox when it runs in one."""
    p, sd = d.p, d.state
    unit = d.unit()
    env = dict(p.env)
    env.update(p.request.extra_env)
    env.update({"PRUN_UNIT_ID": p.request.unit_id, "PRUN_STATE_DIR": sd.path,
                "PRUN_RESULT_FILE": d.write_path})
    d.sandboxed = sandbox_here(d)
    places = Places(d, env, sandboxed=d.sandboxed)
    launch = p.executor.build(unit, env)
    argv = [program_path(launch, unit.workspace), *launch.argv[1:]]
    if d.sandboxed:
        launch = places.own_stdin(launch)
        argv = places.wrap(argv, unit.workspace)
    return launch, argv


def spawn_files(d: Dispatch, launch: Launch) -> dict[str, Any]:
    """Where the worker runs and what it reads and writes, as ``spawn`` takes them."""
    sd, workspace = d.state, d.work_dir()
    return {"cwd": workspace, "env": launch.env, "stdout_path": sd.file(statedir.TAIL),
            "stderr_path": sd.file(statedir.STDERR),
            "stdin_path": absolute(launch.stdin_path, workspace),
            "name": os.path.basename(sd.path), "log": _exit_log(sd)}


def launch_record(d: Dispatch, launch: Launch) -> UnitRecord:
    """``unit.json`` at the launch: with the argv (the prompt redacted) and the sandbox."""
    record = d.unit_record()
    record["argv"] = redact_prompt(launch.argv, d.p.prompt)
    record["sandbox"] = d.sandboxed
    return record


def receipt(d: Dispatch, worker: Worker) -> float | None:
    """The launch's time and receipt (``pid:<pid>@<start time>``); gives the worker's start
    time (kept in ``d.worker_started``)."""
    from .._util.process import create_time

    d.launched_at = time.time()
    started: float | None = (getattr(worker, "create_time", None)
                             or create_time(worker.pid))
    d.receipt = f"pid:{worker.pid}@{started or d.launched_at:.3f}"
    d.worker_started = started
    return started


def record_launch(d: Dispatch, launch: Launch, worker: Worker) -> None:
    """The receipt, and ``unit.json`` with the argv, the sandbox and the worker."""
    started = receipt(d, worker)
    record = launch_record(d, launch)
    record["worker"] = worker_entry(worker.pid, started, d.launched_at or time.time())
    try:
        d.state.write_json(statedir.UNIT, record)
    except OSError as e:  # a full disk: the worker runs all the same and is watched
        print(f"prun: warning: {d.state.file(statedir.UNIT)} not updated at launch: "
              f"{e.strerror or e}", file=sys.stderr)
