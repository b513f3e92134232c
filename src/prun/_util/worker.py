"""What prun needs of a worker process, whoever started it: one Protocol, for annotations
(modules on the dispatcher's fast path import it under ``if TYPE_CHECKING:``)."""

from __future__ import annotations

from typing import Protocol


class WorkerLike(Protocol):
    """What ``end_group``, ``end_escaped`` and a unit's watch need of a worker: a
    ``Worker`` (``spawn``), an ``AdoptedWorker`` or a ``keeper.KeptWorker`` (a run's
    worker, started by its keeper process). ``reap`` gives None when the exit code
    cannot be had from the worker itself (then it is read from the run's exit-code log).
    For annotations only (import it under ``if TYPE_CHECKING:``)."""

    @property
    def pid(self) -> int: ...

    def signal(self, sig: int) -> None: ...

    def exited(self) -> bool: ...

    def wait_exit(self, timeout: float | None) -> bool: ...

    async def await_exit(self) -> None: ...

    def sweep(self) -> None: ...

    def reap(self) -> int | None: ...

    def close(self) -> None: ...
