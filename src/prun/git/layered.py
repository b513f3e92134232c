"""Overlay workspaces: a code unit's workspace as an overlay over one checkout of its base
shared by the run, so that making it costs the same for 3,000 files and for 300,000, and its
disk is its own changes.

* ``wanted(dest, env, sandbox=, base=, objects=)``: whether a code unit at ``dest`` gets
  one: it runs in the sandbox (nothing else would mount it), the base is large enough for a
  clone's checkout to be felt (``MIN_FILES`` tracked files; ``PRUN_OVERLAY=on``: any base;
  ``off``: never), ``nsenter`` is on PATH (prun's reads, ``prun.git.overlayview``) and the
  kernel mounts an unprivileged overlay in the run's folder of workspaces
  (``prun.attempt.overlay``, said once when it cannot: each unit then gets a clone,
  ``prun.git.workspace.make_clone``). Below ``MIN_FILES`` a clone costs well under a second
  and a person can open it on the host as it is; an overlay workspace is an empty folder there
  (``prun.git.overlayview`` shows it).
* ``ensure_lower``: the run's checkout of a base, ``<run's folder>/checkout-<base[:12]>``, a
  clone made like a unit's (its ``.git`` too, so the unit's git works) once per run and base
  under a ``flock`` on the folder, its top folder without write bits. Nothing of prun writes
  it after, and no unit can: overlayfs never writes a lower layer, and the run's folder of
  workspaces is hidden in every sandbox.
* ``make``: the unit's workspace: an empty folder at ``dest`` (where its sandbox mounts the
  overlay: ``overlay_of``), its own ``upper`` and ``work`` folders in
  ``<dest>.overlay/ws/`` and prun's record (``layer.json``: the checkout and the base) beside
  it, out of its unit's reach.
* ``lowers_in``: the run's checkouts, for ``prun clean``.
"""

from __future__ import annotations

import functools
import os
import stat
from collections.abc import Mapping

from .._util import gitcmd
from .._util.fsutil import atomic_write_json
from ..attempt.overlay import SETTING, overlay_here
from ..attempt.sandbox import OVERLAY_UNSAFE
from ..errors import WorkspaceError
from . import store as stores
from .overlayview import LAYER, OWN, overlay_dir
from .workspace import make_clone

PREFIX = "checkout-"


MIN_FILES = 10_000   # tracked files at the base from which a code unit's checkout is overlaid


def wanted(dest: str, env: Mapping[str, str], *, sandbox: bool, base: str,
           objects: str) -> bool:
    """Whether the code unit whose workspace goes at ``dest`` (a checkout of ``base``, whose
    objects are in ``objects``: the repository, or the store a dependent's start was made in)
    gets an overlay workspace."""
    dest = os.path.abspath(dest)
    if not sandbox or any(c in dest for c in OVERLAY_UNSAFE):
        return False
    setting = env.get(SETTING, "").strip().lower()
    if setting != "on" and (setting == "off" or tracked_files(objects, base) < MIN_FILES):
        return False
    return overlay_here(os.path.dirname(dest), env, sandbox=sandbox,
                        instead="each code unit gets a clone of its own", needs=("nsenter",))


@functools.cache
def tracked_files(objects: str, base: str) -> int:
    """How many files ``base`` (a full commit id, in the repository or store ``objects``)
    tracks (once per process and base)."""
    listing = gitcmd.git(["ls-tree", "-r", "-z", "--name-only", base], objects, text=False,
                         isolated=True).stdout
    return listing.count(b"\0")


def lower_path(folder: str, base: str) -> str:
    """Where the run's checkout of ``base`` lives in its folder of workspaces."""
    return os.path.join(os.path.abspath(folder), f"{PREFIX}{base[:12]}")


def ensure_lower(folder: str, repo_root: str, base: str, *, store: str | None = None,
                 neutral: bool = False) -> str:
    """The run's checkout of ``base`` (a full commit id) in ``folder``, made when missing:
    a clone like a unit's, from ``store`` (default: the run's store of ``base``), renamed into
    place whole. Returns its path."""
    path = lower_path(folder, base)
    if os.path.isdir(path):
        return path
    os.makedirs(folder, exist_ok=True)
    store = store or stores.ensure_store(folder, repo_root, base)   # it locks the folder too
    with stores.locked(folder):
        if os.path.isdir(path):
            return path
        making = path + ".making"
        if os.path.lexists(making):   # a maker that died
            stores.discard(making)
        make_clone(repo_root, base, making, store=store, neutral=neutral)
        stores.forget(store, making)
        os.rename(making, path)
        stores.keep_stat_cache(store, path, base)   # the units' reads start from it
        os.chmod(path, stat.S_IMODE(os.stat(path).st_mode) & ~0o222)
    return path


def make(repo_root: str, base: str, dest: str, *, store: str | None = None,
         neutral: bool = False) -> str:
    """The overlay workspace of a code unit at ``dest`` (which must not exist yet, or be an
    empty folder) over the run's checkout of ``base``. Returns its path."""
    dest = os.path.abspath(dest)
    if os.path.exists(dest) and (not os.path.isdir(dest) or os.listdir(dest)):
        raise WorkspaceError(f"workspace destination already exists: {dest}",
                             hint="give a fresh path; prun never reuses a workspace")
    lower = ensure_lower(os.path.dirname(dest), repo_root, base, store=store, neutral=neutral)
    own = os.path.join(overlay_dir(dest), OWN)
    for d in ("upper", "work"):
        os.makedirs(os.path.join(own, d))
    os.makedirs(dest, exist_ok=True)
    atomic_write_json(os.path.join(overlay_dir(dest), LAYER), {"lower": lower, "base": base},
                      durable=False)
    return dest


def lowers_in(folder: str) -> list[str]:
    """The run's checkouts in its folder of workspaces."""
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    return [os.path.join(folder, n) for n in names
            if n.startswith(PREFIX) and not n.endswith(".making")
            and os.path.isdir(os.path.join(folder, n))]


__all__ = ["MIN_FILES", "PREFIX", "ensure_lower", "lower_path", "lowers_in", "make",
           "tracked_files", "wanted"]
