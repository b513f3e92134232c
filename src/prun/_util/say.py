"""A line said once per process on stderr (a condition that holds for every unit, such as
the sandbox being unavailable, is said once, not per unit)."""

from __future__ import annotations

import sys

_SAID: set[str] = set()


def say_once(line: str) -> None:
    """``line`` on stderr, once per process."""
    if line not in _SAID:
        _SAID.add(line)
        print(line, file=sys.stderr, flush=True)
