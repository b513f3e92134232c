"""A packet's scope, as ``prun check`` reads it: the paths it may write, and the plan's shared
paths with their integration owner; a change outside it is a scope leak.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..plan import Packet, Plan, globs
from ..plan.globs import normalize, resolve_folder
from .verdict import Reason

PRUN_FOLDER = ".prun"   # prun's own folder in a repository (``prun.ledger.prun_dir``)


def plan_scope(plan: Plan, root: str | None = None) -> tuple[dict[str, tuple[str, ...]],
                                                            dict[str, str]]:
    """The scope of every packet of ``plan`` as ``prun check`` reads it: what each may change
    (``Plan.may_write``), and the plan-wide shared paths with their integration owner (the
    first declaration of a path wins); a dotted name that is a folder of ``root`` is the whole
    folder."""
    shared: dict[str, str] = {}
    for p in plan.packets:
        for path, owner in p.shared.items():
            shared.setdefault(normalize(resolve_folder(path, root)), owner)
    may_write = {p.id: tuple(resolve_folder(g, root) for g in plan.may_write(p))
                 for p in plan.packets}
    return may_write, shared


def scope_reasons(packet: Packet, paths: Iterable[str], *,
                  may_write: Iterable[str] | None = None,
                  shared: Mapping[str, str] | None = None) -> list[Reason]:
    """Scope leaks (paths outside the globs ``packet`` may write) and shared files touched by
    a packet that is not their integration owner. Globs are ``prun.plan.globs`` globs, as
    ``prun check`` reads them. ``shared`` maps every shared path of the plan to its integration
    owner (default: the packet's own ``shared``); ``may_write`` defaults to the packet's
    ``owns``, ``generates`` and the paths of ``shared`` it is the integration owner of."""
    shared = dict(packet.shared if shared is None else shared)
    if may_write is None:
        mine = (k for k, owner in shared.items() if owner == packet.id)
        may_write = (*packet.owns, *packet.generates, *mine)
    allowed = tuple(may_write)
    reasons = []
    for path in sorted(set(paths)):
        if path == PRUN_FOLDER or path.startswith(PRUN_FOLDER + "/"):
            # prun's own folder (the ledger, the runs, their results): never a unit's to
            # change, whatever its globs say
            reasons.append(Reason("prun-folder", {"path": path}))
            continue
        owner = next((o for key, o in shared.items() if globs.matches(key, path)), None)
        if owner is not None:
            if owner != packet.id:
                reasons.append(Reason("shared-not-owner", {"path": path, "owner": owner}))
        elif not any(globs.matches(g, path) for g in allowed):
            reasons.append(Reason("scope-leak", {"path": path}))
    return reasons
