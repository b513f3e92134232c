"""Plans and packets: what a coordinator hands prun (``model``), read from files (``load``),
checked against the published schemas (``validation``) and field by field (``fields``); the
owned-path globs (``globs``, compiled by ``automaton``); the independence test
(``independence``: its facts, rules, pair index and report in ``pair_*``); the data boundary
(``boundary``); and routing (``routing``, with its ``policy`` and the pools' ``capacity``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .model import DEFAULT_MODE, KINDS, Budget, DataBoundary, Packet, Plan, Prime

if TYPE_CHECKING:
    import os

    from .fields import PacketFields


def load_packet(path: str | os.PathLike[str], *, defaults: PacketFields | None = None) -> Packet:
    """Read one packet file (YAML front matter, Markdown prompt). See ``prun.plan.load``."""
    from .load import load_packet as _load

    return _load(path, defaults=defaults)


def load_plan(path: str | os.PathLike[str]) -> Plan:
    """Read a plan file and its packets, validated. See ``prun.plan.load``."""
    from .load import load_plan as _load

    return _load(path)


__all__ = ["DEFAULT_MODE", "KINDS", "Budget", "DataBoundary", "Packet", "Plan", "Prime",
           "load_packet", "load_plan"]
