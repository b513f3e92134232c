"""Recovery: a supervisor started on a run whose supervisor died (``prun resume``) picks it up
from the ledger and the state dirs, and launches nothing twice.

Finished packets stay finished; ledger rows a crash cut short are completed from the state
dirs (each ``unit.json`` names its attempt); a packet whose last attempt is terminal but not
final (quota, reassignment, no receipt) gets its next attempt; an attempt recorded but never
launched is closed and launched again; a worker still running is re-attached (pidfd) and
watched to its end; one that finished meanwhile is judged from what it left (its
``outcome.json``, else its stream and the exit code its keeper logged).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from ..attempt import statedir
from ..attempt.dispatch import Request
from ..attempt.outcome import Outcome
from ..ledger import PACKET_STATUS, PacketStatus, Status, now_iso
from .drive import watch
from .settle import settle
from .unit import UnitState

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .._util.process import WorkerLike as RunWorker
    from .supervisor import Supervisor


def recover(sup: Supervisor) -> None:
    """Pick the run up from the ledger: finished packets stay finished, attempts an
    earlier supervisor launched are re-attached or judged, nothing is launched twice."""
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


def recover_unit(sup: Supervisor, u: UnitState, last: dict[str, Any]) -> None:
    """A packet with attempts (``last`` its latest): left as it is, its next attempt due,
    or its running attempt adopted."""
    u.attempt_id = last["id"]
    u.executor = last["executor"] or u.executor
    u.state_dir, u.workspace = last["state_dir"], last["workspace"]
    u.result_file, u.attempt_base = last["result_path"], last["base"]
    status = Status(last["status"])
    if status.terminal:
        return after_terminal(sup, u, status)
    launched = bool(last["state_dir"]) and launch_evidence(statedir.StateDir(last["state_dir"]))
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


def launch_evidence(sd: statedir.StateDir) -> bool:
    """Whether the attempt of ``sd`` started a worker, from what is on disk: ``unit.json``'s
    worker; else its keeper's ``spawned`` line (the supervisor died between the spawn and
    recording it), else a live process that runs with its state dir, else a stream it wrote.
    What is found is written into ``unit.json``, so the worker is re-attached or judged, and
    never launched a second time."""
    from ..attempt.exitlog import logged_spawn

    if sd.worker or sd.unit.get("remote"):   # a local worker, or a task sent to a cluster
        return True
    found = logged_spawn(sd) or _running_with(sd.path)
    if found is None:
        return os.path.getsize(sd.file(statedir.TAIL)) > 0 if os.path.exists(
            sd.file(statedir.TAIL)) else False
    pid, start = found
    unit = dict(sd.unit)
    unit["worker"] = {**statedir.worker_entry(pid, start, start), "found_by": "recovery"}
    sd.write_json(statedir.UNIT, unit)
    return True


def _running_with(state_dir: str) -> tuple[int, float] | None:
    """A live process whose environment names ``state_dir`` (``PRUN_STATE_DIR``): a worker
    whose keeper died before it could log its start."""
    import psutil

    for p in psutil.process_iter(["pid", "create_time"]):
        try:
            if p.environ().get("PRUN_STATE_DIR") == state_dir:
                return p.info["pid"], p.info["create_time"]
        except (psutil.Error, OSError):
            continue
    return None


def _prompt_seqs(sup: Supervisor) -> dict[str, int]:
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


def after_terminal(sup: Supervisor, u: UnitState, status: Status) -> None:
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


def find_unrecorded(sup: Supervisor) -> None:
    """Attempts whose state dir exists but whose ledger rows a crash cut short (the
    supervisor batches its writes): complete them from the state dir's unit.json."""
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
        aid = unit.get("attempt_id")
        pid = unit.get("unit_id")
        if not aid or pid not in sup.units:
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
                status=Status.DISPATCHED)
        elif not row["state_dir"]:
            sup.ledger.update_attempt(aid, "state dir found after a crash",
                                      state_dir=sd.path)


async def adopt(sup: Supervisor, u: UnitState, row: dict[str, Any]) -> None:
    """An attempt an earlier supervisor launched: re-attach to its worker if it still runs,
    else judge it from its state dir."""
    from .._util.process import AdoptedWorker
    from ..attempt.dispatch import recorded_exit, reopen

    sd = statedir.StateDir(row["state_dir"])
    u.state_dir = sd.path
    unit = sd.unit
    done = sd.outcome
    if done is not None:  # finished and judged; only the ledger missed it
        from .. import executors

        return settle(sup, u, Outcome.from_json(done), None,
                      executor=executors.get(unit.get("executor", "command")),
                      workspace=unit.get("workspace"))
    d = reopen(request(sup, u, row, sd), sd.path)
    u.started = d.launched_at
    if unit.get("remote"):   # its task's result went to the supervisor that died with it
        return await orphaned(sup, u, d)
    w = unit.get("worker") or {}
    pid, fd = w.get("pid"), still_running(w)
    if pid is not None and fd is not None:
        sd.write(statedir.DISPATCH_PID, str(os.getpid()))
        worker: RunWorker = AdoptedWorker(pid, fd)
        d.worker = worker
        sup.ledger.update_attempt(row["id"], "re-attached by a resumed supervisor",
                                  status=Status.RUNNING)
        sup.emit("reattached", u)
        return await watch(sup, u, d)
    code = await asyncio.to_thread(recorded_exit, sd, True)  # the keeper may be logging it
    settle(sup, u, d.finish(code), None, executor=d.p.executor, workspace=d.workspace)


async def orphaned(sup: Supervisor, u: UnitState, d: Any) -> None:
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
    settle(sup, u, await asyncio.to_thread(d.finish, None, cancelled=why is not None), why,
           executor=d.p.executor, workspace=d.workspace, quiet=quiet)


def request(sup: Supervisor, u: UnitState, row: dict[str, Any],
            sd: statedir.StateDir) -> Request:
    """The request of the attempt in ``row``, as its state dir and the ledger recorded it.
    A prompt copy that a crash left missing or empty is restored first: from the attempt's
    frozen brief (``prompts/<packet>.<n>.md``), else from the packet's prompt in the ledger."""
    from .._util.fsutil import atomic_write, file_size, read_text

    unit = sd.unit
    if file_size(sd.file(statedir.PROMPT)) == 0:
        frozen = read_text(str(sup.paths.prompts / f"{u.packet.id}.{row['seq']}.md"))
        atomic_write(sd.file(statedir.PROMPT), frozen or u.packet.prompt)
    return Request(executor=row["executor"], prompt_file=sd.file(statedir.PROMPT),
                   result_file=row["result_path"], unit_id=u.packet.id,
                   mode=unit.get("mode") or row["mode"], continue_from=row["continue_from"],
                   command=u.packet.command if row["executor"] == "command" else None,
                   model=row["requested_model"], effort=u.packet.effort,
                   timeout_s=unit.get("timeout_s") or u.packet.timeout_s,
                   workspace=unit.get("workspace"), state_root=str(sup.paths.state),
                   env=sup.env, attempt_id=row["id"])


def still_running(worker: dict[str, Any]) -> int | None:
    """A pidfd of the worker unit.json records, if that very process still runs (its pid
    and start time), else None."""
    from .._util.process import same_process_alive

    pid, started = worker.get("pid"), worker.get("create_time")
    if pid is None or not same_process_alive(pid, started):
        return None
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return None
    if not same_process_alive(pid, started):  # it ended, and its pid was taken, meanwhile
        os.close(fd)
        return None
    return fd
