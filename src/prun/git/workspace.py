"""Workspaces: where a unit works, made so that its mistakes stay out of the real repository.

* ``make_scratch``: a fresh, empty directory outside any git work tree (read-only units).
* ``make_clone``: a throwaway clone for a code-writing unit: ``git clone --shared
  --no-checkout`` from the run's object store (``prun.git.store``: the clone borrows its
  objects through ``objects/info/alternates`` and shares no file with the repository, the
  store or another clone), the base checked out detached, ``origin`` removed and no push URL
  left in its config, ``protocol.allow=never`` (no transport reaches anything, even with
  ``--no-verify``), and ``core.hooksPath`` pointed at prun's hooks, which refuse commit,
  push, rebase and branch or tag changes. prun reads it back only through
  ``prun.git.untrusted``.
* ``snapshot_readonly``: a read-only copy of a directory a unit should only read
  (``prun.git.readonly``).

The plan's ``setup`` command runs in a fresh workspace through ``prun.git.setup``.

Every workspace carries a marker (``.git/prun-workspace.json`` in a clone,
``.prun-workspace.json`` elsewhere); ``remove`` deletes only directories that carry one. A
clone's marker is in its unit's reach: it is a removal guard only, read as a bounded regular
file, and never where a base is taken from.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypedDict, cast

from .._util import gitcmd
from .._util.fsutil import atomic_write_json
from ..errors import GitError, UsageError, WorkspaceError
from ..settings import load
from . import store as stores
from .clonefiles import NotRegular, read_inside
from .overlayview import layer, overlay_dir
from .pushconfig import strip_push_config
from .readonly import make_readonly
from .untrusted import ATTRIBUTES, NEUTRAL_ENV, shared_list

MARKER = ".prun-workspace.json"
CLONE_MARKER = "prun-workspace.json"        # inside the clone's .git folder
HOOK_NAMES = ("pre-commit", "prepare-commit-msg", "commit-msg", "pre-merge-commit",
              "pre-applypatch", "pre-rebase", "pre-push", "reference-transaction")


# Locations ----------------------------------------------------------------------------------

def default_root(env: Mapping[str, str] | None = None) -> str:
    """Where workspaces go: ``$PRUN_WORKSPACE_ROOT``, else the user's state folder
    (``$XDG_STATE_HOME/prun/workspaces`` or ``~/.local/state/prun/workspaces``)."""
    return load(env).workspace_root


def _inside(path: str, root: str) -> bool:
    path, root = os.path.realpath(path), os.path.realpath(root)
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


class Marker(TypedDict, total=False):
    """A workspace's marker: its kind (``clone``, ``scratch`` or ``snapshot``), when it was
    made and, by kind, the base commit of a clone or snapshot, the folder a read-only copy
    was made from, the parent of a scratch dir."""

    kind: str
    created: float
    base: str
    source: str
    parent: str


def _write_marker(path: str, kind: str, **info: str) -> None:
    # Not fsynced: the rename is atomic for readers, and a marker lost to a power cut only
    # leaves an empty workspace that ``remove`` will not touch (a run makes one per unit).
    atomic_write_json(path, {"kind": kind, "created": time.time(), **info}, durable=False)


MARKER_MAX_BYTES = 64 * 1024


def _read_marker(path: str) -> Marker | None:
    """A marker, read as a bounded regular file (a clone's is in reach of its unit: it may
    be a link, a FIFO or huge by now, and is then no marker)."""
    try:
        data = read_inside(os.path.dirname(path), os.path.basename(path), MARKER_MAX_BYTES)
        info = json.loads(data) if data else None
    except (NotRegular, ValueError):
        return None
    # a JSON object in a marker file prun wrote: its shape is a Marker's
    return cast(Marker, info) if isinstance(info, dict) else None


def marker(path: str | os.PathLike[str]) -> Marker | None:
    """The marker of the prun workspace at ``path``, or None when it is not one."""
    path = os.fspath(path)
    for candidate in (os.path.join(path, ".git", CLONE_MARKER), os.path.join(path, MARKER)):
        info = _read_marker(candidate)
        if info is not None and info.get("kind"):
            return info
    return None


# Scratch dirs -------------------------------------------------------------------------------

def make_scratch(parent: str | os.PathLike[str], name: str, *,
                 parent_checked: bool = False) -> str:
    """A fresh, empty directory ``<parent>/<name>-<random>`` outside any git work tree, so a
    stray ``git`` command there reaches no repository. Returns its absolute path.
    ``parent_checked``: the caller made ``parent`` and found it outside any work tree
    (``scratch_parent``), as a run does once for all its units."""
    parent = os.path.abspath(os.fspath(parent))
    if not parent_checked:
        scratch_parent(parent)
    path = tempfile.mkdtemp(prefix=f"{name}-", dir=parent)
    _write_marker(os.path.join(path, MARKER), "scratch", parent=parent)
    return path


def scratch_parent(parent: str) -> str:
    """Make ``parent`` and check that it is outside any git work tree (WorkspaceError if
    not): where scratch dirs may be made."""
    os.makedirs(parent, exist_ok=True)
    repo = gitcmd.toplevel(parent)
    if repo:
        raise WorkspaceError(
            f"scratch dirs must live outside any git work tree; {parent} is inside {repo}",
            hint="set PRUN_WORKSPACE_ROOT to a folder outside the repository")
    return parent


# Throwaway clones ---------------------------------------------------------------------------

def hooks_dir() -> str:
    """prun's git hooks, shipped in the package (``prun/hooks``)."""
    return str(Path(__file__).parents[1] / "hooks")


def _hooks_for(git_dir: str) -> str:
    """The hooks folder a clone points at: the package's own when its hooks are executable,
    else (an install that dropped the mode bits) a copy in the clone's git dir."""
    src = hooks_dir()
    if all(os.access(os.path.join(src, h), os.X_OK) for h in HOOK_NAMES):
        return src
    dest = os.path.join(git_dir, "prun-hooks")
    os.makedirs(dest, exist_ok=True)
    for h in HOOK_NAMES:
        target = os.path.join(dest, h)
        shutil.copyfile(os.path.join(src, h), target)
        os.chmod(target, 0o755)
    return dest


# Config keys that could give a clone a way out: any remote, URL rewrites, a default push remote.


def make_clone(repo_root: str | os.PathLike[str], base: str, dest: str | os.PathLike[str], *,
               store: str | None = None, neutral: bool = False) -> str:
    """A throwaway clone of ``repo_root`` at ``dest`` with ``base`` checked out (detached),
    no remote, no push URL, no transport, and prun's refusing hooks. Returns its path.

    Its objects are borrowed (``objects/info/alternates``) from ``store``, a store prun made
    (``prun.git.store``); by default the store of ``base`` beside ``dest``, made when it is
    missing (or ``repo_root`` itself when it is a store). The clone shares no file with the
    repository, the store or another clone. ``dest`` must not exist yet (or be an empty
    folder) and must lie outside ``repo_root``. ``neutral``: ``base`` holds what units wrote
    (a dependent's start), so its checkout reads no configuration but the clone's own and
    selects no driver and no conversion, whatever its ``.gitattributes`` say.
    """
    repo_root = os.path.abspath(os.fspath(repo_root))
    dest = os.path.abspath(os.fspath(dest))
    if _inside(dest, repo_root):
        raise WorkspaceError(f"a clone must live outside the repository: {dest}",
                             hint="set PRUN_WORKSPACE_ROOT to a folder outside the repository")
    if os.path.exists(dest) and (not os.path.isdir(dest) or os.listdir(dest)):
        raise WorkspaceError(f"clone destination already exists: {dest}",
                             hint="give a fresh path; prun never reuses a workspace")
    if store is None and stores.is_store(repo_root):
        store = repo_root
    try:
        commit = gitcmd.rev(store or repo_root, base)
    except GitError:
        raise WorkspaceError(f"base {base!r} is not a commit in {repo_root}",
                             hint="give a commit id, branch or tag that exists")
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    if store is None:
        store = stores.ensure_store(os.path.dirname(dest), repo_root, commit)
    git_dir = os.path.join(dest, ".git")
    try:
        gitcmd.git(["clone", "--quiet", "--shared", "--no-checkout", "-c", "core.longpaths=true",
                    store, dest])
        # the one line prun checks before borrowing the clone's own objects on a later read
        with open(os.path.join(git_dir, "objects", "info", "alternates"), "w") as f:
            f.write(os.path.join(os.path.realpath(store), "objects") + "\n")
        _checkout(dest, commit, neutral)
        gitcmd.git(["remote", "remove", "origin"], dest)
        strip_push_config(dest)
        gitcmd.git(["config", "core.hooksPath", _hooks_for(git_dir)], dest)
        gitcmd.git(["config", "protocol.allow", "never"], dest)
    except GitError as e:
        # a half-made clone may still have its origin: it must not be left for anyone to use
        shutil.rmtree(dest, ignore_errors=True)
        raise WorkspaceError(f"could not make a clone at {dest}: {e.message}",
                             hint="check that the repository is readable and the disk not full")
    # nothing in the clone names the real repository: its marker records no source, and the
    # reflog (whose first line says "clone: from <path>") goes
    shutil.rmtree(os.path.join(git_dir, "logs"), ignore_errors=True)
    _write_marker(os.path.join(git_dir, CLONE_MARKER), "clone", base=commit)
    stores.keep_stat_cache(store, dest, commit)
    return dest


def _checkout(dest: str, commit: str, neutral: bool) -> None:
    """Check ``commit`` out in the fresh clone ``dest``: in parallel (one worker per core: the
    files are most of a clone's cost), into a plain index, which prun keeps a copy of as its
    stat cache. ``neutral``: see ``make_clone``."""
    argv = ["-c", "checkout.workers=0", "-c", "core.splitIndex=false",
            "-c", "core.untrackedCache=false", "-c", "index.sparse=false",
            "-c", "core.fsmonitor=false", "checkout", "--quiet", "--detach", commit]
    if not neutral:
        gitcmd.git(argv, dest)
        return
    neutral_git(dest, argv)


def neutral_git(clone: str, args: list[str], *, input: bytes | None = None,
                check: bool = True) -> gitcmd.Ran[str]:
    """git in a throwaway ``clone`` of prun's over a tree units wrote (a dependent's start, a
    unit's patch being applied): it reads no configuration but the clone's own and selects no
    driver and no conversion, whatever the tree's ``.gitattributes`` say."""
    attributes = os.path.join(clone, ".git", "info", "attributes")
    os.makedirs(os.path.dirname(attributes), exist_ok=True)
    with open(attributes, "w") as f:
        f.write(ATTRIBUTES)
    try:
        return gitcmd.git(["-c", "core.attributesFile=/dev/null", *args], clone,
                          env=NEUTRAL_ENV, isolated=True, input=input, check=check)
    finally:
        os.unlink(attributes)


def clone_base(clone: str | os.PathLike[str]) -> str | None:
    """The base commit recorded when the clone was made (an overlay workspace's: in prun's
    record beside it)."""
    info = _read_marker(os.path.join(os.fspath(clone), ".git", CLONE_MARKER))
    if info is not None:
        return info.get("base")
    over = layer(clone)
    return over["base"] if over else None


def is_clone(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a code unit's workspace to read a change from: a clone (its
    ``.git`` a folder) or an overlay workspace (seen from the host as an empty folder)."""
    return os.path.isdir(os.path.join(os.fspath(path), ".git")) or (
        os.path.isdir(path) and layer(path) is not None)


def set_clone_base(clone: str | os.PathLike[str], commit: str) -> None:
    """Record ``commit`` as the clone's base: a dependent's clone starts from a commit prun
    made on top of the run's base (its predecessors' accepted changes)."""
    path = os.path.join(os.fspath(clone), ".git", CLONE_MARKER)
    info = _read_marker(path)
    if info is None:
        info = Marker(kind="clone")
    info["base"] = commit
    atomic_write_json(path, info, durable=False)


# Read-only snapshots ------------------------------------------------------------------------

def snapshot_readonly(src: str | os.PathLike[str], dest: str | os.PathLike[str]) -> str:
    """Copy ``src`` to ``dest`` (symlinks kept as links) and take away every write permission,
    so a unit reading it cannot change the original or the copy by accident."""
    src, dest = os.path.abspath(os.fspath(src)), os.path.abspath(os.fspath(dest))
    if not os.path.isdir(src):
        raise UsageError(f"not a directory: {src}", hint="give an existing directory to snapshot")
    if os.path.exists(dest):
        raise WorkspaceError(f"snapshot destination already exists: {dest}",
                             hint="give a fresh path")
    shutil.copytree(src, dest, symlinks=True)
    _write_marker(os.path.join(dest, MARKER), "snapshot", source=src)
    make_readonly(dest)
    return dest


# Removal ------------------------------------------------------------------------------------

def remove(path: str | os.PathLike[str]) -> bool:
    """Delete the prun workspace at ``path`` (read-only snapshots included). Refuses a folder
    that carries no prun marker. Returns False when it was already gone."""
    path = os.path.abspath(os.fspath(path))
    if not os.path.lexists(path):
        return False
    if not made_by_prun(path):
        raise WorkspaceError(f"not a prun workspace, left alone: {path}",
                             hint="prun removes only the workspaces it made")

    def _writable_then_retry(func: Callable[[str], object], p: str, _exc: object) -> None:
        for q in (os.path.dirname(p), p):
            try:
                if not os.path.islink(q):
                    os.chmod(q, stat.S_IMODE(os.lstat(q).st_mode) | stat.S_IWUSR | stat.S_IXUSR
                             | stat.S_IRUSR)
            except OSError:
                pass
        func(p)

    kept = stores.keeper_of(path)   # before the clone goes: its record is found by its path
    os.chmod(path, stat.S_IMODE(os.stat(path).st_mode) | stat.S_IWUSR | stat.S_IXUSR)
    shutil.rmtree(path, onerror=_writable_then_retry)
    _forget(path, kept)
    return True


def made_by_prun(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a workspace prun made: a real folder with prun's marker, or a clone
    its store keeps a record of (a unit may have broken its clone's marker), or an overlay
    workspace prun recorded."""
    path = os.path.abspath(os.fspath(path))
    if not os.path.isdir(path) or os.path.islink(path):
        return False
    return (marker(path) is not None or stores.keeper_of(path) is not None
            or layer(path) is not None)


def _forget(path: str, kept: str | None) -> None:
    """Drop what prun kept of a removed workspace beside it: a clone's record in its store,
    the setup command's log, the list of paths it was given from a primed template and the
    upper layers of its overlays."""
    if kept:
        stores.forget(kept, path)
    for beside in (setup_log(path), shared_list(path)):
        if os.path.isfile(beside) and not os.path.islink(beside):
            os.unlink(beside)
    layers = overlay_dir(path)
    if os.path.isdir(layers) and not os.path.islink(layers):
        stores.discard(layers)   # overlayfs leaves its ``work/work`` with no permission bits


def setup_log(workspace: str | os.PathLike[str]) -> str:
    """Where the setup command's output goes: ``<workspace>.setup.log``, beside the workspace
    (out of its reach: the run's folder of workspaces is read-only in the sandbox)."""
    return os.path.abspath(os.fspath(workspace)).rstrip(os.sep) + ".setup.log"


__all__ = ["Marker", "clone_base", "default_root", "is_clone", "made_by_prun", "make_clone",
           "make_scratch", "marker", "remove", "set_clone_base", "setup_log",
           "snapshot_readonly"]
