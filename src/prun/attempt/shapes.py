"""What the dispatcher relies on of the objects other layers hand it, as Protocols, and the
records it writes, as TypedDicts: for the type checker. The dispatcher's fast path imports
this module only under ``TYPE_CHECKING`` (``typing`` costs milliseconds there)."""

from __future__ import annotations

from typing import Protocol


class Worker(Protocol):
    """A started worker: ``process.Worker`` (started here), ``process.AdoptedWorker`` (started
    by an earlier supervisor) or the keeper's ``KeptWorker`` (started by a run's keeper)."""

    @property
    def pid(self) -> int: ...

    def signal(self, sig: int) -> None: ...

    def exited(self) -> bool: ...

    def wait_exit(self, timeout: float | None) -> bool: ...

    async def await_exit(self) -> None: ...

    def sweep(self) -> None: ...

    def reap(self) -> int | None:
        """The exit code; None where it cannot be known here (the worker is not our child,
        or its keeper died before it told)."""

    def close(self) -> None: ...
