"""Reset times written into a backend's error text, the only place some CLIs report them.

Recognised (case-insensitive): ``Resets in 1h 34m``, ``resets in 34 minutes``,
``Please retry in 7s``, ``retry in 1.5s``, ``Suggested retry after 12s``,
``try again in 5 minutes``, ``resets at 2026-11-30T18:00:00Z``. Anything else gives None: a
reset time is never guessed.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

_UNIT = r"(?:ms|milliseconds?|d|days?|h|hrs?|hours?|m|mins?|minutes?|s|secs?|seconds?)"
_AMOUNT = rf"(?:\d+(?:\.\d+)?\s*{_UNIT}\b\s*(?:and\s+|,\s*)?)+"
_RELATIVE = re.compile(
    rf"(?:resets?|retry|try again)\s+(?:in|after)\s+({_AMOUNT})", re.IGNORECASE)
_PART = re.compile(rf"(\d+(?:\.\d+)?)\s*({_UNIT})\b", re.IGNORECASE)
_ABSOLUTE = re.compile(
    r"resets?\s+at\s+(\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?"
    r"(?:Z|[+-]\d{2}:?\d{2})?)", re.IGNORECASE)


def _seconds(unit: str) -> float:
    u = unit.lower()
    if u.startswith("ms") or u.startswith("milli"):
        return 0.001
    return {"d": 86400, "h": 3600, "m": 60, "s": 1}[u[0]]


def reset_from_text(text: str | None, now: datetime | None = None) -> str | None:
    """The reset time named in ``text`` as an ISO time (UTC, seconds), or None."""
    if not text:
        return None
    now = now or datetime.now(UTC)
    m = _ABSOLUTE.search(text)
    if m:
        raw = m.group(1).replace(" ", "T").replace("Z", "+00:00")
        try:
            when = datetime.fromisoformat(raw)
        except ValueError:
            when = None
        if when is not None:
            if when.tzinfo is None:
                when = when.replace(tzinfo=UTC)
            return when.astimezone(UTC).isoformat(timespec="seconds")
    m = _RELATIVE.search(text)
    if not m:
        return None
    seconds = sum(float(n) * _seconds(u) for n, u in _PART.findall(m.group(1)))
    return (now + timedelta(seconds=seconds)).isoformat(timespec="seconds")
