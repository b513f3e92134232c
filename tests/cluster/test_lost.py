"""A worker killed mid-unit (kill -9 of the worker process and of its nanny) on a scheduler
left at Dask's defaults: the scheduler runs the task again on another worker, which finds the
attempt claimed and launches nothing; the attempt ends worker-lost, nothing of the unit is
left running, and a successor comes only where the plan allows one, once per packet, also
across `prun resume`."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

from clusterkit import attempts, poll, write_plan

from helpers import prun

# the unit appends its attempt id to a log, starts a child, records both pids (a file per
# attempt) and waits to be ended
HANG = ("import os, subprocess, sys, time; aid = os.environ['PRUN_ATTEMPT_ID']; "
        "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT); "
        "os.write(fd, (aid + '\\n').encode()); child = subprocess.Popen(['sleep', '300']); "
        "open(sys.argv[2] + '.' + aid.rsplit(':', 1)[1], 'w').write(f'{os.getpid()} {child.pid}'); "
        "time.sleep(300)")


def alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def pids(path: Path) -> list[int] | None:
    text = path.read_text() if path.exists() else ""
    return [int(p) for p in text.split()] if len(text.split()) == 2 else None


def hang_plan(repo: Path, tmp_path: Path, **settings) -> Path:
    return write_plan(repo / "plan.json", [
        {"id": "hang", "executor": "command", "sandbox": "off", "prompt": "hang",
         "command": [sys.executable, "-c", HANG, str(tmp_path / "ran.log"),
                     str(tmp_path / "pids")]}], **settings)


def running_on(row: dict) -> str | None:
    """The worker the unit's supervisor saw it start on."""
    path = Path(row["state_dir"]) / "remote.json"
    return json.loads(path.read_text()).get("worker") if path.exists() else None


def claimed_by(address: str, aid: str) -> list[str]:
    """The workers prun's claim in the scheduler's metadata names for ``aid``, in order."""
    from distributed import Client

    from prun.cluster import claim

    with Client(address, set_as_default=False) as c:
        return claim.workers(c.get_metadata(claim.keys(aid), None))


def test_a_task_run_again_after_its_worker_died_launches_nothing(own_cluster, repo, tmp_path):
    first = own_cluster.add_worker()
    plan = hang_plan(repo, tmp_path, cluster={"address": own_cluster.address,
                                              "worker_lost": "retry"})
    sup = subprocess.Popen([sys.executable, "-m", "prun", "run", str(plan), "--plain"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    run_id = sup.stdout.readline().split()[1]
    lost = poll(lambda: pids(tmp_path / "pids.1"))
    aid = (tmp_path / "ran.log").read_text().split()[0]
    where = poll(lambda: running_on(attempts(repo)[0]))
    own_cluster.add_worker()
    own_cluster.kill_worker(first)
    # the scheduler runs the task again on the second worker (prun holds it while its run
    # goes on): that run finds the attempt claimed, and launches nothing
    again = poll(lambda: claimed_by(own_cluster.address, aid)[1:])
    assert again[0] != where and claimed_by(own_cluster.address, aid)[0] == where
    successor = poll(lambda: pids(tmp_path / "pids.2"))   # the plan allows one, linked
    rows = attempts(repo)
    assert rows[0]["status"] == "failed" and rows[0]["reason"] == "worker-lost"
    assert "died while it ran" in rows[0]["error"]
    assert rows[1]["predecessor"] == rows[0]["id"]
    # nothing of the lost unit is left: its leader died with its worker, its guard ended
    # the rest of its group
    poll(lambda: not any(alive(p) for p in lost))
    # the budget holds across a resume: kill -9 of the supervisor while the successor runs
    poll(lambda: running_on(attempts(repo)[1]))
    sup.kill()
    sup.wait(30)
    r = prun("resume", run_id, "--plain", timeout=180)
    assert r.returncode == 1, r.stdout + r.stderr
    rows = attempts(repo)
    assert [(a["status"], a["reason"]) for a in rows] == [("failed", "worker-lost")] * 2
    assert (tmp_path / "ran.log").read_text().split() == [a["id"] for a in rows]  # once each
    db = sqlite3.connect(repo.parent / "ledger.sqlite")
    try:
        spent = db.execute("SELECT lost_retries FROM packets WHERE run_id = ?",
                           (run_id,)).fetchone()[0]
    finally:
        db.close()
    assert spent == 1                                      # the budget, kept in the ledger
    assert not any(alive(p) for p in successor)           # ended on its worker by the resume


def test_a_lost_worker_with_none_to_run_it_again_fails_the_attempt(own_cluster, repo, tmp_path):
    first = own_cluster.add_worker()
    run = subprocess.Popen([sys.executable, "-m", "prun", "run", str(hang_plan(repo, tmp_path)),
                            "--cluster", own_cluster.address, "--plain"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    unit, child = poll(lambda: pids(tmp_path / "pids.1"))
    own_cluster.kill_worker(first)    # the only worker: its task waits for another, in vain
    out, err = run.communicate(timeout=120)
    assert run.returncode == 1, out + err
    rows = attempts(repo)
    assert len(rows) == 1                       # no successor: the plan did not allow one
    assert rows[0]["status"] == "failed" and rows[0]["reason"] == "worker-lost"
    assert "died while it ran" in rows[0]["error"]
    poll(lambda: not alive(unit) and not alive(child))


def test_a_unit_its_dead_worker_had_not_started_runs_elsewhere_once(own_cluster, repo,
                                                                      tmp_path):
    own_cluster.threads = 1        # the second unit waits behind the first on its worker
    first = own_cluster.add_worker()
    quick = ("import os, sys; aid = os.environ['PRUN_ATTEMPT_ID']; "
             "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT); "
             "os.write(fd, (aid + '\\n').encode()); print('a quick unit ran once: ' + aid)")
    plan = write_plan(repo / "plan.json", [
        {"id": "hang", "executor": "command", "sandbox": "off", "prompt": "hang",
         "command": [sys.executable, "-c", HANG, str(tmp_path / "ran.log"),
                     str(tmp_path / "pids")]},
        {"id": "later", "executor": "command", "sandbox": "off", "prompt": "later",
         "command": [sys.executable, "-c", quick, str(tmp_path / "ran.log")]}], parallel=2)
    run = subprocess.Popen([sys.executable, "-m", "prun", "run", str(plan), "--cluster",
                            own_cluster.address, "--plain"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    poll(lambda: pids(tmp_path / "pids.1"))
    own_cluster.add_worker()
    own_cluster.kill_worker(first)
    out, err = run.communicate(timeout=120)
    assert run.returncode == 1, out + err
    rows = {a["packet_id"]: a for a in attempts(repo)}
    assert rows["hang"]["status"] == "failed" and rows["hang"]["reason"] == "worker-lost"
    assert rows["later"]["status"] == "succeeded"          # not lost: it never started there
    assert len(attempts(repo)) == 2
    assert sorted((tmp_path / "ran.log").read_text().split()) == sorted(
        a["id"] for a in rows.values())                     # each launched once
