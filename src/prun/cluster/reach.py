"""Reaching a unit of a cluster run whose supervisor is gone: ``prun pause``, ``prun cancel``
and a resumed supervisor stop it through the scheduler.

A task whose supervisor died (its client went away) still runs its unit to the end on its
worker, and nothing collects what it leaves. The unit's ``unit.json`` names the cluster and
the task's key; the attempt's claims in the scheduler's metadata (``claim``) name the worker
that launched it. ``stop`` first gives the attempt up there (so it launches nowhere from now
on), then asks each worker that claimed it (``Client.run`` of ``running.stop_unit``) to end
its process group, SIGTERM, the kill grace, SIGKILL, and to confirm that the group is gone;
what the worker's task returns (the unit's diff) comes back with the answer and is landed
here as the supervisor would have landed it: ``remote.patch``, applied to the local clone.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from .._util.fsutil import atomic_write
from ..attempt.statedir import StateDir
from ..errors import PrunError, StateError, UsageError
from ..git.workspace import is_clone
from . import claim
from .bundle import apply
from .connect import connect_client
from .remote import PATCH_FILE
from .running import stop_unit


@dataclass
class Stopped:
    """What ``stop`` found: whether the unit ran on a worker (``found``, and which), whether
    its end and an empty process group were confirmed there (``gone``), and the diff its
    task returned (``patch``: written to ``remote.patch`` and applied to the local clone;
    ``applied`` is None or why it did not apply)."""

    found: bool = False
    gone: bool = True
    worker: str | None = None
    patch: bytes = b""
    applied: str | None = None


def remote_of(state_dir: str | None) -> dict[str, Any] | None:
    """The ``remote`` record of an attempt's ``unit.json`` (cluster, key), or None for a unit
    that ran here."""
    if not state_dir or not os.path.isdir(state_dir):
        return None
    remote = StateDir(state_dir).unit.get("remote")
    return remote if isinstance(remote, dict) and remote.get("cluster") else None


def stop(state_dir: str, attempt_id: str, grace: float, *, why: str = claim.CANCEL,
         workspace: str | None = None) -> Stopped:
    """Stop the remote unit of ``state_dir`` through its cluster's scheduler and land its
    diff into ``workspace`` (its local clone). Raises ``StateError`` when the cluster cannot
    be reached, ``UsageError`` for a unit that ran here."""
    remote = remote_of(state_dir)
    if remote is None:
        raise UsageError(f"{state_dir} is not a unit of a cluster run")
    try:
        client = connect_client(str(remote["cluster"]))
    except PrunError as e:
        raise StateError(f"cannot reach the unit's cluster: {e.message}",
                         hint="start its scheduler again, or stop the unit on its worker "
                              "by hand") from None
    try:
        found = end_on_workers(client, attempt_id, grace, why)
    finally:
        client.close()
    if found.patch:
        found.applied = land_patch(state_dir, workspace, found.patch)
    return found


def end_on_workers(client: Any, attempt_id: str, grace: float, why: str) -> Stopped:
    """Give the attempt up in the scheduler's claims, then end its unit on each worker that
    claimed it (the first that runs it answers). ``why``: the coordinator's entry
    (``claim.CANCEL`` or ``claim.LOST``)."""
    for where in claim.give_up(client, attempt_id, why):
        try:
            answer = client.run(stop_unit, attempt_id, grace, workers=[where],
                                on_error="raise")[where]
        except Exception:   # that worker is gone: nothing of the unit runs there any more
            continue
        if isinstance(answer, dict) and answer.get("found"):
            payload = answer.get("payload") or {}
            return Stopped(True, bool(answer.get("group_gone")), where,
                           bytes(payload.get("patch") or b""))
    return Stopped()


def land_patch(state_dir: str, workspace: str | None, patch: bytes) -> str | None:
    """Write the unit's diff as ``remote.patch`` and apply it to its local clone; None, or
    why it did not apply (it stays in ``remote.patch``)."""
    atomic_write(os.path.join(state_dir, PATCH_FILE), patch)
    if not workspace or not is_clone(workspace):
        return f"no clone at {workspace} to apply it to"
    return apply(workspace, patch)
