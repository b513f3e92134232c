"""The plan's own commands in a workspace: ``setup`` before a unit starts (``run_setup``) and
the combined check after integration (``run_bounded``). Each runs bounded, stdin closed, in a
process group of its own that is ended whole past its timeout.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .._util import gitcmd
from ..errors import SetupFailed

SETUP_LOG = "prun-setup.log"                 # inside the clone's .git folder
SETUP_TIMEOUT_DEFAULT = 600.0


# Setup --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SetupResult:
    ok: bool
    exit_code: int | None        # None: it timed out and was ended
    timed_out: bool
    duration_s: float
    log: str                     # the file holding its stdout and stderr
    tail: str                    # the last lines of that output
    excluded: tuple[str, ...] = ()  # untracked paths it made, excluded from the clone's diff

    def line(self) -> str:
        state = "timeout" if self.timed_out else f"exit={self.exit_code}"
        return f"SETUP {'ok' if self.ok else 'failed'} {state} took={self.duration_s:.1f}s"


def run_setup(workspace: str | os.PathLike[str], command: str | Sequence[str],
              env: Mapping[str, str] | None = None, timeout: float | None = None, *,
              log_path: str | os.PathLike[str] | None = None, check: bool = True) -> SetupResult:
    """Run the plan's ``setup`` command in ``workspace`` before its unit starts.

    A string runs through ``/bin/sh -c`` (it is the plan author's shell line); a list runs as
    argv. It gets its own process group, stdin closed, and ``timeout`` seconds (default 600);
    past that its whole group is ended. Output goes to ``log_path`` (default: the clone's
    ``.git/prun-setup.log``, else a file beside the workspace). In a clone, untracked files it
    made are added to ``.git/info/exclude`` so they never count as the unit's change.
    Raises ``SetupFailed`` on failure when ``check``.
    """
    workspace = os.path.abspath(os.fspath(workspace))
    git_dir = os.path.join(workspace, ".git")
    is_clone = os.path.isdir(git_dir)
    if log_path is None:
        log_path = (os.path.join(git_dir, SETUP_LOG) if is_clone
                    else workspace.rstrip(os.sep) + ".setup.log")
    before = _untracked(workspace) if is_clone else set()
    ran = run_bounded(command, workspace, env,
                      SETUP_TIMEOUT_DEFAULT if timeout is None else timeout, log_path)
    excluded: tuple[str, ...] = ()
    if ran.ok and is_clone:
        excluded = tuple(sorted(_untracked(workspace) - before))
        if excluded:
            os.makedirs(os.path.join(git_dir, "info"), exist_ok=True)
            with open(os.path.join(git_dir, "info", "exclude"), "a", encoding="utf-8") as f:
                f.write("# made by the plan's setup command (prun)\n")
                f.writelines("/" + _escape_glob(p) + "\n" for p in excluded)
    result = SetupResult(ran.ok, ran.exit_code, ran.timed_out, ran.duration_s, ran.log,
                         ran.tail, excluded)
    if check and not ran.ok:
        raise SetupFailed(result, command)
    return result


@dataclass(frozen=True)
class Ran:
    """A bounded command's end: exit code (None when it timed out), time taken, its output."""

    exit_code: int | None
    timed_out: bool
    duration_s: float
    log: str
    tail: str

    @property
    def ok(self) -> bool:
        return not self.timed_out and self.exit_code == 0


def shell_argv(command: str | Sequence[str]) -> list[str]:
    """A plan's command: a string is a shell line (``/bin/sh -c``), a list is argv."""
    if isinstance(command, str):
        return ["cmd", "/c", command] if os.name == "nt" else ["/bin/sh", "-c", command]
    return [str(a) for a in command]


def run_bounded(command: str | Sequence[str], cwd: str, env: Mapping[str, str] | None,
                timeout: float, log_path: str | os.PathLike[str]) -> Ran:
    """Run ``command`` in ``cwd`` in its own process group, stdin closed, stdout and stderr to
    ``log_path``; past ``timeout`` seconds its whole group is ended. Leftover processes of the
    group are ended when its leader exits."""
    from .._util import process
    from .._util.fsutil import tail_bytes

    log_path = os.fspath(log_path)
    full_env = dict(os.environ if env is None else env)
    started = time.monotonic()
    try:
        worker = process.spawn(shell_argv(command), cwd=cwd, env=full_env,
                               stdout_path=log_path, stderr_path=log_path)
    except OSError as e:
        return Ran(127, False, 0.0, log_path, str(e))
    timed_out = not worker.wait_exit(float(timeout))
    if timed_out:
        from ..settings import current

        process.end_group(worker, current().kill_grace_s)
    else:
        worker.sweep()
    code = worker.reap()
    tail = tail_bytes(log_path, 4000).decode("utf-8", "replace")
    return Ran(None if timed_out else code, timed_out, time.monotonic() - started, log_path,
               tail)


def _untracked(clone: str) -> set[str]:
    listing = gitcmd.git(["ls-files", "-z", "--others", "--exclude-standard", "--directory"],
                         clone).stdout
    return {p.rstrip("/") for p in listing.split("\0") if p}


def _escape_glob(path: str) -> str:
    return "".join("\\" + c if c in "*?[]\\!#" else c for c in path)
