"""Recovery: a supervisor started on a run whose supervisor died (``prun resume``) picks it up
from the ledger and the state dirs, and launches nothing twice. An attempt that succeeded but
whose result could not be written (a full disk) is published now from its state dir.

Finished packets stay finished; ledger rows a crash cut short are completed from the state
dirs (each ``unit.json`` names its attempt); a packet whose last attempt is terminal but not
final (quota, reassignment, no receipt) gets its next attempt; an attempt recorded but never
launched is closed and launched again; a worker still running (a unit under its monitor,
which outlives the keeper: ``attempt.monitor``) is re-attached (pidfd) and watched to its end;
one that finished meanwhile is judged from what it left (its ``outcome.json``, else its stream
and the exit code its monitor wrote, else the one its keeper logged). What such a unit left
outside its process group while no keeper ran (an unsandboxed unit's ``setsid`` child that
kept its environment) is ended with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable, Coroutine
from dataclasses import replace
from typing import Any

import psutil

from .._util.fsutil import atomic_write, file_size, read_text
from .._util.process import AdoptedWorker, end_marked, same_process_alive
from .._util.worker import WorkerLike as RunWorker
from ..attempt import identity, statedir
from ..attempt.dispatch import Request, finish, recorded_exit, reopen
from ..attempt.finishing import UNPUBLISHED
from ..attempt.monitor import STATE_DIR_VAR
from ..attempt.outcome import Outcome
from ..ledger import PACKET_STATUS, PacketStatus, Status, now_iso
from .context import RunContext
from .ends import End
from .life import settle, watch
from .state import RunState
from .unit import UnitState

Start = Callable[[UnitState, Coroutine[Any, Any, End]], None]
"""The loop's way to run a unit's task (a re-attached or re-judged attempt) to its end."""


class Recovering:
    """What recovery reports to: the run's state (packet statuses, events), its context (the
    ledger, paths, cluster) and the loop's ``start`` for the tasks of adopted attempts."""

    def __init__(self, state: RunState, ctx: RunContext, start: Start):
        self.state, self.ctx, self.start = state, ctx, start
        self.units, self.ledger, self.run_id = state.units, ctx.ledger, state.run_id
        self.paths, self.env, self.settings = ctx.paths, ctx.env, ctx.settings
        self.set_packet, self.emit = state.set_packet, ctx.emit

    @property
    def cluster(self) -> Any:
        return self.ctx.cluster


def recover(state: RunState, ctx: RunContext, start: Start) -> None:
    """Pick the run up from the ledger: finished packets stay finished, attempts an
    earlier supervisor launched are re-attached or judged, nothing is launched twice.
    Packet statuses go to ``state``; an adopted attempt's task is started with ``start``
    and returns its end to the loop."""
    sup = Recovering(state, ctx, start)
    find_unrecorded(sup)
    attempts: dict[str, list[dict[str, Any]]] = {}
    for a in sup.ledger.attempts(sup.run_id):
        attempts.setdefault(a["packet_id"], []).append(dict(a))
    used = _prompt_seqs(sup)
    for pid, u in sup.units.items():
        rows = attempts.get(pid, [])
        u.seq = max(len(rows), used.get(pid, 0))  # an attempt id is never given twice
        if rows:
            recover_unit(sup, u, rows[-1])
        elif u.status in (PacketStatus.RUNNING, PacketStatus.PARKED):
            sup.set_packet(u, PacketStatus.PENDING, "to be launched")
    unblock(sup)


def unblock(sup: Recovering) -> None:
    """A packet blocked behind one that is judged again now (its result published once a
    full disk allows it), directly or through another, is pending again: the scheduler
    decides about it once what it comes after has ended."""
    changed = True
    while changed:
        changed = False
        for u in sup.units.values():
            if u.status == PacketStatus.BLOCKED and any(
                    a in sup.units and not sup.units[a].status.terminal
                    for a in u.packet.after):
                sup.set_packet(u, PacketStatus.PENDING, "what it comes after is judged again")
                changed = True


def recover_unit(sup: Recovering, u: UnitState, last: dict[str, Any]) -> None:
    """A packet with attempts (``last`` its latest): left as it is, its next attempt due,
    or its running attempt adopted."""
    u.attempt_id = last["id"]
    u.executor = last["executor"] or u.executor
    u.state_dir, u.workspace = last["state_dir"], last["workspace"]
    u.result_file, u.attempt_base = last["result_path"], last["base"]
    status = Status(last["status"])
    if status == Status.FAILED and last["reason"] in UNPUBLISHED and last["state_dir"]:
        sup.set_packet(u, PacketStatus.RUNNING, "its result is published from its state dir")
        return sup.start(u, republish(sup, u, last))
    if status.terminal:
        return after_terminal(sup, u, status)
    launched = bool(last["state_dir"]) and launch_evidence(statedir.StateDir(last["state_dir"]),
                                                           last["receipt"])
    if not launched:  # the earlier supervisor died before this one started
        sup.ledger.update_attempt(last["id"], "the supervisor died before its launch",
                                  status=Status.CANCELLED, reason="never-launched",
                                  finished_at=now_iso())
        u.predecessor = last["id"]
        sup.set_packet(u, PacketStatus.PENDING, "to be launched again")
        return
    if u.status != PacketStatus.RUNNING:
        sup.set_packet(u, PacketStatus.RUNNING, "launched by an earlier supervisor")
    u.cancel_requested = status == Status.CANCEL_REQUESTED
    sup.start(u, adopt(sup, u, last))


def launch_evidence(sd: statedir.StateDir, receipt: str | None = None) -> bool:
    """Whether the attempt of ``sd`` started a worker: its ledger ``receipt`` or its keeper's
    ``spawned`` line (``identity.worker``; the supervisor died between the spawn and
    recording it); else a live process that runs with its state dir; else what its state dir
    shows (``unit.json``'s worker or a cluster task, a stream it wrote). What the state dir
    shows is evidence that a launch happened (so it is never launched a second time), never
    the identity of a process to re-attach to or signal."""
    if identity.worker(sd, receipt) or sd.worker or sd.unit.get("remote"):
        return True
    return _running_with(sd.path) is not None or file_size(sd.file(statedir.TAIL)) > 0


def _running_with(state_dir: str) -> tuple[int, float] | None:
    """A live process whose environment names ``state_dir`` (``PRUN_STATE_DIR``): a worker
    whose keeper died before it could log its start; the one that leads its own group (the
    unit's monitor) when there is one. Only the unit's own processes carry it (the keeper
    sets it for the worker alone): what is found is the unit's, whatever its state dir
    says."""
    found = None
    for p in psutil.process_iter(["pid", "create_time"]):
        try:
            if p.environ().get(STATE_DIR_VAR) == state_dir:
                if os.getpgid(p.info["pid"]) == p.info["pid"]:
                    return p.info["pid"], p.info["create_time"]
                found = found or (p.info["pid"], p.info["create_time"])
        except (psutil.Error, OSError):
            continue
    return found


class Reattached(AdoptedWorker):
    """A worker an earlier supervisor started, re-attached: watched by its pidfd. SIGKILL to
    its group (after its grace, or as it is swept once it exited) also ends what it left
    outside its group that still carries its state dir: no keeper may be left to end that
    (``escaped`` lists them)."""

    __slots__ = ("escaped", "since", "state_dir")

    def __init__(self, pid: int, pidfd: int, state_dir: str, since: float):
        super().__init__(pid, pidfd)
        self.state_dir, self.since = state_dir, since
        self.escaped: list[dict[str, Any]] = []

    def signal(self, sig: int) -> None:
        super().signal(sig)
        if sig == signal.SIGKILL:
            self.escaped += end_marked(STATE_DIR_VAR, self.state_dir, self.since)


def _prompt_seqs(sup: Recovering) -> dict[str, int]:
    """The highest attempt number each packet's frozen prompts show (``<packet>.<n>.md`` is
    written for attempt n before it begins): the floor of the next attempt's number."""
    seqs: dict[str, int] = {}
    try:
        names = os.listdir(sup.paths.prompts)
    except OSError:
        return seqs
    for name in names:
        stem, _, ext = name.rpartition(".")
        pid, _, n = stem.rpartition(".")
        if ext == "md" and n.isdigit():
            seqs[pid] = max(seqs.get(pid, 0), int(n))
    return seqs


def after_terminal(sup: Recovering, u: UnitState, status: Status) -> None:
    """The latest attempt of ``u`` has ended (``status``): a finished packet stays so, one
    whose row missed the attempt's final status gets it, and after a quota stop, a
    reassignment or no receipt the next attempt is due."""
    aid = u.current_attempt
    if u.status.terminal:
        return
    if u.status == PacketStatus.RUNNING and status in PACKET_STATUS:
        # judged, but the packet's own row missed it: settle it, run nothing
        sup.set_packet(u, PACKET_STATUS[status], f"{aid} {status.value}")
        return
    # pending or parked after a quota stop, a reassignment or no receipt
    u.predecessor = aid
    if status == Status.QUOTA:
        from .. import executors

        u.carry_on(executors.get(u.executor), None,
                   because=f"A quota limit stopped your earlier attempt {aid}.")
    if u.status != PacketStatus.PENDING:
        sup.set_packet(u, PacketStatus.PENDING, "a follow-up attempt is due")


def find_unrecorded(sup: Recovering) -> None:
    """Attempts whose state dir exists but whose ledger rows a crash cut short (the
    supervisor died between its writes): complete them from the state dir's unit.json."""
    known = {a["id"]: dict(a) for a in sup.ledger.attempts(sup.run_id)}
    try:
        names = os.listdir(sup.paths.state)
    except OSError:
        return
    for name in sorted(names):
        if name.startswith("."):  # the exit-code log, shared copies
            continue
        sd = statedir.StateDir(str(sup.paths.state / name))
        unit = sd.unit
        aid, pid = unit.get("attempt_id"), unit.get("unit_id")
        if not isinstance(pid, str) or pid not in sup.units or not isinstance(aid, str) \
                or not _attempt_of(aid, sup.run_id, pid) or not name.startswith(pid + "-"):
            continue
        row = known.get(aid)
        if row is None:
            sup.ledger.record_attempt(
                aid, "found in its state dir after a crash", run_id=sup.run_id,
                packet_id=pid, seq=int(aid.rsplit(":", 1)[-1]),
                executor=unit.get("executor"), requested_model=unit.get("requested_model"),
                model=unit.get("model"), mode=unit.get("mode"),
                workspace=unit.get("workspace"), state_dir=sd.path,
                result_path=unit.get("result_file"), continue_from=unit.get("continue_from"),
                status=Status.DISPATCHED, candidate=sup.units[pid].packet.candidate)
        elif not row["state_dir"]:
            sup.ledger.update_attempt(aid, "state dir found after a crash",
                                      state_dir=sd.path)


def _attempt_of(aid: str, run_id: str, packet_id: str) -> bool:
    """Whether ``aid`` is an attempt id of ``packet_id`` in ``run_id`` (``RUN:PACKET:N``)."""
    prefix = f"{run_id}:{packet_id}:"
    return aid.startswith(prefix) and aid[len(prefix):].isdigit()


async def adopt(sup: Recovering, u: UnitState, row: dict[str, Any]) -> End:
    """An attempt an earlier supervisor launched: re-attach to its worker if it still runs
    (found through records its unit cannot write, ``identity.worker``), else judge it from
    its state dir (its ``outcome.json`` when it was judged already)."""
    sd = statedir.StateDir(row["state_dir"])
    u.state_dir = sd.path
    unit = sd.unit
    found = None if unit.get("remote") else (identity.worker(sd, row["receipt"])
                                              or _running_with(sd.path))
    fd = still_running(found) if found else None
    done = sd.outcome if fd is None else None   # a live worker has not been judged
    if done is not None:  # finished and judged; only the ledger missed it
        from .. import executors

        judged = replace(Outcome.from_json(done), result_file=row["result_path"],
                         state_dir=sd.path)   # where prun published it: the ledger says
        return settle(sup.ctx, u, judged, None, executor=executors.get(row["executor"] or "command"),
                      workspace=row["workspace"])
    d = reopen(request(sup, u, row, sd), sd.path, row["receipt"])
    u.started = d.launched_at
    if unit.get("remote"):   # its task's result went to the supervisor that died with it
        return await orphaned(sup, u, d)
    if found is not None and fd is not None:
        with contextlib.suppress(OSError):   # the human record (a full disk: left as it was)
            sd.write(statedir.DISPATCH_PID, str(os.getpid()))
        worker: RunWorker = Reattached(found[0], fd, sd.path, found[1])
        d.worker = worker
        sup.ledger.update_attempt(row["id"], "re-attached by a resumed supervisor",
                                  status=Status.RUNNING)
        sup.emit("reattached", u)
        return await watch(sup.ctx, u, d)
    # it ended while no supervisor ran: what it left behind goes first, as a keeper would
    d.escaped = await asyncio.to_thread(end_marked, STATE_DIR_VAR, sd.path,
                                        found[1] if found else None)
    code = await asyncio.to_thread(recorded_exit, sd, True)  # the keeper may be logging it
    return settle(sup.ctx, u, finish(d, code), None, executor=d.p.executor,
                  workspace=d.workspace)


async def republish(sup: Recovering, u: UnitState, row: dict[str, Any]) -> End:
    """An attempt that succeeded but whose result could not be written (``disk-full``,
    ``publish-failed``): judged again from what its state dir kept (its stream, the exit
    code the ledger recorded) and its result published now, so that its packet ends as it
    would have. Nothing is launched."""
    sd = statedir.StateDir(row["state_dir"])
    u.state_dir = sd.path
    d = reopen(request(sup, u, row, sd), sd.path, row["receipt"])
    u.started = d.launched_at
    outcome = await asyncio.to_thread(finish, d, row["exit_code"])
    sup.emit("republished", u, outcome.reason)
    return settle(sup.ctx, u, outcome, None, executor=d.p.executor, workspace=d.workspace)


async def orphaned(sup: Recovering, u: UnitState, d: Any) -> End:
    """A cluster attempt whose supervisor died: its result cannot be collected any more, so
    it is ended on its worker (when the cluster is reachable; its diff is landed) and fails
    as ``worker-lost`` (cancelled, when a cancel was asked for); it is never launched again
    unless the plan allows a successor."""
    quiet = True
    if sup.cluster is not None and d.p.request.attempt_id:
        try:
            quiet = await asyncio.to_thread(sup.cluster.end_orphan, d.p.request.attempt_id,
                                            d.state.path, d.workspace, sup.settings.kill_grace_s)
        except Exception:  # the scheduler is gone too: nothing left to end there
            pass
    d.lost = ("worker-lost", "the supervisor that sent it to the cluster died; its result "
              "could not be collected")
    why = "cancelled" if u.cancel_requested else None
    return settle(sup.ctx, u, await asyncio.to_thread(finish, d, None,
                                                      cancelled=why is not None), why,
                  executor=d.p.executor, workspace=d.workspace, quiet=quiet)


def request(sup: Recovering, u: UnitState, row: dict[str, Any],
            sd: statedir.StateDir) -> Request:
    """The request of the attempt in ``row``, as its state dir and the ledger recorded it.
    A prompt copy that a crash left missing or empty is restored first: from the attempt's
    frozen brief (``prompts/<packet>.<n>.md``), else from the packet's prompt in the ledger."""
    if file_size(sd.file(statedir.PROMPT)) == 0:
        frozen = read_text(str(sup.paths.prompts / f"{u.packet.id}.{row['seq']}.md"))
        atomic_write(sd.file(statedir.PROMPT), frozen or u.packet.prompt)
    return Request(executor=row["executor"], prompt_file=sd.file(statedir.PROMPT),
                   result_file=row["result_path"], unit_id=u.packet.id,
                   mode=row["mode"] or u.packet.effective_mode,
                   continue_from=row["continue_from"],
                   command=u.packet.command if row["executor"] == "command" else None,
                   model=row["requested_model"], effort=u.packet.effort,
                   timeout_s=u.packet.timeout_s,
                   workspace=row["workspace"], state_root=str(sup.paths.state),
                   env=sup.env, attempt_id=row["id"])


def still_running(worker: tuple[int, float]) -> int | None:
    """A pidfd of ``worker`` (pid, start time: ``identity.worker``) if that very process
    still runs, else None."""
    pid, started = worker
    if not same_process_alive(pid, started):
        return None
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return None
    if not same_process_alive(pid, started):  # it ended, and its pid was taken, meanwhile
        os.close(fd)
        return None
    return fd
