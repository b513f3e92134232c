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

from . import pair_rules as rules
from .model import Packet, Plan
from .pair_facts import LOCKFILES, Facts, ancestors, facts, writes
from .pair_index import candidates
from .pair_report import RULES, Failure, Report

__all__ = ["LOCKFILES", "RULES", "Facts", "Failure", "Report", "ancestors", "check", "facts",
           "pair_failures", "writes"]


def pair_failures(fx: Facts, a: Packet, b: Packet) -> list[Failure]:
    """Every failure of the pair ``a``, ``b`` (``a`` first in plan order) that is not a
    sequence: rules in the order base, files, state, order, each failure once."""
    found: list[Failure] = []
    for f in (*rules.base(fx.plan, a, b, fx.bases), *rules.files(fx, a, b), *rules.state(a, b),
              *rules.order(a, b, fx.writes)):
        if f not in found:
            found.append(f)
    return found


def check(plan: Plan, *, repo: str | os.PathLike[str] | None = None,
          use_git: bool = True) -> Report:
    """Run the four rules over every pair of ``plan``'s packets: the failures in plan order
    of the pairs, as if each pair had been judged in turn."""
    fx = facts(plan, repo=repo, use_git=use_git)
    n = len(fx.packets)
    report = Report(packets=n, pairs=n * (n - 1) // 2, bases=fx.bases,
                    sequenced=_sequenced(fx))
    for i, j in sorted(candidates(fx)):
        a, b = fx.packets[i], fx.packets[j]
        if not fx.linked(a, b):
            report.failures += pair_failures(fx, a, b)
    return report


def _sequenced(fx: Facts) -> list[tuple[str, str]]:
    """The pairs linked through ``after``, in plan order, from the ancestry alone."""
    at = {p.id: i for i, p in enumerate(fx.packets)}
    pairs: set[tuple[int, int]] = set()
    for j, p in enumerate(fx.packets):
        for dep in fx.before[p.id]:
            i = at.get(dep)
            if i is not None and i != j:
                pairs.add((min(i, j), max(i, j)))
    return [(fx.packets[i].id, fx.packets[j].id) for i, j in sorted(pairs)]
