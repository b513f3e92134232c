"""Owned-path globs as languages: match a path, and decide whether two globs can ever match
the same path (even one that does not exist yet) or whether one covers the other. This is
prun's one glob engine: ``prun check`` compares packets with it and reconciliation decides
with it whether a touched path is in a packet's scope (docs/plans.md, "Paths and globs").

Syntax (git's wildmatch, anchored at the repository root):

    *        any run of characters inside one path segment (not '/')
    ?        one character other than '/'
    [a-z]    one character of a class ('[!...]' or '[^...]' negates); never '/'
    **       as a whole segment: any number of segments (``a/**/b``, ``**/x``, ``dir/**``)
    \\x       the character x itself
    dir      a plain name without an extension also covers everything below it
             (``src/api`` = the path itself and ``src/api/**``); ``dir.d/`` (trailing '/')
             is always a folder; ``pyproject.toml`` is one file; ``src/*`` is only the
             entries directly in ``src``, write ``src/**`` for the whole tree

A dotted name that is an existing folder of the repository (``conf.d``) is a file name to
the patterns alone; ``resolve_folder`` reads it as the folder, for callers that know the root.

A pattern is compiled to a small nondeterministic automaton over characters that accepts real
paths only (no empty segment, no '/' at either end). Two patterns overlap when the product of
their automata reaches a pair of accepting states; the search runs over a finite alphabet of
representatives (every character the patterns name, '/', and one character they do not name,
which stands for all the others), so it is exact, and it returns a short path both patterns
match as the example. Containment (``covers``) is the same search over sets of states.
"""

from __future__ import annotations

import os
import re
from collections import deque
from collections.abc import Iterator, Mapping
from functools import lru_cache

from .automaton import alphabet, compile_glob, folder_like, meet, normalize

__all__ = ["common", "compile_glob", "covers", "fixed_prefix", "fixed_suffix", "matches",
           "normalize", "overlap", "path_of", "resolve_folder"]


def matches(pattern: str, path: str) -> bool:
    """Does ``pattern`` cover ``path`` (relative to the repository root, '/' separated)?"""
    a = compile_glob(pattern)
    states = a.start()
    for ch in path_of(path):
        states = a.step(states, ch)
        if not states:
            return False
    return a.accepts(states)


def path_of(path: str) -> str:
    """A path as patterns see it: no leading './' or '/', no doubled or trailing '/'. Unlike
    a pattern, a path keeps its spaces: ``notes.txt `` is not ``notes.txt``."""
    while path.startswith("./"):
        path = path[2:]
    while "//" in path:
        path = path.replace("//", "/")
    return path.strip("/")


_WILD = re.compile(r"[*?\[\\]")     # where a pattern stops being a fixed string
_SPECIAL = re.compile(r"[*?\[\]\\]")  # after the last of these, it is one again


@lru_cache(maxsize=65536)
def fixed_prefix(pattern: str) -> str:
    """The fixed beginning of ``pattern`` (normalized): the characters before its first
    wildcard, class or escape. Every path it matches starts with them, so two globs can only
    overlap when the fixed prefix of one starts with that of the other."""
    pat = normalize(pattern)
    wild = _WILD.search(pat)
    return pat[:wild.start()] if wild else pat


@lru_cache(maxsize=65536)
def fixed_suffix(pattern: str) -> str:
    """The fixed end of ``pattern`` (normalized): the characters after its last wildcard,
    class or escape, or nothing when it may reach below the name it ends with (``src/api``,
    ``src/**``). Every path it matches ends with them."""
    pat = normalize(pattern)
    if folder_like(pat.rsplit("/", 1)[-1]):
        return ""
    tail = _SPECIAL.split(pat)[-1]
    head = pat[:len(pat) - len(tail)]
    if set(head.split("/")) == {"**"}:
        return tail.lstrip("/")     # '**/x' matches 'x' itself
    return tail


def resolve_folder(pattern: str, root: str | os.PathLike[str] | None) -> str:
    """``pattern`` as it reads in the repository at ``root``: a dotted literal name that is an
    existing folder there (``conf.d``) stands for the whole folder (``conf.d/**``)."""
    norm = normalize(pattern)
    if root is not None and "." in norm and not _WILD.search(norm) \
            and os.path.isdir(os.path.join(root, norm)):
        return norm + "/**"
    return pattern


@lru_cache(maxsize=65536)
def overlap(a: str, b: str) -> str | None:
    """A short path both globs cover, or None when no path can match both."""
    pa, pb = fixed_prefix(a), fixed_prefix(b)
    if not (pa.startswith(pb) or pb.startswith(pa)):
        return None     # anchored patterns with diverging fixed beginnings never meet
    sa, sb = fixed_suffix(a), fixed_suffix(b)
    if not (sa.endswith(sb) or sb.endswith(sa)):
        return None     # nor do patterns with diverging fixed ends
    ma, mb = compile_glob(a), compile_glob(b)
    # Breadth-first over pairs of states of the two automata (their product), epsilon moves
    # first, so the example found is short.
    start = (0, 0)
    parent: dict[tuple[int, int], tuple[tuple[int, int], str] | None] = {start: None}
    todo = deque([start])
    while todo:
        node = todo.popleft()
        qa, qb = node
        if qa in ma.accept and qb in mb.accept:
            return _spelled(parent, node)
        moves = [((t, qb), "") for t in ma.eps[qa]] + [((qa, t), "") for t in mb.eps[qb]]
        for csa, ta in ma.edges[qa]:
            for csb, tb in mb.edges[qb]:
                ch = meet(csa, csb)
                if ch is not None:
                    moves.append(((ta, tb), ch))
        for nxt, ch in moves:
            if nxt not in parent:
                parent[nxt] = (node, ch)
                if ch:
                    todo.append(nxt)
                else:
                    todo.appendleft(nxt)
    return None


def _spelled(parent: Mapping[tuple[int, int], tuple[tuple[int, int], str] | None],
             node: tuple[int, int]) -> str:
    """The characters read on the way to ``node`` from the start (``parent``: how each pair of
    states was first reached)."""
    out = []
    step = parent[node]
    while step is not None:
        node, ch = step
        out.append(ch)
        step = parent[node]
    return "".join(reversed(out))


@lru_cache(maxsize=65536)
def covers(wide: str, narrow: str) -> bool:
    """Does ``wide`` match every path ``narrow`` matches?"""
    mw, mn = compile_glob(wide), compile_glob(narrow)
    chars = alphabet(mw, mn)
    start = (mn.start(), mw.start())
    seen = {start}
    todo = deque([start])
    while todo:
        sn, sw = todo.popleft()
        if mn.accepts(sn) and not mw.accepts(sw):
            return False
        for ch in chars:
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
    else a glob that both cover (``src/api/**`` and ``src/**/*.py`` share
    ``src/api/**/*.py``), else a short shared path; None when they share none."""
    example = overlap(a, b)
    if example is None:
        return None
    na, nb = normalize(a), normalize(b)
    if covers(na, nb):
        return nb
    if covers(nb, na):
        return na
    for cand in _candidates(na, nb):
        if covers(na, cand) and covers(nb, cand) and overlap(cand, cand) is not None:
            return cand
    return example


def _candidates(a: str, b: str) -> Iterator[str]:
    """Globs that may name the shared part of ``a`` and ``b``: a folder of one with the file
    pattern of the other."""
    for x, y in ((a, b), (b, a)):
        if x.endswith("/**") and "/" in y:
            folder, name = x[:-3], y.rsplit("/", 1)[1]
            yield f"{folder}/**/{name}"
            yield f"{folder}/{name}"
