"""The one place prun runs git: argv lists, no shell, a clean environment, bounded waits.

Every git call in workspaces, reconciliation and integration goes through ``git()``, so the
environment rules live here once: inherited ``GIT_DIR``/``GIT_WORK_TREE``/``GIT_INDEX_FILE``
(set when prun runs inside a git hook) never leak in, git never prompts, and its messages are
in the C locale so they can be parsed. ``isolated=True`` (a read of a unit's clone,
``prun.git.untrusted``) goes further: no inherited ``GIT_*`` variable at all, only the caller's.
A failure becomes ``GitError`` carrying the argv, the exit code and stderr.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, Literal, TypeVar, overload

from ..errors import GitError, PrunError
from .bounded import run

Out = TypeVar("Out", str, bytes)

GIT_TIMEOUT_S = 600.0
# who the commits prun makes itself are by (a worktree base, a dependent's start, a culprit's)
AUTHOR = {"GIT_AUTHOR_NAME": "prun", "GIT_AUTHOR_EMAIL": "prun@localhost",
          "GIT_COMMITTER_NAME": "prun", "GIT_COMMITTER_EMAIL": "prun@localhost"}

# Variables that would point git at another repository, index or config than the one asked for.
_SCRUB = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
          "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_COMMON_DIR", "GIT_NAMESPACE",
          "GIT_PREFIX", "GIT_CEILING_DIRECTORIES", "GIT_CONFIG", "GIT_CONFIG_PARAMETERS",
          "GIT_CONFIG_COUNT")


def git_env(extra: Mapping[str, str] | None = None, *,
            isolated: bool = False) -> dict[str, str]:
    """The environment git runs in: the process's, less what would point git elsewhere (with
    ``isolated``, less every ``GIT_*`` variable), plus ``extra``."""
    env = {k: v for k, v in os.environ.items()
           if k not in _SCRUB and not k.startswith("GIT_CONFIG_KEY_")
           and not k.startswith("GIT_CONFIG_VALUE_") and not (isolated and k.startswith("GIT_"))}
    env.update({"GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", "LANGUAGE": "C",
                "GIT_OPTIONAL_LOCKS": "0"})
    if extra:
        env.update(extra)
    return env


@overload
def git(args: Sequence[str], cwd: str | os.PathLike[str] | None = None, *, check: bool = True,
        env: Mapping[str, str] | None = None, input: bytes | None = None,
        text: Literal[True] = True, timeout: float = GIT_TIMEOUT_S,
        isolated: bool = False, through: Sequence[str] = ()) -> Ran[str]: ...


@overload
def git(args: Sequence[str], cwd: str | os.PathLike[str] | None = None, *, check: bool = True,
        env: Mapping[str, str] | None = None, input: bytes | None = None,
        text: Literal[False], timeout: float = GIT_TIMEOUT_S,
        isolated: bool = False, through: Sequence[str] = ()) -> Ran[bytes]: ...


def git(args: Sequence[str], cwd: str | os.PathLike[str] | None = None, *, check: bool = True,
        env: Mapping[str, str] | None = None, input: bytes | None = None,
        text: bool = True, timeout: float = GIT_TIMEOUT_S,
        isolated: bool = False, through: Sequence[str] = ()) -> Ran[str] | Ran[bytes]:
    """Run ``git -C cwd args...`` (bounded: ``process.run``); stdout and stderr captured;
    ``through``: the argv that runs git (``nsenter ... --``: git in the namespaces where an
    overlay workspace is mounted, ``prun.git.overlayview``). Raises ``GitError`` when
    ``check`` and git exits non-zero."""
    argv = [*through, "git"]
    if cwd is not None:
        argv += ["-C", os.fspath(cwd)]
    argv += list(args)
    try:
        done = run(argv, input=input, env=git_env(env, isolated=isolated), timeout=timeout)
    except FileNotFoundError:
        raise PrunError("git not found on PATH", hint="install git") from None
    if done.timed_out:
        raise PrunError(f"git {' '.join(args)} took longer than {timeout:.0f}s")
    code, stderr = done.returncode or 0, done.stderr.decode("utf-8", "replace")
    if check and code != 0:
        raise GitError(list(args), code, stderr)
    if text:
        return Ran(code, done.stdout.decode("utf-8", "surrogateescape"), stderr)
    return Ran(code, done.stdout, stderr)


@dataclass(frozen=True, slots=True)
class Ran(Generic[Out]):
    """What a git command returned: its exit code, its stdout (text, or bytes when asked)
    and its stderr (text)."""

    returncode: int
    stdout: Out
    stderr: str


def out(args: Sequence[str], cwd: str | os.PathLike[str] | None = None, *, check: bool = True,
        env: Mapping[str, str] | None = None, input: bytes | None = None,
        timeout: float = GIT_TIMEOUT_S) -> str:
    """git's stdout as text, trailing newline removed."""
    return git(args, cwd, check=check, env=env, input=input, timeout=timeout).stdout.rstrip("\n")


def rev(repo: str | os.PathLike[str], revision: str) -> str:
    """The commit id ``revision`` names in ``repo``; GitError when it names none."""
    if not revision or revision.startswith("-"):
        raise GitError(["rev-parse", revision], 128, f"bad revision {revision!r}")
    return out(["rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}"], repo)


def toplevel(path: str | os.PathLike[str] | None = None) -> str | None:
    """The root of the git work tree holding ``path`` (default: the current folder): the
    nearest folder at or above it that holds a ``.git`` (a folder, or the file of a worktree
    or submodule), symbolic links resolved; None when there is none. The one finder of a
    repository's root: no git process is started."""
    p = Path(os.path.realpath(os.fspath(path) if path is not None else os.getcwd()))
    for folder in (p, *p.parents):
        if (folder / ".git").exists():
            return str(folder)
    return None
