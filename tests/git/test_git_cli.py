"""prun reconcile, integrate, pause and clean on a run recorded in a real ledger."""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import sys
from pathlib import Path

import pytest
from gitrepo import gone, gout, make_unit_state, write

from helpers import prun
from prun._util import process
from prun.git import workspace
from prun.ledger import Ledger
from prun.plan import DataBoundary, Packet


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


def test_reconcile_exit_10_when_only_review_is_needed(repo, recorded_run):
    recorded_run({"a": (["src/app/**"], {})})
    r = prun("reconcile", cwd=repo)
    assert r.returncode == 10
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
    assert r.returncode == 11  # CONFLICT
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
        started = process.create_time(worker.pid)
        (sd / "unit.json").write_text(json.dumps({"worker":
            {"pid": worker.pid, "pgid": worker.pid, "create_time": started}}))
        with Ledger.open() as ledger:   # the worker as the supervisor records it
            ledger.update_attempt("a-1", receipt=f"pid:{worker.pid}@{started:.3f}")
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
        started = process.create_time(worker.pid)
        (sd / "unit.json").write_text(json.dumps({"worker":
            {"pid": worker.pid, "pgid": worker.pid, "create_time": started}}))
        with Ledger.open() as ledger:   # the worker as the supervisor records it
            ledger.update_attempt("a-1", receipt=f"pid:{worker.pid}@{started:.3f}")
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


# clean and retention ---------------------------------------------------------------------------

def run_plan(repo: Path, units: dict[str, tuple[str, str]], code: str) -> str:
    """Run a plan of command units (id -> (kind, retention)) for real; the run id."""
    packets = [{"id": pid, "kind": kind, "executor": "command", "prompt": f"unit {pid}",
                "command": [sys.executable, "-c", code],
                **({"owns": ["out/**"]} if kind == "code" else {}),
                **({"data": {"retention": retention}} if retention else {})}
               for pid, (kind, retention) in units.items()]
    (repo / "plan.yaml").write_text(json.dumps({"packets": packets}))
    r = prun("run", "plan.yaml", cwd=repo)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout.split()[1]


def run_attempts(run_id: str) -> dict[str, dict]:
    with Ledger.open() as ledger:
        return {a["packet_id"]: dict(a) for a in ledger.attempts(run_id)}


def test_clean_keeps_what_retention_keeps(repo):
    run_id = run_plan(repo, {"k": ("read-only", "keep"), "k30": ("read-only", "keep 30d"),
                             "k0": ("read-only", "keep 0s"), "n": ("code", "a note for people")},
                      "print('a result that is long enough to count')")
    a = run_attempts(run_id)
    with Ledger.open() as ledger:
        finished = ledger.find_run(run_id)["finished_at"]
    end = datetime.datetime.fromisoformat(finished.replace("Z", "+00:00")) + \
        datetime.timedelta(days=30)
    until = (end + datetime.timedelta(seconds=1 if end.microsecond else 0)).replace(
        microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")         # rounded up to the second
    r = prun("clean", cwd=repo)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    run_dir = Path(a["n"]["result_path"]).parents[1]
    assert lines[:-1] == [
        f"KEPT k {a['k']['workspace']} reason=retention",
        f"REMOVED k0 {a['k0']['workspace']}",
        f"KEPT k30 {a['k30']['workspace']} reason=retention until={until}",
        # the code unit changed nothing: nothing waits, its (empty) change is saved first
        f"SAVED n {run_dir / 'changes' / 'n.1.patch'}",
        f"REMOVED n {a['n']['workspace']}",
        # the read-only units' snapshot stays while a read-only packet's retention keeps
        f"KEPT - {Path(a['n']['workspace']).parent / ('snapshot-' + a['n']['base'][:12])} "
        "reason=retention",
        # the code units' object store goes with the last code unit's clone
        f"REMOVED - {Path(a['n']['workspace']).parent / ('objects-' + a['n']['base'][:12])}"
        ".git"]
    assert lines[-1] == f"CLEAN run={run_id} removed=3 kept=3 saved=1"
    assert Path(a["k"]["workspace"]).is_dir() and Path(a["k30"]["workspace"]).is_dir()
    assert not Path(a["k0"]["workspace"]).exists() and not Path(a["n"]["workspace"]).exists()
    assert all(Path(x["result_path"]).is_file() and Path(x["state_dir"]).is_dir()
               for x in a.values())                  # evidence stays unless delete says so
    again = json.loads(prun("clean", "--json", cwd=repo).stdout)   # kept on every clean
    assert [(k["packet"], k["reason"], k["until"]) for k in again["kept"]] == [
        ("k", "retention", None), ("k30", "retention", until), ("-", "retention", None)]
    assert again["retention"]["k30"] == {"rule": "keep", "keep_s": 30 * 86400.0,
                                         "text": "keep 30d", "until": until}
    assert again["retention"]["n"]["rule"] == "note" and again["removed"] == []


def test_clean_deletes_the_evidence_retention_delete_names(repo):
    own_result = ("import os; open(os.environ['PRUN_RESULT_FILE'], 'w').write('## Summary\\n"
                  "the worker wrote its own result\\n'); print('and a response beside it')")
    run_id = run_plan(repo, {"d": ("code", "delete"), "n": ("read-only", None)}, own_result)
    a = run_attempts(run_id)
    run_dir = Path(a["d"]["result_path"]).parents[1]
    d = a["d"]
    response = json.loads((Path(d["state_dir"]) / "outcome.json").read_text())["response_file"]
    assert response and Path(response).is_file()
    evidence = [str(run_dir / "prompts" / "d.1.md"), d["result_path"], response, d["state_dir"]]
    dry = prun("clean", "--dry-run", cwd=repo)
    assert dry.returncode == 0 and dry.stdout.splitlines()[-1].endswith("dry-run=yes")
    assert all(Path(p).exists() for p in evidence)
    j = json.loads(prun("clean", "--dry-run", "--json", cwd=repo).stdout)
    assert j["retention"]["d"]["rule"] == "delete" and j["retention"]["n"]["rule"] == "none"
    assert j["owner"]
    r = prun("clean", cwd=repo)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == f"REMOVED d {d['workspace']}"
    assert sorted(lines[1:5]) == sorted(f"REMOVED d {p}" for p in evidence)
    snapshot = next(line.split()[2] for line in lines if line.startswith("REMOVED - "))
    store = Path(d["workspace"]).parent / f"objects-{d['base'][:12]}.git"
    assert lines[5:] == [f"REMOVED n {a['n']['workspace']}",
                         # what its snapshot held is saved with the read-only unit first
                         f"SAVED n {run_dir / 'changes' / 'n.1.json'}", f"REMOVED - {snapshot}",
                         f"REMOVED - {store}", f"CLEAN run={run_id} removed=8 kept=0 saved=1"]
    assert not store.exists()
    assert not any(Path(p).exists() for p in [d["workspace"], *evidence])
    n = a["n"]
    assert Path(n["result_path"]).is_file() and Path(n["state_dir"]).is_dir()
    assert (run_dir / "prompts" / "n.1.md").is_file()


def test_clean_never_deletes_evidence_outside_the_run_dir(repo, recorded_run, tmp_path):
    base = gout(repo, "rev-parse", "HEAD")
    clone = workspace.make_clone(repo, base, tmp_path / "ws" / "a")
    sd, result = make_unit_state(tmp_path, "a")
    packet = Packet(id="a", prompt="do it", kind="code", data=DataBoundary(retention="delete"))
    with Ledger.open() as ledger:
        ledger.record_run({"id": "run1", "repo_root": str(repo.resolve()), "base": base,
                           "run_dir": str(tmp_path / "run1")}, [dataclasses.asdict(packet)])
        ledger.record_attempt("a-1", "test", run_id="run1", packet_id="a", executor="command",
                              workspace=clone, state_dir=str(sd), result_path=str(result),
                              status="succeeded")
    r = prun("clean", cwd=repo)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        f"REMOVED a {clone}", f"KEPT a {result} reason=outside-run-dir",
        f"KEPT a {sd} reason=outside-run-dir", "CLEAN run=run1 removed=1 kept=2"]
    assert result.is_file() and sd.is_dir()
