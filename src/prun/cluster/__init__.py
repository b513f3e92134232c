"""Running a run's units on a Dask distributed cluster (``prun run --cluster ADDRESS``).

The coordinator's side does not change: the same supervisor, ledger, state dirs and result
files on the coordinator's machine. Only the launch differs: ``client.Cluster`` sends each
attempt to a Dask worker as one task (``task.run_unit``), which clones the base from a git
bundle (``bundle``), runs the unit with the dispatcher's own code in a worker-local state dir,
streams the tail back, and returns what the unit left; ``remote.RemoteWorker`` is the
supervisor's handle on it and writes what comes back into the local state dir and workspace.

What Dask does not give is added here: no unit is ever launched twice, on any scheduler,
Dask's defaults included (every task has ``retries=0``, and prun's claim in the scheduler's
metadata, ``claim``, lets one worker at most launch an attempt, also when the scheduler runs
its task again after its worker died); a running unit is stopped by ending its process group
on the worker (``running``), also with its supervisor gone (``reach``); a worker that dies
mid-unit fails the attempt as ``worker-lost``, and its unit's group is ended (``guard``); a
unit's ports are reserved on the worker that runs it.

Dask is an extra (``pip install 'prun-agents[dask]'``): nothing here imports it at module
level, so importing prun and every local command stay free of it. See docs/cluster.md.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from .client import Cluster

if TYPE_CHECKING:
    import asyncio
    from collections.abc import AsyncIterator

    from .client import Cluster
    from .config import ClusterConfig


@contextlib.asynccontextmanager
async def connected(config: ClusterConfig | None, run_id: str,
                    loop: asyncio.AbstractEventLoop) -> AsyncIterator[Cluster | None]:
    """A supervisor's connection to its run's cluster while it drives the run (None for a
    run on this machine); ``UsageError`` in one line when it cannot be had."""
    if config is None:
        yield None
        return


    cluster = await asyncio.to_thread(Cluster.connect, config, run_id, loop)
    try:
        yield cluster
    finally:
        await asyncio.to_thread(cluster.close)
