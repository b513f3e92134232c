"""The independence test: may these packets run at the same time?

Every pair of packets is judged on four rules. Packets linked through ``after`` (directly or
through a chain) are a sequence, not a fan-out, and pass every rule; the test is about the pairs
that would run side by side.

    base   both write code: they start from the same immutable revision (resolved with git)
    files  what they may write is disjoint: ``owns``, ``generates``, the lockfiles a manifest
           regenerates, and the ``shared`` paths they are the integration owner of; a shared
           path has one integration owner; a code packet with no ``owns`` may write anything
    state  ports, databases, fixtures and other ``state`` resources are disjoint; a named port
           (``port:web``) is assigned to each unit on its own, so it never collides
    order  neither ``reads`` what the other writes (none consumes another's output)

Globs are compared as languages (``prun.plan.globs``), so an overlap is found whether or not a
matching file exists yet. Each ``Failure`` names the pair, the rule, the path or resource, why,
and how to fix it.

The verdict covers every pair, but pairs are not visited one by one (10,000 packets make 50
million). Only the pairs an index puts together can fail, and only those are judged: globs by
their fixed prefix and suffix (two globs can only share a path when the fixed prefix of one
starts with the other's and the fixed suffix of one ends with the other's; ``**/x.md`` has no
prefix, so it is compared with every glob, but judged only beside those whose suffix meets
``x.md``), state resources by kind and name (port numbers by range), code packets by resolved
base. ``pairs`` is counted, and the sequenced pairs come from the ``after`` ancestry.
"""

from __future__ import annotations

import os
import re
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from itertools import chain, combinations, product

from .._util import gitcmd
from ..errors import PrunError, UsageError
from . import globs
from .model import Packet, Plan

RULES = ("base", "files", "state", "order")
HEAD = "HEAD"

# Manifests and the lockfiles their tools rewrite next to them.
LOCKFILES: dict[str, tuple[str, ...]] = {
    "package.json": ("package-lock.json", "yarn.lock", "pnpm-lock.yaml", "npm-shrinkwrap.json",
                     "bun.lockb"),
    "pyproject.toml": ("uv.lock", "poetry.lock", "pdm.lock", "Pipfile.lock"),
    "Pipfile": ("Pipfile.lock",),
    "Cargo.toml": ("Cargo.lock",),
    "go.mod": ("go.sum",),
    "Gemfile": ("Gemfile.lock",),
    "composer.json": ("composer.lock",),
    "mix.exs": ("mix.lock",),
    "pubspec.yaml": ("pubspec.lock",),
    "Package.swift": ("Package.resolved",),
    "flake.nix": ("flake.lock",),
}


@dataclass(frozen=True)
class Failure:
    rule: str           # base | files | state | order
    a: str              # packet ids, in plan order
    b: str
    key: str            # path | resource | base
    value: str
    why: str
    fix: str
    where_a: str = ""
    where_b: str = ""

    def line(self) -> str:
        return (f"FAIL {self.rule} {self.a} {self.b} {self.key}={_q(self.value)} "
                f"why={_q(self.why, force=True)} fix={_q(self.fix, force=True)}")


@dataclass
class Report:
    packets: int
    pairs: int
    failures: list[Failure] = field(default_factory=list)
    sequenced: list[tuple[str, str]] = field(default_factory=list)
    bases: dict[str, str | None] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failures

    def lines(self) -> list[str]:
        out = [f.line() for f in self.failures]
        tail = f"pairs={self.pairs} packets={self.packets} sequenced={len(self.sequenced)}"
        out.append(f"OK {tail}" if self.ok else f"FAILED failures={len(self.failures)} {tail}")
        return out

    def to_json(self) -> dict:
        return {"ok": self.ok, "packets": self.packets, "pairs": self.pairs,
                "sequenced": [list(p) for p in self.sequenced],
                "failures": [asdict(f) for f in self.failures], "bases": self.bases}


def _q(value: str, *, force: bool = False) -> str:
    if not force and value and not re.search(r'[\s"\\=]', value):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


# ---------------------------------------------------------------------------------------------

def ancestors(plan: Plan) -> dict[str, set[str]]:
    """For each packet id, every packet it comes after, directly or through a chain."""
    direct = {p.id: p.after for p in plan.packets}
    out: dict[str, set[str]] = {}
    for p in plan.packets:
        # Depth first without recursion (a chain may be thousands of packets long); a packet's
        # set is made when all of its own dependencies have theirs.
        stack = [(p.id, iter(direct[p.id]))]
        on_path = {p.id}
        while stack:
            pid, deps = stack[-1]
            for dep in deps:
                if dep in direct and dep not in out and dep not in on_path:
                    stack.append((dep, iter(direct[dep])))   # cycles are refused by the loader
                    on_path.add(dep)
                    break
            else:
                stack.pop()
                on_path.discard(pid)
                acc: set[str] = set()
                for dep in direct[pid]:
                    acc.add(dep)
                    acc |= out.get(dep, set())
                out[pid] = acc
    return out


@dataclass(frozen=True)
class _Write:
    glob: str
    how: str            # "owns", "generates", "integration owner", "lockfile of X", ...
    implied: bool = False
    field: str = "owns"  # the packet field it comes from


def writes(packet: Packet, owner_of: Iterable[str] = (),
           root: str | os.PathLike | None = None) -> list[_Write]:
    """What ``packet`` may write, each glob with the reason it counts; ``owner_of`` are the
    shared paths it is the integration owner of. A dotted name that is an existing folder
    under ``root`` (``conf.d``) counts as that whole folder."""
    out = [_Write(globs.resolve_folder(g, root), "owns") for g in packet.owns]
    out += [_Write(globs.resolve_folder(g, root), "generates", field="generates")
            for g in packet.generates]
    out += [_Write(globs.resolve_folder(s, root), "is the integration owner of", field="shared")
            for s in owner_of]
    if packet.writes_code and not out:
        out.append(_Write("**", "declares no owns, so may write"))
    implied = []
    for w in out:
        norm = globs.normalize(w.glob)
        head, _, name = norm.rpartition("/")
        for lock in LOCKFILES.get(name, ()):
            implied.append(_Write(f"{head}/{lock}" if head else lock,
                                  f"regenerates (with {norm})", implied=True,
                                  field=w.field))
    return out + implied


def _shared(plan: Plan) -> list[tuple[str, str, str]]:
    """Every shared declaration: (path, integration owner, declared by)."""
    seen, out = set(), []
    for p in plan.packets:
        for path, owner in p.shared.items():
            key = (globs.normalize(path), owner)
            if key not in seen:
                seen.add(key)
                out.append((globs.normalize(path), owner, p.id))
    return out


@dataclass
class Facts:
    """What the rules read about a plan, worked out once: its packets in plan order, the
    ``after`` ancestry, each code packet's resolved base, the shared declarations (in plan
    order, by declaring packet and by integration owner) and what each packet may write."""

    plan: Plan
    packets: list[Packet]
    before: dict[str, set[str]]
    bases: dict[str, str | None]
    shared: list[tuple[str, str, str]]                   # (path, owner, declared by)
    declared: dict[str, list[tuple[str, str]]]           # declared by -> (path, owner)
    owned: dict[str, list[tuple[int, str, str]]]         # owner -> (index in shared, path, owner)
    writes: dict[str, list[_Write]]

    def linked(self, a: Packet, b: Packet) -> bool:
        """Are ``a`` and ``b`` a sequence (one comes after the other)?"""
        return a.id in self.before[b.id] or b.id in self.before[a.id]


def facts(plan: Plan, *, repo: str | os.PathLike | None = None, use_git: bool = True) -> Facts:
    """The ``Facts`` of ``plan``; bases are resolved with git in ``repo`` (default: the plan's
    repository) unless ``use_git`` is false. Raises ``UsageError`` for a base that is not a
    commit."""
    packets = list(plan.packets)
    shared = _shared(plan)
    git_root = _git_root(repo if repo is not None else plan.root) if use_git else None
    resolved: dict[str, str] = {}
    bases = {p.id: _resolve(plan, p, git_root, resolved) for p in packets if p.writes_code}
    root = git_root or (repo if repo is not None else plan.root)
    declared: dict[str, list[tuple[str, str]]] = {}
    owned: dict[str, list[tuple[int, str, str]]] = {}
    for k, (path, owner, by) in enumerate(shared):
        declared.setdefault(by, []).append((path, owner))
        owned.setdefault(owner, []).append((k, path, owner))
    wr = {p.id: writes(p, [s for _k, s, _o in owned.get(p.id, ())], root) for p in packets}
    return Facts(plan, packets, ancestors(plan), bases, shared, declared, owned, wr)


def pair_failures(fx: Facts, a: Packet, b: Packet) -> list[Failure]:
    """Every failure of the pair ``a``, ``b`` (``a`` first in plan order) that is not a
    sequence: rules in the order base, files, state, order, each failure once."""
    found: list[Failure] = []
    for f in (*_base(fx.plan, a, b, fx.bases), *_files(fx, a, b), *_state(a, b),
              *_order(a, b, fx.writes)):
        if f not in found:
            found.append(f)
    return found


def check(plan: Plan, *, repo: str | os.PathLike | None = None,
          use_git: bool = True) -> Report:
    """Run the four rules over every pair of ``plan``'s packets: the failures in plan order
    of the pairs, as if each pair had been judged in turn."""
    fx = facts(plan, repo=repo, use_git=use_git)
    n = len(fx.packets)
    report = Report(packets=n, pairs=n * (n - 1) // 2, bases=fx.bases,
                    sequenced=_sequenced(fx))
    for i, j in sorted(_candidates(fx)):
        a, b = fx.packets[i], fx.packets[j]
        if not fx.linked(a, b):
            report.failures += pair_failures(fx, a, b)
    return report


def _sequenced(fx: Facts) -> list[tuple[str, str]]:
    """The pairs linked through ``after``, in plan order, from the ancestry alone."""
    at = {p.id: i for i, p in enumerate(fx.packets)}
    pairs = set()
    for j, p in enumerate(fx.packets):
        for dep in fx.before[p.id]:
            i = at.get(dep)
            if i is not None and i != j:
                pairs.add((min(i, j), max(i, j)))
    return [(fx.packets[i].id, fx.packets[j].id) for i, j in sorted(pairs)]


# Which pairs can fail ---------------------------------------------------------------------------

class _Prefixes:
    """Items filed under the fixed prefix of their glob (``globs.fixed_prefix``), each with the
    glob's fixed suffix; the prefixes sorted, so the ones starting with a given prefix are found
    by bisection."""

    def __init__(self, items: Iterable[tuple[str, object]]):
        self.by: dict[str, list[tuple[str, object]]] = {}
        for glob, item in items:
            self.by.setdefault(globs.fixed_prefix(glob), []).append(
                (globs.fixed_suffix(glob), item))
        self.keys = sorted(self.by)

    def starting_with(self, prefix: str) -> Iterator[list[tuple[str, object]]]:
        k = bisect_left(self.keys, prefix)
        while k < len(self.keys) and self.keys[k].startswith(prefix):
            yield self.by[self.keys[k]]
            k += 1


def _meeting(x: _Prefixes, y: _Prefixes) -> Iterator[tuple]:
    """Every (item of x, item of y) whose globs may overlap: the fixed prefix of one starts
    with the other's, and the fixed suffix of one ends with the other's."""
    for prefix, xs in x.by.items():
        for ys in y.starting_with(prefix):
            yield from _ends_meet(xs, ys)
    if x is not y:
        for prefix, ys in y.by.items():
            for xs in x.starting_with(prefix):
                yield from _ends_meet(xs, ys)


def _ends_meet(xs: list[tuple[str, object]], ys: list[tuple[str, object]]) -> Iterator[tuple]:
    for sx, ix in xs:
        for sy, iy in ys:
            if sx.endswith(sy) or sy.endswith(sx):
                yield ix, iy


def _candidates(fx: Facts) -> set[tuple[int, int]]:
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
            kind, name = _resource(text)
            if kind != "port":
                named.setdefault(kind, []).append((name, i))
            elif (span := _ports(name)) is not None:
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


def _fail(rule, a: Packet, b: Packet, key, value, why, fix, fa=None, fb=None) -> Failure:
    return Failure(rule, a.id, b.id, key, value, why, fix,
                   where_a=a.where(fa), where_b=b.where(fb))


def _sequence_or_group(a: Packet, b: Packet) -> str:
    return f"group {a.id} and {b.id} into one packet, or sequence them (after: [{a.id}] in {b.id})"


# base ------------------------------------------------------------------------------------------

def _git_root(folder) -> str | None:
    try:
        return gitcmd.toplevel(folder)
    except PrunError:   # no git at all: bases are compared as written
        return None


def _resolve(plan: Plan, p: Packet, git_root: str | None, cache: dict) -> str | None:
    rev = plan.base_of(p)
    if git_root is None:
        return rev
    name = rev or HEAD
    if name in cache:
        return cache[name]
    try:
        out = gitcmd.git(["rev-parse", "--verify", "--quiet", f"{name}^{{commit}}"], git_root,
                         check=False, timeout=30)
    except PrunError as e:
        raise UsageError(f"cannot run git to resolve base {name!r}: {e.message}",
                         hint="install git, or run prun check outside a repository")
    if out.returncode != 0 or not out.stdout.strip():
        where = p.where("base") if p.base else plan.where("base")
        raise UsageError(f"{where}: base {name!r} of packet {p.id!r} is not a commit in "
                         f"{git_root}", hint="give a commit id, tag or branch that exists "
                         "(git log --oneline shows them)")
    cache[name] = out.stdout.strip()
    return cache[name]


def _base(plan: Plan, a: Packet, b: Packet, bases) -> list[Failure]:
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

def _files(fx: Facts, a: Packet, b: Packet) -> list[Failure]:
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


def _resource(text: str) -> tuple[str, str]:
    kind, _, name = text.partition(":")
    kind = kind.strip().lower()
    return _ALIASES.get(kind, kind), name.strip()


def _ports(name: str) -> tuple[int, int] | None:
    m = _RANGE.match(name)
    if not m:
        return None
    lo = int(m.group(1))
    hi = int(m.group(2)) if m.group(2) else lo
    return (min(lo, hi), max(lo, hi))


def _same_resource(x: str, y: str) -> str | None:
    kx, nx = _resource(x)
    ky, ny = _resource(y)
    if kx != ky:
        return None
    if kx == "port":
        rx, ry = _ports(nx), _ports(ny)
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


def _state(a: Packet, b: Packet) -> list[Failure]:
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

def _order(a: Packet, b: Packet, wr) -> list[Failure]:
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
