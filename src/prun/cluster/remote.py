"""``RemoteWorker``: the supervisor's handle on a unit running on a Dask worker, with the
methods of the process helper's workers (``_util.worker.WorkerLike``), so the supervisor
watches it, ends it and judges it as it does a local one.

While the unit runs, its tail's growth arrives as events and is written at its offsets into
the local state dir's ``tail`` (so stall detection, ``monitor`` and the live view see it
grow), and so does its rest once it ended, a chunk at a time (a command's 50 MB of output is
never in memory here); ``signal`` sends a signal to its process group on the worker. When the
task ends, ``land`` waits for those chunks, writes what came back into the local state dir
(the end of stderr, the result the unit wrote, ``remote.json``) and applies its diff to the
local clone;
only then is the worker seen to have exited, so the dispatcher's own ``finish`` judges it and
writes ``outcome.json`` last, as for a local unit. A task whose worker died fails the attempt
with reason ``worker-lost``: when the scheduler removes that worker (``worker_died``), or when
it ran the task again elsewhere and that run found the attempt claimed and launched nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pickle
import signal as signals
import threading
import time
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any, Protocol

from ..attempt import statedir
from .bundle import apply
from .claim import CANCEL
from .config import ClusterConfig
from .running import landed_tail

if TYPE_CHECKING:
    from ..attempt.core import Dispatch

KEY_PREFIX = "prun-unit-"     # a unit's task key: this and its attempt id
REMOTE_FILE = "remote.json"   # in the local state dir: where and how it ran, the wire's bytes
PATCH_FILE = "remote.patch"   # the diff the unit's task returned
EVENT_WAIT_S = 30.0           # for a payload sent as an event, once its task has ended


class Cluster(Protocol):
    """What a unit's handle needs of its run's connection to the cluster (``client.Cluster``)."""

    @property
    def config(self) -> ClusterConfig: ...

    @property
    def client(self) -> Any: ...                        # a ``distributed.Client``

    @property
    def loop(self) -> asyncio.AbstractEventLoop: ...    # the supervisor's

    @property
    def landing(self) -> Executor: ...                  # where what comes back is written

    @property
    def gone(self) -> set[str]: ...                     # workers the scheduler removed

    @property
    def workers(self) -> dict[str, RemoteWorker]: ...   # running units, by attempt id

    def signal(self, attempt_id: str, worker: str, sig: int) -> None: ...

    def cancel_unstarted(self, attempt_id: str, sig: int) -> None: ...

    def claimed(self, attempt_id: str) -> list[str]: ...


class RemoteWorker:
    """One attempt's task on the cluster."""

    remote = True

    def __init__(self, cluster: Cluster, d: Dispatch, spec: dict[str, Any], *, kind: str,
                 workspace: str, bundle_bytes: int):
        self.cluster, self.d, self.kind, self.workspace = cluster, d, kind, workspace
        self.attempt_id: str = spec["attempt_id"]
        self.key = KEY_PREFIX + self.attempt_id
        self.pid = 0                       # no local process: never signalled here
        self.create_time: float | None = None
        self.escaped: list[dict[str, Any]] = []
        self.code: int | None = None
        self.group_gone = True
        self.worker_address: str | None = None
        self.lost_on: str | None = None    # the worker the scheduler removed while it ran
        self.signalled: int | None = None
        self.future: Any = None
        self._lock = threading.Lock()
        self._grown = threading.Condition(self._lock)   # the tail's bytes written here grew
        self._done = threading.Event()
        self._waiters: list[asyncio.Future[None]] = []
        self._have = 0                     # the tail's bytes written here, contiguous
        self._ended_by: dict[str, Any] | None = None   # the payload, when it came as an event
        self._end_event = threading.Event()
        self._landed = False
        self._tail_fd = os.open(d.state.file(statedir.TAIL), os.O_WRONLY | os.O_CREAT, 0o644)
        self.record: dict[str, Any] = {
            "cluster": cluster.config.address, "key": self.key, "submitted_at": time.time(),
            "wire": {"spec": len(pickle.dumps(spec, protocol=5)), "events": 0,
                     "event_count": 0, "tail": 0, "payload": 0, "diff": 0, "result": 0,
                     "bundle": bundle_bytes}}

    def attach(self, future: Any) -> None:
        self.future = future
        future.add_done_callback(self._finished)

    def _finished(self, future: Any) -> None:   # Dask's callback thread
        try:
            self.cluster.landing.submit(self.land, future)
        except RuntimeError:   # the cluster was closed: the run is over
            pass

    # events (the client's thread) ------------------------------------------------------------
    def on_event(self, msg: dict[str, Any]) -> None:
        import msgpack  # type: ignore[import-untyped]

        wire = self.record["wire"]
        wire["events"] += len(msgpack.packb(msg, use_bin_type=True))
        wire["event_count"] += 1
        if msg.get("k") == "end":   # the payload, sent as an event (small ones)
            self._ended_by = msg.get("p")
            self._end_event.set()
            self.cluster.landing.submit(self._land_event)
        elif msg.get("k") == "tail":
            self._write_tail(int(msg["o"]), msg["b"])
            wire["tail"] += len(msg["b"])
            if msg.get("ack"):   # the rest of an ended unit's: the next is sent on our word
                self._landed_tail()
        elif msg.get("k") == "start":
            self.worker_address = str(msg.get("w"))
            self.record.update(worker=self.worker_address, pid=msg.get("pid"),
                               started_at=msg.get("t"), sandboxed=msg.get("sandboxed"),
                               ports=msg.get("ports") or {})
            self._save()
            with self._lock:
                sig = self.signalled
            if sig is not None:   # cancelled before it was known to run (not from this thread)
                self.cluster.landing.submit(self.cluster.signal, self.attempt_id,
                                            self.worker_address, sig)

    def _landed_tail(self) -> None:
        """Tell the worker how much of the tail is written here (from a landing thread: the
        client's own must not wait for the scheduler)."""
        with self._lock:
            have, where = self._have, self.worker_address
        if where is not None:
            with contextlib.suppress(RuntimeError):   # the cluster was closed: the run is over
                self.cluster.landing.submit(self.cluster.client.run, landed_tail,
                                            self.attempt_id, have, workers=[where],
                                            wait=False)

    def _write_tail(self, offset: int, data: bytes) -> None:
        with self._lock:
            if self._tail_fd < 0 or offset > self._have:
                return   # a gap: the end of the task brings everything from its last push
            os.pwrite(self._tail_fd, data, offset)
            self._have = max(self._have, offset + len(data))
            self._grown.notify_all()

    # the worker protocol -----------------------------------------------------------------------
    def signal(self, sig: int) -> None:
        """Signal its process group on the worker; before it is known to run, cancel it
        (sent from a landing thread: the caller does not wait for the scheduler)."""
        if self._done.is_set():
            return
        with self._lock:
            self.signalled = sig
            where = self.worker_address
        with contextlib.suppress(RuntimeError):   # the cluster was closed: the run is over
            if where is not None:
                self.cluster.landing.submit(self.cluster.signal, self.attempt_id, where, sig)
            elif sig in (signals.SIGTERM, signals.SIGKILL):
                self.cluster.landing.submit(self.cluster.cancel_unstarted, self.attempt_id, sig)

    def worker_died(self, address: str) -> None:
        """The scheduler removed ``address`` while this attempt's task was on it (a landing
        thread). If a worker that is gone now claimed the attempt, the unit was launched
        there and is lost: the attempt ends as ``worker-lost`` now (the scheduler may run
        its task again elsewhere; that run finds the claim and launches nothing). If no
        worker claimed it, it never started there: the scheduler runs its task again, as its
        first launch. If a live worker claimed it, it runs there."""
        if self._done.is_set():
            return
        try:
            claimed = self.cluster.claimed(self.attempt_id)
        except Exception:   # the scheduler is gone too: nothing runs it any more
            claimed = [address]
        if not claimed or any(w not in self.cluster.gone for w in claimed):
            return
        self.lost_on = claimed[0]
        self.d.lost = ("worker-lost", f"the Dask worker {claimed[0]} died while it ran; it "
                       "is not run again")
        self._finish(None, None)

    def exited(self) -> bool:
        return self._done.is_set()

    def wait_exit(self, timeout: float | None) -> bool:
        return self._done.wait(timeout)

    async def await_exit(self) -> None:
        if self._done.is_set():
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        if self._done.is_set():   # ended while the waiter was being added
            self._wake()
        try:
            await fut
        finally:
            with contextlib.suppress(ValueError):
                self._waiters.remove(fut)

    def _wake(self) -> None:     # in the supervisor's event loop
        for fut in list(self._waiters):
            if not fut.done():
                fut.set_result(None)

    def sweep(self) -> None:
        """Nothing here: the task ended the unit's group on the worker before it returned."""

    def reap(self) -> int | None:
        return self.code

    def close(self) -> None:
        pass

    async def quiesce(self) -> bool:
        """After it was ended: whether the worker found its group empty."""
        await self.await_exit()
        return self.group_gone

    # the end (a landing thread) ---------------------------------------------------------------
    def _land_event(self) -> None:
        if self._ended_by is not None:
            self._finish(self._ended_by, None)

    def land(self, future: Any) -> None:
        """The task ended: land what it returned (or, when its payload came as an event,
        wait for that to land), then let the supervisor see the exit."""
        if self._end_event.is_set() or self._landed:   # landed from its event, or given up
            future.release()
            return
        try:
            payload = self._payload(future)
        except Exception as e:
            self.d.lost = ("worker-lost", f"its result could not be fetched: {e}")
            payload = None
        if payload is not None and payload.get("by_event"):
            if not self._end_event.wait(EVENT_WAIT_S):
                self.d.lost = ("landing-failed", "its task ended, but its payload never "
                               "arrived")
                return self._finish(None, future)
            future.release()   # landed (or being landed) from the event
            return
        self._finish(payload, future)

    def _finish(self, payload: dict[str, Any] | None, future: Any) -> None:
        """Write ``payload`` into the local state dir and workspace, then end (once)."""
        with self._lock:
            if self._landed:
                return
            self._landed = True
        if future is None:   # it came inside the last event: counted with the events
            self.record["wire"]["payload_in_events"] = True
        try:
            if payload is not None and self.d.outcome is None:   # not judged without it
                self._land(payload)
        except Exception as e:   # never leave the supervisor waiting
            self.d.lost = ("landing-failed", f"what the worker returned could not be written "
                           f"here: {type(e).__name__}: {e}")
        finally:
            self.cluster.workers.pop(self.attempt_id, None)
            with self._lock:
                os.close(self._tail_fd)
                self._tail_fd = -1
            self.record["finished_at"] = time.time()
            with contextlib.suppress(OSError):
                self._save()
            if future is not None:
                with contextlib.suppress(Exception):
                    future.release()
            self._done.set()
            self.cluster.loop.call_soon_threadsafe(self._wake)

    def _payload(self, future: Any) -> dict[str, Any] | None:
        """The task's return, or None with ``d.lost`` saying why there is none."""
        from distributed.scheduler import KilledWorker

        if future.status == "finished":
            payload: dict[str, Any] = future.result()
            self.record["wire"]["payload"] = _wire_size(payload)
            return payload
        if future.status == "cancelled":
            self.d.lost = ("worker-lost", "the cluster dropped its task (the scheduler "
                           "restarted or this client lost it)")
            return None
        exc = future.exception()
        where = self.worker_address or "its worker"
        if isinstance(exc, KilledWorker):
            self.d.lost = ("worker-lost", f"the Dask worker {where} died while it ran; it "
                           "is not re-run")
        else:
            self.d.lost = ("worker-lost", f"its task failed on {where}: "
                           f"{type(exc).__name__}: {exc}")
        return None

    def _land(self, p: dict[str, Any]) -> None:
        d, wire = self.d, self.record["wire"]
        self.record.update({k: p.get(k) for k in (
            "worker", "pid", "create_time", "exit_code", "received_at", "claimed_at",
            "placed_at", "begun_at", "launched_at", "exited_at", "returned_at", "signalled")
            if k in p})
        self.record["landing_at"] = time.time()
        if p.get("refused"):
            if not (self.signalled and p.get("refused_by") == CANCEL):
                where = self.lost_on or self.worker_address or "that ran it first"
                d.lost = ("worker-lost", f"the Dask worker {where} died while it ran, and the "
                          f"scheduler ran its task again on {p.get('worker')}, which launched "
                          f"nothing: {p['refused']}")
            return
        if p.get("launch_error"):
            d.launch_error = str(p["launch_error"])
            return
        d.sandboxed = p.get("sandboxed")
        self.code, self.group_gone = p.get("exit_code"), bool(p.get("group_gone", True))
        with self._lock:
            start = int(p.get("tail_from") or 0)   # the worker pushed all before it as events
            self._grown.wait_for(lambda: self._have >= start, EVENT_WAIT_S)
            if start > self._have:
                self.record["tail_gap"] = [self._have, start]
            os.pwrite(self._tail_fd, p.get("tail") or b"", start)
            wire["tail"] += len(p.get("tail") or b"")
        with open(d.state.file(statedir.STDERR), "wb") as f:
            f.write(p.get("stderr") or b"")
        if p.get("outbox") is not None:
            with open(d.write_path, "wb") as f:
                f.write(p["outbox"])
            wire["result"] = len(p["outbox"])
        patch = p.get("patch") or b""
        wire["diff"] = len(patch)
        if patch:
            with open(d.state.file(PATCH_FILE), "wb") as f:
                f.write(patch)
            self._apply(patch)

    def _apply(self, patch: bytes) -> None:
        if self.kind != "clone":
            self.d.lost = ("diff-not-applied", "a read-only unit changed its workspace on the "
                           f"worker; the diff is kept in {PATCH_FILE}")
            return
        why = apply(self.workspace, patch)
        if why is not None:
            self.d.lost = ("diff-not-applied", f"its diff did not apply to {self.workspace}: "
                           f"{why} (kept in {PATCH_FILE})")

    def _save(self) -> None:
        self.d.state.write_json(REMOTE_FILE, self.record)


def _wire_size(payload: dict[str, Any]) -> int:
    """The bytes ``payload`` took on the wire, near enough: its byte strings (the tail, the
    result, the diff) counted, not copied into a pickle of their own (tens of MB)."""
    blobs = {k: v for k, v in payload.items() if isinstance(v, bytes | bytearray)}
    rest = {k: v for k, v in payload.items() if k not in blobs}
    return len(pickle.dumps(rest, protocol=5)) + sum(len(v) for v in blobs.values())
