"""What the dispatcher relies on of the objects other layers hand it, as Protocols, and the
records it writes, as TypedDicts: for the type checker. The dispatcher's fast path imports
this module only under ``TYPE_CHECKING`` (``typing`` costs milliseconds there)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NotRequired, Protocol, TypedDict

if TYPE_CHECKING:
    from .._util.worker import WorkerLike as Worker  # the one worker Protocol


class Keeper(Protocol):
    """A run's worker keeper (``prun.run.keeper.Keeper``): it starts a worker as its child and
    logs the worker's exit code to ``log`` when it reaps it."""

    @property
    def ident(self) -> Mapping[str, Any]:
        """The keeper's pid and start time, kept in each worker's record."""

    async def spawn_async(self, argv: list[str], *, cwd: str, env: dict[str, str],
                          stdout_path: str, stderr_path: str, stdin_path: str | None,
                          name: str, log: str, files: list[tuple[str, str]] | None = None,
                          copies: list[tuple[str, str]] | None = None,
                          record: tuple[str, Mapping[str, Any]] | None = None,
                          status: str | None = None) -> Worker:
        """Start a worker, awaited in the event loop that reads the keeper's answers: the
        keeper writes ``files`` (path, text) and ``copies`` (from, to) first, and ``record``
        (``unit.json``) with the worker in it once it runs; ``status`` is the file it opens
        for the worker's monitor (``attempt.monitor``)."""


class RemoteLauncher(Protocol):
    """A cluster run's launcher (``prun.cluster.client.Launcher``): it sends the attempt
    to a remote worker and returns the handle the supervisor watches."""

    @property
    def address(self) -> str:
        """The cluster's address, recorded in ``unit.json``."""

    def launch(self, d: Any) -> Worker: ...


class RemoteRecord(TypedDict):
    """The attempt's task on a cluster, in ``unit.json`` (instead of a local worker)."""

    cluster: str
    key: str
    submitted_at: str


class DispatcherRecord(TypedDict):
    pid: int
    create_time: float | None


class WorkerRecord(TypedDict):
    """The launched worker, in ``unit.json``: its pid (the leader of its process group)."""

    pid: int
    pgid: int
    create_time: float | None
    started_at: str
    keeper: NotRequired[Mapping[str, Any]]   # the keeper that started it, in a run


class UnitRecord(TypedDict):
    """``unit.json``: what was asked and what runs; ``argv``, ``sandbox`` and ``worker`` once
    the worker is launched."""

    unit_id: str
    attempt_id: str | None
    executor: str
    requested_model: str | None
    model: str | None
    effort: str | None
    mode: str
    workspace: str | None
    add_dirs: list[str]
    resume_id: str | None
    continue_from: str | None
    timeout_s: float
    result_file: str
    dispatcher: DispatcherRecord
    route_reason: str | None
    started_at: str
    home: NotRequired[str]           # the worker's private home (HOME)
    subdispatch: NotRequired[bool]   # it may start other agents (its packet allots it)
    argv: NotRequired[list[str]]
    sandbox: NotRequired[bool | None]
    worker: NotRequired[WorkerRecord]
    remote: NotRequired[RemoteRecord]


class ResultIdentity(TypedDict):
    """What a published result file is (``published.identity``): where, which inode, how big,
    when last written, and (when asked) its SHA-256."""

    path: str
    dev: int
    ino: int
    size: int
    mtime_ns: int
    sha256: NotRequired[str]
