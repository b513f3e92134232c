"""Owned-path globs as languages: match a path, and decide whether two globs can ever match
the same path (even one that does not exist yet) or whether one covers the other.

Syntax (git's wildmatch, anchored at the repository root):

    *        any run of characters inside one path segment (not '/')
    ?        one character other than '/'
    [a-z]    one character of a class ('[!...]' or '[^...]' negates); never '/'
    **       as a whole segment: any number of segments (``a/**/b``, ``**/x``, ``dir/**``)
    \\x       the character x itself
    dir      a pattern whose last segment has no wildcard also covers everything below it
             (``src/api`` = ``src/api/**`` plus the path itself); ``src/*`` is only the
             entries directly in ``src``, write ``src/**`` for the whole tree

A pattern is compiled to a small nondeterministic automaton over characters. Two patterns
overlap when the product of their automata reaches a pair of accepting states; the search runs
over a finite alphabet of representatives (every character the patterns name, '/', and one
character they do not name, which stands for all the others), so it is exact, and it returns
the shortest path both patterns match as the example. Containment (``covers``) is the same
search over sets of states.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from functools import lru_cache

# A character set: ("lit", c) | ("seg",) any but '/' | ("any",) | ("cls", chars, negated)
CharSet = tuple


def _in(cs: CharSet, ch: str) -> bool:
    kind = cs[0]
    if kind == "lit":
        return cs[1] == ch
    if kind == "seg":
        return ch != "/"
    if kind == "any":
        return True
    return ch != "/" and ((ch in cs[1]) != cs[2])


@dataclass
class Automaton:
    """An NFA: ``edges[i]`` lists (charset, j); ``eps[i]`` lists j; ``accept`` the final states."""

    pattern: str
    edges: list[list[tuple[CharSet, int]]] = field(default_factory=list)
    eps: list[list[int]] = field(default_factory=list)
    accept: set[int] = field(default_factory=set)
    chars: set[str] = field(default_factory=set)   # every character the pattern names

    def state(self) -> int:
        self.edges.append([])
        self.eps.append([])
        return len(self.edges) - 1

    def edge(self, a: int, cs: CharSet, b: int) -> None:
        self.edges[a].append((cs, b))
        if cs[0] == "lit":
            self.chars.add(cs[1])
        elif cs[0] == "cls":
            self.chars.update(cs[1])

    def closure(self, states) -> frozenset[int]:
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
        return self.closure({t for s in states for cs, t in self.edges[s] if _in(cs, ch)})

    def start(self) -> frozenset[int]:
        return self.closure({0})

    def accepts(self, states) -> bool:
        return not self.accept.isdisjoint(states)


def normalize(pattern: str) -> str:
    """The canonical spelling: no leading './' or '/', no trailing or doubled '/'."""
    p = pattern.strip()
    while p.startswith("./"):
        p = p[2:]
    p = p.lstrip("/")
    while "//" in p:
        p = p.replace("//", "/")
    p = p.rstrip("/")
    return p or "**"


def _parse_class(seg: str, i: int) -> tuple[CharSet, int] | None:
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
            return ("cls", frozenset(members), negated), j + 1
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
    """The automaton of ``pattern`` (normalized), with directory-prefix coverage."""
    pat = normalize(pattern)
    a = Automaton(pat)
    cur = a.state()
    segments = pat.split("/")
    need_sep = False
    for k, seg in enumerate(segments):
        last = k == len(segments) - 1
        if seg == "**":
            if need_sep:
                n = a.state()
                a.edge(cur, ("lit", "/"), n)
                cur = n
            if last:            # everything below (or everything, for a lone '**')
                f = a.state()
                a.edge(cur, ("any",), f)
                a.edge(f, ("any",), f)
                cur = f
                need_sep = False
            else:               # zero or more whole segments, each followed by '/'
                t, u = a.state(), a.state()
                a.eps[cur].append(t)
                a.edge(cur, ("seg",), u)
                a.edge(u, ("any",), u)
                a.edge(u, ("lit", "/"), t)
                cur = t
                need_sep = False
            continue
        if need_sep:
            n = a.state()
            a.edge(cur, ("lit", "/"), n)
            cur = n
        i = 0
        while i < len(seg):
            c = seg[i]
            if c == "*":
                loop = a.state()
                a.eps[cur].append(loop)
                a.edge(loop, ("seg",), loop)
                cur = loop
                while i < len(seg) and seg[i] == "*":
                    i += 1
                continue
            if c == "?":
                n = a.state()
                a.edge(cur, ("seg",), n)
                cur = n
                i += 1
                continue
            if c == "[":
                parsed = _parse_class(seg, i)
                if parsed:
                    cs, i = parsed
                    n = a.state()
                    a.edge(cur, cs, n)
                    cur = n
                    continue
            if c == "\\" and i + 1 < len(seg):
                i += 1
                c = seg[i]
            n = a.state()
            a.edge(cur, ("lit", c), n)
            cur = n
            i += 1
        need_sep = True
    a.accept.add(cur)
    if not _has_wildcard(segments[-1]):
        # A pattern that names a directory covers everything below it. Only a literal last
        # segment is a directory name: 'src/*.js' is about files, not a folder called 'x.js'.
        d, e = a.state(), a.state()
        a.edge(cur, ("lit", "/"), d)
        a.edge(d, ("any",), e)
        a.edge(e, ("any",), e)
        a.accept.add(e)
    return a


def _has_wildcard(segment: str) -> bool:
    return any(c in segment for c in "*?[")


def matches(pattern: str, path: str) -> bool:
    """Does ``pattern`` cover ``path`` (relative to the repository root, '/' separated)?"""
    a = compile_glob(pattern)
    states = a.start()
    for ch in normalize(path):
        states = a.step(states, ch)
        if not states:
            return False
    return a.accepts(states)


def _alphabet(*automata: Automaton) -> list[str]:
    named = set().union(*(a.chars for a in automata)) | {"/"}
    fresh = next(c for c in "xyzqjkw_0123456789" + "".join(map(chr, range(0x100, 0x3000)))
                 if c not in named)
    return [fresh, *sorted(named)]


def overlap(a: str, b: str) -> str | None:
    """The shortest path both globs cover, or None when no path can match both."""
    ma, mb = compile_glob(a), compile_glob(b)
    alphabet = _alphabet(ma, mb)
    start = (ma.start(), mb.start())
    parent: dict = {start: None}
    todo = deque([start])
    while todo:
        node = todo.popleft()
        sa, sb = node
        if ma.accepts(sa) and mb.accepts(sb):
            out = []
            while parent[node] is not None:
                node, ch = parent[node]
                out.append(ch)
            return "".join(reversed(out))
        for ch in alphabet:
            nxt = (ma.step(sa, ch), mb.step(sb, ch))
            if nxt[0] and nxt[1] and nxt not in parent:
                parent[nxt] = (node, ch)
                todo.append(nxt)
    return None


def covers(wide: str, narrow: str) -> bool:
    """Does ``wide`` match every path ``narrow`` matches?"""
    mw, mn = compile_glob(wide), compile_glob(narrow)
    alphabet = _alphabet(mw, mn)
    start = (mn.start(), mw.start())
    seen = {start}
    todo = deque([start])
    while todo:
        sn, sw = todo.popleft()
        if mn.accepts(sn) and not mw.accepts(sw):
            return False
        for ch in alphabet:
            nn = mn.step(sn, ch)
            if not nn:
                continue
            nxt = (nn, mw.step(sw, ch))
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return True


def common(a: str, b: str) -> str | None:
    """How to name the paths two globs share: the narrower glob when one covers the other,
    else an example path; None when they share none."""
    example = overlap(a, b)
    if example is None:
        return None
    if covers(a, b):
        return normalize(b)
    if covers(b, a):
        return normalize(a)
    return example
