"""`prun estimate PLAN`: the projection per executor and model from the ledger's history
(a real ledger written by a real `prun run` of fake Claude Code units), the quota pools'
headroom from the snapshot, and `prun run`'s one-line warning before launching."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from helpers import fake_claude_reporting_usage, prun, write_plan


@pytest.fixture
def claude(tmp_path, monkeypatch):
    fake_claude_reporting_usage(tmp_path, monkeypatch)


def _plan(repo, name, n):
    return write_plan(repo / name, [{"id": f"u{i}", "executor": "claude", "prompt": f"Answer {i}."}
                                    for i in range(n)])


def test_with_no_history_it_projects_nothing(repo, claude):
    r = prun("estimate", str(_plan(repo, "plan.yaml", 3)))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("ESTIMATE claude model=") and \
        " units=3 samples=0 tokens=unknown usd=unknown" in lines[0]
    assert lines[-1] == "HISTORY none"
    doc = json.loads(prun("estimate", str(_plan(repo, "plan.yaml", 3)), "--json").stdout)
    assert doc["history"] is False
    [entry] = doc["entries"]
    assert (entry["executor"], entry["units"], entry["samples"], entry["tokens"],
            entry["usd"]) == ("claude", 3, 0, None, None)


def test_on_a_ledger_with_history(repo, claude, tmp_path):
    seeded = prun("run", str(_plan(repo, "seed.yaml", 2)), "--plain")
    assert seeded.returncode == 0, seeded.stdout + seeded.stderr
    resets = (datetime.now(UTC) + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    (tmp_path / "quota.json").write_text(json.dumps({"version": 1, "groups": {"claude": {
        "left": 0.0, "resets_at": resets, "read_at": datetime.now(UTC).strftime(
            "%Y-%m-%dT%H:%M:%SZ"), "source": "probe"}}}))
    plan = _plan(repo, "plan.yaml", 4)
    r = prun("estimate", str(plan), "--budget-usd", "0.04")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert " units=4 samples=2 tokens=4920 usd=0.0500 unit_tokens=1230..1230 " \
           "unit_usd=0.0125..0.0125" in lines[0]
    assert lines[1] == (f"POOL claude left=0 resets={resets} units=4 exhausts=yes "
                        'why="it reads empty now"')
    assert lines[2] == 'BUDGET over="the budget: 0.0500 USD projected, 0.04 allowed"'
    doc = json.loads(prun("estimate", str(plan), "--json").stdout)
    assert doc["history"] is True and doc["budget_over"] is None
    [entry] = doc["entries"]
    assert (entry["samples"], entry["tokens"], entry["usd"]) == (2, 4920, 0.05)
    assert doc["pools"] == [{"group": "claude", "left": 0.0, "resets_at": resets, "units": 4,
                             "exhausts": True, "why": "it reads empty now"}]

    run = prun("run", str(plan), "--detach", "--budget-usd", "0.04")
    warning = [ln for ln in run.stderr.splitlines() if ln.startswith("prun: warning: ")]
    assert warning == ["prun: warning: the plan's projection exceeds the claude pool: it reads "
                       "empty now; the budget: 0.0500 USD projected, 0.04 allowed"]
    assert prun("cancel", run.stdout.split()[1]).returncode == 0
