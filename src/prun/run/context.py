"""What a unit's task uses of its run: the frozen run, where its files go, the ledger its
attempts are recorded in, the keeper that starts their workers, the cluster when it runs on
one, and what units share (the run's snapshots of a base, its block of port ranges).

Built once by the run loop (``prun.run.loop``). A task reads the run's state through
``state`` and changes none of it; what happened to its unit it returns (``prun.run.ends``).
It tells the world of what happens mid-attempt (dispatched, handed off, cancel-requested)
with ``emit``, written and shown at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import settings
from ..cluster.client import Cluster
from ..cluster.config import ClusterConfig
from ..errors import WorkspaceError
from ..git.snapshot import ensure_snapshot
from ..git.workspace import scratch_parent
from ..ledger import Ledger
from ..plan import Plan
from ..ports.ranges import RunRanges
from .events import Event
from .keeper import Keeper
from .paths import RunPaths
from .state import RunState, event
from .unit import UnitState


@dataclass
class RunContext:
    """One run's surroundings, shared by its units' tasks."""

    run: dict[str, Any]                   # the run's ledger row
    state: RunState                       # read only: the loop changes it
    ledger: Ledger
    paths: RunPaths
    env: dict[str, str]
    settings: settings.Settings           # read once: every attempt uses this
    keeper: Keeper                        # starts, reaps and logs the workers
    plan: Plan
    ancestors: dict[str, set[str]]
    sandbox: dict[str, Any]               # each packet's sandbox setting
    git_wrapper: str | None
    workspaces: str                       # the run's folder of workspaces
    cluster_config: ClusterConfig | None
    tell: Callable[[Event], None]         # the loop's: written and shown at once
    cluster: Cluster | None = None        # while connected (a cluster run)
    started: float | None = None          # the loop's process start time, once it holds the run
    ranges: RunRanges | None = None       # the units' own port ranges (``schedule``)
    scope: tuple[dict[str, tuple[str, ...]], dict[str, str]] | None = None
    snapshots: dict[str, str] = field(default_factory=dict)   # base -> its snapshot
    _scratch_ready: bool | None = None

    @property
    def run_id(self) -> str:
        return self.state.run_id

    def emit(self, kind: str, u: UnitState | None = None, cause: str = "",
             **data: Any) -> None:
        """Tell of a change mid-attempt, at once."""
        self.tell(event(self.run_id, kind, u, cause, **data))

    def snapshot_of(self, base: str) -> str:
        """The run's read-only snapshot of the code at ``base``: one per base per run, made
        by the first unit that needs it (``git.snapshot``; called from worker threads)."""
        found = self.snapshots.get(base)
        if found is None:
            found = self.snapshots[base] = ensure_snapshot(
                self.workspaces, self.run["repo_root"], base).path
        return found

    def scratch_ready(self) -> bool:
        """Whether the run's folder of workspaces is made and outside any git work tree,
        checked once per run (a unit whose check failed reports it itself)."""
        if self._scratch_ready is None:
            try:
                scratch_parent(self.workspaces)
                self._scratch_ready = True
            except (WorkspaceError, OSError):
                self._scratch_ready = False
        return self._scratch_ready
