"""The records the dispatcher writes, as TypedDicts: for the type checker (the launch seam's
Protocol is ``launcher``). The dispatcher's fast path imports
this module only under ``TYPE_CHECKING`` (``typing`` costs milliseconds there)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NotRequired, TypedDict


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
