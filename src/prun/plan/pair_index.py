"""Which pairs of packets can fail a rule of the independence test (``prun.plan.independence``):
an index puts together only the pairs whose globs, state resources or bases may meet, so a
plan of 10,000 packets is not judged pair by pair.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Iterator
from itertools import chain, combinations, product
from typing import Generic, TypeVar

from . import globs
from .model import Packet
from .pair_facts import Facts
from .pair_rules import port_range, resource

T = TypeVar("T")
U = TypeVar("U")


class _Prefixes(Generic[T]):
    """Items filed under the fixed prefix of their glob (``globs.fixed_prefix``), each with the
    glob's fixed suffix; the prefixes sorted, so the ones starting with a given prefix are found
    by bisection."""

    def __init__(self, items: Iterable[tuple[str, T]]):
        self.by: dict[str, list[tuple[str, T]]] = {}
        for glob, item in items:
            self.by.setdefault(globs.fixed_prefix(glob), []).append(
                (globs.fixed_suffix(glob), item))
        self.keys = sorted(self.by)

    def starting_with(self, prefix: str) -> Iterator[list[tuple[str, T]]]:
        k = bisect_left(self.keys, prefix)
        while k < len(self.keys) and self.keys[k].startswith(prefix):
            yield self.by[self.keys[k]]
            k += 1


def _meeting(x: _Prefixes[T], y: _Prefixes[U]) -> Iterator[tuple[T, U]]:
    """Every (item of x, item of y) whose globs may overlap: the fixed prefix of one starts
    with the other's, and the fixed suffix of one ends with the other's."""
    for prefix, xs in x.by.items():
        for ys in y.starting_with(prefix):
            yield from _ends_meet(xs, ys)
    if x is not y:
        for prefix, ys in y.by.items():
            for xs in x.starting_with(prefix):
                yield from _ends_meet(xs, ys)


def _ends_meet(xs: list[tuple[str, T]], ys: list[tuple[str, U]]) -> Iterator[tuple[T, U]]:
    for sx, ix in xs:
        for sy, iy in ys:
            if sx.endswith(sy) or sy.endswith(sx):
                yield ix, iy


def candidates(fx: Facts) -> set[tuple[int, int]]:
    """The pairs (plan positions i < j) that may fail a rule; every other pair passes all four.
    """
    out: set[tuple[int, int]] = set()
    for i, j in chain(_base_pairs(fx), _glob_pairs(fx), _state_pairs(fx.packets)):
        if i != j:
            out.add((i, j) if i < j else (j, i))
    return out


def _base_pairs(fx: Facts) -> Iterator[tuple[int, int]]:
    """Code packets of different resolved bases (every such pair fails)."""
    by_base: dict[str | None, list[int]] = {}
    for i, p in enumerate(fx.packets):
        if p.writes_code:
            by_base.setdefault(fx.bases.get(p.id), []).append(i)
    for xs, ys in combinations(by_base.values(), 2):
        yield from product(xs, ys)


def _glob_pairs(fx: Facts) -> Iterator[tuple[int, int]]:
    """Writes against writes and reads against writes (files, order), and shared paths
    against shared paths declared with another integration owner (files)."""
    packets = fx.packets
    written = _Prefixes((w.glob, i) for i, p in enumerate(packets) for w in fx.writes[p.id])
    yield from _meeting(written, written)
    yield from _meeting(_Prefixes((r, i) for i, p in enumerate(packets) for r in p.reads),
                        written)
    at = {p.id: i for i, p in enumerate(packets)}
    declared = _Prefixes((path, (at[by], owner)) for path, owner, by in fx.shared)
    for (i, oi), (j, oj) in _meeting(declared, declared):
        if oi != oj:
            yield i, j


def _state_pairs(packets: list[Packet]) -> Iterator[tuple[int, int]]:
    """Port numbers whose ranges meet, and resources of one kind whose names may overlap."""
    ports: list[tuple[int, int, int]] = []
    named: dict[str, list[tuple[str, int]]] = {}
    for i, p in enumerate(packets):
        for text in p.state:
            kind, name = resource(text)
            if kind != "port":
                named.setdefault(kind, []).append((name, i))
            elif (span := port_range(name)) is not None:
                ports.append((*span, i))      # a named port never collides
    ports.sort()
    for k, (_lo, hi, i) in enumerate(ports):
        for m in range(k + 1, len(ports)):
            if ports[m][0] > hi:
                break
            yield i, ports[m][2]
    for items in named.values():
        index = _Prefixes(items)
        yield from _meeting(index, index)
