"""The worker's side: one unit as one Dask task (``run_unit``), run in a thread of a Dask
worker process that has prun installed.

The task claims its attempt id (a marker file on the worker, made with O_EXCL, and prun's
claim in the scheduler's metadata, ``claim``: a second launch of the same attempt is refused
wherever it lands, also when the scheduler runs the task again after its worker died), makes
the unit's workspace from the base's bundle (a clone, or a scratch dir and a read-only
snapshot), reserves the unit's ports in this machine's registry, runs the unit through the
dispatcher's own ``Dispatch`` (the same executors, argv and sandbox as a local unit; no quota
gate: that stays with the coordinator) in a worker-local state dir, guards its process group
against the worker's own death (``guard``), pushes the tail's growth to the coordinator while
it runs (``Worker.log_event``) and the rest of it after, a chunk at a time, and returns what
the coordinator needs to judge it: the exit code, the end of stderr, the result the unit
wrote, and its binary diff.

What the coordinator calls on a running unit (a signal, a stop) is in ``running``.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import shutil
import time
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Protocol

from .. import settings
from .._util.fsutil import tail_bytes
from .._util.process import end_group
from ..attempt import statedir
from ..attempt.beginning import admit, begin
from ..attempt.core import Dispatch
from ..attempt.launching import launch
from ..attempt.local import LocalLauncher
from ..attempt.request import Request, prepare
from ..errors import PortsUnavailable
from . import claim as claims
from .bundle import diff_since
from .guard import guard
from .place import place
from .running import LOCK, RUNNING, Running

if TYPE_CHECKING:
    from .bundle import Start

PUSH_S = 0.1                # the tail's growth is pushed this often while the unit runs
CHUNK_BYTES = 256 * 1024    # at most this much of the tail in one event
WINDOW = 4                  # chunks of the tail sent ahead of the supervisor's word
LANDED_S = 10.0             # for its word on an ended unit's (past it: it is gone or stalled)
STDERR_BYTES = 64 * 1024    # the end of stderr that comes back
DEADLINE_MARGIN_S = 30.0    # the worker's own backstop past the coordinator's deadline
CLAIM_S = 60.0              # for the scheduler to answer a claim
EVENT_PAYLOAD_BYTES = 16 * 1024   # a payload up to this comes back as an event
GROUP_GONE_S = 5.0          # for what is left of an ended unit's group to be reaped
PORT_RETRY_S = 1.0          # ports another unit of this machine holds: looked at again
_CLEANER = ThreadPoolExecutor(1, thread_name_prefix="prun-cleaner")   # finished units' dirs


class WorkerPorts(Protocol):
    """A unit's ports as its task reserves them on this machine (the run's side makes it:
    ``prun.ports.ranges.PortsThere``): ``take`` gives what is held, whose ``env()`` are the
    unit's variables, and ``give_back`` returns it."""

    def take(self, attempt_id: str, env: Mapping[str, str]) -> Any: ...

    def give_back(self, held: Any, env: Mapping[str, str]) -> None: ...


def run_unit(spec: dict[str, Any], bundle: bytes | None) -> dict[str, Any]:
    """Run one attempt (``spec``, made by ``client``) from ``bundle`` (the base); returns the
    payload ``remote.RemoteWorker`` lands. Never raises for what the unit did."""
    from distributed import get_worker


    worker = get_worker()
    s = settings.current()
    aid = spec["attempt_id"]
    root = os.path.join(s.user_state, "cluster")
    out: dict[str, Any] = {"attempt_id": aid, "worker": worker.address,
                           "received_at": time.time()}
    refused = _mark(worker, root, aid)
    if refused:
        out.update(refused=refused, refused_by="claimed")
        return out
    claim = _claim(worker, aid)   # answered while the workspace is made
    entry = Running()
    with LOCK:
        RUNNING[aid] = entry
    unit_dir = os.path.join(root, "units", _safe(aid))
    try:
        _run(spec, bundle, root, unit_dir, entry, worker, out, claim)
    except Exception as e:  # the workspace or the dispatcher's preparation failed
        from ..errors import PrunError

        out["launch_error"] = e.line() if isinstance(e, PrunError) else f"{type(e).__name__}: {e}"
    finally:
        entry.ended.set()
        with LOCK:
            RUNNING.pop(aid, None)
        _CLEANER.submit(shutil.rmtree, unit_dir, ignore_errors=True)   # off the unit's path
    out["returned_at"] = time.time()
    entry.out = out
    entry.returned.set()
    return _send(worker, spec["topic"], aid, out)


def _send(worker: Any, topic: str, aid: str, out: dict[str, Any]) -> dict[str, Any]:
    """A small payload goes back as the run's last event for this attempt (the scheduler
    relays it at once; no fetch from this worker afterwards), and the task returns only that
    it did; a large one is the task's return value."""
    if len(pickle.dumps(out, protocol=5)) > EVENT_PAYLOAD_BYTES:
        return out
    worker.log_event(topic, {"a": aid, "k": "end", "p": out})
    return {"attempt_id": aid, "by_event": True}


def _mark(worker: Any, root: str, aid: str) -> str | None:
    """This worker's marker of ``aid`` (O_EXCL): None, or why it must not run again."""
    marks = os.path.join(root, "launched")
    os.makedirs(marks, exist_ok=True)
    try:
        fd = os.open(os.path.join(marks, _safe(aid)), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return f"attempt {aid} was launched on this worker already; it is not run twice"
    os.write(fd, worker.address.encode())
    os.close(fd)
    return None


def _claim(worker: Any, aid: str) -> Future[claims.Refusal | None]:
    """Claim ``aid`` in the scheduler's record (``claim``), in the worker's event loop: this
    worker's entry first, then the record read back. The answer is None, or why it must not
    run (launched already on another worker, cancelled before it started, given up)."""
    async def ask() -> claims.Refusal | None:
        await worker.scheduler.set_metadata(keys=claims.keys(aid, worker.id),
                                            value=worker.address)
        record = await worker.scheduler.get_metadata(keys=claims.keys(aid), default=None)
        return claims.verdict(record, worker.id, aid)

    return asyncio.run_coroutine_threadsafe(ask(), worker.loop.asyncio_loop)


def _safe(aid: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in aid)


def _run(spec: dict[str, Any], bundle: bytes | None, root: str, unit_dir: str,
         entry: Running, worker: Any, out: dict[str, Any],
         claim: Future[claims.Refusal | None]) -> None:
    """Workspace, ports, dispatch, watch, and what comes back (into ``out``)."""
    ws, snapshot, start = place(spec, bundle, root, unit_dir, _env())
    out["placed_at"] = time.time()
    ports: WorkerPorts | None = spec.get("ports")
    held = _take_ports(ports, spec["attempt_id"], entry) if ports is not None else None
    if ports is not None and held is None:
        out.update(refused=f"attempt {spec['attempt_id']} was cancelled while it waited for "
                           "its ports", refused_by=claims.CANCEL)
        return
    try:
        _dispatch(spec, root, unit_dir, ws, snapshot, start, held.env() if held else {},
                  entry, worker, out, claim)
    finally:
        if ports is not None:
            ports.give_back(held, _env())


def _take_ports(ports: WorkerPorts, aid: str, entry: Running) -> Any:
    """The unit's ports, reserved on this machine before it starts. A fixed port another
    unit here holds, or no room left, is waited for; None if the unit is stopped
    meanwhile."""
    while True:
        try:
            return ports.take(aid, _env())
        except PortsUnavailable:
            if entry.stopping.wait(PORT_RETRY_S):
                return None


def _dispatch(spec: dict[str, Any], root: str, unit_dir: str, ws: str, snapshot: str | None,
              start: Start | None, held: dict[str, str], entry: Running, worker: Any,
              out: dict[str, Any], claim: Future[claims.Refusal | None]) -> None:
    """The unit through the dispatcher's ``Dispatch``, once the claim says it may run."""
    state = statedir.create(spec["unit_id"], os.path.join(unit_dir, "state"))
    request = _request(spec, unit_dir, state.path, ws, snapshot, root, held)
    d = Dispatch(prepare(request), LocalLauncher(durable=False), state)
    begin(d)   # all on this worker's own files: nothing runs before the claim is answered
    admit(d, gate=False)   # no quota gate: the coordinator asked it
    out["begun_at"] = time.time()
    refused = claim.result(CLAIM_S)
    out["claimed_at"] = time.time()
    if refused is None and entry.signalled is not None:
        refused = claims.Refusal(claims.CANCEL, f"attempt {spec['attempt_id']} was "
                                                "cancelled before it started")
    if refused is not None:
        out.update(refused=refused.text, refused_by=refused.by)
        return
    launched = launch(d)
    out["sandboxed"] = d.sandboxed
    if not launched:
        out["launch_error"] = d.launch_error
        return
    w = d.running()
    guard = None if d.sandboxed else _guard(w.pid, d.p.config.kill_grace_s)
    with entry.lock:
        entry.worker = w
        if entry.signalled is not None:   # cancelled while it was being launched
            w.signal(entry.signalled)
    out.update(pid=w.pid, create_time=(d.state.worker or {}).get("create_time"),
               launched_at=d.launched_at, ports=held)
    topic = spec["topic"]
    worker.log_event(topic, {"a": spec["attempt_id"], "k": "start", "pid": w.pid,
                             "w": worker.address, "t": d.launched_at,
                             "sandboxed": d.sandboxed, "ports": held})
    try:
        code, timed_out, sent = _watch(d, w, entry, worker, topic, spec)
        out.update(exit_code=code, worker_timeout=timed_out, signalled=entry.signalled,
                   group_gone=_group_gone(w.pid), exited_at=time.time())
    finally:
        if guard is not None:
            guard.stand_down()
        entry.ended.set()
    sent = _push_rest(worker, topic, spec["attempt_id"], d.state.file(statedir.TAIL), sent,
                      entry)
    out["tail_from"] = sent
    out["tail"] = _read_from(d.state.file(statedir.TAIL), sent)   # what could not be pushed
    out["stderr"] = _read_end(d.state.file(statedir.STDERR), STDERR_BYTES)
    outbox = d.write_path
    out["outbox"] = _read_from(outbox, 0) if os.path.exists(outbox) else None
    out["patch"] = _diff(ws, start) if start else b""


def _guard(pgid: int, grace: float) -> Any:
    return guard(pgid, grace)


def _env() -> dict[str, str]:
    return dict(settings.current().env)


def _request(spec: dict[str, Any], unit_dir: str, state_dir: str, ws: str,
             snapshot: str | None, root: str, ports: dict[str, str]) -> Any:
    """The dispatcher's request on this worker: the coordinator's, its paths made this
    worker's (the brief names the coordinator's state dir, workspace and snapshot), with the
    variables of the ports reserved here."""
    result = os.path.join(unit_dir, "results", spec["result_name"])
    os.makedirs(os.path.dirname(result), exist_ok=True)
    prompt_file = os.path.join(unit_dir, "prompt.md")
    mine = {"state": state_dir, "workspace": ws,
            "snapshot": snapshot or "", "prompt": prompt_file}
    paths = sorted(((local, mine[role]) for local, role in spec["paths"] if local and mine[role]),
                   key=lambda p: -len(p[0]))

    def here(text: str) -> str:
        for local, own in paths:
            text = text.replace(local, own)
        return text

    with open(prompt_file, "w") as f:
        f.write(here(spec["prompt"]))
    continue_from = None
    if spec.get("conversation_id"):
        continue_from = os.path.join(unit_dir, "earlier")
        os.makedirs(continue_from, exist_ok=True)
        with open(os.path.join(continue_from, statedir.CONVERSATION_ID), "w") as f:
            f.write(spec["conversation_id"])
    read_only = tuple(p for p in (os.path.join(root, "bases"), snapshot) if p)
    return Request(
        executor=spec["executor"], prompt_file=prompt_file, result_file=result,
        unit_id=spec["unit_id"], mode=spec["mode"], continue_from=continue_from,
        command=spec["command"], model=spec["model"], effort=spec["effort"],
        timeout_s=spec["timeout_s"], workspace=ws, state_root=os.path.dirname(state_dir),
        env=_env(), attempt_id=spec["attempt_id"],
        extra_env={**{k: here(v) for k, v in spec["extra_env"].items()}, **ports}, briefed=True,
        sandbox=spec["sandbox"], outbox=True, read_only=read_only,
        add_dirs=(snapshot,) if snapshot else (), config=settings.current())


def _watch(d: Dispatch, w: Any, entry: Running, worker: Any, topic: str,
           spec: dict[str, Any]) -> tuple[int | None, bool, int]:
    """Until the unit exits (or the worker's backstop deadline passes), pushing the tail's
    growth every PUSH_S. Returns (exit code, timed out here, tail bytes pushed)."""
    tail = d.state.file(statedir.TAIL)
    sent, timed_out = 0, False
    aid = spec["attempt_id"]
    while True:
        left = d.deadline + DEADLINE_MARGIN_S - time.time()
        if left <= 0:
            end_group(w, d.p.config.kill_grace_s)
            timed_out = True
            break
        if w.wait_exit(min(left, PUSH_S)):
            break
        sent = _push(worker, topic, aid, tail, sent, entry)
    if not timed_out:
        w.sweep()
    with entry.lock:
        entry.reaped = True
        code = w.reap()
    return code, timed_out, sent


def _push(worker: Any, topic: str, aid: str, tail: str, sent: int, entry: Running) -> int:
    """While the unit runs: the tail's bytes past ``sent`` (a chunk at most), unless the
    window is full (the supervisor has not said it wrote them: it is slow, or gone); the
    new offset."""
    if sent - entry.landed >= WINDOW * CHUNK_BYTES:
        return sent
    data = _read_chunk(tail, sent)
    return _send_tail(worker, topic, aid, sent, data, entry) if data else sent


def _push_rest(worker: Any, topic: str, aid: str, tail: str, sent: int,
               entry: Running) -> int:
    """After the unit's end: the rest of its tail as events, a chunk at a time, never more
    than ``WINDOW`` chunks ahead of what the supervisor says it has written
    (``running.landed_tail``): the scheduler and the supervisor hold a few chunks of it at
    most, and none comes inside the task's return. Returns the offset the task's return
    carries the tail from: the end, or, when the supervisor has not answered for
    ``LANDED_S`` (it is gone, or stalled), what it said it wrote (nothing is lost)."""
    while True:
        if not entry.wait_landed(sent - (WINDOW - 1) * CHUNK_BYTES, LANDED_S):
            return entry.landed
        data = _read_chunk(tail, sent)
        if not data:
            return sent
        sent = _send_tail(worker, topic, aid, sent, data, entry)


def _send_tail(worker: Any, topic: str, aid: str, sent: int, data: bytes,
               entry: Running) -> int:
    """One chunk of the tail at ``sent`` as an event; past half the window unacknowledged,
    it asks the supervisor to say how much it has written (``running.landed_tail``)."""
    end = sent + len(data)
    ack = end - entry.landed >= WINDOW * CHUNK_BYTES // 2
    worker.log_event(topic, {"a": aid, "k": "tail", "o": sent, "b": data, "ack": ack})
    return end


def _read_chunk(path: str, offset: int) -> bytes:
    """At most CHUNK_BYTES of ``path`` from ``offset`` (empty at its end or when unreadable)."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read(CHUNK_BYTES)
    except OSError:
        return b""


def _group_gone(pgid: int) -> bool:
    """No process is left in the unit's group, within GROUP_GONE_S: every member was sent
    SIGKILL already (the sweep), so what is left is a zombie its new parent has still to
    reap (its leader is reaped: nothing more is signalled)."""
    end = time.monotonic() + GROUP_GONE_S
    delay = 0.005
    while True:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        if time.monotonic() >= end:
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


def _read_from(path: str, offset: int) -> bytes:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read()
    except OSError:
        return b""


def _read_end(path: str, limit: int) -> bytes:
    try:
        return tail_bytes(path, limit)
    except OSError:
        return b""


def _diff(ws: str, start: Start) -> bytes:
    return diff_since(start)


def carry(data: bytes) -> bytes:
    """The bundle's task: its value is its argument (made again from the graph if the worker
    holding it dies)."""
    return data
