"""What a run decides for each unit before launching it: its executor (routing), its
workspace, and whether its quota pool is known to be empty.

Each decision is one small function so the supervisor stays readable and the policy lives in
the module that owns it (``prun.plan.routing``, ``prun.git.workspace``, ``prun.quota``).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .. import executors
from ..attempt.overlay import Overlay
from ..errors import LaunchError, UsageError
from ..git import layered, template
from ..git import workspace as ws
from ..git.setup import run_setup, sandboxed
from ..hooks.git_wrapper import git_wrapper_dir
from ..plan import Packet, Prime, routing
from ..quota.snapshot import parse_time

if TYPE_CHECKING:
    from ..executors.base import Executor
    from ..quota.snapshot import GroupState
    from .dependents import Start


@dataclass(frozen=True)
class Route:
    executor: str
    reason: str


def route_all(packets: Sequence[Packet], env: Mapping[str, str]) -> dict[str, Route]:
    """Each packet's executor and the reason, decided for the whole batch by
    ``prun.plan.routing`` (the seed's Executors rule, the project's policy, current quota).
    Quota is read only when a unit may draw on a metered pool: a batch whose every packet
    names an executor without quota groups (command units) reads no snapshot and runs no probe.
    Executors missing here are never chosen; a unit that can go only to them is refused."""
    needs = [routing.Need.of(p) for p in packets]
    states: dict[str, GroupState] = {}
    if any(n.named is None or executors.get(n.named).quota_groups() for n in needs):
        from ..quota import group_states

        states = dict(group_states(env, executors.quota_groups(), executors.quota_probe))
    policy = routing.load_policy(routing.find_policy(env))
    decisions = routing.route(needs, states, policy, env, executors.missing(env))
    return {d.packet: Route(d.executor, d.reason) for d in decisions}


@dataclass(frozen=True)
class Workspace:
    """Where one attempt works, as the brief describes it."""

    path: str
    kind: str                          # "clone" (code units) or "scratch" (read-only units)
    base: str | None                   # the commit its workspace starts from
    snapshot: str | None = None        # the run's read-only view of the code at its base
    applied: tuple[str, ...] = ()      # predecessors whose accepted changes it starts with
    seen_at: str | None = None         # where its sandbox also shows it: its template's path
    overlays: tuple[Overlay, ...] = ()  # its own (an overlay workspace), then its template's


def workspace(packet: Packet, *, root: str, seq: int, repo_root: str | None,
              base: str | None, setup: str | None, env: Mapping[str, str],
              snapshot_of: Callable[[str], str], start: Start | None = None,
              reuse: str | None = None, reuse_base: str | None = None,
              scratch_ready: Callable[[], bool] | None = None,
              prime: Prime | None = None, templates: str | None = None) -> Workspace:
    """Make the unit's workspace in ``root`` (the run's folder of workspaces): a scratch dir
    for a read-only unit (with the run's read-only snapshot of the code at its base,
    ``snapshot_of(base)``, beside it), a throwaway clone at the frozen base for a code unit
    (for a dependent, at the commit of its predecessors' accepted changes, made in a store of
    its own), given the shared paths of the plan's primed template (``prime``, kept under
    ``templates``, the workspace root: ``prun.git.template``; primed first when there is none
    for its key; as overlays where its sandbox can mount them, else copies); where its sandbox
    can mount an overlay and the base is large (``prun.git.layered.wanted``), the clone itself
    is one (the run's one checkout of the base below, the unit's own layer above); then the
    plan's setup command, in the sandbox when the unit runs in one.
    ``reuse``: a follow-up keeps its predecessor's workspace, whose base the ledger recorded
    (``reuse_base``; never read from the workspace); ``scratch_ready()``: ``root`` is known to
    be outside any git work tree."""
    snapshot = None
    if not packet.writes_code and packet.snapshot and repo_root and base:
        snapshot = snapshot_of(base)
    if reuse and os.path.isdir(reuse):
        kind = "clone" if packet.writes_code else "scratch"
        clone = kind == "clone"
        return Workspace(reuse, kind, (reuse_base if packet.writes_code else None) or base,
                         snapshot, seen_at=template.primed_at(reuse) if clone else None,
                         overlays=template.overlays_of(reuse) if clone else ())
    name = f"{packet.id}.{seq}"
    applied: tuple[str, ...] = ()
    seen_at = None
    if packet.writes_code:
        if not repo_root or not base:
            raise UsageError(f"packet {packet.id} writes code, but the run has no git base",
                             hint="run the plan inside a git repository")
        store = None
        if start is not None and start.patches:
            from ..git.store import store_path
            from .dependents import start_commit

            base = start_commit(root, repo_root, base, start) or base
            store, applied = store_path(root, base), start.applied
        in_sandbox = sandboxed(packet.sandbox)
        dest = os.path.join(root, name)
        layers = layered.wanted(dest, env, sandbox=in_sandbox, base=base,
                                objects=store or repo_root)
        make = layered.make if layers else ws.make_clone
        path = make(repo_root, base, dest, store=store, neutral=store is not None)
        kind = "clone"
        if prime is not None:
            primed = template.ensure(prime, root=templates or root, repo_root=repo_root,
                                     base=base, store=store, env=env, sandbox=in_sandbox,
                                     logs=root)
            template.give(primed, path, overlay=template.overlay_here(root, env,
                                                                      sandbox=in_sandbox))
            seen_at = primed.tree
    else:
        path = ws.make_scratch(root, name,
                               parent_checked=bool(scratch_ready and scratch_ready()))
        kind = "scratch"
    if setup:
        read_only = [p for p in (repo_root, root, snapshot) if p]
        run_setup(path, setup, env, sandbox=sandboxed(packet.sandbox), read_only=read_only,
                  base=base if packet.writes_code else None,
                  overlays=template.overlays_of(path) if kind == "clone" else ())
    return Workspace(path, kind, base, snapshot, applied, seen_at,
                     template.overlays_of(path) if kind == "clone" else ())


def git_wrapper(user_state: str) -> str | None:
    """The folder of the git wrapper every worker of the run gets first on its PATH (made
    once for the run; None when there is no git to wrap)."""
    try:
        return git_wrapper_dir(user_state)
    except LaunchError:
        return None


class QuotaPools:
    """The quota groups' states for one scheduling pass of the supervisor: read
    (``quota.group_states``, in a worker thread: it may probe a CLI) the first time a unit
    the pass launches draws on a metered pool, then shared by the pass's other units. The
    next pass makes a new one, so a park or a quota hit is seen at the next pass."""

    def __init__(self, env: Mapping[str, str]):
        self.env = env
        self._states: dict[str, GroupState] | None = None
        self._reading = asyncio.Lock()

    async def reset_of(self, executor: Executor, model: str | None) -> float | None:
        """When the pool of ``executor`` running ``model`` is known to be empty: its reset
        time (epoch seconds; an unknown reset counts as five minutes away). None: launch
        (unknown is never empty)."""
        group = executor.quota_group(model)
        if group is None:
            return None
        state = (await self.states()).get(group)
        if state is None or not state.empty:
            return None
        if state.resets_at:
            try:
                return parse_time(state.resets_at)
            except (ValueError, OverflowError, OSError):
                pass
        return time.time() + 300

    async def states(self) -> dict[str, GroupState]:
        async with self._reading:
            if self._states is None:
                from .. import executors
                from ..quota import group_states

                self._states = await asyncio.to_thread(group_states, self.env,
                                                       executors.quota_groups(),
                                                       executors.quota_probe)
            return self._states
