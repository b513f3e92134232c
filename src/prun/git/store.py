"""Object stores: where a code unit's clone borrows its objects from, out of the unit's reach.

A store is a bare repository prun makes and no unit can write: its objects are what every
clone made from it reads through ``objects/info/alternates``, so a clone holds no object
file of anyone else's (a unit that rewrites what its clone reaches rewrites its own files, or
fails on a read-only mount). One store per base commit in a folder of workspaces,
``<folder>/objects-<base[:12]>.git``, made by the first clone that needs it, found by every
other (``ensure_store``; threads and processes alike, under an exclusive ``flock`` on the
folder):

1. ``git clone --bare --quiet <repo> <name>.making``: a local clone, so the object files are
   hard-linked from the repository where the folder is on the same file system, copied where
   it is not (no ``--local``: with it git refuses to fall back and fails with EXDEV). The
   links are safe because nothing writes the store: a run's folder of workspaces is mounted
   read-only in every unit's sandbox, and so is the real repository;
2. its ``origin`` removed and the push config stripped: nothing in it names the repository;
3. the marker ``prun-store.json`` (kind ``store``, the commit) written, and every write bit
   taken off (``readonly.drop_write``, as the run's snapshot does; root ignores modes, the
   mount is what holds) except on ``prun/``, where prun keeps what it knows of each clone;
4. renamed to its final name (a half-made store is never found).

A dependent's clone starts from a commit prun makes on top of its base (its predecessors'
accepted changes): ``building`` makes that commit in a store of its own, borrowing from the
base's store, so the start commit is prun's too, named ``objects-<start[:12]>.git``.

``stat cache``: right after a clone's checkout prun keeps a copy of its index in
``<store>/prun/clones/<key>.index`` (with the commit it was taken at). A host-side read of the
clone starts from it (``prun.git.untrusted``), so files the unit left alone are not read again;
the unit's own index is never read.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator, Sequence

from .._util import gitcmd
from .._util.fsutil import atomic_write_json, read_json
from .._util.gitcmd import AUTHOR
from ..errors import GitError, WorkspaceError
from .pushconfig import strip_push_config
from .readonly import drop_write

MARKER = "prun-store.json"
PREFIX, SUFFIX = "objects-", ".git"
OWN = "prun"                          # the store's writable folder: prun's notes on its clones
_COMMIT_ID = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")


def store_path(folder: str, commit: str) -> str:
    """Where the store of ``commit`` lies in ``folder`` (a folder of workspaces)."""
    return os.path.join(os.path.abspath(folder), f"{PREFIX}{commit[:12]}{SUFFIX}")


def is_store(path: str | os.PathLike[str], commit: str | None = None) -> bool:
    """Whether ``path`` is a whole store prun made (of ``commit``, when given): a real folder
    (not a link) holding prun's marker."""
    path = os.fspath(path)
    try:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            return False
    except OSError:
        return False
    info = read_json(os.path.join(path, MARKER))
    if not isinstance(info, dict) or info.get("kind") != "store":
        return False
    return commit is None or info.get("commit") == commit


def store_of(clone: str | os.PathLike[str], base: str) -> str | None:
    """The store a clone at ``base`` made in a folder of workspaces borrows from, found by
    where it lies (beside the clone) and the base the caller knows; None when there is none
    (a clone made before stores, or elsewhere). Nothing the unit wrote is read."""
    if not _COMMIT_ID.fullmatch(base):
        return None
    path = store_path(os.path.dirname(os.path.abspath(os.fspath(clone))), base)
    return path if is_store(path, base) else None


def borrowed(clone: str | os.PathLike[str], base: str) -> list[str]:
    """Every store a clone at ``base`` reads objects from: its own and those it borrows from
    in turn (a dependent's start borrows from its base's). A sandbox mounts these read-only
    for the clone's unit; none of them is the unit's to write."""
    found: list[str] = []
    path = store_of(clone, base)
    while path and path not in found:
        found.append(path)
        try:
            with open(os.path.join(path, "objects", "info", "alternates")) as f:
                lines = [line.strip() for line in f if line.strip()]
        except OSError:
            break
        nxt = [os.path.dirname(line) for line in lines if is_store(os.path.dirname(line))]
        path = nxt[0] if nxt else None
    return found


def ensure_store(folder: str, repo_root: str, commit: str) -> str:
    """The store of ``commit`` (a full commit id of ``repo_root``) in ``folder``: made by the
    first caller, found by every other; a caller that comes while it is being made waits for
    it whole."""
    if not _COMMIT_ID.fullmatch(commit):
        raise WorkspaceError(f"a store's base must be a full commit id, not {commit!r}",
                             hint="resolve it first: git rev-parse <name>")
    path = store_path(folder, commit)
    if is_store(path, commit):
        return path
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with locked(os.path.dirname(path)):
        if is_store(path, commit):
            return path
        if os.path.lexists(path):
            raise WorkspaceError(f"{path} exists and is not prun's store of {commit[:12]}",
                                 hint="remove it, or give the run another workspace folder")
        making = _fresh(path)
        try:
            gitcmd.git(["clone", "--bare", "--quiet", os.path.abspath(repo_root), making])
            _seal(making, commit)
            os.rename(making, path)
        except BaseException as e:
            discard(making)
            if isinstance(e, GitError):
                raise WorkspaceError(f"could not make the object store {path}: {e.message}",
                                     hint="check that the repository is readable and the "
                                          "disk not full") from None
            raise
    return path


class Building:
    """A start commit being made on top of ``base`` in a store of its own (``building``):
    ``git(args)`` runs git there with a private index at ``base``; ``commit(message)`` writes
    the commit and makes the store whole."""

    def __init__(self, folder: str, making: str, base: str):
        self.folder, self.making, self.base = folder, making, base
        self.env = {"GIT_INDEX_FILE": os.path.join(making, OWN, "index")}
        self.path: str | None = None

    def git(self, args: Sequence[str], *, input: bytes | None = None,
            check: bool = True) -> gitcmd.Ran[str]:
        return gitcmd.git(args, self.making, env=self.env, input=input, check=check)

    def commit(self, message: str) -> str:
        tree = gitcmd.out(["write-tree"], self.making, env=self.env)
        commit = gitcmd.out(["commit-tree", tree, "-p", self.base, "-m", message],
                            self.making, env={**self.env, **AUTHOR})
        os.unlink(self.env["GIT_INDEX_FILE"])
        path = store_path(self.folder, commit)
        with locked(self.folder):
            if is_store(path, commit):   # the same commit made already (same changes, second)
                discard(self.making)
            else:
                _seal(self.making, commit)
                os.rename(self.making, path)
        self.path = path
        return commit


@contextlib.contextmanager
def building(folder: str, repo_root: str, base: str) -> Iterator[Building]:
    """A new store borrowing from the store of ``base`` (made when needed), where a commit on
    top of ``base`` is made (``Building``). Nothing half-made is left behind."""
    parent = ensure_store(folder, repo_root, base)
    making = tempfile.mkdtemp(prefix=f"{PREFIX}start-", suffix=".making", dir=folder)
    try:
        gitcmd.git(["init", "--bare", "--quiet", making])
        with open(os.path.join(making, "objects", "info", "alternates"), "w") as f:
            f.write(os.path.join(os.path.realpath(parent), "objects") + "\n")
        os.makedirs(os.path.join(making, OWN), exist_ok=True)
        b = Building(os.path.abspath(folder), making, base)
        b.git(["read-tree", base])
        yield b
    finally:
        if os.path.lexists(making):
            discard(making)


# What prun keeps of each clone ------------------------------------------------------------

def _key(clone: str) -> str:
    return hashlib.sha256(os.path.realpath(clone).encode("utf-8", "surrogateescape")
                          ).hexdigest()[:24]


def stat_cache(store: str, clone: str) -> tuple[str, str | None]:
    """The path of the clone's stat cache in ``store``, and the commit it was taken at (None
    when there is none)."""
    path, commit, _ = _cache(store, clone)
    return path, commit


def cache_is_fresh(store: str, clone: str) -> bool:
    """Whether the clone's stat cache was refreshed by a read (``keep_stat_cache(...,
    fresh=True)``): a later read need not refresh it again."""
    return _cache(store, clone)[2]


def _cache(store: str, clone: str) -> tuple[str, str | None, bool]:
    path = os.path.join(store, OWN, "clones", _key(clone) + ".index")
    info = read_json(path + ".json")
    info = info if isinstance(info, dict) else {}
    commit = info.get("commit")
    ok = isinstance(commit, str) and os.path.isfile(path)
    return path, commit if ok else None, ok and info.get("fresh") is True


def keeper_of(clone: str | os.PathLike[str]) -> str | None:
    """The store beside ``clone`` that holds prun's record of it (its stat cache): prun's own
    proof that it made the clone, whatever the unit did to the clone's marker."""
    clone = os.path.abspath(os.fspath(clone))
    for path in stores_in(os.path.dirname(clone)):
        if stat_cache(path, clone)[1] is not None:
            return path
    return None


def keep_stat_cache(store: str, clone: str, commit: str, index: str | None = None, *,
                    fresh: bool = False) -> None:
    """Keep ``index`` (default: the clone's own, just checked out at ``commit`` by prun, before
    any unit ran in it; else a private index of a read, refreshed at ``commit``) as the
    clone's stat cache. ``copy2`` keeps its mtime, which git's racy-clean check compares file
    times with; the copy replaces the old one atomically. Best effort: a read without it
    reads every file."""
    path, _ = stat_cache(store, clone)
    tmp = f"{path}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        shutil.copy2(index or os.path.join(clone, ".git", "index"), tmp)
        os.replace(tmp, path)
        atomic_write_json(path + ".json", {"commit": commit, "fresh": fresh}, durable=False)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        forget(store, clone)


def forget(store: str, clone: str) -> None:
    """Drop what prun kept of ``clone`` in ``store``."""
    path, _ = stat_cache(store, clone)
    for p in (path, path + ".json"):
        with contextlib.suppress(OSError):
            os.unlink(p)


def mark(path: str, commit: str) -> None:
    """Make a bare repository prun made (a cluster worker's unpacked base) a store."""
    os.makedirs(os.path.join(path, OWN), exist_ok=True)
    atomic_write_json(os.path.join(path, MARKER), {"kind": "store", "commit": commit},
                      durable=False)


# Making ------------------------------------------------------------------------------------

def _fresh(path: str) -> str:
    """A free ``<path>.making`` name (a maker that died may have left one: it is swept)."""
    making = f"{path}.making"
    if os.path.lexists(making):
        discard(making)
    return making


def _seal(making: str, commit: str) -> None:
    """Check the store holds ``commit``, strip what names its source, mark it, and take the
    write bits off everything but its own folder."""
    gitcmd.rev(making, commit)
    with contextlib.suppress(GitError):
        gitcmd.git(["remote", "remove", "origin"], making)
    strip_push_config(making)
    shutil.rmtree(os.path.join(making, "logs"), ignore_errors=True)
    shutil.rmtree(os.path.join(making, "hooks"), ignore_errors=True)
    mark(making, commit)
    own = os.path.join(making, OWN)
    for folder, dirs, files in os.walk(making, topdown=False):
        if folder == own or folder.startswith(own + os.sep):
            continue
        for name in files + dirs:
            entry = os.path.join(folder, name)
            if entry != own:
                drop_write(entry, os.lstat(entry))
    drop_write(making, os.lstat(making))


def discard(path: str) -> None:
    """Remove a store (or a half-made one), its read-only modes included."""
    def _writable_then_retry(func: object, p: str, _exc: object) -> None:
        for q in (os.path.dirname(p), p):
            with contextlib.suppress(OSError):
                if not os.path.islink(q):
                    os.chmod(q, stat.S_IMODE(os.lstat(q).st_mode) | stat.S_IRWXU)
        func(p)  # type: ignore[operator]

    if os.path.islink(path):
        os.unlink(path)
        return
    with contextlib.suppress(OSError):
        os.chmod(path, stat.S_IMODE(os.lstat(path).st_mode) | stat.S_IRWXU)
    shutil.rmtree(path, onerror=_writable_then_retry)


@contextlib.contextmanager
def locked(folder: str) -> Iterator[None]:
    """An exclusive ``flock`` on ``folder`` itself (no lock file left behind); the kernel
    releases it when its holder dies."""
    fd = os.open(folder, os.O_RDONLY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def stores_in(folder: str) -> list[str]:
    """The stores in a folder of workspaces (what ``prun clean`` removes with the run's
    clones)."""
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    return [os.path.join(folder, n) for n in names
            if n.startswith(PREFIX) and n.endswith(SUFFIX) and is_store(os.path.join(folder, n))]


__all__ = [
    "MARKER",
    "Building",
    "building",
    "discard",
    "ensure_store",
    "forget",
    "is_store",
    "keep_stat_cache",
    "mark",
    "stat_cache",
    "store_of",
    "store_path",
    "stores_in",
]
