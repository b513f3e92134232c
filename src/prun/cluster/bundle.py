"""The base as it travels to a worker: a ``git bundle`` of one commit, made once per base on
the coordinator and unpacked once per base on each worker (``ensure_repo``, a bare repository
that is also the object store every unit's clone of that base borrows from, under the
worker's ``bases`` folder, read-only in every unit's sandbox), from which every unit's clone
or snapshot is made; and the unit's change as it travels back: a binary diff against the tree
it started from (``tree_of``, ``diff_since``, both reading the clone as
``prun.git.untrusted`` does: nothing the unit wrote in its ``.git`` is read by git), applied
to the coordinator's clone (``apply``, through a private ``GIT_DIR`` too)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass

from .._util import gitcmd
from ..errors import GitError, WorkspaceError
from ..git import store
from ..git.clonefiles import BrokenClone
from ..git.untrusted import reading

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
        if not store.is_store(path):   # unpacked by an earlier prun: a store all the same
            store.mark(path, commit)
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
            with contextlib.suppress(GitError):
                gitcmd.git(["remote", "remove", "origin"], repo)
            store.mark(repo, commit)   # every unit's clone of this base borrows from it
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
    the worker's clone (through a private ``GIT_DIR``: what the patch holds selects no
    driver)."""
    why = apply(clone, patch)
    if why is not None:
        raise WorkspaceError(f"the start of this attempt does not apply to {clone}: {why}",
                             hint="the coordinator's clone and the base disagree")


@dataclass(frozen=True)
class Start:
    """What a worker's clone held when its unit started: its tree, whose objects are kept in
    the clone's store (``objects``) until ``diff_since`` has read them."""

    clone: str
    store: str
    tree: str
    objects: str


def tree_of(clone: str, store_dir: str, base: str) -> Start:
    """The tree of everything in the clone's work tree now (untracked files included), written
    through a private ``GIT_DIR`` and index: nothing of the clone is touched."""
    objects = os.path.join(store_dir, store.OWN, "starts", os.path.basename(
        tempfile.mkdtemp(prefix="start-", dir=_starts(store_dir))))
    try:
        with reading(clone, base, store=store_dir, objects=objects) as r:
            r.stage(keep_links=True)
            tree = r.git(["write-tree"]).stdout.strip()
    except BrokenClone as e:
        shutil.rmtree(objects, ignore_errors=True)
        raise WorkspaceError(f"could not read the fresh clone {clone}: {e.why}",
                             hint="check the plan's setup command") from None
    return Start(clone, store_dir, tree, objects)


def _starts(store_dir: str) -> str:
    folder = os.path.join(store_dir, store.OWN, "starts")
    os.makedirs(folder, exist_ok=True)
    return folder


def diff_since(start: Start) -> bytes:
    """The clone's change since ``start`` as a binary patch (``git apply`` applies it), read
    like a unit's change: what the tree holds that must never be read (special files, nested
    repositories, files too large or sparse) is left out, links are kept (a link is data; the
    coordinator's reconcile judges where it points). Empty when the clone cannot be read."""
    try:
        with reading(start.clone, start.tree, store=start.store,
                     borrow=[start.objects]) as r:
            r.stage(keep_links=True)
            if not r.complete:
                return b""
            proc = r.git(["diff", "--cached", "--binary", "--full-index", "--no-ext-diff",
                          "--no-textconv", "--no-color", start.tree], text=False)
            out: bytes = proc.stdout
            return out
    except BrokenClone:
        return b""
    finally:
        shutil.rmtree(start.objects, ignore_errors=True)


def apply(clone: str, patch: bytes) -> str | None:
    """Apply a unit's patch to a clone's work tree through a private ``GIT_DIR`` (nothing in
    the clone's ``.git`` is read; no index, no objects: a binary patch carries its content);
    None, or why it did not apply."""
    if not patch:
        return None

    try:
        with reading(clone, None, walk=False) as r:
            proc = r.git(["apply", "--binary", "--whitespace=nowarn", "-"], input=patch,
                         text=False, check=False)
    except BrokenClone as e:
        return e.why
    if proc.returncode == 0:
        return None
    err = proc.stderr.strip()
    return err.splitlines()[0] if err else f"git apply exited {proc.returncode}"
