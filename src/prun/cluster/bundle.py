"""The base as it travels to a worker: a ``git bundle`` of one commit, made once per base on
the coordinator and unpacked once per base on each worker (``ensure_repo``), from which every
unit's clone or snapshot is made; and the unit's change as it travels back: a binary diff
against the tree it started from (``tree_of``, ``diff_since``), applied to the coordinator's
clone (``apply``)."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator

from .._util import gitcmd
from ..errors import GitError, WorkspaceError

BUNDLE_REF = "refs/heads/prun-base"
_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_LOCK = threading.Lock()


def make_bundle(repo: str, commit: str) -> bytes:
    """A bundle of ``commit`` (and its history) from ``repo``, made without touching it: a
    throwaway bare repository borrows its objects and holds the one ref a bundle needs."""
    with tempfile.TemporaryDirectory(prefix="prun-bundle-") as tmp:
        stage = os.path.join(tmp, "stage.git")
        gitcmd.git(["init", "--quiet", "--bare", stage])
        objects = gitcmd.out(["rev-parse", "--path-format=absolute", "--git-common-dir"], repo)
        with open(os.path.join(stage, "objects", "info", "alternates"), "w") as f:
            f.write(os.path.join(objects, "objects") + "\n")
        gitcmd.git(["update-ref", BUNDLE_REF, commit], stage)
        out = os.path.join(tmp, "base.bundle")
        gitcmd.git(["bundle", "create", "--quiet", out, BUNDLE_REF], stage)
        with open(out, "rb") as f:
            return f.read()


def ensure_repo(root: str, commit: str, bundle: bytes) -> str:
    """This worker's repository of ``commit`` under ``root``: unpacked from ``bundle`` by the
    first unit that needs it, found by every later one (the threads of a worker process and
    the worker processes of a machine wait for the first; a half-made one is never found)."""
    path = os.path.join(root, "bases", commit)
    if os.path.isdir(path):
        return path
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with _lock(path), _flocked(os.path.dirname(path)):   # threads, then worker processes
        if os.path.isdir(path):
            return path
        making = tempfile.mkdtemp(prefix=f"{commit[:12]}.", suffix=".making",
                                  dir=os.path.dirname(path))
        try:
            file = os.path.join(making, "base.bundle")
            with open(file, "wb") as f:
                f.write(bundle)
            repo = os.path.join(making, "repo")
            gitcmd.git(["clone", "--quiet", "--bare", file, repo])
            gitcmd.rev(repo, commit)   # the bundle holds the commit asked for
            os.unlink(file)
            os.rename(repo, path)
        except GitError as e:
            raise WorkspaceError(f"could not unpack the base {commit[:12]} on this worker: "
                                 f"{e.message}", hint="check the worker's disk and git")
        finally:
            shutil.rmtree(making, ignore_errors=True)
    return path


@contextlib.contextmanager
def _flocked(folder: str) -> Iterator[None]:
    """An exclusive ``flock`` on ``folder``: the worker processes of one machine share it."""
    import fcntl

    fd = os.open(folder, os.O_RDONLY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _lock(path: str) -> threading.Lock:
    with _LOCKS_LOCK:
        return _LOCKS.setdefault(path, threading.Lock())


def apply_start(clone: str, patch: bytes) -> None:
    """Put the coordinator's clone's uncommitted start (a follow-up's earlier changes) into
    the worker's clone."""
    if patch:
        gitcmd.git(["apply", "--binary", "--whitespace=nowarn", "-"], clone, input=patch,
                   text=False)


def tree_of(clone: str) -> str:
    """The tree of everything in the clone's work tree now (untracked files included), written
    through a private index: the clone's own index is not touched."""
    from ..git.changes import private_index

    git_dir = gitcmd.out(["rev-parse", "--absolute-git-dir"], clone)
    with private_index(git_dir) as env:
        gitcmd.git(["add", "-A", "--ignore-errors", "--", "."], clone, env=env, check=False)
        return gitcmd.out(["write-tree"], clone, env=env)


def diff_since(clone: str, tree: str) -> bytes:
    """The clone's change since ``tree`` as a binary patch (``git apply`` applies it)."""
    from ..git.changes import private_index

    git_dir = gitcmd.out(["rev-parse", "--absolute-git-dir"], clone)
    with private_index(git_dir) as env:
        gitcmd.git(["add", "-A", "--ignore-errors", "--", "."], clone, env=env, check=False)
        proc = gitcmd.git(["diff", "--cached", "--binary", "--full-index", "--no-ext-diff",
                           "--no-color", tree], clone, env=env, text=False)
    out: bytes = proc.stdout
    return out


def apply(clone: str, patch: bytes) -> str | None:
    """Apply a unit's patch to the coordinator's clone; None, or why it did not apply."""
    if not patch:
        return None
    proc = gitcmd.git(["apply", "--binary", "--whitespace=nowarn", "-"], clone, input=patch,
                      text=False, check=False)
    if proc.returncode == 0:
        return None
    err = proc.stderr.strip()
    return err.splitlines()[0] if err else f"git apply exited {proc.returncode}"
