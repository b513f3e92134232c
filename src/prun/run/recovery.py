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
import contextlib
import os

from ..attempt import statedir
from ..attempt.outcome import Outcome
from ..ledger import PACKET_STATUS, PacketStatus, Status, now_iso
from .drive import watch
from .settle import settle
from .unit import UnitState

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .supervisor import Supervisor


def recover(sup: Supervisor) -> None:
    """Pick the run up from the ledger: finished packets stay finished, attempts an
    earlier supervisor launched are re-attached or judged, nothing is launched twice."""
    find_unrecorded(sup)
    attempts: dict[str, list] = {}
    for a in sup.ledger.attempts(sup.run_id):
        attempts.setdefault(a["packet_id"], []).append(dict(a))
    for pid, u in sup.units.items():
        rows = attempts.get(pid, [])
        u.seq = len(rows)
        if not rows:
            if u.status in (PacketStatus.RUNNING, PacketStatus.PARKED):
                sup.set_packet(u, PacketStatus.PENDING, "to be launched")
            continue
        last = rows[-1]
        u.attempt_id = last["id"]
        u.executor = last["executor"] or u.executor
        u.state_dir, u.workspace = last["state_dir"], last["workspace"]
        u.result_file, u.attempt_base = last["result_path"], last["base"]
        status = Status(last["status"])
        if status.terminal:
            if u.status.terminal:
                continue
            if u.status == PacketStatus.RUNNING and status in PACKET_STATUS:
                # judged, but the packet's own row missed it: settle it, run nothing
                sup.set_packet(u, PACKET_STATUS[status], f"{last['id']} {status.value}")
                continue
            # pending or parked after a quota stop, a reassignment or no receipt
            u.predecessor = last["id"]
            if status == Status.QUOTA:
                from .. import executors

                u.carry_on(executors.get(u.executor), None,
                           because=f"A quota limit stopped your earlier attempt {last['id']}.")
            if u.status != PacketStatus.PENDING:
                sup.set_packet(u, PacketStatus.PENDING, "a follow-up attempt is due")
            continue
        launched = last["state_dir"] and statedir.StateDir(last["state_dir"]).worker
        if not launched:  # the earlier supervisor died before this one started
            sup.ledger.update_attempt(last["id"], "the supervisor died before its launch",
                                      status=Status.CANCELLED, reason="never-launched",
                                      finished_at=now_iso())
            u.predecessor = last["id"]
            sup.set_packet(u, PacketStatus.PENDING, "to be launched again")
            continue
        if u.status != PacketStatus.RUNNING:
            sup.set_packet(u, PacketStatus.RUNNING, "launched by an earlier supervisor")
        u.cancel_requested = status == Status.CANCEL_REQUESTED
        sup.start(u, adopt(sup, u, last))


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


async def adopt(sup: Supervisor, u: UnitState, row: dict) -> None:
    """An attempt an earlier supervisor launched: re-attach to its worker if it still runs,
    else judge it from its state dir."""
    from .._util.process import AdoptedWorker, same_process_alive
    from ..attempt.dispatch import Request, reopen

    sd = statedir.StateDir(row["state_dir"])
    u.state_dir = sd.path
    unit = sd.unit
    req = Request(executor=row["executor"], prompt_file=sd.file(statedir.PROMPT),
                  result_file=row["result_path"], unit_id=u.packet.id,
                  mode=unit.get("mode") or row["mode"], continue_from=row["continue_from"],
                  command=u.packet.command if row["executor"] == "command" else None,
                  model=row["requested_model"], effort=u.packet.effort,
                  timeout_s=unit.get("timeout_s") or u.packet.timeout_s,
                  workspace=unit.get("workspace"), state_root=str(sup.paths.state),
                  env=sup.env, attempt_id=row["id"])
    done = sd.outcome
    if done is not None:  # finished and judged; only the ledger missed it
        from .. import executors

        return settle(sup, u, Outcome.from_json(done), None,
                      executor=executors.get(unit.get("executor", "command")),
                      workspace=unit.get("workspace"))
    d = reopen(req, sd.path)
    u.started = d.launched_at
    w = unit.get("worker") or {}
    pid, started = w.get("pid"), w.get("create_time")
    fd = None
    if same_process_alive(pid, started):
        with contextlib.suppress(OSError):
            fd = os.pidfd_open(pid)
        if fd is not None and not same_process_alive(pid, started):
            os.close(fd)
            fd = None
    if fd is not None:
        sd.write(statedir.DISPATCH_PID, str(os.getpid()))
        d.worker = AdoptedWorker(pid, fd)
        sup.ledger.update_attempt(row["id"], "re-attached by a resumed supervisor",
                                  status=Status.RUNNING)
        sup.emit("reattached", u)
        return await watch(sup, u, d)
    from ..attempt.dispatch import recorded_exit

    code = await asyncio.to_thread(recorded_exit, sd, True)  # the keeper may be logging it
    settle(sup, u, d.finish(code), None, executor=d.p.executor, workspace=d.workspace)

