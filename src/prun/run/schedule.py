"""The run's scheduler: which packets start now, and what a packet waits for.

A packet starts when fewer than the run's parallelism run, every packet in its ``after``
succeeded (one that did not blocks it), its quota park is over, the machine has room for it
(``admission``: held, it looks again every ``admission.RETRY_S``; alone it always starts) and
the ports it needs are free; the rest wait in plan order, and none is ever dropped. A unit
whose pool is empty is parked until the reset; a unit whose fixed port another unit holds
stays queued and looks again every ``PORT_RETRY_S``.

``ready``, ``park`` and ``wait_for_ports`` are steps of the run loop over its state; the
ports' functions are what a unit's task uses of the run's ports (``RunContext``).
"""

from __future__ import annotations

import asyncio
import math
import os
import sys
import time
from collections.abc import Callable

from ..errors import PrunError
from ..ledger import PacketStatus, now_iso
from ..ports import reserve as ports
from ..ports.ranges import PortsThere, RunRanges
from ..ports.reserve import Reservation
from . import admission, brief
from .context import RunContext
from .state import RunState
from .unit import UnitState

PORT_RETRY_S = 1.0  # a unit whose fixed port is held looks again this often
UNKNOWN_RESET_S = 300.0


Admit = Callable[[UnitState], str | None]   # a launch gate: None, or why the unit may not start


def ready(state: RunState, running: int, budget: Admit | None = None) -> list[UnitState]:
    """The packets to launch now (``running``: how many units' tasks run), each marked
    running; blocks those whose ``after`` failed. ``budget``: the run's budget gate; the first
    unit it refuses stops the launching (``hold_for_budget``)."""
    if state.stopped or state.cancelled or state.timed_out or state.budget_reached:
        return []
    now = time.time()
    order, units = state.order, state.units
    while state.cursor < len(order) and order[state.cursor].status.terminal:
        state.cursor += 1  # everything before the cursor is finished
    room = state.parallel - running
    chosen: list[UnitState] = []
    machine: admission.Machine | None = None   # looked at once, when a unit needs it
    for u in order[state.cursor:]:
        if len(chosen) >= room:
            break
        if u.status == PacketStatus.PARKED and (u.park_until or 0) <= now:
            u.status = PacketStatus.PENDING
            state.parked.discard(u.packet.id)
        if u.status != PacketStatus.PENDING or (u.not_before or 0) > now:
            continue
        deps = [units[a].status for a in u.packet.after if a in units]
        failed = [a for a in u.packet.after
                  if a in units and units[a].status.terminal
                  and units[a].status != PacketStatus.SUCCEEDED]
        if failed:
            state.set_packet(u, PacketStatus.BLOCKED, f"{failed[0]} did not succeed")
            state.emit("blocked", u, f"it comes after {failed[0]}, which did not succeed")
            continue
        if any(s != PacketStatus.SUCCEEDED for s in deps):
            continue
        if state.admission and running + len(chosen) > 0:   # one may always start alone
            machine = machine or state.admission.look()
            note = state.admission.held(u.packet.resources.memory, machine)
            if note is not None:
                hold(state, u, note)
                continue
        if budget is not None and (why := budget(u)) is not None:
            hold_for_budget(state, why)
            break
        u.held = None
        state.set_packet(u, PacketStatus.RUNNING, "launching")
        chosen.append(u)
    return chosen


def park(state: RunState, u: UnitState, until: float | None, cause: str) -> None:
    """Its quota pool is empty: it waits until ``until`` (an unknown reset: five minutes)."""
    until = until if until and until > time.time() else time.time() + UNKNOWN_RESET_S
    u.park_until = until
    cause = f"{cause} (parked until {now_iso(until)})"
    state.set_packet(u, PacketStatus.PARKED, cause, resets_at=now_iso(until), reason="quota")
    state.emit("parked", u, cause, resets_at=now_iso(until), reason="quota")


def hold_for_budget(state: RunState, why: str) -> None:
    """The budget lets no more units start: every unit not yet started is parked with
    ``reason=budget`` (never failed); the running ones finish, and the run stops launching."""
    state.budget_reached = why
    for u in state.order:
        if u.status in (PacketStatus.PENDING, PacketStatus.PARKED):
            u.park_until = math.inf
            state.set_packet(u, PacketStatus.PARKED, why, reason="budget")
            state.emit("parked", u, why, reason="budget")


def hold(state: RunState, u: UnitState, note: str) -> None:
    """The machine has no room for it (``admission``): it stays pending and looks again in
    ``admission.RETRY_S``; its note (``waiting reason=memfree ...``) is told when its reason
    changes."""
    u.not_before = time.time() + admission.RETRY_S
    reason = admission.held_reason(note)
    if u.held != reason:
        u.held = reason
        state.set_packet(u, PacketStatus.PENDING, note)
        state.emit("waiting", u, note)


def wait_for_ports(state: RunState, u: UnitState, note: str) -> None:
    """A fixed port it needs is held (by a unit of any run): it stays queued (pending in the
    ledger too, which its launch had marked running), and says why once."""
    u.not_before = time.time() + PORT_RETRY_S
    state.set_packet(u, PacketStatus.PENDING, note)
    if u.port_note != note:
        u.port_note = note
        state.emit("waiting", u, note)


def ranges_of(ctx: RunContext, u: UnitState) -> RunRanges:
    """The run's block of own ranges, made by the first unit to ask, in the event loop (so
    that units starting together share one; it leases nothing until a range is taken)."""
    if ctx.ranges is None:
        request = ports.port_request(u.packet.state, ctx.env, where=u.packet.where("state"))
        pid, started = _keeper(ctx)
        ctx.ranges = RunRanges(ctx.run_id, pid, started, request.count, ctx.env,
                               block=ctx.state.parallel)
    return ctx.ranges


def reserve_ports(ctx: RunContext, block: RunRanges, u: UnitState, aid: str) -> Reservation:
    """The attempt's ports (``prun.ports.reserve``): its own range from the run's ``block``,
    and the ports it names or fixes from the machine-wide registry. Held in the keeper's name,
    which lives as long as the run's workers do; given back when the attempt ends."""
    request = ports.port_request(u.packet.state, ctx.env, where=u.packet.where("state"))
    own = block.take()
    pid, started = _keeper(ctx)
    held = ports.Holder(aid, ctx.run_id, u.packet.id, pid, started)
    if not request.fixed and not request.names:
        return ports.Reservation(held, own)
    try:
        return ports.reserve(held, request, ctx.env, own=own)
    except BaseException:
        block.give_back(own)
        raise


def ports_there(ctx: RunContext, u: UnitState) -> PortsThere:
    """The ports of a cluster's unit, reserved by its task on the worker that runs it."""
    request = ports.port_request(u.packet.state, ctx.env, where=u.packet.where("state"))
    return PortsThere(request, ctx.run_id, u.packet.id)


def brief_ports(ctx: RunContext, u: UnitState,
                held: Reservation | None) -> brief.Ports | brief.PortsByName:
    """What the brief says of the unit's ports: the numbers ``held`` for it here, or, for a
    cluster's unit (None), the variables its worker fills in."""
    if held is not None:
        return brief.Ports(held.range.base, held.range.count, dict(held.named),
                           tuple(str(r) for r in held.fixed))
    request = ports.port_request(u.packet.state, ctx.env, where=u.packet.where("state"))
    return brief.PortsByName(request.count, tuple(ports.env_name(n) for n in request.names),
                             tuple(str(r) for r in request.fixed))


def _keeper(ctx: RunContext) -> tuple[int, float | None]:
    """The process that holds the run's ports: its keeper, alive as long as its workers."""
    keeper = ctx.keeper.ident
    return keeper.get("pid") or os.getpid(), keeper.get("create_time")


async def release_ports(ctx: RunContext, u: UnitState) -> None:
    """Give an ended attempt's ports back: its range to the run's block, what it named or
    fixed to the registry (a failure there is only reported)."""
    held, u.ports = u.ports, None
    if held is None:
        return
    if ctx.ranges is not None:
        ctx.ranges.give_back(held.range)
    if held.fixed or held.named:
        aid = held.holder.attempt_id
        try:
            await asyncio.to_thread(ports.release, aid, ctx.env, held.holder)
        except PrunError as e:
            print(f"prun: warning: ports of {aid} not released ({e.line()})", file=sys.stderr)
