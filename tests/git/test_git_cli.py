"""prun reconcile, integrate, pause and clean on a run recorded in a real ledger."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path

import pytest
from gitrepo import gone, gout, make_unit_state, write

from helpers import prun
from prun import process, workspace
from prun.ledger import Ledger
from prun.plan import Packet


@pytest.fixture
def recorded_run(repo, tmp_path):
    """Record a run of code units in the ledger, each with a clone and a finished attempt."""
    base = gout(repo, "rev-parse", "HEAD")

    def make(units: dict, *, check: str | None = None, status: str = "succeeded"):
        packets, attempts = [], []
        for pid, (owns, files) in units.items():
            clone = workspace.make_clone(repo, base, tmp_path / "ws" / pid)
            write(Path(clone), files)
            sd, result = make_unit_state(tmp_path, pid, outcome=status)
            packet = Packet(id=pid, prompt="do it", kind="code", owns=tuple(owns))
            packets.append(dataclasses.asdict(packet))
            attempts.append(dict(packet_id=pid, run_id="run1", executor="command",
                                 workspace=clone, base=base, state_dir=str(sd),
                                 result_path=str(result), receipt=f"{pid}-1", status=status))
        with Ledger.open() as ledger:
            ledger.record_run({"id": "run1", "repo_root": str(repo.resolve()), "base": base,
                               "check_command": check, "run_dir": str(tmp_path / "run1")},
                              packets)
            for a in attempts:
                ledger.record_attempt(f"{a['packet_id']}-1", "test", **a)
        return base

    return make


def test_reconcile_prints_verdicts_and_exits_non_zero_on_a_rejection(repo, recorded_run):
    recorded_run({"a": (["src/app/**"], {"src/app/main.py": "A\n"}),
                  "b": (["src/lib/**"], {"src/lib/core.py": "B\n", "README.md": "leak\n"})})
    r = prun("reconcile", cwd=repo)
    assert r.returncode == 1, r.stderr
    assert r.stdout.splitlines() == [
        "ACCEPTED a files=1",
        "REJECTED b reason=scope-leak path=README.md",
        "RECONCILE run=run1 packets=2 accepted=1 rejected=1 review=0 complete=no"]
    j = json.loads(prun("reconcile", "run1", "--json", cwd=repo).stdout)
    assert j["packets"][1]["reasons"] == [{"code": "scope-leak", "path": "README.md"}]
    ok = prun("reconcile", "--rescoped", "b=README belongs to b now", cwd=repo)
    assert ok.returncode == 0 and ok.stdout.splitlines()[-1].endswith("complete=yes")


def test_reconcile_exit_3_when_only_review_is_needed(repo, recorded_run):
    recorded_run({"a": (["src/app/**"], {})})
    r = prun("reconcile", cwd=repo)
    assert r.returncode == 3
    assert r.stdout.splitlines()[0] == "REVIEW a reason=hollow-empty-diff"


def test_integrate_applies_accepted_runs_check_and_skips_rejected(repo, recorded_run, tmp_path):
    recorded_run({"a": (["src/app/**"], {"src/app/main.py": "A\n"}),
                  "b": (["src/lib/**"], {"README.md": "leak\n"})},
                 check="test \"$(cat src/app/main.py)\" = A")
    r = prun("integrate", cwd=repo)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "APPLIED a files=1 +1 -2"
    assert "SKIPPED b verdict=rejected" in lines
    assert any(line.startswith("CHECK passed exit=0") for line in lines)
    assert (repo / "src/app/main.py").read_text() == "A\n"
    assert (repo / "README.md").read_text() == "readme\n"
    assert (tmp_path / "run1" / "integrate" / "a.patch").exists()


def test_integrate_reports_a_failing_check_and_conflicts(repo, recorded_run):
    recorded_run({"a": (["src/app/**"], {"src/app/main.py": "A\n"}),
                  "b": (["src/app/**"], {"src/app/main.py": "B\n"})}, check="exit 5")
    r = prun("integrate", cwd=repo)
    assert r.returncode == 4
    assert "CONFLICT b path=src/app/main.py with=a" in r.stdout.splitlines()
    assert "CHECK failed exit=5" in r.stdout


def test_integrate_with_a_check_that_fails(repo, recorded_run):
    recorded_run({"a": (["src/app/**"], {"src/app/main.py": "A\n"})}, check="exit 7")
    r = prun("integrate", cwd=repo)
    assert r.returncode == 1
    assert "CHECK failed exit=7" in r.stdout
    assert gout(repo, "log", "--oneline").count("\n") == 0      # still one commit


def test_clean_removes_only_workspaces_and_refuses_while_a_unit_runs(repo, recorded_run,
                                                                     tmp_path):
    recorded_run({"a": (["src/app/**"], {"src/app/main.py": "A\n"})})
    with Ledger.open() as ledger:     # an attempt whose workspace is the real repository
        ledger.record_attempt("odd-1", "test", run_id="run1", packet_id="a",
                              workspace=str(repo), status="failed")
    sd = tmp_path / "state" / "a"
    worker = process.spawn([sys.executable, "-c", "import time; time.sleep(60)"],
                           cwd=str(tmp_path), env=dict(os.environ),
                           stdout_path=str(sd / "w.out"), stderr_path=str(sd / "w.err"))
    try:
        (sd / "unit.json").write_text(json.dumps({"worker":
            {"pid": worker.pid, "pgid": worker.pid,
             "create_time": process.create_time(worker.pid)}}))
        r = prun("clean", cwd=repo)
        assert r.returncode == 1 and "still has units running: a" in r.stderr
        assert (tmp_path / "ws" / "a").exists()
    finally:
        process.end_group(worker, grace=5)
        worker.reap()
    r = prun("clean", cwd=repo)
    assert r.returncode == 0, r.stderr
    assert f"REMOVED a {tmp_path / 'ws' / 'a'}" in r.stdout.splitlines()
    assert f"KEPT a {repo} reason=not-a-workspace" in r.stdout.splitlines()
    assert not (tmp_path / "ws" / "a").exists()
    assert (repo / "README.md").exists()


def test_pause_saves_the_patch_and_stops_only_its_group(repo, recorded_run, tmp_path):
    recorded_run({"a": (["src/app/**"], {"src/app/main.py": "half done\n"})},
                 status="running")
    sd = tmp_path / "state" / "a"
    pidfile = tmp_path / "child.pid"
    code = (f"import subprocess,sys,time; c=subprocess.Popen([sys.executable,'-c',"
            f"'import time; time.sleep(60)']); open({str(pidfile)!r},'w').write(str(c.pid)); "
            f"time.sleep(60)")
    worker = process.spawn([sys.executable, "-c", code], cwd=str(tmp_path),
                           env=dict(os.environ), stdout_path=str(sd / "w.out"),
                           stderr_path=str(sd / "w.err"))
    bystander = process.spawn([sys.executable, "-c", "import time; time.sleep(60)"],
                              cwd=str(tmp_path), env=dict(os.environ),
                              stdout_path=str(sd / "b.out"), stderr_path=str(sd / "b.err"))
    try:
        (sd / "unit.json").write_text(json.dumps({"worker":
            {"pid": worker.pid, "pgid": worker.pid,
             "create_time": process.create_time(worker.pid)}}))
        assert worker.wait_exit(0) is False
        for _ in range(200):          # bounded: the worker writes its child's pid at start
            if pidfile.exists() and pidfile.read_text():
                break
            worker.wait_exit(0.05)
        child = int(pidfile.read_text())
        r = prun("pause", "a", cwd=repo)
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith("PAUSED a attempt=a-1 stopped=stopped files=1 patch=")
        assert worker.wait_exit(10)
        assert gone(child)
        assert not bystander.exited()          # another group is never touched
        patch = (sd / "paused.patch").read_text()
        assert "+half done" in patch
        with Ledger.open() as ledger:
            assert ledger.attempt("a-1")["status"] == "cancelled"
            kinds = [e["kind"] for e in ledger.events("run1")]
            assert "pause" in kinds
    finally:
        for w in (worker, bystander):
            process.end_group(w, grace=2)
            w.reap()
