"""The local way to launch an attempt: its worker a child of this process, in its own process
group, ended with it should this process be killed (``prun dispatch``; a Dask worker's task
runs its unit the same way). Followed and stopped through ``process.Worker``."""

from __future__ import annotations

from .launching import build, record_launch, spawn_files

TYPE_CHECKING = False  # typing costs milliseconds on the dispatcher's fast path
if TYPE_CHECKING:
    from .._util.worker import WorkerLike as Worker
    from .core import Dispatch
    from .launcher import Planned


class LocalLauncher:
    """The worker as this process's child (``Launcher``). ``durable``: each of its files
    synced as written (a standalone dispatcher's; nothing else syncs them)."""

    __slots__ = ("durable",)

    stages = False

    def __init__(self, *, durable: bool = True):
        self.durable = durable

    def plan(self, d: Dispatch) -> Planned:
        return build(d)

    def start(self, d: Dispatch, planned: Planned) -> Worker:
        from .._util.process import spawn

        if planned is None:
            raise RuntimeError("a local launch is planned first")
        launch, argv = planned
        files = spawn_files(d, launch)
        del files["name"], files["log"]
        worker = spawn(argv, **files, die_with_parent=True)  # a kill -9 of this process ends it
        record_launch(d, launch, worker)
        return worker

    async def start_async(self, d: Dispatch, planned: Planned) -> Worker:
        return self.start(d, planned)
