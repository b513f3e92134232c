"""A run's budget, end to end: fake Claude Code units whose stream-json reports usage as the
real CLI does, through a real `prun run`; the projection comes from the ledger's history, a
unit the budget cannot hold is parked with reason=budget, `prun wait` exits 6, `prun status`
shows spent, projected and the budget, and --budget-hard cancels the running units too."""

from __future__ import annotations

import json

import pytest

from helpers import fake_claude_reporting_usage, poll, prun
from prun.ledger import Ledger
from runkit import write_plan

UNIT_TOKENS = 1230   # 200 + 1000 cached in, 30 out: what each fake unit reports


@pytest.fixture
def claude(tmp_path, monkeypatch):
    fake_claude_reporting_usage(tmp_path, monkeypatch)
    monkeypatch.setenv("FAKE_CLAUDE_IF", json.dumps({"HANG": {"FAKE_CLAUDE_SCENARIO": "hang"}}))


def _units(ids, hang=()):
    return [{"id": i, "executor": "claude", "prompt": f"Answer {i}." + (" HANG" if i in hang
                                                                       else "")} for i in ids]


def _history(repo):
    """One finished unit in the ledger: the projection every later claude unit gets."""
    r = prun("run", str(write_plan(repo / "seed.yaml", _units(["seed"]))), "--plain")
    assert r.returncode == 0, r.stdout + r.stderr


def _statuses(run_id):
    with Ledger.open() as led:
        return {p["id"]: p["status"] for p in led.packets(run_id)}


def test_a_budget_reached_after_a_few_units_parks_the_rest(repo, claude):
    _history(repo)
    plan = write_plan(repo / "plan.yaml", _units(["u1", "u2", "u3", "u4", "u5"]), parallel=1)
    r = prun("run", str(plan), "--plain", "--budget-tokens", "3000")
    run_id = r.stdout.split()[1]
    assert _statuses(run_id) == {"u1": "succeeded", "u2": "succeeded", "u3": "parked",
                                 "u4": "parked", "u5": "parked"}, r.stdout + r.stderr
    told = r.stdout.split("\nRUN ")[0]   # the events, before the summary
    parked = [ln for ln in told.splitlines() if " parked " in ln]
    assert [ln.split()[1] for ln in parked] == ["u3", "u4", "u5"]
    assert all(ln.startswith(f"UNIT {ln.split()[1]} parked reason=budget ") for ln in parked)
    assert "the budget of 3000 tokens would be passed" in parked[0]

    s = prun("status", run_id)
    assert s.returncode == 0
    line = next(ln for ln in s.stdout.splitlines() if ln.startswith("BUDGET "))
    assert line == (f"BUDGET spent_tokens={2 * UNIT_TOKENS} spent_usd=0.0250 projected_tokens=0 "
                    "projected_usd=0.0000 budget_tokens=3000 budget_usd=none")
    doc = json.loads(prun("status", run_id, "--json").stdout)
    assert doc["budget"] == [{"executor": None, "spent": {"tokens": 2460, "usd": 0.025},
                              "projected": {"tokens": 0, "usd": 0.0},
                              "budget": {"tokens": 3000, "usd": None}}]
    assert doc["run"]["status"] == "stopped"


def test_the_plan_budget_per_executor_and_usd(repo, claude):
    _history(repo)
    plan = write_plan(repo / "plan.yaml", _units(["u1", "u2", "u3"]), parallel=1,
                      budget={"executors": {"claude": {"usd": 0.03}}})
    r = prun("run", str(plan), "--plain")
    run_id = r.stdout.split()[1]
    assert _statuses(run_id) == {"u1": "succeeded", "u2": "succeeded", "u3": "parked"}
    assert "the claude budget of 0.03 USD would be passed" in r.stdout


def test_prun_wait_exits_6_while_the_running_units_finish(repo, claude):
    _history(repo)
    plan = write_plan(repo / "plan.yaml", _units(["slow", "a", "b", "c"], hang=("slow",)),
                      parallel=2)
    r = prun("run", str(plan), "--detach", "--budget-tokens", "3000")
    assert r.returncode == 0, r.stderr
    run_id = r.stdout.split()[1]
    w = prun("wait", run_id)
    assert w.returncode == 6, w.stdout + w.stderr
    assert "EVENT" in w.stdout and " parked packet=b reason=budget " in w.stdout
    assert _statuses(run_id) == {"slow": "running", "a": "succeeded", "b": "parked",
                                 "c": "parked"}
    assert prun("cancel", run_id).returncode == 0
    poll(lambda: _statuses(run_id)["slow"] == "cancelled")


def test_budget_hard_cancels_the_running_units(repo, claude):
    _history(repo)
    plan = write_plan(repo / "plan.yaml", _units(["slow", "a", "b", "c"], hang=("slow",)),
                      parallel=2)
    r = prun("run", str(plan), "--plain", "--budget-tokens", "3000", "--budget-hard")
    run_id = r.stdout.split()[1]
    assert _statuses(run_id) == {"slow": "cancelled", "a": "succeeded", "b": "parked",
                                 "c": "parked"}, r.stdout + r.stderr


def test_a_bad_budget_is_refused_in_one_line(repo, claude):
    r = prun("run", str(write_plan(repo / "plan.yaml", _units(["u1"]))), "--budget-usd", "-1")
    assert r.returncode == 2 and "not an amount of US dollars" in r.stderr
    plan = write_plan(repo / "plan.yaml", _units(["u1"]),
                      budget={"executors": {"nosuch": {"usd": 1}}})
    r = prun("run", str(plan))
    assert r.returncode == 2 and "budget.executors: unknown executor 'nosuch'" in r.stderr


def test_the_launch_gate_reads_the_ledger_once_per_pass_whatever_the_units(repo, claude):
    """Asked about many units beside many running ones, the gate reads each projection once
    per launch pass (a run of a thousand units under a budget stays linear)."""
    from prun.plan import Budget
    from prun.run.budget import BudgetGate
    from prun.run.freeze import packet_from_spec

    _history(repo)
    with Ledger.open() as led:
        run_id = led.conn.execute("SELECT id FROM runs ORDER BY rowid DESC LIMIT 1").fetchone()[0]
        packet = packet_from_spec(led.packets(run_id)[0]["spec"], led.packets(run_id)[0])
        reads = []
        usage = led.usage
        led.usage = lambda *a, **k: reads.append(a) or usage(*a, **k)   # type: ignore[method-assign]
        gate = BudgetGate(Budget(tokens=10**9), led, run_id, {})
        for n in range(40):
            assert gate.admit(packet, "claude", [(packet, "claude")] * n) is None
        first = len(reads)
        assert 0 < first <= 2        # this run's finished attempts, then the history
        gate.refresh()               # the next pass reads again
        assert gate.admit(packet, "claude", [(packet, "claude")] * 40) is None
        assert len(reads) == 2 * first
