"""Shortening names for a narrow column without making two of them look the same.

``shorten(names, width)`` keeps a name that fits as it is, and cuts a longer one in the middle
(``fix-the-par…module-a``): its start says what it is, its end usually tells it from its
neighbours. Where that does not tell two names apart (they differ only in the middle), it
shows the part where they differ (``fix-t…-017-…dule``); as a last resort a number
(``fix-the-pa…3``). Distinct names always stay distinct.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

ELLIPSIS = "…"
MIN_WIDTH = 5


def shorten(names: Sequence[str], width: int) -> list[str]:
    """Each of ``names`` (distinct) in at most ``width`` characters (at least ``MIN_WIDTH``),
    in the same order; distinct names give distinct results."""
    if width < MIN_WIDTH:
        raise ValueError(f"width {width} is below {MIN_WIDTH}")
    out = {n: n for n in names if len(n) <= width}
    taken = set(out)
    todo = [n for n in dict.fromkeys(names) if n not in out]
    tries = {n: _candidates(n, width) for n in todo}
    while todo:
        round_ = {n: next(tries[n], None) for n in todo}
        counts: dict[str, int] = {}
        for c in round_.values():
            if c is not None:
                counts[c] = counts.get(c, 0) + 1
        left = []
        for n, c in round_.items():
            if c is not None and counts[c] == 1 and c not in taken:
                out[n] = c
                taken.add(c)
            elif c is not None:
                left.append(n)
            else:
                out[n] = _numbered(n, width, taken)
        todo = left
    return [out[n] for n in names]


def _candidates(name: str, width: int) -> Iterator[str]:
    """Shortenings of ``name`` in order of preference: cut in the middle (a little more of
    the end kept first), then a window on the middle between two cuts."""
    room = width - 1
    tail = (room + 1) // 2
    splits = sorted(range(room + 1), key=lambda t: (abs(t - tail), -t))
    for t in splits:
        yield name[:room - t] + ELLIPSIS + name[len(name) - t:]
    # two cuts: a short start and end, a window on the middle
    edge = max(1, (width - 2) // 4)
    window = width - 2 - 2 * edge
    if window < 1:
        return
    for start in range(edge, len(name) - edge - window + 1):
        yield (name[:edge] + ELLIPSIS + name[start:start + window] + ELLIPSIS
               + name[len(name) - edge:])


def _numbered(name: str, width: int, taken: set[str]) -> str:
    """The start of ``name``, an ellipsis and the first number that makes it unique."""
    k = 1
    while True:
        mark = str(k)
        head = max(0, width - 1 - len(mark))
        c = name[:head] + ELLIPSIS + mark
        if len(c) <= width and c not in taken:
            taken.add(c)
            return c
        k += 1
