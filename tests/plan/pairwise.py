"""The independence test judged pair by pair: the reference that ``prun.plan.independence.check``
(which judges only the pairs its indexes put together) must agree with, report for report,
and a maker of random plans full of overlaps to compare them on."""

from __future__ import annotations

import random
from itertools import combinations

from prun.plan import Packet, Plan
from prun.plan.independence import Report, facts, pair_failures


def pairwise_check(plan: Plan, *, repo=None, use_git: bool = True,
                   limit: int | None = None) -> Report:
    """Every pair of ``plan``'s packets in plan order, each judged on the four rules (at
    most ``limit`` pairs; ``pairs`` then counts the pairs judged)."""
    fx = facts(plan, repo=repo, use_git=use_git)
    n = len(fx.packets)
    report = Report(packets=n, pairs=n * (n - 1) // 2, bases=fx.bases)
    seen = set()
    judged = 0
    for a, b in combinations(fx.packets, 2):
        if limit is not None and judged >= limit:
            report.pairs = judged
            break
        judged += 1
        if fx.linked(a, b):
            report.sequenced.append((a.id, b.id))
            continue
        for f in pair_failures(fx, a, b):
            if f not in seen:
                seen.add(f)
                report.failures.append(f)
    return report


GLOBS = ["src/**", "src/a/**", "src/a/*.py", "src/a/x.py", "src/b", "src/*.py", "src/[ab]/**",
         "src/a?/**", "**/*.md", "**/x.py", "docs/*.md", "docs/x.md", "*.md", "docs/",
         "pyproject.toml", "web/package.json", "web/package-lock.json", "uv.lock", "Cargo.toml",
         "tests/test_a.py", "tests/**/test_*.py", "tests/", "conf.d", "conf.d/app.conf", "**",
         "src/\\*x", "[!s]*/**", "a/**/b", "a/b"]
# Globs of one module each (``{i}`` a module number): most pairs of these never meet.
OWN = ["src/m{i}/**", "tests/test_m{i}.py", "src/m{i}*.py", "docs/m{i}.md", "lib/m{i}",
       "src/m{i}/[ab].py", "db:m{i}", "port:{port}"]
STATE = ["port:8000", "port:8000-8010", "port:8005", "port:8010-8020", "port:web", "port:api",
         "db:orders", "database:orders", "db:test_*", "db:test_x", "fixture:users",
         "fixtures:users", "service:redis", "db:"]


def random_plan(rng: random.Random, n: int, *, dense: float = 0.5,
                named_ports: bool = True) -> Plan:
    """A plan of ``n`` packets whose globs and state come from small pools (with probability
    ``dense``) or name one module of ``n`` (mostly their own), with ``after`` links, bases
    and shared paths, so that every rule meets and misses."""
    ids = [f"p{i}" for i in range(n)]
    order = ids[:]
    rng.shuffle(order)          # ``after`` only to packets earlier in this order: no cycles
    state = STATE if named_ports else [s for s in STATE if s not in ("port:web", "port:api")]

    def one(pool, own):
        if rng.random() < dense:
            return rng.choice(pool)
        return rng.choice(own).format(i=rng.randrange(n), port=8100 + rng.randrange(n))

    def some(pool, own, most):
        return tuple(dict.fromkeys(one(pool, own) for _ in range(rng.randint(0, most))))

    packets = []
    for pid in ids:
        earlier = order[:order.index(pid)]
        after = tuple(rng.sample(earlier, min(len(earlier), rng.choice((0, 0, 0, 1, 2)))))
        shared = {one(GLOBS, OWN[:6]): rng.choice(ids) for _ in range(rng.choice((0, 0, 1, 2)))}
        packets.append(Packet(
            id=pid, prompt="x", kind=rng.choice(("code", "code", "read-only")),
            owns=some(GLOBS, OWN[:6], 3), generates=some(GLOBS, OWN[:6], 1),
            reads=some(GLOBS, OWN[:6], 2), shared=shared, state=some(state, OWN[6:], 2),
            after=after, base=rng.choice((None, None, None, None, "v1", "v2"))))
    return Plan(packets=tuple(packets), base=rng.choice((None, "v1")))
