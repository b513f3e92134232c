"""The host's view of an overlay workspace (``prun.git.layered``): the workspace exactly as its
unit sees it, for prun's own reads and writes.

An overlay workspace is mounted only in its unit's own namespaces; on the host its path is an
empty folder. ``merged(workspace)`` starts a short-lived holder (``unshare -Urm``, the
workspace's overlay mounted, then a ``cat`` waiting on a pipe prun holds) and yields a
``View``: ``path``, ``/proc/<holder>/root/<workspace>``, where Python reads and writes the
merged tree (as the same user, the holder's mount namespace is reachable there), and
``through``, the ``nsenter`` prefix that runs a program (git) in the holder's namespaces,
where the workspace's own path is the merged tree (git resolves its work tree to a real path,
which ``/proc/<pid>/root`` is not). Closing the view closes the pipe: the holder exits and its
mount goes with it. For any other workspace the view is the workspace itself, at no cost.

``layer(workspace)`` reads prun's record of what an overlay workspace lies on, beside it (out
of its unit's reach); ``overlay_of`` is the overlay its sandbox mounts first.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

from .._util import process
from .._util.fsutil import read_json
from ..attempt.overlay import Overlay
from ..attempt.sandbox import PROBE_TIMEOUT_S, mounting
from ..errors import UsageError, WorkspaceError

LAYER = "layer.json"     # in ``<workspace>.overlay``: the workspace is an overlay
OWN = "ws"               # its own upper and work folders: ``<workspace>.overlay/ws/``
RECORD_MAX_BYTES = 64 * 1024
_HOLD = "echo ready && exec cat >/dev/null"   # after the mount: wait for prun's pipe to close


def overlay_dir(workspace: str | os.PathLike[str]) -> str:
    """Where a clone's overlays keep their upper layers (``prun.git.template``; an overlay
    workspace's own, and its record): ``<workspace>.overlay``, beside it, out of its unit's
    reach, removed with it."""
    return os.path.abspath(os.fspath(workspace)).rstrip(os.sep) + ".overlay"


def layer(workspace: str | os.PathLike[str]) -> dict[str, str] | None:
    """What an overlay workspace lies on: ``lower`` (the run's shared checkout of its base)
    and ``base``, from prun's record beside it; None for any other workspace."""
    info = read_json(os.path.join(overlay_dir(workspace), LAYER), limit=RECORD_MAX_BYTES)
    if not isinstance(info, dict) or not all(isinstance(info.get(k), str)
                                             for k in ("lower", "base")):
        return None
    return {"lower": info["lower"], "base": info["base"]}


def overlay_of(workspace: str | os.PathLike[str]) -> Overlay | None:
    """The overlay an overlay workspace is (the run's checkout below, its own upper layer
    above, mounted at its path), or None for any other workspace."""
    found = layer(workspace)
    if found is None:
        return None
    own = os.path.join(overlay_dir(workspace), OWN)
    return Overlay(found["lower"], os.path.join(own, "upper"), os.path.join(own, "work"),
                   os.path.abspath(os.fspath(workspace)))


@dataclass(frozen=True)
class View:
    """A workspace as its unit sees it: ``path`` for Python's reads and writes, ``through``
    the argv prefix that runs a program where the workspace's own path shows it (empty for a
    workspace that is no overlay)."""

    path: str
    through: tuple[str, ...] = ()


@contextlib.contextmanager
def merged(workspace: str | os.PathLike[str]) -> Iterator[View]:
    """The workspace as its unit sees it, for the time of the ``with``. ``WorkspaceError``
    when its overlay cannot be mounted."""
    workspace = os.path.abspath(os.fspath(workspace))
    over = overlay_of(workspace)
    if over is None:
        yield View(workspace)
        return
    nsenter = shutil.which("nsenter")
    if nsenter is None:
        raise WorkspaceError(f"cannot read the overlay workspace {workspace}: no nsenter on "
                             "PATH", hint="install util-linux")
    holder = _hold(over)
    try:
        pid = str(holder.pid)
        yield View(f"/proc/{pid}/root{workspace}",
                   (nsenter, "-t", pid, "-U", "-m", "--preserve-credentials", "--"))
    finally:
        _release(holder)


def _hold(over: Overlay) -> subprocess.Popen[bytes]:
    try:
        argv = [*mounting([over.paths]), "sh", "-c", _HOLD]
        holder = process.start(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    except (OSError, UsageError) as e:
        raise WorkspaceError(f"cannot mount the overlay workspace {over.target}: {e}",
                             hint="set PRUN_OVERLAY=off to use clones") from None
    assert holder.stdout is not None
    ready, _, _ = select.select([holder.stdout], [], [], PROBE_TIMEOUT_S)
    line = holder.stdout.readline() if ready else b""
    if line.strip() == b"ready":
        return holder
    err = _release(holder)
    raise WorkspaceError(f"cannot mount the overlay workspace {over.target}: "
                         f"{(err.splitlines() or ['no answer'])[-1]}",
                         hint="set PRUN_OVERLAY=off to use clones")


def _release(holder: subprocess.Popen[bytes]) -> str:
    """Close the holder's pipe (it exits, its mount with it), reap it; what it said."""
    if holder.stdin is not None:
        with contextlib.suppress(OSError):
            holder.stdin.close()
    try:
        holder.wait(timeout=PROBE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        holder.kill()
        holder.wait()
    said = holder.stderr.read().decode(errors="replace").strip() if holder.stderr else ""
    for pipe in (holder.stdout, holder.stderr):
        if pipe is not None:
            pipe.close()
    return said


__all__ = ["LAYER", "OWN", "View", "layer", "merged", "overlay_dir", "overlay_of"]
