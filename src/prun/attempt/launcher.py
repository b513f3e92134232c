"""The launch seam: how an attempt is started, followed and stopped.

A ``Dispatch`` is given one ``Launcher``; it knows no other way. One implementation per way,
each in the module that owns that way:

    local.LocalLauncher               a child of this process (``prun dispatch``; a Dask
                                      worker's task runs its unit the same way)
    prun.run.keeper.KeeperLauncher    a run's unit, started by its keeper process under a
                                      monitor that outlives the keeper (``monitor``)
    prun.cluster.client.Launcher      a cluster run's unit, sent to a Dask worker
    session_launcher.SessionLauncher  a session unit, handed to the coordinator, who runs it
                                      as a subagent (``executors.session``)

``plan`` does the launch's file work (any thread), ``start`` or ``start_async`` starts it and
returns its handle. A process's handle is a ``WorkerLike``: it is followed through it
(``wait_exit``, ``await_exit``; its stream is the state dir's ``tail``) and stopped through it
(``signal``, ``sweep``, ``reap``: ``process.end_group``); whichever launcher started it,
``start`` leaves the attempt's receipt, launch time and ``unit.json`` as they should be once
it runs. A session unit's handle is a ``handoff.HandedOff``: there is no process, so it is
followed by its receipt and its result landing, and stopped by being marked cancelled.

The dispatcher's fast path imports this module only under ``TYPE_CHECKING``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, TypeAlias, TypeVar

if TYPE_CHECKING:
    from .._util.worker import WorkerLike as Worker
    from ..executors.records import Launch
    from .handoff import HandedOff

Planned: TypeAlias = "tuple[Launch, list[str]] | None"  # the executor's launch and the argv that runs it
Started: TypeAlias = "Worker | HandedOff"   # a process's handle, or a session unit's
# the attempt it launches: ``core.Dispatch`` (a parameter, so that this module does not
# import the one that imports it)
Dispatch = TypeVar("Dispatch", contravariant=True)


class Launcher(Protocol[Dispatch]):
    """How an attempt is started, followed and stopped (``Launcher[core.Dispatch]``)."""

    @property
    def durable(self) -> bool:
        """Whether each of the attempt's files is synced as it is written (so, on this machine,
        always: its end is recorded after them; a Dask worker's task, whose files travel
        back to be written by the run, does not)."""

    @property
    def stages(self) -> bool:
        """Whether the state dir's opening files are kept for ``start`` to write as it starts
        the worker (``Dispatch.opening``), instead of being written at ``begin``."""

    def plan(self, d: Dispatch) -> Planned:
        """The launch's file work, from any thread: the executor's launch and the argv that
        runs it (None: nothing to plan here). Raises ``LaunchError`` or ``OSError``."""

    def start(self, d: Dispatch, planned: Planned) -> Started:
        """Start the planned attempt and return its handle (blocking, from any thread).
        Raises ``OSError`` (or ``LaunchError``, its line the reason) when it cannot start."""

    async def start_async(self, d: Dispatch, planned: Planned) -> Started:
        """``start``, from the run's event loop."""
