"""Durations as people write them (``90``, ``90s``, ``45m``, ``2h``, ``1h30m``, ``1.5h``), the
ISO times prun records, and deadlines (either)."""

from __future__ import annotations

import re

from ..errors import UsageError

_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?", re.IGNORECASE)
_SCALE = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, None: 1}
MAX_DURATION_S = 3650 * 86400.0  # the longest duration prun takes anywhere: ten years
MAX_TEXT = 64                    # characters in a written duration


def parse_duration(text: str | int | float, *, what: str = "duration") -> float:
    """Seconds in ``text``; raises UsageError naming ``what`` when it is not a duration: a
    number of seconds or parts such as ``1h30m``, not negative, finite and at most
    ``MAX_DURATION_S`` (3650d, ten years)."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        if not 0 <= text <= MAX_DURATION_S:   # also refuses nan
            raise UsageError(f"{what} {text!r} is not from 0 to {MAX_DURATION_S:.0f} seconds",
                             hint="give seconds or a duration such as 90, 45m, 2h or 1h30m, "
                             "at most 3650d")
        return float(text)
    raw = str(text).strip()
    if len(raw) > MAX_TEXT:
        raise UsageError(f"bad {what}: {len(raw)} characters",
                         hint="give seconds or a duration such as 90, 45m, 2h or 1h30m")
    pos, total, parts = 0, 0.0, 0
    while pos < len(raw):
        m = _PART.match(raw, pos)
        if not m or m.end() == pos:
            break
        unit = m.group(2).lower() if m.group(2) else None
        total += float(m.group(1)) * _SCALE[unit]
        parts += 1
        pos = m.end()
        while pos < len(raw) and raw[pos] == " ":
            pos += 1
    if not raw or parts == 0 or pos != len(raw):
        raise UsageError(f"bad {what}: {text!r}",
                         hint="give seconds or a duration such as 90, 45m, 2h or 1h30m")
    if total > MAX_DURATION_S:
        raise UsageError(f"{what} {text!r} is longer than ten years",
                         hint="give at most 3650d")
    return total


def format_duration(seconds: float) -> str:
    """Compact and stable: ``42s``, ``3m05s``, ``2h10m``."""
    s = round(max(0.0, seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def epoch(iso: str | None) -> float | None:
    """An ISO time (``2026-12-01T18:00:00Z``; without a zone: UTC) as seconds since the
    epoch; None when empty or not a time. The one parser of the times prun records."""
    if not iso:
        return None
    import datetime as dt

    try:
        when = dt.datetime.fromisoformat(str(iso).strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.timestamp()


def deadline_at(text: str | float | None, now: float | None = None) -> float | None:
    """A deadline (a duration from ``now``, or an ISO time; without a zone: UTC) as seconds
    since the epoch; None when there is none. Raises UsageError when it is neither."""
    if text is None or str(text).strip() == "":
        return None
    import time

    try:
        return (time.time() if now is None else now) + parse_duration(text, what="deadline")
    except UsageError:
        pass
    when = epoch(str(text))
    if when is None:
        raise UsageError(f"bad deadline {text!r}",
                         hint="give a duration (90m, 2h) or an ISO time (2026-12-01T18:00:00Z)")
    return when
