"""The run's scheduler: which packets start now, and what a packet waits for.

A packet starts when fewer than the run's parallelism run, every packet in its ``after``
succeeded (one that did not blocks it), its quota park is over and the ports it needs are
free; the rest wait in plan order, and none is ever dropped. A unit whose pool is empty is
parked until the reset; a unit whose fixed port another unit holds stays queued and looks
again every ``PORT_RETRY_S``.
"""

from __future__ import annotations

import asyncio
import os
import time

from ..errors import PortsUnavailable, PrunError
from ..ledger import PacketStatus, now_iso
from .unit import UnitState

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..ports.ranges import PortsThere, RunRanges
    from ..ports.reserve import Reservation
    from . import brief
    from .supervisor import Supervisor

PORT_RETRY_S = 1.0  # a unit whose fixed port is held looks again this often
UNKNOWN_RESET_S = 300.0


def ready(sup: Supervisor) -> list[UnitState]:
    """The packets to launch now, each marked running; blocks those whose ``after`` failed."""
    if sup.stopped or sup.cancelled or sup.timed_out:
        return []
    now = time.time()
    order = sup.order
    while sup.cursor < len(order) and order[sup.cursor].status.terminal:
        sup.cursor += 1  # everything before the cursor is finished
    room = sup.parallel - len(sup.running)
    chosen: list[UnitState] = []
    for u in order[sup.cursor:]:
        if len(chosen) >= room:
            break
        if u.status == PacketStatus.PARKED and (u.park_until or 0) <= now:
            u.status = PacketStatus.PENDING
            sup.parked.discard(u.packet.id)
        if u.status != PacketStatus.PENDING or (u.not_before or 0) > now:
            continue
        deps = [sup.units[a].status for a in u.packet.after if a in sup.units]
        failed = [a for a in u.packet.after
                  if a in sup.units and sup.units[a].status.terminal
                  and sup.units[a].status != PacketStatus.SUCCEEDED]
        if failed:
            sup.set_packet(u, PacketStatus.BLOCKED, f"{failed[0]} did not succeed")
            sup.emit("blocked", u, f"it comes after {failed[0]}, which did not succeed")
            continue
        if any(s != PacketStatus.SUCCEEDED for s in deps):
            continue
        sup.set_packet(u, PacketStatus.RUNNING, "launching")
        chosen.append(u)
    return chosen


def park(sup: Supervisor, u: UnitState, until: float | None, cause: str) -> None:
    """Its quota pool is empty: it waits until ``until`` (an unknown reset: five minutes)."""
    until = until if until and until > time.time() else time.time() + UNKNOWN_RESET_S
    u.park_until = until
    cause = f"{cause} (parked until {now_iso(until)})"
    sup.set_packet(u, PacketStatus.PARKED, cause, resets_at=now_iso(until))
    sup.emit("parked", u, cause, resets_at=now_iso(until))


def reserve_ports(sup: Supervisor, u: UnitState, aid: str) -> Reservation:
    """The attempt's ports (``prun.ports.reserve``): its own range from the run's block, and the
    ports it names or fixes from the machine-wide registry. Held in the keeper's name, which
    lives as long as the run's workers do; given back when the attempt ends."""
    from ..ports import reserve as ports

    request = ports.port_request(u.packet.state, sup.env, where=u.packet.where("state"))
    block = _ranges(sup, request.count)
    own = block.take()
    pid, started = _keeper(sup)
    held = ports.Holder(aid, sup.run_id, u.packet.id, pid, started)
    if not request.fixed and not request.names:
        return ports.Reservation(held, own)
    try:
        return ports.reserve(held, request, sup.env, own=own)
    except BaseException:
        block.give_back(own)
        raise


def ports_there(sup: Supervisor, u: UnitState) -> PortsThere:
    """The ports of a cluster's unit, reserved by its task on the worker that runs it."""
    from ..ports import reserve as ports
    from ..ports.ranges import PortsThere

    request = ports.port_request(u.packet.state, sup.env, where=u.packet.where("state"))
    return PortsThere(request, sup.run_id, u.packet.id)


def brief_ports(sup: Supervisor, u: UnitState,
                held: Reservation | None) -> brief.Ports | brief.PortsByName:
    """What the brief says of the unit's ports: the numbers ``held`` for it here, or, for a
    cluster's unit (None), the variables its worker fills in."""
    from ..ports import reserve as ports
    from . import brief

    if held is not None:
        return brief.Ports(held.range.base, held.range.count, dict(held.named),
                           tuple(str(r) for r in held.fixed))
    request = ports.port_request(u.packet.state, sup.env, where=u.packet.where("state"))
    return brief.PortsByName(request.count, tuple(ports.env_name(n) for n in request.names),
                             tuple(str(r) for r in request.fixed))


def ports_at_hand(sup: Supervisor, u: UnitState) -> bool:
    """Whether ``reserve_ports`` needs no file: the unit names and fixes no port and the
    run's block has a range free (then it is quick enough for the event loop)."""
    from ..ports import reserve as ports

    request = ports.port_request(u.packet.state, sup.env, where=u.packet.where("state"))
    if not _ranges(sup, request.count).at_hand():
        return False
    return not request.fixed and not request.names


def _ranges(sup: Supervisor, size: int) -> RunRanges:
    """The run's block of own ranges, made by the first unit to ask, in the event loop (so
    that units starting together share one; it leases nothing until a range is taken)."""
    from ..ports.ranges import RunRanges

    if sup.ranges is None:
        pid, started = _keeper(sup)
        sup.ranges = RunRanges(sup.run_id, pid, started, size, sup.env, block=sup.parallel)
    return sup.ranges


def _keeper(sup: Supervisor) -> tuple[int, float | None]:
    """The process that holds the run's ports: its keeper, alive as long as its workers."""
    keeper = sup.keeper.ident
    return keeper.get("pid") or os.getpid(), keeper.get("create_time")


def wait_for_ports(sup: Supervisor, u: UnitState, e: PortsUnavailable) -> None:
    """A fixed port it needs is held (by a unit of any run): it stays queued (pending in the
    ledger too, which its launch had marked running), and says why once."""
    u.not_before = time.time() + PORT_RETRY_S
    note = f"waiting for its ports: {e.message}"
    sup.set_packet(u, PacketStatus.PENDING, note)
    if u.port_note != note:
        u.port_note = note
        sup.emit("waiting", u, note)


async def release_ports(sup: Supervisor, u: UnitState) -> None:
    """Give an ended attempt's ports back: its range to the run's block, what it named or
    fixed to the registry (a failure there is only reported)."""
    from ..ports import reserve as ports

    held, u.ports = u.ports, None
    if held is None:
        return
    if sup.ranges is not None:
        sup.ranges.give_back(held.range)
    if held.fixed or held.named:
        aid = held.holder.attempt_id
        try:
            await asyncio.to_thread(ports.release, aid, sup.env, held.holder)
        except PrunError as e:
            import sys

            print(f"prun: warning: ports of {aid} not released ({e.line()})", file=sys.stderr)
