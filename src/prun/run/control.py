"""Control of a running run, as steps of the run loop over its state: requests other commands
leave in the ledger (cancel, reassign, followup), the cancel of the whole run, the run's
deadline, and stall reports.

Requests are looked for on SIGUSR1 (which the commands that add one send) and, should a
signal be lost, every ``REQUEST_POLL_S`` (``prun.run.loop``). A running attempt asked to stop
is ended by its own task (``prun.run.life.watch``); a packet not running changes status here.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from typing import Any

from .. import executors
from ..attempt import statedir
from ..errors import PrunError
from ..ledger import PacketStatus
from .state import RunState
from .unit import UnitState

REQUEST_POLL_S = 0.5  # requests are looked for at least this often (SIGUSR1 says at once)


def carry_out(state: RunState, requests: Iterable[Any]) -> None:
    """Carry out the requests taken from the ledger."""
    for r in requests:
        if r["kind"] == "cancel":
            if not r["target"]:
                cancel_all(state, r["cause"] or "cancel requested")
            else:
                cancel_one(state, r["target"], r["cause"] or "cancel requested")
        elif r["kind"] == "reassign":
            reassign(state, r["target"], r["executor"], r["cause"] or "reassigned")
        elif r["kind"] == "followup":
            request_followup(state, r["target"], r["data"] or "")


def cancel_all(state: RunState, cause: str) -> None:
    """Cancel the whole run: running attempts are ended, the rest are cancelled."""
    if state.cancelled:
        return
    state.cancelled = True
    for u in state.units.values():
        cancel_unit(state, u, cause)


def cancel_one(state: RunState, target: str, cause: str) -> None:
    """Cancel one packet, named by its id or by its attempt's."""
    u = state.units.get(target)
    if u is None:
        u = next((x for x in state.units.values() if x.attempt_id == target), None)
    if u is not None:
        cancel_unit(state, u, cause)


def cancel_unit(state: RunState, u: UnitState, cause: str) -> None:
    if u.status == PacketStatus.RUNNING:
        u.cancel_requested = True
        if u.stop is not None:
            u.stop.set()
    elif not u.status.terminal:
        state.set_packet(u, PacketStatus.CANCELLED, cause)
        state.emit("cancelled", u, cause)


def reassign(state: RunState, packet_id: str, executor: str | None, cause: str) -> None:
    """A linked successor attempt (on ``executor`` if given); a running one is superseded."""
    u = state.units.get(packet_id)
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
    state.set_packet(u, PacketStatus.PENDING, cause)


def request_followup(state: RunState, packet_id: str | None, text: str) -> None:
    """A follow-up turn: now if the packet is finished, else after the attempt running now."""
    u = state.units.get(packet_id or "")
    if u is None or not text.strip():
        return
    if u.status.terminal and u.attempt_id:
        return follow_up(state, u, text)
    u.followups.append(text)  # after the attempt that runs (or is due) now


def follow_up(state: RunState, u: UnitState, text: str,
              cause: str = "follow-up requested") -> None:
    """``prun followup`` (or ``followup: auto``, ``cause``): a linked attempt with a new
    request, in the same workspace."""
    try:
        ex = executors.get(u.executor)
    except PrunError as e:
        return state.emit("stopped", u, e.line(), action="follow up")
    u.carry_on(ex, text, because=f"Your earlier attempt {u.attempt_id} finished; "
               "this is a follow-up turn.")
    u.cancel_requested = u.superseded = False
    state.set_packet(u, PacketStatus.PENDING, cause)


def check_deadline(state: RunState) -> None:
    """Past the run's deadline nothing more is dispatched (running units end at it too)."""
    if state.deadline is None or state.timed_out or time.time() < state.deadline:
        return
    state.timed_out = True
    for u in state.units.values():
        if not u.status.terminal and u.status != PacketStatus.RUNNING:
            state.set_packet(u, PacketStatus.CANCELLED,
                             "the run's deadline passed before it was dispatched")
            state.emit("cancelled", u, "the run's deadline passed before it was dispatched")


def check_stalls(state: RunState, stall_s: float) -> None:
    """Report once each running unit whose ``tail`` has not grown for ``stall_s``."""
    now = time.time()
    for u in state.units.values():
        if u.status != PacketStatus.RUNNING or not u.state_dir or u.started is None:
            continue
        try:
            last = os.stat(os.path.join(u.state_dir, statedir.TAIL)).st_mtime
        except OSError:
            continue
        last = max(last, u.started)
        if now - last >= stall_s and not u.stalled:
            u.stalled = True
            state.emit("stalled", u, f"no output for {int(now - last)} s")
        elif now - last < stall_s:
            u.stalled = False
