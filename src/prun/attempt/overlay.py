"""Overlays for a unit's sandbox: the run's checkout of the base (an overlay workspace,
``prun.git.layered``) or a primed template's shared folder, read-only below, and the
unit's own upper layer above it, mounted by ``prun.attempt.sandbox.wrap`` (``overlays=``) in
the unit's own user and mount namespaces before bwrap starts.

``Overlay`` is one; ``overlays_unavailable(folder)`` says why none can be mounted with its
upper layer in ``folder`` (None when one can: a write inside lands in the upper layer only),
probed once per process and folder; ``overlay_here`` decides for a unit (and says once why
not).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass

from .._util.bounded import run as bounded
from .._util.say import say_once
from ..errors import UsageError
from .sandbox import OVERLAY_UNSAFE, PROBE_TIMEOUT_S, unavailable, wrap


@dataclass(frozen=True)
class Overlay:
    """An overlay a unit sees at ``target``: ``lower`` read-only below, its own ``upper``
    (and ``work``, overlayfs's scratch folder on the same file system) above."""

    lower: str
    upper: str
    work: str
    target: str

    @property
    def paths(self) -> tuple[str, str, str, str]:
        """``(lower, upper, work, target)``, as ``sandbox.wrap`` takes it."""
        return self.lower, self.upper, self.work, self.target


SETTING = "PRUN_OVERLAY"   # "off": no overlay anywhere (copies and clones instead); "on": a
                           # code unit's checkout too, whatever its size (``prun.git.layered``)
_probed: dict[str, str | None] = {}   # by folder, once per process


def overlay_here(root: str, env: Mapping[str, str], *, sandbox: bool, instead: str,
                 needs: tuple[str, ...] = ()) -> bool:
    """Whether a unit whose layers go in ``root`` gets an overlay: it runs in the sandbox,
    ``PRUN_OVERLAY`` is not ``off``, every program of ``needs`` is on PATH and the kernel
    mounts an unprivileged overlay there (probed once per process). When it cannot, says once
    ``prun: <instead>, not overlaid: <why>``."""
    if not sandbox or env.get(SETTING, "").strip().lower() == "off":
        return False
    missing = [p for p in needs if shutil.which(p) is None]
    why = f"no {missing[0]} on PATH (util-linux)" if missing else overlays_unavailable(root)
    if why is not None:
        say_once(f"prun: {instead}, not overlaid: {why}")
    return why is None


def overlays_unavailable(folder: str) -> str | None:
    """None when a unit's sandbox can mount an overlay whose upper layer is in ``folder`` (a
    write inside lands in the upper layer only), else a one-line reason. Probed once per
    process and folder, in a temporary folder inside it."""
    folder = os.path.realpath(folder)
    if folder not in _probed:
        _probed[folder] = _probe_overlay(folder)
    return _probed[folder]


def _probe_overlay(folder: str) -> str | None:
    why = unavailable()
    if why is not None:
        return f"no sandbox: {why}"
    missing = [p for p in ("unshare", "mount") if shutil.which(p) is None]
    if missing:
        return f"no {missing[0]} on PATH (util-linux)"
    if any(c in folder for c in OVERLAY_UNSAFE):
        return f"the workspace root {folder!r} holds ',', ':', '\\' or a newline"
    try:
        os.makedirs(folder, exist_ok=True)
        probe = tempfile.mkdtemp(prefix=".overlay-probe-", dir=folder)
    except OSError as e:
        return f"cannot make a folder in {folder}: {e.strerror or e}"
    try:
        lower, upper, work, target = (os.path.join(probe, n) for n in ("l", "u", "w", "t"))
        for d in (lower, upper, work, target):
            os.mkdir(d)
        argv = wrap(["sh", "-c", 'echo x > "$0/written"', target], writable=[target],
                    read_only=[], overlays=[(lower, upper, work, target)])
        p = bounded(argv, timeout=PROBE_TIMEOUT_S)
        if p.returncode != 0:
            lines = p.stderr.decode(errors="replace").strip().splitlines()
            return f"the overlay was refused: {lines[-1] if lines else p.returncode}"
        if not os.path.isfile(os.path.join(upper, "written")) or os.listdir(lower):
            return "a write in the overlay did not land in its upper layer"
        return None
    except (OSError, UsageError) as e:
        return f"the overlay could not be tried: {e}"
    finally:   # overlayfs leaves ``work/work`` with no permission bits
        with contextlib.suppress(OSError):
            os.chmod(os.path.join(probe, "w", "work"), 0o700)
        shutil.rmtree(probe, ignore_errors=True)


__all__ = ["SETTING", "Overlay", "overlay_here", "overlays_unavailable"]
