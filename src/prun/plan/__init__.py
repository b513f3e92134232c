"""Plans and packets: what a coordinator hands prun (``model``), read from files and checked
against the published schemas (``load``), the owned-path globs (``globs``), the independence
test (``independence``), the data boundary (``boundary``) and routing (``routing``)."""

from .model import DEFAULT_MODE, KINDS, DataBoundary, Packet, Plan, load_packet, load_plan

__all__ = ["DEFAULT_MODE", "KINDS", "DataBoundary", "Packet", "Plan", "load_packet", "load_plan"]
