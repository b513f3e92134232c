"""prun's git wrapper: the ``git`` first on every worker's PATH, whatever its executor.

``git_wrapper_dir(state_root)`` makes (once, atomically) a folder holding an executable ``git``:
a small shell script that runs the commands that only read (``READ_ONLY``: status, diff, log,
show, ...) as the real git straight away, and for anything else sets ``PRUN_REAL_GIT`` (the real
git, found on PATH when the folder was made, skipping any folder of such wrappers) and runs this
file with the interpreter prun runs under (``-E -s -S``: no ``PYTHON*`` variables, no site
packages; only the standard library is needed). Its name is a hash of that script, so another
interpreter or another git gets another folder. Put it first on a worker's PATH.

Run as ``git ARGS``: when ``git_policy`` refuses ARGS (git's own options before the subcommand
included, and a configured alias looked up with the real git for names that are not git's own
commands), one line on stderr (``prun: git commit is refused here: ...``), the refusal added to
``$PRUN_STATE_DIR/guard.log``, exit code 1, and the repository untouched. Anything else is the
real git, exec'd with the same arguments: same exit code, stdin, stdout and stderr untouched
(SIGPIPE and SIGXFSZ back at their defaults, which Python changes).

A guard against accidents, not a wall: the real git called by its path gets past it.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the type checker sees the package's module
    from . import git_policy
else:
    try:
        from . import git_policy
    except ImportError:  # run by path, as the wrapper script does: the sibling module is on
        import git_policy  # sys.path

REFUSED_EXIT = 1
HEADER = "# prun's git wrapper"
WRAPPERS = "git-wrapper"      # the folder under a state root holding one folder per wrapper
# git's own commands that never change a repository's history or a worker's edits: passed to
# the real git by the shell script itself
READ_ONLY = ("status", "diff", "log", "show", "blame", "grep", "ls-files", "ls-tree",
             "rev-parse", "cat-file", "describe", "shortlog", "version", "--version", "help")


def git_wrapper_dir(state_root: str) -> str:
    """The folder whose ``git`` is the wrapper (made on first use). Raises ``LaunchError``
    when there is no git on PATH to wrap."""
    real = _real_git()
    if real is None:
        from ..errors import LaunchError

        raise LaunchError("no git on PATH to wrap", hint="install git or fix PATH")
    script = (f"#!/bin/sh\n{HEADER}: refuses commit, push and the like; made by prun\n"
              # the commands that only read go straight to git (no interpreter to start):
              # an alias cannot take the name of one of git's own commands
              f"case \"$1\" in {'|'.join(READ_ONLY)}) exec {shlex.quote(real)} \"$@\";; esac\n"
              f"PRUN_REAL_GIT={shlex.quote(real)} exec {shlex.quote(sys.executable)} -E -s -S "
              f"{shlex.quote(os.path.abspath(__file__))} \"$@\"\n")
    parent = os.path.join(state_root, WRAPPERS)
    folder = os.path.join(parent, hashlib.sha256(script.encode()).hexdigest()[:16])
    if os.path.exists(os.path.join(folder, "git")):
        return folder
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".new-", dir=parent)
    try:
        with open(os.path.join(tmp, "git"), "w", encoding="utf-8") as f:
            f.write(script)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(os.path.join(tmp, "git"), 0o755)
        os.rename(tmp, folder)
    except OSError:
        if not os.path.exists(os.path.join(folder, "git")):   # not a concurrent maker's win
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


def _real_git() -> str | None:
    """The first git on PATH that is not one of these wrappers."""
    for folder in os.environ.get("PATH", os.defpath).split(os.pathsep):
        path = os.path.join(folder or ".", "git")
        if os.path.isfile(path) and os.access(path, os.X_OK) and not _is_wrapper(path):
            return os.path.abspath(path)
    return None


def _is_wrapper(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return HEADER.encode() in f.read(200)
    except OSError:
        return False


def refusal(real: str, args: list[str]) -> str | None:
    """Why ``git ARGS`` is refused, configured aliases resolved with the real git."""
    why = git_policy.refusal_argv(["git", *args])
    for _ in range(git_policy.MAX_DEPTH):
        if why is not None:
            return why
        opts, sub, rest = git_policy.split_git(args)
        if sub is None or sub in git_policy.BUILTIN:
            return None
        value = _configured_alias(real, opts, sub)
        if value is None:
            return None
        expanded = git_policy.expand_alias(opts, value, rest)
        if value.startswith("!") or expanded is None:
            return git_policy.alias_refusal(opts, value, rest)
        args = expanded
        why = git_policy.refusal_argv(["git", *args])
    return why


def _configured_alias(real: str, opts: list[str], name: str) -> str | None:
    try:
        p = subprocess.run([real, *opts, "config", "--get", f"alias.{name}"],
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if p.returncode != 0:
        return None
    return p.stdout.strip() or None


def main() -> int:
    if TYPE_CHECKING:  # ``_signal`` has no stub of its own: it has ``signal``'s names
        import signal as _signal
    else:
        import _signal  # the C module under ``signal``: cheaper to import (no enum)

    real = os.environ.get("PRUN_REAL_GIT") or ""
    if not os.path.isabs(real):
        print("prun: the git wrapper has no PRUN_REAL_GIT (run it through the git that "
              "git_wrapper_dir made)", file=sys.stderr)
        return 127
    args = sys.argv[1:]
    why = refusal(real, args)
    if why is not None:
        print(f"prun: {why} is refused here: a prun worker never commits, pushes, changes "
              "branches or tags, or discards work. Leave your changes in the working tree; the "
              "coordinator reviews the diff and commits.", file=sys.stderr)
        git_policy.log_refusal(why, " ".join(["git", *args]))
        return REFUSED_EXIT
    for sig in (_signal.SIGPIPE, _signal.SIGXFSZ):
        _signal.signal(sig, _signal.SIG_DFL)
    try:
        os.execv(real, [real, *args])
    except OSError as e:
        print(f"prun: cannot run the real git {real}: {e.strerror}", file=sys.stderr)
    return 127


if __name__ == "__main__":
    sys.exit(main())
