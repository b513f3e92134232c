"""A unit that rewrites what its state dir says about its processes (its `unit.json`: the worker,
the dispatcher, the keeper, its result path) makes prun signal nothing else and write nowhere
else: `prun pause`, `prun cancel`, `prun settle` and `prun resume` know a unit's processes from
records it cannot write (the ledger's receipt, the keeper's log, a standalone dispatcher's
record beside the state dir). The units run unsandboxed, so that the rewrite itself succeeds."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys

import psutil
import pytest
from faultkit import json_file, until

# A unit that rewrites its own unit.json to name another process: the one in argv[1] (a JSON
# {pid, create_time}), else the run's supervisor as the ledger records it; another attempt id;
# and its result path as argv[2]. It then marks that it did so and waits to be ended.
FORGER = r"""
import json, os, sqlite3, sys, time
victim = json.loads(sys.argv[1]) if sys.argv[1] != "supervisor" else None
if victim is None:
    c = sqlite3.connect(os.environ["PRUN_LEDGER"])
    pid, start = c.execute("SELECT supervisor_pid, supervisor_started FROM runs WHERE id = ?",
                           (os.environ["PRUN_RUN_ID"],)).fetchone()
    victim = {"pid": pid, "create_time": start}
path = os.path.join(os.environ["PRUN_STATE_DIR"], "unit.json")
while True:
    unit = json.load(open(path))
    if unit.get("worker"):
        break
    time.sleep(0.01)
unit["worker"] = {**victim, "pgid": victim["pid"], "keeper": victim}
unit["dispatcher"] = victim
unit["attempt_id"] = "another-run:another-packet:1"
if len(sys.argv) > 2:
    unit["result_file"] = sys.argv[2]
    unit["workspace"] = os.path.dirname(sys.argv[2])
with open(path + ".tmp", "w") as f:
    json.dump(unit, f)
os.replace(path + ".tmp", path)
open(os.environ["FORGED_MARK"] + "." + os.environ.get("PRUN_PACKET_ID", "unit"), "w").close()
print("forged", flush=True)
time.sleep(600)
"""


@pytest.fixture
def victim():
    """A process of the user's that prun never started: it leads its own group and session."""
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                         start_new_session=True)
    yield p, {"pid": p.pid, "create_time": psutil.Process(p.pid).create_time()}
    p.kill()
    p.wait(30)


@pytest.fixture
def leftovers():
    yield
    for p in psutil.Process().children(recursive=True):
        p.kill()


def _forger(tmp_path, *args: str) -> list[str]:
    script = tmp_path / "forger.py"
    script.write_text(FORGER)
    return [sys.executable, str(script), *args]


def _receipt(attempt_id: str) -> psutil.Process:
    """The worker the ledger's receipt names (once the supervisor has committed it)."""
    def receipt() -> str | None:
        with sqlite3.connect(os.environ["PRUN_LEDGER"]) as c:
            row = c.execute("SELECT receipt FROM attempts WHERE id = ?", (attempt_id,)).fetchone()
        return row[0] if row else None

    return psutil.Process(int(until(receipt).split(":")[1].split("@")[0]))


def _gone(p: psutil.Process) -> bool:
    try:
        return p.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_pause_stops_only_the_units_own_group_whatever_its_unit_json_names(
        repo, tmp_path, victim, leftovers, monkeypatch):
    bystander, ident = victim
    monkeypatch.setenv("FORGED_MARK", str(tmp_path / "forged"))
    packets = [{"id": "names-supervisor", "executor": "command", "sandbox": "off",
                "command": _forger(tmp_path, "supervisor"), "prompt": "forge"},
               {"id": "names-bystander", "executor": "command", "sandbox": "off",
                "command": _forger(tmp_path, json.dumps(ident)), "prompt": "forge"}]
    (repo / "plan.json").write_text(json.dumps({"parallel": 2, "packets": packets}))
    sup = subprocess.Popen([sys.executable, "-m", "prun", "run", "plan.json", "--plain"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    run_id = sup.stdout.readline().split()[1]
    until(lambda: all((tmp_path / f"forged.{p['id']}").exists() for p in packets), 60)
    for packet in ("names-supervisor", "names-bystander"):
        worker = _receipt(f"{run_id}:{packet}:1")
        p = subprocess.run([sys.executable, "-m", "prun", "pause", packet, "--run", run_id],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0 and p.stdout.startswith(f"PAUSED {packet} "), p.stderr
        until(lambda w=worker: _gone(w), 30)        # its own group was ended ...
        assert sup.poll() is None, "prun pause killed the run's supervisor"
        assert bystander.poll() is None, "prun pause killed a process prun never started"
    out, err = sup.communicate(timeout=120)
    assert sup.returncode in (0, 1, 4), out + err     # the run ends as a run does
    assert "Traceback" not in err
    assert bystander.poll() is None


def _dispatch(tmp_path, argv: list[str]) -> tuple[subprocess.Popen, str]:
    (tmp_path / "prompt.md").write_text("hold on\n")
    d = subprocess.Popen([sys.executable, "-m", "prun", "dispatch", "--executor", "command",
                          "--command", " ".join(f"'{a}'" for a in argv), "--prompt-file",
                          str(tmp_path / "prompt.md"), "--result-file",
                          str(tmp_path / "result.md"), "--unit-id", "forger", "--sandbox",
                          "off"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = d.stdout.readline()
    assert line.startswith("STATE-DIR "), line + d.stderr.read()
    return d, line.split(" ", 1)[1].strip()


def test_cancel_of_a_standalone_unit_signals_its_own_dispatcher_not_the_one_it_names(
        repo, tmp_path, victim, leftovers, monkeypatch):
    bystander, ident = victim
    monkeypatch.setenv("FORGED_MARK", str(tmp_path / "forged"))
    d, state = _dispatch(tmp_path, _forger(tmp_path, json.dumps(ident)))
    until(lambda: (tmp_path / "forged.unit").exists(), 60)
    p = subprocess.run([sys.executable, "-m", "prun", "cancel", state], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.strip() == f"CANCEL {state} status=cancelled", \
        p.stdout + p.stderr
    d.wait(60)                                      # its real dispatcher was told, and ended it
    assert bystander.poll() is None, "prun cancel signalled the process unit.json named"


def test_a_standalone_unit_settled_after_its_dispatcher_died_writes_where_it_was_told(
        repo, tmp_path, victim, leftovers, monkeypatch):
    bystander, ident = victim
    monkeypatch.setenv("FORGED_MARK", str(tmp_path / "forged"))
    planted = tmp_path / "elsewhere" / "planted.sh"
    planted.parent.mkdir()
    d, state = _dispatch(tmp_path, _forger(tmp_path, json.dumps(ident), str(planted)))
    until(lambda: (tmp_path / "forged.unit").exists(), 60)
    d.send_signal(signal.SIGKILL)                   # its worker dies with it
    d.wait(30)
    for command in ("cancel", "settle"):
        p = subprocess.run([sys.executable, "-m", "prun", command, state], capture_output=True,
                           text=True, timeout=120)
        assert p.returncode == 0, p.stdout + p.stderr
        assert bystander.poll() is None, f"prun {command} signalled the process unit.json named"
    assert not planted.exists(), "the FALLBACK went to the path the unit wrote in unit.json"
    assert (tmp_path / "result.md").read_text().startswith("FALLBACK")
    outcome = json_file(f"{state}/outcome.json")
    assert outcome and outcome["result_file"] == str(tmp_path / "result.md")


def test_resume_reattaches_to_the_real_worker_and_cancel_ends_only_it(
        repo, tmp_path, victim, leftovers, monkeypatch):
    bystander, ident = victim
    monkeypatch.setenv("FORGED_MARK", str(tmp_path / "forged"))
    packet = {"id": "forger", "executor": "command", "sandbox": "off",
              "command": _forger(tmp_path, json.dumps(ident)), "prompt": "forge"}
    (repo / "plan.json").write_text(json.dumps({"packets": [packet]}))
    sup = subprocess.Popen([sys.executable, "-m", "prun", "run", "plan.json", "--plain"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    run_id = sup.stdout.readline().split()[1]
    until(lambda: (tmp_path / "forged.forger").exists(), 60)
    worker = _receipt(f"{run_id}:forger:1")
    sup.send_signal(signal.SIGKILL)                 # its keeper and worker live on
    sup.wait(30)
    resumed = subprocess.Popen([sys.executable, "-m", "prun", "resume", run_id, "--plain"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    until(lambda: _reattached(run_id), 60)
    cancel = subprocess.run([sys.executable, "-m", "prun", "cancel", run_id],
                            capture_output=True, text=True, timeout=120)
    assert cancel.returncode == 0, cancel.stdout + cancel.stderr
    _, err = resumed.communicate(timeout=120)
    assert "Traceback" not in err, err
    until(lambda: _gone(worker), 30)
    assert bystander.poll() is None, "the resumed supervisor ended the process unit.json named"


def _reattached(run_id: str) -> bool:
    with sqlite3.connect(os.environ["PRUN_LEDGER"]) as c:
        row = c.execute("SELECT 1 FROM events WHERE run_id = ? AND cause LIKE 're-attached%'",
                        (run_id,)).fetchone()
    return row is not None


def test_clean_refuses_while_the_real_worker_runs_whatever_unit_json_says(
        repo, tmp_path, leftovers, monkeypatch):
    monkeypatch.setenv("FORGED_MARK", str(tmp_path / "forged"))
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    dead = json.dumps({"pid": gone.pid, "create_time": 1000.0})   # no such process now
    packet = {"id": "forger", "executor": "command", "sandbox": "off",
              "command": _forger(tmp_path, dead), "prompt": "forge"}
    (repo / "plan.json").write_text(json.dumps({"packets": [packet]}))
    sup = subprocess.Popen([sys.executable, "-m", "prun", "run", "plan.json", "--plain"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    run_id = sup.stdout.readline().split()[1]
    until(lambda: (tmp_path / "forged.forger").exists(), 60)
    worker = _receipt(f"{run_id}:forger:1")
    sup.send_signal(signal.SIGKILL)                 # no supervisor; its worker runs on
    sup.wait(30)
    p = subprocess.run([sys.executable, "-m", "prun", "clean", run_id], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 1 and "still has units running: forger" in p.stderr, \
        p.stdout + p.stderr
    assert worker.is_running()
    worker.kill()
