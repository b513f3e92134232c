"""Quota: a unit whose pool is empty is parked until the reset, never failed for quota; a
unit stopped by a quota limit mid-run is followed by a linked attempt that resumes it."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from helpers import calls, make_fake_cli, poll, prun
from prun.ledger import Ledger
from runkit import write_plan

FAKE = Path(__file__).parent / "fake_agy_quota.py"


@pytest.fixture
def agy(tmp_path, monkeypatch):
    path = make_fake_cli(tmp_path / "bin", "agy", FAKE)
    monkeypatch.setenv("PRUN_AGY_BIN", str(path))
    log = tmp_path / "agy-calls.jsonl"
    monkeypatch.setenv("FAKE_AGY_LOG", str(log))
    return log


def _iso(seconds_from_now: float) -> str:
    t = datetime.now(UTC) + timedelta(seconds=seconds_from_now)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _rows(run_id):
    with Ledger.open() as led:
        return ({p["id"]: p["status"] for p in led.packets(run_id)},
                [dict(a) for a in led.attempts(run_id)],
                [dict(e) for e in led.events(run_id)])


def test_empty_pool_parks_the_unit_until_its_reset(repo, agy, tmp_path, monkeypatch):
    snap = Path(tmp_path / "quota.json")
    snap.write_text(json.dumps({"version": 1, "groups": {"agy-gemini": {
        "left": 0.0, "resets_at": _iso(6), "read_at": _iso(0), "source": "probe"}}}))
    plan = write_plan(repo / "plan.yaml", [{"id": "research", "executor": "agy",
                                            "prompt": "look something up"}])
    start = time.time()
    r = prun("run", str(plan))
    assert r.returncode == 0, r.stdout + r.stderr
    parked = [line for line in r.stdout.splitlines() if line.startswith("UNIT research parked")]
    assert len(parked) == 1 and "parked until" in parked[0]
    statuses, attempts, events = _rows(r.stdout.split()[1])
    assert statuses == {"research": "succeeded"}
    assert len(attempts) == 1 and attempts[0]["status"] == "succeeded"
    assert any(e["kind"] == "parked" for e in events)
    assert time.time() - start >= 1.0  # it waited for the reset
    assert len(calls(agy)) == 1


def test_quota_stop_mid_run_is_followed_by_a_resumed_attempt(repo, agy, monkeypatch):
    monkeypatch.setenv("FAKE_QUOTA_FIRST", "1")
    plan = write_plan(repo / "plan.yaml", [{"id": "research", "executor": "agy",
                                            "prompt": "look something up"}])
    r = prun("run", str(plan))
    assert r.returncode == 0, r.stdout + r.stderr
    statuses, attempts, _ = _rows(r.stdout.split()[1])
    assert statuses == {"research": "succeeded"}
    first, second = attempts
    assert first["status"] == "quota" and first["resets_at"]
    assert second["predecessor"] == first["id"]
    assert second["continue_from"] == first["state_dir"]
    assert "resumed the conversation" in Path(second["result_path"]).read_text()
    argvs = [c["argv"] for c in calls(agy)]
    assert "--conversation" not in argvs[0] and argvs[1][argvs[1].index("--conversation") + 1] \
        == "conv-1"


@pytest.mark.parametrize("snapshot", ["shared", "unwritable"])
def test_one_quota_error_stops_the_pool(repo, agy, monkeypatch, tmp_path, snapshot):
    """10 units on one pool at --parallel 2, every answer a quota error: only the two in
    flight hit it, the other eight park without starting, and none fails; the run itself
    remembers the hit when the quota snapshot cannot be written."""
    monkeypatch.setenv("FAKE_QUOTA_ALWAYS", "1")
    if snapshot == "unwritable":
        (tmp_path / "a-file").write_text("")
        monkeypatch.setenv("PRUN_QUOTA_SNAPSHOT", str(tmp_path / "a-file" / "quota.json"))
    ids = [f"u{i}" for i in range(10)]
    plan = write_plan(repo / "plan.yaml", [{"id": i, "executor": "agy", "prompt": f"look {i} up"}
                                           for i in ids])
    r = prun("run", str(plan), "--parallel", "2", "--detach")
    assert r.returncode == 0, r.stderr
    run_id = r.stdout.split()[1]
    w = prun("wait", run_id)
    assert w.returncode == 6 and " parked packet=" in w.stdout, w.stdout + w.stderr
    poll(lambda: set(_rows(run_id)[0].values()) == {"parked"})
    _, attempts, events = _rows(run_id)
    assert len(calls(agy)) == 2                            # only the units in flight ran
    hit = [a for a in attempts if a["status"] == "quota" and a["dispatched_at"]]
    assert len(hit) == 2
    assert not any(a["status"] == "failed" for a in attempts)
    assert sorted(e["packet_id"] for e in events if e["kind"] == "parked") == sorted(ids)
    assert prun("cancel", run_id).returncode == 0
    poll(lambda: set(_rows(run_id)[0].values()) == {"cancelled"})
    assert len(calls(agy)) == 2
