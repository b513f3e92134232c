"""Exactly once: a supervisor killed (kill -9) anywhere in a launch burst, with or without its
worker keeper, and then `prun resume`: every unit ran exactly once and succeeded (a unit whose
keeper was killed too ran on under its monitor, which recorded its exit), and the ledger says
so."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import psutil
import pytest
from faultkit import counted_unit, executions, until

UNITS = 100


def _run_id(out_path) -> str:
    for line in out_path.read_text().splitlines():
        if line.startswith("RUN "):
            return line.split()[1]
    raise AssertionError(f"no RUN line in {out_path.read_text()!r}")


def _keeper_of(pid: int) -> psutil.Process | None:
    try:
        for child in psutil.Process(pid).children():
            if any("keeper" in part for part in child.cmdline()):
                return child
    except psutil.Error:
        pass
    return None


# (executions seen before the kill, whether the keeper dies too)
POINTS = [(0, False), (1, False), (8, True), (16, False), (17, True), (45, False), (80, True)]


@pytest.mark.parametrize(("seen", "keeper_too"), POINTS)
def test_a_supervisor_killed_in_the_launch_burst_runs_nothing_twice(repo, tmp_path, seen,
                                                                    keeper_too):
    log = tmp_path / "executions.log"
    plan = repo / "plan.json"
    plan.write_text(json.dumps({"parallel": 16, "packets": [
        counted_unit(f"u{i:03}", log, hold=0.2) for i in range(UNITS)]}))
    out = tmp_path / "run.out"
    with open(out, "w") as f:
        sup = subprocess.Popen([sys.executable, "-m", "prun", "run", "plan.json", "--plain"],
                               stdout=f, stderr=subprocess.STDOUT)
    try:
        if seen:
            until(lambda: sum(executions(log).values()) >= seen)
        else:
            until(lambda: out.exists() and "RUN " in out.read_text())
        keeper = _keeper_of(sup.pid) if keeper_too else None
        sup.send_signal(signal.SIGKILL)
        if keeper is not None:
            keeper.send_signal(signal.SIGKILL)
    finally:
        sup.kill()
        sup.wait(30)
    run_id = _run_id(out)
    resumed = subprocess.run([sys.executable, "-m", "prun", "resume", run_id, "--plain"],
                             capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]

    ran = executions(log)
    twice = {u: n for u, n in ran.items() if n != 1}
    assert not twice, f"ran more than once: {twice}"
    view = json.loads(subprocess.run([sys.executable, "-m", "prun", "status", run_id, "--json"],
                                     capture_output=True, text=True, timeout=60,
                                     check=True).stdout)
    # a unit still running when its keeper was killed too ran on to its end under its
    # monitor, which recorded its exit code: it succeeded like the others
    failed = {u["packet_id"]: u["reason"] for u in view["units"] if u["status"] != "succeeded"}
    assert not failed, failed
    assert set(ran) == {f"u{i:03}" for i in range(UNITS)}
    assert all(a["exit_code"] == 0 for a in view["attempts"] if a["dispatched_at"])
    launched: dict[str, int] = {}
    for a in view["attempts"]:
        if a["dispatched_at"]:
            launched[a["packet_id"]] = launched.get(a["packet_id"], 0) + 1
    assert all(n == 1 for n in launched.values()), {p: n for p, n in launched.items() if n != 1}
    ids = [a["id"] for a in view["attempts"]]
    assert len(ids) == len(set(ids))
    assert not _leftovers(tmp_path)


def _leftovers(tmp_path) -> list[int]:
    """Unit processes still alive (each one's command line names the executions log)."""
    mark = str(tmp_path / "executions.log")
    found = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        if p.info["pid"] != os.getpid() and any(mark in part for part in p.info["cmdline"] or []):
            found.append(p.info["pid"])
    return found
