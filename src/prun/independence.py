"""The independence test: may these packets run at the same time?

Every pair of packets is checked on four rules. Packets linked through ``after`` (directly or
through a chain) are a sequence, not a fan-out, and pass every rule; the test is about the pairs
that would run side by side.

    base   both write code: they start from the same immutable revision (resolved with git)
    files  what they may write is disjoint: ``owns``, ``generates``, the lockfiles a manifest
           regenerates, and the ``shared`` paths they are the integration owner of; a shared
           path has one integration owner; a code packet with no ``owns`` may write anything
    state  ports, databases, fixtures and other ``state`` resources are disjoint
    order  neither ``reads`` what the other writes (none consumes another's output)

Globs are compared as languages (``prun.globs``), so an overlap is found whether or not a
matching file exists yet. Each ``Failure`` names the pair, the rule, the path or resource, why,
and how to fix it.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import asdict, dataclass, field
from itertools import combinations

from . import globs
from .errors import UsageError
from .plan import Packet, Plan

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
    direct = {p.id: set(p.after) for p in plan.packets}
    out: dict[str, set[str]] = {}

    def visit(pid: str, trail: frozenset[str]) -> set[str]:
        if pid in out:
            return out[pid]
        acc: set[str] = set()
        for dep in direct.get(pid, ()):
            if dep in trail:      # cycles are refused by the loader; stay finite anyway
                continue
            acc.add(dep)
            acc |= visit(dep, trail | {dep})
        out[pid] = acc
        return acc

    for p in plan.packets:
        visit(p.id, frozenset({p.id}))
    return out


@dataclass(frozen=True)
class _Write:
    glob: str
    how: str            # "owns", "generates", "integration owner", "lockfile of X", ...
    implied: bool = False
    field: str = "owns"  # the packet field it comes from


def writes(packet: Packet, shared: list[tuple[str, str, str]],
           root: str | os.PathLike | None = None) -> list[_Write]:
    """What ``packet`` may write, each glob with the reason it counts. A dotted name that is
    an existing folder under ``root`` (``conf.d``) counts as that whole folder."""
    def real(g: str) -> str:
        norm = globs.normalize(g)
        if root is not None and not any(c in norm for c in "*?[\\") and "." in norm \
                and os.path.isdir(os.path.join(root, norm)):
            return norm + "/**"
        return g

    out = [_Write(real(g), "owns") for g in packet.owns]
    out += [_Write(real(g), "generates", field="generates") for g in packet.generates]
    out += [_Write(real(s), "is the integration owner of", field="shared")
            for s, owner, _by in shared if owner == packet.id]
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


# ---------------------------------------------------------------------------------------------

def check(plan: Plan, *, repo: str | os.PathLike | None = None,
          use_git: bool = True) -> Report:
    """Run the four rules over every pair of ``plan``'s packets."""
    packets = list(plan.packets)
    before = ancestors(plan)
    shared = _shared(plan)
    git_root = _git_root(repo if repo is not None else plan.root) if use_git else None
    resolved: dict[str, str] = {}
    bases = {p.id: _resolve(plan, p, git_root, resolved) for p in packets if p.writes_code}
    report = Report(packets=len(packets), pairs=len(packets) * (len(packets) - 1) // 2,
                    bases=bases)
    root = git_root or (repo if repo is not None else plan.root)
    wr = {p.id: writes(p, shared, root) for p in packets}
    for a, b in combinations(packets, 2):
        if a.id in before[b.id] or b.id in before[a.id]:
            report.sequenced.append((a.id, b.id))
            continue
        found: list[Failure] = []
        found += _base(plan, a, b, bases)
        found += _files(a, b, wr, shared)
        found += _state(a, b)
        found += _order(a, b, wr)
        for f in found:
            if f not in report.failures:
                report.failures.append(f)
    return report


def _fail(rule, a: Packet, b: Packet, key, value, why, fix, fa=None, fb=None) -> Failure:
    return Failure(rule, a.id, b.id, key, value, why, fix,
                   where_a=a.where(fa), where_b=b.where(fb))


def _sequence_or_group(a: Packet, b: Packet) -> str:
    return f"group {a.id} and {b.id} into one packet, or sequence them (after: [{a.id}] in {b.id})"


# base ------------------------------------------------------------------------------------------

def _git_root(folder) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(folder), "rev-parse", "--show-toplevel"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def _resolve(plan: Plan, p: Packet, git_root: str | None, cache: dict) -> str | None:
    rev = plan.base_of(p)
    if git_root is None:
        return rev
    name = rev or HEAD
    if name in cache:
        return cache[name]
    try:
        out = subprocess.run(["git", "-C", git_root, "rev-parse", "--verify", "--quiet",
                              f"{name}^{{commit}}"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise UsageError(f"cannot run git to resolve base {name!r}: {e}",
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

def _files(a: Packet, b: Packet, wr, shared) -> list[Failure]:
    out: list[Failure] = []
    for wa in wr[a.id]:
        for wb in wr[b.id]:
            if wa.implied and wb.implied:
                continue    # their manifests overlap too, and that is reported
            path = globs.common(wa.glob, wb.glob)
            if path is None:
                continue
            why = f"{a.id} {wa.how} {wa.glob} and {b.id} {wb.how} {wb.glob}"
            owner = next((o for s, o, _by in shared
                          if o in (a.id, b.id) and globs.covers(s, path)), None)
            if owner is not None:
                other = b.id if owner == a.id else a.id
                fix = (f"drop {path} from the owns of {other}: its integration owner is {owner} "
                       f"(let {other} report the change it needs), or {_sequence_or_group(a, b)}")
            else:
                fix = (f"{_sequence_or_group(a, b)}, or name one integration owner "
                       f"(shared: {{{path}: {a.id}}}) and drop it from the owns of {b.id}")
            out.append(_fail("files", a, b, "path", path, why, fix, wa.field, wb.field))
    # One integration owner per shared path.
    for s1, o1, by1 in shared:
        for s2, o2, by2 in shared:
            if o1 == o2 or {by1, by2} != {a.id, b.id} or by1 != a.id:
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
        if rx and ry:
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
