"""Control of remote units: a cancel ends the unit's processes on the worker; with the run's
supervisor gone (kill -9), `prun resume`, `prun pause` and `prun cancel` reach the unit through
the scheduler: its process group ends on its worker, and pause saves its diff."""

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


# a code unit: it writes a file in its clone, starts a child, records both pids, and waits
EDIT_HANG = ("import os, pathlib, subprocess, sys, time; "
             "pathlib.Path('paused.txt').write_text('written before the pause\\n'); "
             "child = subprocess.Popen(['sleep', '300']); "
             "open(sys.argv[1], 'w').write(f'{os.getpid()} {child.pid}'); time.sleep(300)")


def orphaned_unit(cluster, repo, pidfile: Path) -> tuple[str, dict, list[int]]:
    """A code unit running on the cluster whose supervisor was killed (kill -9): the run's id,
    its attempt's row, and the unit's pids."""
    plan = write_plan(repo / "plan.json", [
        {"id": "edit", "kind": "code", "executor": "command", "sandbox": "off",
         "owns": ["paused.txt"], "prompt": "edit, then hang",
         "command": [sys.executable, "-c", EDIT_HANG, str(pidfile)]}])
    sup = subprocess.Popen([sys.executable, "-m", "prun", "run", str(plan), "--cluster",
                            cluster.address, "--plain"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    run_id = sup.stdout.readline().split()[1]
    unit = poll(lambda: pids(pidfile))
    row = poll(lambda: attempts(repo) and attempts(repo)[-1]["state_dir"]
               and (Path(attempts(repo)[-1]["state_dir"]) / "remote.json").exists()
               and attempts(repo)[-1])
    sup.kill()
    sup.wait(30)
    return run_id, row, unit


def test_pause_reaches_a_remote_unit_whose_supervisor_died(cluster, repo, tmp_path):
    run_id, row, unit = orphaned_unit(cluster, repo, tmp_path / "pids")
    r = prun("pause", "edit", "--run", run_id, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith(f"PAUSED edit attempt={row['id']} stopped=stopped files=1 ")
    assert not any(alive(p) for p in unit)      # its group ended on its worker, confirmed
    patch = Path(r.stdout.split("patch=")[1].strip()).read_text()
    assert "paused.txt" in patch and "+written before the pause" in patch
    assert (Path(row["workspace"]) / "paused.txt").exists()   # landed in the local clone
    after = attempts(repo)[-1]
    assert after["status"] == "cancelled" and after["reason"] == "paused"


def test_cancel_reaches_a_remote_unit_whose_supervisor_died(cluster, repo, tmp_path):
    run_id, _, unit = orphaned_unit(cluster, repo, tmp_path / "pids")
    r = prun("cancel", run_id, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip() == f"CANCEL {run_id} status=cancelled"
    assert not any(alive(p) for p in unit)
    assert attempts(repo)[-1]["status"] == "cancelled"
    assert len(attempts(repo)) == 1                 # nothing launched again


def test_pause_of_a_remote_unit_goes_through_its_live_supervisor(cluster, repo, tmp_path):
    pidfile = tmp_path / "pids"
    plan = write_plan(repo / "plan.json", [
        {"id": "edit", "kind": "code", "executor": "command", "sandbox": "off",
         "owns": ["paused.txt"], "prompt": "edit, then hang",
         "command": [sys.executable, "-c", EDIT_HANG, str(pidfile)]}])
    r = prun("run", str(plan), "--cluster", cluster.address, "--detach", timeout=60)
    assert r.returncode == 0, r.stderr
    run_id = r.stdout.split()[1]
    unit = poll(lambda: pids(pidfile))
    p = prun("pause", "edit", "--run", run_id, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert " stopped=stopped files=1 " in p.stdout
    assert "+written before the pause" in Path(p.stdout.split("patch=")[1].strip()).read_text()
    assert not any(alive(pid) for pid in unit)
    w = prun("wait", run_id, "--timeout", "60", timeout=90)
    assert w.returncode != 2, w.stderr
    assert attempts(repo)[-1]["status"] == "cancelled"
