"""Control of remote units: a cancel ends the unit's processes on the worker; a worker killed
mid-unit fails the attempt as worker-lost, with a linked successor only where the plan allows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
from clusterkit import attempts, poll, write_plan

from helpers import prun

# the unit starts a child, records both pids, and waits to be ended
HANG = ("import os, subprocess, sys, time; child = subprocess.Popen(['sleep', '300']); "
        "open(sys.argv[1], 'w').write(f'{os.getpid()} {child.pid}'); time.sleep(300)")


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def pids(path: Path) -> list[int] | None:
    text = path.read_text() if path.exists() else ""
    return [int(p) for p in text.split()] if len(text.split()) == 2 else None


def test_cancel_ends_the_units_processes_on_the_worker(cluster, repo, tmp_path):
    pidfile = tmp_path / "pids"
    plan = write_plan(repo / "plan.json", [
        {"id": "hang", "executor": "command", "sandbox": "off", "prompt": "hang",
         "command": [sys.executable, "-c", HANG, str(pidfile)]}])
    r = prun("run", str(plan), "--cluster", cluster.address, "--detach", timeout=60)
    assert r.returncode == 0, r.stderr
    run_id = r.stdout.split()[1]
    unit, child = poll(lambda: pids(pidfile))
    assert alive(unit) and alive(child)
    c = prun("cancel", run_id, timeout=60)
    assert c.returncode == 0, c.stdout + c.stderr
    w = prun("wait", run_id, "--timeout", "60", timeout=90)
    assert w.returncode != 2, w.stderr
    poll(lambda: attempts(repo) and attempts(repo)[-1]["status"] == "cancelled")
    assert not alive(unit) and not alive(child)   # gone on the worker, the child too
    row = attempts(repo)[-1]
    remote = json.loads((Path(row["state_dir"]) / "remote.json").read_text())
    assert remote["signalled"] is not None and remote["pid"] == unit


def test_a_worker_killed_mid_unit_fails_it_as_worker_lost(own_cluster, repo, tmp_path):
    pidfile = tmp_path / "pids"
    first = own_cluster.add_worker()
    plan = write_plan(repo / "plan.json", [
        {"id": "hang", "executor": "command", "sandbox": "off", "prompt": "hang",
         "command": [sys.executable, "-c", HANG, str(pidfile)]}])
    run = subprocess.Popen([sys.executable, "-m", "prun", "run", str(plan), "--cluster",
                            own_cluster.address, "--plain"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    unit, child = poll(lambda: pids(pidfile))
    own_cluster.kill_worker(first)
    out, err = run.communicate(timeout=90)
    assert run.returncode == 1, out + err
    rows = attempts(repo)
    assert len(rows) == 1                       # never re-run silently
    assert rows[0]["status"] == "failed" and rows[0]["reason"] == "worker-lost"
    assert "died while it ran" in rows[0]["error"]
    poll(lambda: not alive(unit))   # its leader ends with the worker (parent-death signal)
    if alive(child):   # unsandboxed, what the leader started outlives it: this test's to end
        os.kill(child, 9)


def test_the_plan_may_allow_a_successor_after_a_lost_worker(own_cluster, repo, tmp_path):
    pidfile, mark = tmp_path / "pids", tmp_path / "first-ran"
    code = (f"import os, pathlib, sys; m = pathlib.Path({str(mark)!r})\n"
            "if m.exists():\n"
            "    pathlib.Path(os.environ['PRUN_RESULT_FILE']).write_text('# Result\\nsecond')\n"
            "    sys.exit(0)\n"
            f"m.write_text('x')\nexec({HANG!r})")
    first = own_cluster.add_worker()
    plan = write_plan(repo / "plan.json", [
        {"id": "flaky", "executor": "command", "sandbox": "off", "prompt": "flaky",
         "command": [sys.executable, "-c", code, str(pidfile)]}],
        cluster={"address": own_cluster.address, "worker_lost": "retry"})
    run = subprocess.Popen([sys.executable, "-m", "prun", "run", str(plan), "--plain"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    poll(lambda: pids(pidfile))
    own_cluster.kill_worker(first)
    own_cluster.add_worker()
    out, err = run.communicate(timeout=120)
    assert run.returncode == 0, out + err
    rows = attempts(repo)
    assert [r["status"] for r in rows] == ["failed", "succeeded"]
    assert rows[0]["reason"] == "worker-lost"
    assert rows[1]["predecessor"] == rows[0]["id"]          # linked, never silent
    assert os.path.exists(rows[1]["result_path"])


def test_a_resumed_run_ends_a_remote_unit_whose_supervisor_died(cluster, repo, tmp_path):
    pidfile = tmp_path / "pids"
    plan = write_plan(repo / "plan.json", [
        {"id": "hang", "executor": "command", "sandbox": "off", "prompt": "hang",
         "command": [sys.executable, "-c", HANG, str(pidfile)]}])
    sup = subprocess.Popen([sys.executable, "-m", "prun", "run", str(plan), "--cluster",
                            cluster.address, "--plain"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    run_id = sup.stdout.readline().split()[1]
    unit, child = poll(lambda: pids(pidfile))
    state = repo / ".prun" / "runs" / run_id / "state"
    poll(lambda: [d for d in state.glob("hang-*") if (d / "remote.json").exists()])
    sup.kill()
    sup.wait(30)
    r = prun("resume", run_id, "--plain", timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    rows = attempts(repo)
    assert len(rows) == 1                              # never launched a second time
    assert rows[0]["status"] == "failed" and rows[0]["reason"] == "worker-lost"
    poll(lambda: not alive(unit))                      # ended on its worker
    if alive(child):   # unsandboxed, what the leader started outlives it: this test's to end
        os.kill(child, 9)
