"""The quota gate: each executor's own decision before launch, on every dispatch.

Before each launch the dispatcher asks the executor's hook (``Executor.gate``; by default there
is none, and the unit launches as asked). A hook answers None (launch as asked), a
``GateDecision`` (launch with other settings; its note, such as agy's ``MODEL-FALLBACK`` line,
goes to stderr and ``<state>/quota-note``), or raises ``errors.GateRefusal`` (exit 75, nothing
launched). The policy is the executor's (agy's is in ``prun.executors.agy``); what every hook
shares is here:

* ``readings(groups, env)``: the snapshot's states of those groups, refreshed first when a
  reading is past its TTL and a probe exists. A group the snapshot does not report is unknown,
  never empty; an unreadable snapshot gives None (the gate is skipped, with one warning line).
* ``switched_off(env, variable)``: a hook's on/off variable (``PRUN_AGY_QUOTA_GATE=off``).
* ``reset_of(state)``: a state's reset time as the gate's lines print it, or ``unknown``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from . import OFF, ProbeOf, current, warn
from .snapshot import normalise_time

if TYPE_CHECKING:
    from ..executors.settings import Settings
    from .snapshot import GroupState

ON = {"on", "1", "true", "yes", ""}


@dataclass(frozen=True)
class GateDecision:
    """Launch with ``settings`` (None: as asked); ``note`` goes to stderr and quota-note."""

    settings: Settings | None
    note: str | None


def switched_off(env: Mapping[str, str], variable: str) -> bool:
    """True when ``variable`` turns a gate off (off/0/false/no); anything else but on/1/true/
    yes/empty is warned about and leaves the gate on."""
    switch = env.get(variable, "").strip().lower()
    if switch in OFF:
        return True
    if switch not in ON:
        warn(f"{variable}={env.get(variable)!r} is not on/off; the quota gate stays on")
    return False


def readings(groups: Iterable[str], env: Mapping[str, str],
             probe_of: ProbeOf | None = None) -> dict[str, GroupState] | None:
    """The snapshot's state of each of ``groups`` (stale ones re-read where probes exist), or
    None when the snapshot cannot be trusted: the gate is skipped, with one warning line."""
    groups = tuple(groups)
    try:
        snap = current(env, groups, probe_of=probe_of)
    except Exception as e:  # the gate never stops a dispatch by breaking (a cancel is no Exception)
        warn(f"quota snapshot not read ({e}); quota gate skipped")
        return None
    bad = [f"{g}: {snap.bad[g]}" for g in groups if g in snap.bad]
    if snap.problem or bad:
        why = snap.problem or "; ".join(bad)
        warn(f"quota snapshot {snap.path} unreadable ({why}); quota gate skipped")
        return None
    return {g: snap.state(g) for g in groups}


def reset_of(state: GroupState) -> str:
    """When ``state``'s group resets, as an ISO time, or ``unknown``."""
    return normalise_time(state.resets_at) or "unknown"
