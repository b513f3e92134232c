"""Best of several candidates: a packet with ``candidates:`` runs as N units side by side,
one per candidate, each in its own workspace; ``prun reconcile`` picks one of them
(``prun.git.candidates``).

``expand`` turns such a packet into its candidates' units when a plan is frozen into a run
(after the independence test, which sees the packet once: its candidates never overlap each
other). Candidate ``k`` of packet ``fix`` is the unit ``fix.c<k>``: the packet with that id,
the k-th executor, ``candidate=k`` and ``candidate_of="fix"``.
"""

from __future__ import annotations

import dataclasses

from .model import Packet, Plan


def unit_id(packet_id: str, k: int) -> str:
    """The id of candidate ``k`` (1..N) of packet ``packet_id`` in a run."""
    return f"{packet_id}.c{k}"


def expand(plan: Plan) -> Plan:
    """``plan`` with every packet that has candidates replaced by its candidates' units, in
    place (plan order kept)."""
    if not any(p.candidates for p in plan.packets):
        return plan
    return dataclasses.replace(plan, packets=tuple(u for p in plan.packets for u in units(p)))


def units(p: Packet) -> list[Packet]:
    """The units packet ``p`` runs as: its candidates', or itself."""
    if not p.candidates:
        return [p]
    return [dataclasses.replace(p, id=unit_id(p.id, k), executor=executor, candidate=k,
                                candidate_of=p.id)
            for k, executor in enumerate(p.candidates, 1)]
