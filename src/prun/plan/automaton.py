"""The glob compiler of ``prun.plan.globs``: a pattern (git's wildmatch syntax, normalized)
as a small nondeterministic automaton over characters, the character sets on its edges, and
what two character sets share.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache

# The character sets on the automaton's edges.

@dataclass(frozen=True, slots=True)
class Lit:
    """One character."""

    char: str


@dataclass(frozen=True, slots=True)
class Seg:
    """Any character but '/'."""


@dataclass(frozen=True, slots=True)
class Cls:
    """A class (``[a-z]``): one of ``chars``, or any character outside them when ``negated``;
    never '/'."""

    chars: frozenset[str]
    negated: bool


CharSet = Lit | Seg | Cls
SEG = Seg()
SLASH = Lit("/")


def _in(cs: CharSet, ch: str) -> bool:
    if isinstance(cs, Lit):
        return cs.char == ch
    if ch == "/":
        return False
    return isinstance(cs, Seg) or (ch in cs.chars) != cs.negated


@dataclass
class Automaton:
    """An NFA: ``edges[i]`` lists (charset, j); ``eps[i]`` lists j; ``accept`` the final states."""

    pattern: str
    edges: list[list[tuple[CharSet, int]]] = field(default_factory=list)
    eps: list[list[int]] = field(default_factory=list)
    accept: set[int] = field(default_factory=set)
    chars: set[str] = field(default_factory=set)   # every character the pattern names
    _steps: dict[tuple[frozenset[int], str], frozenset[int]] = field(
        default_factory=dict, repr=False)  # (states, ch) -> states

    def state(self) -> int:
        self.edges.append([])
        self.eps.append([])
        return len(self.edges) - 1

    def edge(self, a: int, cs: CharSet, b: int) -> None:
        self.edges[a].append((cs, b))
        if isinstance(cs, Lit):
            self.chars.add(cs.char)
        elif isinstance(cs, Cls):
            self.chars.update(cs.chars)

    def then(self, a: int, cs: CharSet) -> int:
        """A new state reached from ``a`` on ``cs``."""
        b = self.state()
        self.edge(a, cs, b)
        return b

    def closure(self, states: Iterable[int]) -> frozenset[int]:
        out = set(states)
        todo = list(states)
        while todo:
            s = todo.pop()
            for t in self.eps[s]:
                if t not in out:
                    out.add(t)
                    todo.append(t)
        return frozenset(out)

    def step(self, states: frozenset[int], ch: str) -> frozenset[int]:
        key = (states, ch)
        out = self._steps.get(key)
        if out is None:
            out = self.closure({t for s in states for cs, t in self.edges[s] if _in(cs, ch)})
            self._steps[key] = out
        return out

    def start(self) -> frozenset[int]:
        return self.closure({0})

    def accepts(self, states: Iterable[int]) -> bool:
        return not self.accept.isdisjoint(states)


def normalize(pattern: str) -> str:
    """The canonical spelling: no leading './' or '/', no doubled '/', 'dir/' as 'dir/**'."""
    p = pattern.strip()
    while p.startswith("./"):
        p = p[2:]
    p = p.lstrip("/")
    while "//" in p:
        p = p.replace("//", "/")
    if p.endswith("/"):             # an explicit folder: everything below it
        p = p.rstrip("/") + "/**" if p.rstrip("/") else "**"
    return p or "**"


def _parse_class(seg: str, i: int) -> tuple[Cls, int] | None:
    """The class starting at seg[i] == '[' and the index after it, or None if unclosed."""
    j = i + 1
    negated = j < len(seg) and seg[j] in "!^"
    if negated:
        j += 1
    members: set[str] = set()
    first = True
    while j < len(seg):
        c = seg[j]
        if c == "]" and not first:
            return Cls(frozenset(members), negated), j + 1
        if c == "\\" and j + 1 < len(seg):
            j += 1
            c = seg[j]
        if j + 2 < len(seg) and seg[j + 1] == "-" and seg[j + 2] != "]":
            lo, hi = ord(c), ord(seg[j + 2])
            if hi - lo > 2000:
                hi = lo + 2000  # bound the alphabet; wider ranges are not used for paths
            members.update(chr(k) for k in range(lo, hi + 1))
            j += 3
        else:
            members.add(c)
            j += 1
        first = False
    return None


@lru_cache(maxsize=4096)
def compile_glob(pattern: str) -> Automaton:
    """The automaton of ``pattern`` (normalized), with directory-prefix coverage. It accepts
    paths as they are: segments that are never empty, with no '/' at either end."""
    pat = normalize(pattern)
    a = Automaton(pat)
    cur = a.state()
    segments = pat.split("/")
    need_sep = False
    for k, seg in enumerate(segments):
        last = k == len(segments) - 1
        if seg == "**":
            if need_sep:
                cur = a.then(cur, SLASH)
            if last:            # one or more segments (everything below, or everything)
                cur = _segments(a, cur)
            else:               # zero or more segments, each followed by '/'
                t, u = a.state(), a.state()
                a.eps[cur].append(t)
                a.edge(t, SEG, u)
                a.edge(u, SEG, u)
                a.edge(u, SLASH, t)
                cur = t
            need_sep = False
            continue
        if need_sep:
            cur = a.then(cur, SLASH)
        if set(seg) == {"*"}:   # a segment of stars alone: any name, never an empty one
            cur = a.then(cur, SEG)
            a.edge(cur, SEG, cur)
            need_sep = True
            continue
        i = 0
        while i < len(seg):
            c = seg[i]
            if c == "*":
                loop = a.state()
                a.eps[cur].append(loop)
                a.edge(loop, SEG, loop)
                cur = loop
                while i < len(seg) and seg[i] == "*":
                    i += 1
                continue
            if c == "?":
                cur = a.then(cur, SEG)
                i += 1
                continue
            if c == "[":
                parsed = _parse_class(seg, i)
                if parsed:
                    cls, i = parsed
                    cur = a.then(cur, cls)
                    continue
            if c == "\\" and i + 1 < len(seg):
                i += 1
                c = seg[i]
            cur = a.then(cur, Lit(c))
            i += 1
        need_sep = True
    a.accept.add(cur)
    if folder_like(segments[-1]):
        # A pattern that names a folder covers everything below it. Only a literal name
        # without an extension is taken as a folder: 'src/*.js' is about files, and
        # 'pyproject.toml' is a file, not a folder that '**/x.py' could reach into.
        a.accept.add(_segments(a, a.then(cur, SLASH)))
    return a


def _segments(a: Automaton, start: int) -> int:
    """Add ``one or more segments joined by '/'`` from ``start``; the state it ends in."""
    end, sep = a.state(), a.state()
    a.edge(start, SEG, end)
    a.edge(end, SEG, end)
    a.edge(end, SLASH, sep)
    a.edge(sep, SEG, end)
    return end


def folder_like(segment: str) -> bool:
    """Is ``segment`` the last one of a pattern that names a folder (and so everything below
    it): a literal name without an extension?"""
    if any(c in segment for c in "*?["):
        return False
    return "." not in segment.lstrip(".")   # 'src', '.github' yes; 'pyproject.toml' no


def alphabet(*automata: Automaton) -> list[str]:
    """The characters that stand for every path character the automata can tell apart: each
    one they name, '/', and one they do not name."""
    named = frozenset({"/"}.union(*(a.chars for a in automata)))
    return [_outside(named), *sorted(named)]


def _outside(*excluded: frozenset[str]) -> str:
    """A character (not '/') outside every set in ``excluded``."""
    for c in "xyzqjkw_0123456789":
        if not any(c in e for e in excluded):
            return c
    k = 0x100
    while any(chr(k) in e for e in excluded):
        k += 1
    return chr(k)


def meet(x: CharSet, y: CharSet) -> str | None:
    """A character in both sets, or None."""
    if isinstance(x, Lit):
        return x.char if _in(y, x.char) else None
    if isinstance(y, Lit):
        return y.char if _in(x, y.char) else None
    if isinstance(x, Cls) and isinstance(y, Cls):
        return _meet_classes(x, y)
    if isinstance(x, Cls):
        return _any_of(x)
    if isinstance(y, Cls):
        return _any_of(y)
    return "x"      # any character but '/', twice


def _meet_classes(x: Cls, y: Cls) -> str | None:
    if not x.negated and not y.negated:
        both = sorted(x.chars & y.chars - {"/"})
        return both[0] if both else None
    if not x.negated or not y.negated:
        pos, neg = (x, y) if not x.negated else (y, x)
        left = sorted(pos.chars - neg.chars - {"/"})
        return left[0] if left else None
    return _outside(x.chars, y.chars)


def _any_of(cls: Cls) -> str | None:
    """A character of ``cls`` (never '/'), or None when it has none."""
    if not cls.negated:
        members = sorted(cls.chars - {"/"})
        return members[0] if members else None
    return _outside(cls.chars)
