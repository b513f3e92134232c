"""The plan's ``setup`` command in a fresh workspace, before its unit starts (``run_setup``):
bounded, stdin closed, in a process group of its own ended whole past its timeout, in the
sandbox its units run in wherever they would. Untracked files it made in a clone are left out
of the unit's change.
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..attempt.overlay import Overlay
from ..attempt.sandbox import unavailable, wrap
from ..errors import SetupFailed
from ..settings import load
from .clonefiles import BrokenClone, NotRegular, append_inside
from .commands import run_bounded, shell_argv
from .overlayview import layer, merged
from .untrusted import pattern, reading
from .workspace import clone_base, setup_log

SETUP_TIMEOUT_DEFAULT = 600.0


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


def sandboxed(setting: str | None) -> bool:
    """Whether a workspace's setup runs in the sandbox: wherever its units would (the
    packet's resolved setting, ``auto`` or ``on``, and a sandbox can be made here)."""
    return (setting or "auto") != "off" and unavailable() is None


def run_setup(workspace: str | os.PathLike[str], command: str | Sequence[str],
              env: Mapping[str, str] | None = None, timeout: float | None = None, *,
              log_path: str | os.PathLike[str] | None = None, check: bool = True,
              sandbox: bool = False, read_only: Sequence[str] = (),
              base: str | None = None, overlays: Sequence[Overlay] = (),
              exclude_new: bool = True) -> SetupResult:
    """Run the plan's ``setup`` command in ``workspace`` before its unit starts.

    A string runs through ``/bin/sh -c`` (it is the plan author's shell line); a list runs as
    argv. It gets its own process group, stdin closed, and ``timeout`` seconds (default 600);
    past that its whole group is ended. With ``sandbox`` it runs in the sandbox its units run
    in (``prun.attempt.sandbox.wrap``): the workspace writable (and a temporary folder of its
    own, its ``HOME`` too), ``read_only`` read-only, ``overlays`` mounted (a primed template's
    shared folders, as its unit sees them), so
    nothing in a workspace (a predecessor's change, a follow-up's earlier work) runs on the
    host. Output goes to ``log_path`` (default: ``setup_log``). In a clone (at ``base``,
    default the one its marker recorded when prun made it), untracked files it made are
    added to ``.git/info/exclude`` so they never count as the unit's change (not with
    ``exclude_new`` false: a primed template's clone, which is never read as a change).
    Raises ``SetupFailed`` on failure when ``check``.
    """
    workspace = os.path.abspath(os.fspath(workspace))
    git_dir = os.path.join(workspace, ".git")
    excluding = exclude_new and (layer(workspace) is not None or (
        os.path.isdir(git_dir) and not os.path.islink(git_dir)))
    if log_path is None:
        log_path = setup_log(workspace)
    if excluding and base is None:
        base = clone_base(workspace)   # prun's own, read before the setup runs
    before = _untracked(workspace, base) if excluding and base else set()
    wrapped = None
    if sandbox:
        wrapped, env = _in_sandbox(shell_argv(command), workspace, env, read_only, overlays)
    try:
        ran = run_bounded(wrapped or command, workspace, env,
                          SETUP_TIMEOUT_DEFAULT if timeout is None else timeout, log_path)
    finally:
        if wrapped:   # its temporary folder goes with it
            shutil.rmtree(workspace + ".setup-tmp", ignore_errors=True)
    excluded: tuple[str, ...] = ()
    if ran.ok and excluding and base:
        excluded = tuple(sorted(_untracked(workspace, base) - before))
        if excluded:
            try:
                with merged(workspace) as view:   # an overlay workspace: through its view
                    append_inside(os.path.join(view.path, ".git"), "info/exclude",
                                  "# made by the plan's setup command (prun)\n"
                                  + "".join("/" + _escape_glob(p) + "\n" for p in excluded))
            except NotRegular:   # the setup made it something else: nothing is left out
                excluded = ()
    result = SetupResult(ran.ok, ran.exit_code, ran.timed_out, ran.duration_s, ran.log,
                         ran.tail, excluded)
    if check and not ran.ok:
        raise SetupFailed(command if isinstance(command, str) else shlex.join(command),
                          returncode=ran.exit_code, timed_out=ran.timed_out,
                          last_line=(ran.tail.strip().splitlines()[-1:] or [""])[0], log=ran.log)
    return result


def _in_sandbox(argv: list[str], workspace: str, env: Mapping[str, str] | None,
                read_only: Sequence[str],
                overlays: Sequence[Overlay] = ()) -> tuple[list[str], dict[str, str]]:
    """The setup's argv in the sandbox, and its environment: like a unit, it writes only its
    workspace, a temporary folder of its own (``<workspace>.setup-tmp``, its ``/tmp``, ``TMPDIR``
    and ``HOME``) and the folders every sandboxed unit may also write
    (``PRUN_SANDBOX_WRITABLE``)."""
    given = dict(os.environ if env is None else env)
    tmp = workspace + ".setup-tmp"
    os.makedirs(tmp, exist_ok=True)
    extra = load(given).sandbox_writable
    argv = wrap(argv, writable=[workspace, *extra], read_only=list(read_only), tmp=tmp,
                overlays=[o.paths for o in overlays])
    return argv, {**given, "HOME": tmp, "TMPDIR": tmp}


def _untracked(clone: str, base: str) -> set[str]:
    """The untracked paths in the clone (ignored ones aside; a nested repository counts as
    one), read like a unit's change (``prun.git.untrusted``)."""
    try:
        with reading(clone, base) as r:
            nested = {f.path for f in r.findings if f.code == "nested-repository" and f.path}
            r.exclude_folders()
            if not r.complete:
                return set()
            listing = r.git(["ls-files", "-z", "--others", "--exclude-standard",
                             "--directory", "--no-empty-directory"]).stdout
    except BrokenClone:
        return set()
    return {p.rstrip("/") for p in listing.split("\0") if p} | nested


def _escape_glob(path: str) -> str:
    return pattern(path)
