"""What each unit cost, end to end: fake Claude Code, Gemini CLI and agy units through a real
`prun run`; what each CLI reported lands in outcome.json, the ledger's attempts, the run's
summary, `prun status` and its --json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import FAKES, make_fake_cli, prun, report_claude_usage
from prun.ledger import Ledger
from runkit import py_unit, write_plan


@pytest.fixture
def agents(tmp_path, monkeypatch):
    for name, fake in (("claude", "fake_claude.py"), ("gemini", "fake_gemini.py"),
                       ("agy", "fake_agy.py")):
        monkeypatch.setenv(f"PRUN_{name.upper()}_BIN",
                           str(make_fake_cli(tmp_path / "bin", name, FAKES / fake)))
    monkeypatch.setenv("FAKE_CLAUDE_HOME", str(tmp_path / "claude-home"))
    monkeypatch.setenv("FAKE_GEMINI_HOME", str(tmp_path / "gemini-home"))
    monkeypatch.setenv("IS_SANDBOX", "1")
    report_claude_usage(monkeypatch)


def _cost(lines: list[str]) -> dict[str, dict[str, str]]:
    return {ln.split()[1]: dict(w.split("=", 1) for w in ln.split()[2:])
            for ln in lines if ln.startswith("COST ")}


def test_each_executor_reports_what_its_units_used(repo, agents):
    plan = write_plan(repo / "plan.yaml", [
        {"id": "c1", "executor": "claude", "prompt": "Answer."},
        {"id": "c2", "executor": "claude", "prompt": "Answer again."},
        {"id": "g1", "executor": "gemini", "prompt": "Answer."},
        {"id": "a1", "executor": "agy", "prompt": "Answer."},
        py_unit("cmd", "print('No tokens are counted for a command unit. ' * 4)")])
    r = prun("run", str(plan), "--plain")
    assert r.returncode == 0, r.stdout + r.stderr
    run_id = r.stdout.split()[1]
    summary = _cost(r.stdout.splitlines())
    assert summary["claude"] == {"attempts": "2", "tokens_in": "2400", "tokens_out": "60",
                                 "cached": "2000", "usd": "0.0250"}
    assert summary["gemini"] == {"attempts": "1", "tokens_in": "10547", "tokens_out": "40",
                                 "cached": "0", "usd": "unknown"}
    assert summary["agy"] == {"attempts": "1", "tokens_in": "2310", "tokens_out": "7",
                              "cached": "0", "usd": "unknown"}
    assert "command" not in summary                  # it reported nothing: no line
    assert r.stdout.splitlines()[-1].startswith("RESULTS ")

    with Ledger.open() as led:
        rows = {a["packet_id"]: dict(a) for a in led.attempts(run_id)}
    assert (rows["c1"]["tokens_in"], rows["c1"]["tokens_out"], rows["c1"]["tokens_cached"],
            rows["c1"]["cost_usd"]) == (1200, 30, 1000, 0.0125)
    assert rows["g1"]["cost_usd"] is None and rows["g1"]["tokens_in"] == 10547
    assert all(rows["cmd"][c] is None for c in ("tokens_in", "tokens_out", "tokens_cached",
                                                "cost_usd"))
    outcome = json.loads((Path(rows["c1"]["state_dir"]) / "outcome.json").read_text())
    assert outcome["tokens"] == {"in": 1200, "out": 30, "cached": 1000}
    assert outcome["cost_usd"] == 0.0125 and outcome["usage"]["input_tokens"] == 200
    cmd = json.loads((Path(rows["cmd"]["state_dir"]) / "outcome.json").read_text())
    assert cmd["tokens"] == {"in": None, "out": None, "cached": None} and cmd["cost_usd"] is None

    s = prun("status", run_id)
    assert s.returncode == 0 and _cost(s.stdout.splitlines()) == summary
    j = json.loads(prun("status", run_id, "--json").stdout)
    units = {u["packet_id"]: u for u in j["units"]}
    assert units["c2"]["tokens"] == {"in": 1200, "out": 30, "cached": 1000}
    assert units["c2"]["cost_usd"] == 0.0125
    assert units["cmd"]["tokens"] == {"in": None, "out": None, "cached": None}
    assert j["cost"]["claude"] == {"attempts": 2, "tokens": {"in": 2400, "out": 60,
                                                             "cached": 2000},
                                   "cost_usd": 0.025, "unknown": {}}
    assert j["cost"]["gemini"]["cost_usd"] is None
    assert j["cost"]["gemini"]["unknown"] == {"cost_usd": 1}
    assert "command" not in j["cost"]


def test_a_total_missing_some_units_says_how_many(repo, agents, monkeypatch):
    monkeypatch.setenv("FAKE_CLAUDE_COST", "omit")   # this CLI run printed no cost
    plan = write_plan(repo / "plan2.yaml", [
        {"id": "c1", "executor": "claude", "prompt": "A."},
        {"id": "c2", "executor": "claude", "prompt": "B."}])
    r = prun("run", str(plan))
    assert r.returncode == 0, r.stdout + r.stderr
    (line,) = [ln for ln in r.stdout.splitlines() if ln.startswith("COST ")]
    assert line == ("COST claude attempts=2 tokens_in=2400 tokens_out=60 cached=2000 "
                    "usd=unknown")
    monkeypatch.delenv("FAKE_CLAUDE_COST")
    plan = write_plan(repo / "plan3.yaml", [
        {"id": "ok", "executor": "claude", "prompt": "Answer."},
        {"id": "broken", "executor": "claude", "prompt": "Fail now."}])
    r = prun("run", str(plan), env={"FAKE_CLAUDE_COST": "0.5", "FAKE_CLAUDE_IF": json.dumps(
        {"Fail now.": {"FAKE_CLAUDE_SCENARIO": "nonzero_exit"}})})
    assert r.returncode == 1, r.stdout + r.stderr   # its unit failed, printing no result event
    (line,) = [ln for ln in r.stdout.splitlines() if ln.startswith("COST ")]
    assert line == ("COST claude attempts=2 tokens_in=1200 tokens_out=30 cached=1000 "
                    "usd=0.5000 tokens_in_unknown=1 tokens_out_unknown=1 cached_unknown=1 "
                    "usd_unknown=1")
