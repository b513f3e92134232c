"""A unit's workspace on a worker, made from the base's repository there (``bundle``) with
prun's own workspace code: a throwaway clone at the base, or a scratch dir and a read-only
snapshot of the base."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ..git import workspace as ws
from ..git.setup import run_setup, sandboxed
from ..git.snapshot import ensure_snapshot
from .bundle import apply_start, ensure_repo, tree_of

if TYPE_CHECKING:
    from .bundle import Start


def place(spec: dict[str, Any], bundle: bytes | None, root: str, unit_dir: str,
          env: dict[str, str]) -> tuple[str, str | None, Start | None]:
    """The unit's workspace on this worker: (its path, its read-only snapshot, the tree its
    diff is taken against). A code unit gets a clone at the base (with the coordinator's
    clone's uncommitted start, then the plan's setup); a read-only unit a scratch dir and
    the snapshot of the base. ``env``: the worker's environment (the setup's, with the
    unit's variables)."""
    base = spec.get("base")
    repo = ensure_repo(root, base, bundle) if base and bundle is not None else None
    os.makedirs(unit_dir, exist_ok=True)
    env = {**env, **spec["extra_env"]}
    if spec["kind"] == "clone":
        if repo is None or not base:
            raise RuntimeError("a code unit came without its base")
        path = ws.make_clone(repo, base, os.path.join(unit_dir, "work"))
        apply_start(path, spec.get("start_patch") or b"")
        if spec.get("setup"):
            run_setup(path, spec["setup"], env, base=base, **_setup_sandbox(spec, root))
        return path, None, tree_of(path, repo, base)
    path = ws.make_scratch(unit_dir, "work", parent_checked=_outside_git(root))
    if spec.get("setup"):
        run_setup(path, spec["setup"], env, **_setup_sandbox(spec, root))
    snapshot = None
    if repo is not None and base and spec.get("snapshot"):
        snapshot = ensure_snapshot(os.path.join(root, "snapshots"), repo, base).path
    return path, snapshot, None


def _setup_sandbox(spec: dict[str, Any], root: str) -> dict[str, Any]:
    """The setup command runs in the sandbox where the unit will (the bases read-only)."""
    return {"sandbox": sandboxed(spec.get("sandbox")),
            "read_only": [os.path.join(root, "bases")]}


_CHECKED: set[str] = set()


def _outside_git(root: str) -> bool:
    """Whether ``root`` (every unit's folder lies in it) was found outside any git work tree,
    checked once per worker process (``make_scratch`` checks it itself otherwise)."""
    if root not in _CHECKED:
        from ..git.workspace import scratch_parent

        scratch_parent(os.path.join(root, "units"))
        _CHECKED.add(root)
    return True
