"""What a launch needs besides the executor's own argv: the program's path, prun's git
wrapper first on PATH, the sandbox (whether, and what it mounts), the argv as recorded."""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing costs milliseconds on the dispatcher's fast path
if TYPE_CHECKING:
    from ..executors.records import Launch
    from .core import Dispatch


def sandbox_here(d: Dispatch) -> bool:
    """Whether this unit runs in the sandbox: ``off`` never; ``on`` always (refused at
    prepare where none can be made); ``auto`` where one can be made, else one line, once."""
    from .sandbox import unavailable

    if d.p.sandbox == "off":
        return False
    why = unavailable()
    if why is None:
        return True
    _say_once(f"prun: units run unsandboxed: {why}")
    return False


def sandboxed(d: Dispatch, argv: list[str], workspace: str) -> list[str]:
    """``argv`` in the sandbox: its workspace, state dir and result folder writable (a
    run's result is written to the outbox in its state dir), the real repository and what
    the caller names read-only; extra directories writable only in accept-edits mode."""
    from .._util.gitcmd import toplevel
    from .sandbox import wrap

    p, req = d.p, d.p.request
    writable = [workspace, d.state.path, *req.writable]
    if d.write_path == p.result_file:
        writable.append(os.path.dirname(p.result_file))
    read_only = list(req.read_only)
    (writable if p.mode == "accept-edits" else read_only).extend(p.add_dirs)
    if not req.read_only:  # a standalone dispatch: the repository it was started from
        real = toplevel(os.getcwd())
        if real:
            read_only.append(real)
    return wrap(argv, writable=writable, read_only=read_only)


def program_path(launch: Launch, workspace: str) -> str:
    """The path of the program to start (a run's keeper searches no PATH): a relative path
    is taken in the workspace, a bare name is looked up on the launch's PATH."""
    import shutil

    from ..errors import LaunchError

    prog = launch.argv[0]
    path = launch.env.get("PATH")
    found = shutil.which(os.path.join(workspace, prog) if "/" in prog else prog, path=path)
    if not found:
        raise LaunchError(f"{prog} not found" + ("" if "/" in prog else " on PATH"),
                          hint=f"install {prog} or give its full path")
    return found


def absolute(path: str | None, workspace: str) -> str | None:
    return os.path.join(workspace, path) if path else None


def git_wrapper_first(env: dict[str, str], folder: str | None, user_state: str) -> None:
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


def redact_prompt(argv: list[str], prompt: str) -> list[str]:
    return ["<prompt>" if a == prompt else a for a in argv]
