"""A standalone `prun dispatch` that is killed: its worker ends with it, and the unit can be
settled afterwards (its FALLBACK published, its ledger row closed), so that monitor and gather
see it finished."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import psutil
from faultkit import json_file, until


def _start(tmp_path, *, sandbox: str) -> tuple[subprocess.Popen, str]:
    (tmp_path / "prompt.md").write_text("hold on\n")
    code = "import time; print('partial output of a long unit', flush=True); time.sleep(600)"
    d = subprocess.Popen([sys.executable, "-m", "prun", "dispatch", "--executor", "command",
                          "--command", f"{sys.executable} -c {code!r}", "--prompt-file",
                          str(tmp_path / "prompt.md"), "--result-file",
                          str(tmp_path / "result.md"), "--unit-id", "held", "--sandbox",
                          sandbox], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = d.stdout.readline()
    assert line.startswith("STATE-DIR "), line + d.stderr.read()
    return d, line.split(" ", 1)[1].strip()


def _worker(state: str) -> psutil.Process:
    unit = until(lambda: (u := json_file(f"{state}/unit.json")) and u.get("worker") and u)
    return psutil.Process(unit["worker"]["pid"])


def _gone(p: psutil.Process) -> bool:
    try:
        return p.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_a_killed_dispatcher_takes_its_worker_with_it_and_the_unit_can_be_settled(repo,
                                                                                  tmp_path):
    d, state = _start(tmp_path, sandbox="off")
    worker = _worker(state)
    until(lambda: os.path.getsize(f"{state}/tail") > 0)
    d.send_signal(signal.SIGKILL)
    d.wait(30)
    until(lambda: _gone(worker), 30)
    p = subprocess.run([sys.executable, "-m", "prun", "settle", state], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    result = (tmp_path / "result.md").read_text()
    assert "FALLBACK" in result and "partial output of a long unit" in result
    outcome = json_file(f"{state}/outcome.json")
    assert outcome and outcome["outcome"] != "succeeded"
    assert outcome["worker_exit"] is None  # never observed, never made up
    again = subprocess.run([sys.executable, "-m", "prun", "settle", state], capture_output=True,
                           text=True, timeout=60)
    assert again.returncode == 0 and (tmp_path / "result.md").read_text() == result
    mon = subprocess.run([sys.executable, "-m", "prun", "monitor", state, "--timeout", "5s"],
                         capture_output=True, text=True, timeout=60)
    assert mon.returncode != 124, mon.stdout + mon.stderr   # finished, not still running
    rows = subprocess.run([sys.executable, "-m", "prun", "ledger", "--dispatches"],
                          capture_output=True, text=True, timeout=60)
    assert "status=dispatched" not in rows.stdout


def test_prun_cancel_ends_a_standalone_unit_by_its_state_dir(repo, tmp_path):
    d, state = _start(tmp_path, sandbox="off")
    worker = _worker(state)
    p = subprocess.run([sys.executable, "-m", "prun", "cancel", state], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    d.wait(60)
    until(lambda: _gone(worker), 30)
    outcome = until(lambda: json_file(f"{state}/outcome.json"))
    assert outcome["outcome"] == "cancelled"
