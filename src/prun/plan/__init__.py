"""Plans and packets: what a coordinator hands prun (``model``), read from files (``load``),
checked against the published schemas (``validation``) and field by field (``fields``); the
owned-path globs (``globs``, compiled by ``automaton``); the independence test
(``independence``: its facts, rules, pair index and report in ``pair_*``); the data boundary
(``boundary``); and routing (``routing``, with its ``policy`` and the pools' ``capacity``)."""

from .model import DEFAULT_MODE, KINDS, DataBoundary, Packet, Plan, load_packet, load_plan

__all__ = ["DEFAULT_MODE", "KINDS", "DataBoundary", "Packet", "Plan", "load_packet", "load_plan"]
