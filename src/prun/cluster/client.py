"""The coordinator's side: ``Cluster``, the supervisor's connection to a Dask scheduler.

One ``distributed.Client`` per supervisor (its own event-loop thread, so Dask's work never
runs in the supervisor's loop). Any scheduler will do, Dask's defaults included: one that runs
a task again after its worker died (``allowed-failures`` above 0) runs nothing twice, because
each attempt is claimed before it launches (``claim``). ``unit`` gives the launcher of one
attempt (``attempt.launcher.Launcher``), whose ``start`` submits it (``retries=0``, its own
key) with the base's bundle as a task argument: the bundle is a task of its own, one per
base, so Dask sends it to each worker once and can make it again if the worker holding it
dies (a scattered bundle would be lost).
Progress comes back on one topic per run (``Worker.log_event`` → ``Client.subscribe_topic``):
the scheduler relays each event at once and in order with the task's completion, no polling
on either side. The scheduler's own ``remove-worker`` events (topic ``all``) say when a
worker running a unit died.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from ..attempt import statedir
from ..attempt.statedir import iso
from ..errors import LaunchError
from .bundle import make_bundle
from .claim import CANCEL, LOST, claimed, give_up
from .config import ClusterConfig
from .connect import connect_client
from .reach import end_on_workers, land_patch
from .remote import KEY_PREFIX, RemoteWorker
from .running import signal_unit
from .task import carry, run_unit

SCHEDULER_TOPIC = "all"   # where the scheduler logs its own events (a worker removed ...)
LANDING_THREADS = 4   # what comes back is written into the local state dirs here


if TYPE_CHECKING:
    from ..attempt.core import Dispatch
    from ..attempt.launcher import Planned
    from .remote import RemoteWorker
    from .task import WorkerPorts


class Cluster:
    """A supervisor's connection: the client, the run's progress topic, the bundles sent,
    and the remote workers of the attempts in flight (by attempt id)."""

    def __init__(self, config: ClusterConfig, run_id: str, client: Any,
                 loop: asyncio.AbstractEventLoop):
        self.config = config
        self.client = client
        self.loop = loop
        self.topic = f"prun-{run_id}"
        self.workers: dict[str, RemoteWorker] = {}
        self.lock = threading.Lock()
        self.bundles: dict[str, tuple[Any, int]] = {}   # base commit -> (future, bytes)
        self.landing = ThreadPoolExecutor(LANDING_THREADS, thread_name_prefix="prun-landing")
        self.gone: set[str] = set()   # workers the scheduler removed while this run was driven
        client.subscribe_topic(self.topic, self._event)
        client.subscribe_topic(SCHEDULER_TOPIC, self._scheduler_event)

    @classmethod
    def connect(cls, config: ClusterConfig, run_id: str,
                loop: asyncio.AbstractEventLoop) -> Cluster:
        return cls(config, run_id, connect_client(config.address), loop)

    def close(self) -> None:
        with self.lock:
            bundles, self.bundles = self.bundles, {}
        for fut, _ in bundles.values():
            fut.release()
        self.landing.shutdown(wait=True)
        try:
            self.client.unsubscribe_topic(self.topic)
            self.client.unsubscribe_topic(SCHEDULER_TOPIC)
        finally:
            self.client.close()

    # one attempt ---------------------------------------------------------------------------
    def unit(self, *, kind: str, workspace: str, base: str | None, snapshot: str | None,
             repo_root: str | None, setup: str | None, fresh: bool,
             ports: WorkerPorts | None = None) -> Launcher:
        """The launcher of one attempt; ``ports``: what its task reserves on its worker."""
        return Launcher(self, kind=kind, workspace=workspace, base=base, snapshot=snapshot,
                        repo_root=repo_root, setup=setup, fresh=fresh, ports=ports)

    def bundle(self, commit: str, source: str) -> tuple[Any, int, bool]:
        """The task holding the bundle of ``commit`` (made from ``source``), its size, and
        whether this call made it (once per base per run)."""
        with self.lock:
            found = self.bundles.get(commit)
            if found is not None:
                return found[0], found[1], False
            data = make_bundle(source, commit)
            fut = self.client.submit(carry, data, key=f"prun-bundle-{commit}", pure=False,
                                     retries=0)
            self.bundles[commit] = (fut, len(data))
            return fut, len(data), True

    def signal(self, attempt_id: str, worker: str, sig: int) -> None:
        """Signal the unit's process group on ``worker`` (through the scheduler; not from
        the client's own thread). A worker that is gone has nothing left to signal."""
        try:
            self.client.run(signal_unit, attempt_id, int(sig), workers=[worker], wait=False)
        except Exception as e:
            print(f"prun: could not signal {attempt_id} on {worker}: {e}", file=sys.stderr)

    def end_orphan(self, attempt_id: str, state_dir: str, workspace: str | None,
                   grace: float) -> bool:
        """A unit whose supervisor died (a resumed supervisor's): given up, ended on its
        worker (SIGTERM, ``grace``, SIGKILL) and its diff landed here. Whether its group was
        confirmed gone (or it ran nowhere any more)."""
        found = end_on_workers(self.client, attempt_id, grace, LOST)
        if found.patch:
            land_patch(state_dir, workspace, found.patch)
        return found.gone

    def claimed(self, attempt_id: str) -> list[str]:
        """The workers that claimed the attempt, first first (``claim.claimed``)."""
        return claimed(self.client, attempt_id)

    def cancel_unstarted(self, attempt_id: str, sig: int) -> None:
        """An attempt not known to have started is cancelled: its task refuses to launch it,
        and a worker that claimed it already is sent ``sig``."""
        try:
            claimed = give_up(self.client, attempt_id, CANCEL)
        except Exception as e:
            print(f"prun: could not mark {attempt_id} cancelled on the cluster: {e}",
                  file=sys.stderr)
            return
        for where in claimed:
            if where not in self.gone:
                self.signal(attempt_id, where, sig)

    def _event(self, event: tuple[float, Any]) -> None:
        """A progress event (in the client's thread): to the remote worker it names."""
        msg = event[1]
        if not isinstance(msg, dict):
            return
        w = self.workers.get(str(msg.get("a")))
        if w is not None:
            w.on_event(msg)

    def _scheduler_event(self, event: tuple[float, Any]) -> None:
        """The scheduler's own events (in the client's thread): a worker it removed (dead,
        or closed) while it ran units of this run."""
        msg = event[1]
        if not isinstance(msg, dict) or msg.get("action") != "remove-worker":
            return
        address = str(msg.get("worker"))
        self.gone.add(address)
        for key in msg.get("processing-tasks") or ():
            w = self.workers.get(str(key).removeprefix(KEY_PREFIX))
            if w is not None and w.key == key:
                try:
                    self.landing.submit(w.worker_died, address)
                except RuntimeError:   # the cluster was closed: the run is over
                    return


class Launcher:
    """A cluster run's attempt, sent to a Dask worker (``attempt.launcher.Launcher``):
    followed and stopped through its ``RemoteWorker``. What comes back is synced as it is
    written here, before the run records its end."""

    durable = True
    stages = False

    def __init__(self, cluster: Cluster, *, kind: str, workspace: str, base: str | None,
                 snapshot: str | None, repo_root: str | None, setup: str | None, fresh: bool,
                 ports: WorkerPorts | None = None):
        self.cluster = cluster
        self.kind, self.workspace, self.base, self.snapshot = kind, workspace, base, snapshot
        self.repo_root, self.setup, self.fresh = repo_root, setup, fresh
        self.ports = ports

    @property
    def address(self) -> str:
        return self.cluster.config.address

    def plan(self, d: Dispatch) -> Planned:
        """Nothing to plan here (the worker's task builds its own argv): its workspace
        made."""
        d.work_dir()
        return None

    def start(self, d: Dispatch, planned: Planned) -> RemoteWorker:
        """Submit the attempt; returns its remote worker at once (the task may queue). Its
        receipt is the task's key; ``unit.json`` names the cluster instead of a local worker
        (no local process to signal). ``LaunchError`` when it cannot be submitted."""
        try:
            w = self.submit(d)
        except OSError as e:
            raise LaunchError(f"cannot send {d.p.executor.name} to the cluster: {e}") from None
        d.launched_at = time.time()
        d.receipt = f"dask:{w.key}"
        record = d.unit_record()
        record["remote"] = {"cluster": self.address, "key": w.key,
                            "submitted_at": iso(d.launched_at)}
        d.state.write_json(statedir.UNIT, record)
        return w

    async def start_async(self, d: Dispatch, planned: Planned) -> RemoteWorker:
        """``start`` from a thread (sending may bundle the base)."""
        return await asyncio.to_thread(self.start, d, planned)

    def submit(self, d: Dispatch) -> RemoteWorker:
        """Submit the attempt's task. Raises ``OSError`` when it cannot be submitted."""
        spec = self.spec(d)
        source = self.source()
        bundle, size, made = (self.cluster.bundle(self.base, source)
                              if self.base and source else (None, 0, False))
        w = RemoteWorker(self.cluster, d, spec, kind=self.kind, workspace=self.workspace,
                         bundle_bytes=size if made else 0)
        self.cluster.workers[spec["attempt_id"]] = w
        try:
            fut = self.cluster.client.submit(run_unit, spec, bundle, key=w.key, pure=False,
                                             retries=0)
        except Exception as e:
            self.cluster.workers.pop(spec["attempt_id"], None)
            raise OSError(0, f"the Dask scheduler refused the task: {e}") from None
        w.attach(fut)
        return w

    def source(self) -> str | None:
        """Where the base's objects are: the coordinator's clone, else the repository."""
        return self.workspace if self.kind == "clone" else self.repo_root

    def spec(self, d: Dispatch) -> dict[str, Any]:
        """The attempt as the worker's task receives it (plain data)."""
        req = d.p.request
        start = b""
        if self.kind == "clone" and not self.fresh and self.base:
            from ..git.changes import patch_of

            start = patch_of(self.workspace, self.base)
        command = req.command
        return {
            "attempt_id": req.attempt_id or "", "unit_id": req.unit_id,
            "executor": d.p.executor.name, "mode": d.p.mode,
            "command": list(command) if isinstance(command, (list, tuple)) else command,
            "model": d.settings.model, "effort": d.settings.effort,
            "timeout_s": d.settings.timeout_s, "prompt": d.p.prompt, "kind": self.kind,
            "base": self.base, "snapshot": bool(self.snapshot), "start_patch": start,
            "setup": self.setup, "sandbox": d.p.sandbox, "extra_env": dict(req.extra_env),
            "paths": [[d.state.path, "state"], [self.workspace, "workspace"],
                      [self.snapshot or "", "snapshot"], [req.prompt_file, "prompt"]],
            "conversation_id": d.p.resume_id,
            "result_name": os.path.basename(d.p.result_file), "topic": self.cluster.topic,
            "ports": self.ports,
        }


__all__ = ["Cluster", "Launcher"]
