"""``check`` judges only the pairs its indexes put together; its report is the one a judge of
every pair gives (``pairwise.pairwise_check``), failure for failure, on random plans."""

from __future__ import annotations

import random

import pytest
from pairwise import pairwise_check, random_plan

from prun.plan import Packet, Plan
from prun.plan.independence import ancestors, check


@pytest.mark.parametrize("dense", [0.0, 0.05, 0.3, 0.8])
def test_check_reports_what_judging_every_pair_reports(tmp_path, dense):
    (tmp_path / "conf.d").mkdir()       # a dotted name that is a folder
    rng = random.Random(f"check-{dense}")
    for _ in range(30):
        plan = random_plan(rng, rng.randint(2, 20), dense=dense)
        got = check(plan, repo=tmp_path, use_git=False)
        want = pairwise_check(plan, repo=tmp_path, use_git=False)
        assert got.lines() == want.lines()
        assert got.to_json() == want.to_json()
        assert got.failures == want.failures      # where_a and where_b too


def test_the_random_plans_meet_every_rule_and_miss(tmp_path):
    rng = random.Random("coverage")
    plans = [random_plan(rng, 16, dense=d) for d in (0.0, 0.05, 0.3) for _ in range(5)]
    reports = [check(p, repo=tmp_path, use_git=False) for p in plans]
    assert {f.rule for r in reports for f in r.failures} == {"base", "files", "state", "order"}
    assert all(r.sequenced for r in reports[5:])
    failing = sum(len({(f.a, f.b) for f in r.failures}) for r in reports)
    assert 0 < failing < sum(r.pairs - len(r.sequenced) for r in reports) / 2


def test_a_chain_thousands_of_packets_long():
    n = 3000
    plan = Plan(packets=tuple(Packet(id=f"p{i}", prompt="x", after=(f"p{i - 1}",) if i else ())
                              for i in range(n)))
    before = ancestors(plan)
    assert len(before[f"p{n - 1}"]) == n - 1 and before["p0"] == set()
    assert before["p2"] == {"p0", "p1"}
