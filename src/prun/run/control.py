"""Control of a running run: requests other commands leave in the ledger (cancel, reassign,
followup), the signals that cancel the whole run, the run's deadline, and stall reports.

Requests are looked for on SIGUSR1 (which the commands that add one send) and, should a
signal be lost, every ``REQUEST_POLL_S``. A running attempt asked to stop is ended by its own
watch (``drive.watch``); a packet not running changes status here.
"""

from __future__ import annotations

import os
import time

from ..attempt import statedir
from ..ledger import PacketStatus
from .settle import follow_up
from .unit import UnitState

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .supervisor import Supervisor

REQUEST_POLL_S = 0.5  # requests are looked for at least this often (SIGUSR1 says at once)


def requests_sent(sup: Supervisor) -> None:
    """SIGUSR1: another command added a request to the ledger."""
    sup.requests_due = True
    sup.wake()


def take_requests(sup: Supervisor) -> None:
    """Carry out the requests in the ledger."""
    sup.requests_due = False
    sup.next_request_check = time.monotonic() + REQUEST_POLL_S
    for r in sup.ledger.take_requests(sup.run_id):
        if r["kind"] == "cancel":
            if not r["target"]:
                cancel_all(sup, r["cause"] or "cancel requested")
            else:
                cancel_one(sup, r["target"], r["cause"] or "cancel requested")
        elif r["kind"] == "reassign":
            reassign(sup, r["target"], r["executor"], r["cause"] or "reassigned")
        elif r["kind"] == "followup":
            request_followup(sup, r["target"], r["data"] or "")


def cancel_all(sup: Supervisor, cause: str) -> None:
    """Cancel the whole run: running attempts are ended, the rest are cancelled."""
    if sup.cancelled:
        return
    sup.cancelled = True
    for u in sup.units.values():
        cancel_unit(sup, u, cause)
    sup.wake()


def cancel_one(sup: Supervisor, target: str, cause: str) -> None:
    """Cancel one packet, named by its id or by its attempt's."""
    u = sup.units.get(target)
    if u is None:
        u = next((x for x in sup.units.values() if x.attempt_id == target), None)
    if u is not None:
        cancel_unit(sup, u, cause)


def cancel_unit(sup: Supervisor, u: UnitState, cause: str) -> None:
    if u.status == PacketStatus.RUNNING:
        u.cancel_requested = True
        if u.stop is not None:
            u.stop.set()
    elif not u.status.terminal:
        sup.set_packet(u, PacketStatus.CANCELLED, cause)
        sup.emit("cancelled", u, cause)


def reassign(sup: Supervisor, packet_id: str, executor: str | None, cause: str) -> None:
    """A linked successor attempt (on ``executor`` if given); a running one is superseded."""
    u = sup.units.get(packet_id)
    if u is None:
        return
    if executor:
        u.executor = executor
        u.reason = f"reassigned to {executor}"
    if u.status == PacketStatus.RUNNING:
        u.superseded = True
        if u.stop is not None:
            u.stop.set()
        return
    u.predecessor = u.attempt_id
    u.continue_from = u.reuse_workspace = u.followup = u.earlier = None
    u.cancel_requested = False
    sup.set_packet(u, PacketStatus.PENDING, cause)


def request_followup(sup: Supervisor, packet_id: str | None, text: str) -> None:
    """A follow-up turn: now if the packet is finished, else after the attempt running now."""
    u = sup.units.get(packet_id or "")
    if u is None or not text.strip():
        return
    if u.status.terminal and u.attempt_id:
        return follow_up(sup, u, text)
    u.followups.append(text)  # after the attempt that runs (or is due) now


def check_deadline(sup: Supervisor) -> None:
    """Past the run's deadline nothing more is dispatched (running units end at it too)."""
    if sup.deadline is None or sup.timed_out or time.time() < sup.deadline:
        return
    sup.timed_out = True
    for u in sup.units.values():
        if not u.status.terminal and u.status != PacketStatus.RUNNING:
            sup.set_packet(u, PacketStatus.CANCELLED,
                           "the run's deadline passed before it was dispatched")
            sup.emit("cancelled", u, "the run's deadline passed before it was dispatched")


def check_stalls(sup: Supervisor) -> None:
    """Report once each running unit whose ``tail`` has not grown for the stall threshold."""
    now = time.time()
    if now - sup.last_stall_check < min(30.0, sup.stall_s / 4):
        return
    sup.last_stall_check = now
    for u in sup.units.values():
        if u.status != PacketStatus.RUNNING or not u.state_dir or u.started is None:
            continue
        try:
            last = os.stat(os.path.join(u.state_dir, statedir.TAIL)).st_mtime
        except OSError:
            continue
        last = max(last, u.started)
        if now - last >= sup.stall_s and not u.stalled:
            u.stalled = True
            sup.emit("stalled", u, f"no output for {int(now - last)} s")
        elif now - last < sup.stall_s:
            u.stalled = False
