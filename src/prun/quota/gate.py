"""The quota gate of ``prun dispatch --executor agy``: decided before launch, on every dispatch.

agy meters two groups apart: Gemini models (``agy-gemini``) and the Claude-and-GPT models
(``agy-claude-gpt``). Reading the snapshot (refreshed first when a reading is past its TTL and
a probe exists):

1. Claude-and-GPT empty, Gemini not, a Claude-or-GPT model asked: run the Gemini default
   instead; the decision carries the ``MODEL-FALLBACK ...`` line.
2. Gemini empty and a Gemini model would run: refuse (exit 75); never move into the metered
   group on its own; the message names ANTIGRAVITY_DISPATCH_MODEL.
3. Both empty: refuse (exit 75) with both reset times.
4. A group the snapshot does not report is unknown, never empty; an unreadable snapshot skips
   the gate with one warning line; ``PRUN_AGY_QUOTA_GATE=off`` disables it.

Anything else: None (launch as asked).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import QuotaExhausted

if TYPE_CHECKING:
    from ..executors.base import Settings

OFF = {"off", "0", "false", "no"}
ON = {"on", "1", "true", "yes", ""}
FALLBACK_REASON = "claude-and-gpt-quota-exhausted"


@dataclass(frozen=True)
class GateDecision:
    """Launch with ``settings`` (None: as asked); ``note`` goes to stderr and quota-note."""

    settings: Settings | None
    note: str | None


class GateRefusal(QuotaExhausted):
    """The gate refused a launch (exit 75). ``note`` is the line for ``<state>/quota-note``."""

    def __init__(self, message: str, *, group: str, resets_at: str | None, hint: str | None,
                 note: str):
        super().__init__(message, group=group, resets_at=resets_at, hint=hint)
        self.note = note


def gate(executor, settings, env: Mapping[str, str]) -> GateDecision | None:
    """None: launch as asked; a GateDecision: launch with its settings; or raise GateRefusal."""
    from ..executors.agy import (
        CLAUDE_GPT_MODELS,
        DEFAULT_EFFORT,
        DEFAULT_MODEL,
        GROUP_CLAUDE_GPT,
        GROUP_GEMINI,
    )
    from . import current, warn

    if getattr(executor, "name", None) != "agy":
        return None
    switch = env.get("PRUN_AGY_QUOTA_GATE", "").strip().lower()
    if switch in OFF:
        return None
    if switch not in ON:
        warn(f"PRUN_AGY_QUOTA_GATE={env.get('PRUN_AGY_QUOTA_GATE')!r} is not on/off; "
             "the quota gate stays on")
    requested = executor.quota_group(settings.model)
    if requested not in (GROUP_GEMINI, GROUP_CLAUDE_GPT):
        return None
    try:
        snap = current(env, (GROUP_GEMINI, GROUP_CLAUDE_GPT))
    except Exception as e:  # the gate must never stop a dispatch by breaking...
        from ..attempt.dispatch import Cancelled

        if isinstance(e, Cancelled):  # ...but a cancel is not a breakage
            raise
        warn(f"quota snapshot not read ({e}); quota gate skipped")
        return None
    bad = [f"{g}: {snap.bad[g]}" for g in (GROUP_GEMINI, GROUP_CLAUDE_GPT) if g in snap.bad]
    if snap.problem or bad:
        why = snap.problem or "; ".join(bad)
        warn(f"quota snapshot {snap.path} unreadable ({why}); quota gate skipped")
        return None
    gem, other = snap.state(GROUP_GEMINI), snap.state(GROUP_CLAUDE_GPT)
    model = settings.model or DEFAULT_MODEL
    if gem.empty and other.empty:
        # When could this unit run again: on its own group's reset, or (for a Claude-or-GPT
        # model) on either reset, since Gemini would then take it as a fallback.
        candidates = [gem, other] if requested == GROUP_CLAUDE_GPT else [gem]
        first = min((_when(s) for s in candidates), key=_sort_key)
        raise GateRefusal(
            f"both agy quota groups are empty ({GROUP_GEMINI} resets {_when(gem)}, "
            f"{GROUP_CLAUDE_GPT} resets {_when(other)}); {model} was not launched",
            group=requested, resets_at=None if first == "unknown" else first,
            hint="wait for a reset or route the unit to another executor (claude, gemini)",
            note=(f"QUOTA-EXHAUSTED model={model} groups={GROUP_GEMINI},{GROUP_CLAUDE_GPT} "
                  f"resets={_when(gem)},{_when(other)}"))
    if requested == GROUP_GEMINI and gem.empty:
        raise GateRefusal(
            f"the agy Gemini quota group ({GROUP_GEMINI}) is empty until {_when(gem)}; "
            f"{model} was not launched. prun never moves a unit into the metered "
            "Claude-and-GPT group on its own: to spend that group, set "
            f"ANTIGRAVITY_DISPATCH_MODEL to one of its models ({', '.join(CLAUDE_GPT_MODELS)})",
            group=GROUP_GEMINI, resets_at=None if _when(gem) == "unknown" else _when(gem),
            hint="or wait for the reset, or route the unit to another executor",
            note=f"QUOTA-EXHAUSTED model={model} groups={GROUP_GEMINI} resets={_when(gem)}")
    if requested == GROUP_CLAUDE_GPT and other.empty:
        effort = env.get("ANTIGRAVITY_DISPATCH_EFFORT", "").strip() or DEFAULT_EFFORT
        return GateDecision(
            settings.replace(model=DEFAULT_MODEL, effort=effort),
            f"MODEL-FALLBACK from={model} to={DEFAULT_MODEL} reason={FALLBACK_REASON} "
            f"resets={_when(other)}")
    return None


def _when(state) -> str:
    from .snapshot import normalise_time

    return normalise_time(state.resets_at) or "unknown"


def _sort_key(when: str) -> str:
    return "~" if when == "unknown" else when  # normalised ISO times sort as text
