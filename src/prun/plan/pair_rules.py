"""The four rules of the independence test (``prun.plan.independence``), each judging one pair
of packets that are not a sequence: base, files, state, order.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from . import globs
from .model import Packet, Plan
from .pair_facts import HEAD, Facts, Write
from .pair_report import Failure


def _fail(rule: str, a: Packet, b: Packet, key: str, value: str, why: str, fix: str,
          fa: str | None = None, fb: str | None = None) -> Failure:
    return Failure(rule, a.id, b.id, key, value, why, fix,
                   where_a=a.where(fa), where_b=b.where(fb))


def _sequence_or_group(a: Packet, b: Packet) -> str:
    return f"group {a.id} and {b.id} into one packet, or sequence them (after: [{a.id}] in {b.id})"


# base ------------------------------------------------------------------------------------------

def base(plan: Plan, a: Packet, b: Packet, bases: Mapping[str, str | None]) -> list[Failure]:
    """Two writers side by side start from the same revision."""
    if not (a.writes_code and b.writes_code):
        return []
    ra, rb = bases.get(a.id), bases.get(b.id)
    if ra == rb:
        return []
    shown_a = plan.base_of(a) or HEAD
    shown_b = plan.base_of(b) or HEAD
    value = f"{shown_a}..{shown_b}" if (ra is None or rb is None) else f"{ra[:12]}..{rb[:12]}"
    why = (f"{a.id} starts from {shown_a} and {b.id} from {shown_b}: writers that run side by "
           "side must start from the same immutable revision")
    fix = (f"give both the same base (a commit id), or sequence them (after: [{a.id}] in {b.id}) "
           "so the later one starts from the earlier one's result")
    return [_fail("base", a, b, "base", value, why, fix, "base", "base")]


# files -----------------------------------------------------------------------------------------

def files(fx: Facts, a: Packet, b: Packet) -> list[Failure]:
    """What they may write is disjoint, and a shared path has one integration owner."""
    out: list[Failure] = []
    for wa in fx.writes[a.id]:
        for wb in fx.writes[b.id]:
            if wa.implied and wb.implied:
                continue    # their manifests overlap too, and that is reported
            path = globs.common(wa.glob, wb.glob)
            if path is None:
                continue
            why = f"{a.id} {wa.how} {wa.glob} and {b.id} {wb.how} {wb.glob}"
            mine = sorted((*fx.owned.get(a.id, ()), *fx.owned.get(b.id, ())))
            owner = next((o for _k, s, o in mine if globs.covers(s, path)), None)
            if owner is not None:
                other = b.id if owner == a.id else a.id
                fix = (f"drop {path} from the owns of {other}: its integration owner is {owner} "
                       f"(let {other} report the change it needs), or {_sequence_or_group(a, b)}")
            else:
                fix = (f"{_sequence_or_group(a, b)}, or name one integration owner "
                       f"(shared: {{{path}: {a.id}}}) and drop it from the owns of {b.id}")
            out.append(_fail("files", a, b, "path", path, why, fix, wa.field, wb.field))
    # One integration owner per shared path.
    for s1, o1 in fx.declared.get(a.id, ()):
        for s2, o2 in fx.declared.get(b.id, ()):
            if o1 == o2:
                continue
            path = globs.common(s1, s2)
            if path is None:
                continue
            why = f"{a.id} names {o1} and {b.id} names {o2} as integration owner of {path}"
            fix = f"name one integration owner for {path} in both packets"
            out.append(_fail("files", a, b, "path", path, why, fix, "shared", "shared"))
    return out


# state -----------------------------------------------------------------------------------------

_ALIASES = {"database": "db", "ports": "port", "fixtures": "fixture"}
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def resource(text: str) -> tuple[str, str]:
    kind, _, name = text.partition(":")
    kind = kind.strip().lower()
    return _ALIASES.get(kind, kind), name.strip()


def port_range(name: str) -> tuple[int, int] | None:
    m = _RANGE.match(name)
    if not m:
        return None
    lo = int(m.group(1))
    hi = int(m.group(2)) if m.group(2) else lo
    return (min(lo, hi), max(lo, hi))


def _same_resource(x: str, y: str) -> str | None:
    kx, nx = resource(x)
    ky, ny = resource(y)
    if kx != ky:
        return None
    if kx == "port":
        rx, ry = port_range(nx), port_range(ny)
        if rx is None or ry is None:
            return None     # a named port (port:web) is assigned per unit: it never collides
        lo, hi = max(rx[0], ry[0]), min(rx[1], ry[1])
        if lo > hi:
            return None
        return f"port:{lo}" if lo == hi else f"port:{lo}-{hi}"
    if nx == ny:
        return f"{kx}:{nx}"
    common = globs.common(nx, ny)
    return f"{kx}:{common}" if common is not None else None


def state(a: Packet, b: Packet) -> list[Failure]:
    """Their ``state`` resources are disjoint."""
    out = []
    for x in a.state:
        for y in b.state:
            res = _same_resource(x, y)
            if res is None:
                continue
            kind = res.split(":", 1)[0]
            why = f"{a.id} uses {x} and {b.id} uses {y}"
            fix = (f"give each its own {kind} (isolate it per packet), or "
                   f"{_sequence_or_group(a, b)}")
            out.append(_fail("state", a, b, "resource", res, why, fix, "state", "state"))
    return out


# order -----------------------------------------------------------------------------------------

def order(a: Packet, b: Packet, wr: Mapping[str, list[Write]]) -> list[Failure]:
    """Neither reads what the other writes."""
    out = []
    for reader, writer in ((a, b), (b, a)):
        for r in reader.reads:
            for w in wr[writer.id]:
                path = globs.common(r, w.glob)
                if path is None:
                    continue
                why = (f"{reader.id} reads {r}, which {writer.id} {w.how} {w.glob}: "
                       f"{reader.id} consumes the output of {writer.id}")
                fix = (f"sequence them (after: [{writer.id}] in {reader.id}), or group them "
                       "into one packet")
                out.append(_fail("order", a, b, "path", path, why, fix,
                                 "reads" if reader is a else w.field,
                                 "reads" if reader is b else w.field))
    return out
