"""Sizes as people write them (``512M``, ``4G``, ``1.5G``, ``200000K``, a number of bytes):
binary multiples (K is 1024 bytes), and the same written back for a person's eyes."""

from __future__ import annotations

import re

from ..errors import UsageError

_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?", re.IGNORECASE)
_SCALE = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
MAX_TEXT = 32
_HINT = "give a size such as 512M or 4G (K, M, G, T: 1024 times the one before)"


def parse_size(text: str | int | float, *, what: str = "size") -> int:
    """Bytes in ``text`` (a number of bytes, or a number with a K, M, G or T suffix); raises
    UsageError naming ``what`` when it is not a size of at least one byte."""
    if isinstance(text, bool):
        raise UsageError(f"{what} {text!r} is not a size", hint=_HINT)
    raw = str(text).strip()
    m = _SIZE.fullmatch(raw) if len(raw) <= MAX_TEXT else None
    if m is None:
        raise UsageError(f"{what} {raw[:MAX_TEXT]!r} is not a size", hint=_HINT)
    n = int(float(m.group(1)) * _SCALE[m.group(2).upper()])
    if n < 1:
        raise UsageError(f"{what} {raw!r} is less than one byte", hint=_HINT)
    return n


def format_size(n: int) -> str:
    """``n`` bytes as the largest whole-ish unit: ``200M``, ``1.5G``, ``512K``, ``100B``."""
    for suffix in ("T", "G", "M", "K"):
        scale = _SCALE[suffix]
        if n >= scale:
            value = n / scale
            return f"{value:.0f}{suffix}" if value >= 100 or value == int(value) \
                else f"{value:.1f}{suffix}"
    return f"{n}B"
