"""What an attempt that was ended (cancelled, timed out) or superseded produced is moved out of
reach of integration: into the run's quarantine, ``<packet>.<n>``, beside a note of where its
workspace went (renamed ``<workspace>.quarantined``)."""

from __future__ import annotations

import contextlib
import os
import shutil

from ..git.overlayview import overlay_dir
from ..git.untrusted import shared_list
from .paths import RunPaths
from .unit import UnitState


def quarantine(paths: RunPaths, u: UnitState, workspace: str | None, *,
               result_file: str | None, response_file: str | None = None,
               fallback: bool = False, everything: bool) -> str | None:
    """Move what the worker produced (its own result file, the response beside it, and
    its workspace) out of reach of integration. ``fallback``: the result file holds prun's
    own FALLBACK text, kept unless ``everything`` (the published result too) is moved."""
    dest = paths.quarantine / f"{u.packet.id}.{u.seq}"
    moved = []
    for path, is_result in ((result_file, True), (response_file, False)):
        if not path or not os.path.exists(path):
            continue
        if is_result and fallback and not everything:
            continue  # prun's own FALLBACK text is evidence, not partial output
        dest.mkdir(parents=True, exist_ok=True)
        shutil.move(path, dest / os.path.basename(path))
        moved.append(os.path.basename(path))
    ws = workspace
    if ws and os.path.isdir(ws):
        target = ws.rstrip(os.sep) + ".quarantined"
        with contextlib.suppress(OSError):
            os.rename(ws, target)
            for beside in (overlay_dir, shared_list):   # its layers and records go with it
                if os.path.lexists(beside(ws)):
                    os.rename(beside(ws), beside(target))
            dest.mkdir(parents=True, exist_ok=True)
            (dest / "workspace").write_text(target + "\n")
            moved.append("workspace")
    return str(dest) if moved else None
