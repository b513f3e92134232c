"""Units outlive prun's own processes: `kill -9` of a run's supervisor and its worker keeper
together leaves every running unit to go on to its end under its monitor (a small `sh`; in
the sandbox, bubblewrap's parent), which records its exit in the state dir; `prun resume`
re-attaches to the units still running and judges every one as if nothing had happened, and
`prun cancel` ends them. Nothing runs twice, nothing is left running."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest
from faultkit import executions, gated_unit, json_file, until

from prun.attempt.monitor import exit_status

PRUN = [sys.executable, "-m", "prun"]
UNITS = 16


@pytest.fixture(autouse=True)
def no_orphans_after(tmp_path):
    """Whatever a test leaves, its units and their monitors (each names the test's folder)
    are ended when it is over, so that a failure leaves nothing running."""
    yield
    procs = []
    for pid in leftovers(str(tmp_path)):
        try:
            procs.append(psutil.Process(pid))
            procs[-1].kill()
        except psutil.Error:
            pass
    psutil.wait_procs(procs, timeout=30)


@pytest.fixture(params=["on", "off"], ids=["sandboxed", "unsandboxed"])
def sandbox(request, monkeypatch):
    """Each test twice: in the sandbox (which must exist on CI) and without it."""
    if request.param == "on":
        request.getfixturevalue("bwrap")
    monkeypatch.setenv("PRUN_SANDBOX", request.param)
    return request.param


def start_run(repo: Path, tmp_path: Path, packets: list[dict]) -> tuple[subprocess.Popen, Path]:
    plan = repo / "plan.json"
    plan.write_text(json.dumps({"parallel": len(packets), "packets": packets}))
    out = tmp_path / "run.out"
    with open(out, "w") as f:
        sup = subprocess.Popen([*PRUN, "run", "plan.json", "--plain"], stdout=f,
                               stderr=subprocess.STDOUT)
    return sup, out


def kill_supervisor_and_keeper(sup: subprocess.Popen) -> None:
    """`kill -9` of the supervisor and its worker keeper, together."""
    keeper = [c for c in psutil.Process(sup.pid).children()
              if any("keeper" in part for part in c.cmdline())]
    assert len(keeper) == 1, keeper
    sup.send_signal(signal.SIGKILL)
    keeper[0].send_signal(signal.SIGKILL)
    sup.wait(30)
    psutil.wait_procs(keeper, timeout=30)
    assert not keeper[0].is_running()


def run_id(out: Path) -> str:
    for line in out.read_text().splitlines():
        if line.startswith("RUN "):
            return line.split()[1]
    raise AssertionError(f"no RUN line in {out.read_text()!r}")


def state_dirs(repo: Path, rid: str) -> dict[str, Path]:
    """Each packet's state dir (one attempt each)."""
    root = repo / ".prun" / "runs" / rid / "state"
    found = {}
    for d in root.iterdir():
        unit = json_file(d / "unit.json") if d.is_dir() else None
        if unit:
            found[unit["unit_id"]] = d
    return found


def view(rid: str) -> dict:
    return json.loads(subprocess.run([*PRUN, "status", rid, "--json"], capture_output=True,
                                     text=True, timeout=60, check=True).stdout)


def leftovers(mark: str) -> list[int]:
    """Processes still alive whose command line names ``mark`` (a unit's code names its
    executions log; so do its monitor's and its sandbox's command lines)."""
    found = []
    for p in psutil.process_iter(["pid", "cmdline", "status"]):
        if p.info["pid"] != os.getpid() and p.info["status"] != psutil.STATUS_ZOMBIE \
                and any(mark in part for part in p.info["cmdline"] or []):
            found.append(p.info["pid"])
    return found


def marked(mark: str) -> list[int]:
    """Processes whose last argument is ``mark`` (the daemons a unit started)."""
    found = []
    for p in psutil.process_iter(["pid", "cmdline", "status"]):
        cmd = p.info["cmdline"] or []
        if cmd and cmd[-1] == mark and p.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(p.info["pid"])
    return found


def resume(rid: str) -> subprocess.Popen:
    return subprocess.Popen([*PRUN, "resume", rid, "--plain"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def test_units_outlive_their_supervisor_and_keeper_and_each_succeeds_once(repo, tmp_path,
                                                                          sandbox):
    log = tmp_path / "executions.log"
    gates = (tmp_path / "gate-early", tmp_path / "gate-late")
    ids = [f"u{i:02}" for i in range(UNITS)]
    early, late = ids[:UNITS // 2], ids[UNITS // 2:]
    sup, out = start_run(repo, tmp_path, [gated_unit(u, log, gates[u in late]) for u in ids])
    until(lambda: len(executions(log)) == UNITS)
    kill_supervisor_and_keeper(sup)
    rid = run_id(out)
    dirs = state_dirs(repo, rid)
    assert len(leftovers(str(log))) >= UNITS            # every unit runs on

    # half of them end while no prun process runs: each one's monitor records its exit
    gates[0].touch()
    until(lambda: all(exit_status(str(dirs[u] / "exit-status")) == 0 for u in early))
    # the other half are still running when the run is resumed: re-attached, then they end
    resumed = resume(rid)
    until(lambda: all((dirs[u] / "dispatch-pid").read_text().strip() == str(resumed.pid)
                      for u in late))
    gates[1].touch()
    text, _ = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, text[-3000:]

    assert executions(log) == dict.fromkeys(ids, 1)    # each ran exactly once
    v = view(rid)
    assert {u["packet_id"]: u["status"] for u in v["units"]} == dict.fromkeys(ids, "succeeded")
    attempts = {a["packet_id"]: a for a in v["attempts"]}
    assert len(v["attempts"]) == UNITS
    assert {p: a["exit_code"] for p, a in attempts.items()} == dict.fromkeys(ids, 0)
    for u in ids:   # its result published, as the ledger says
        published = Path(attempts[u]["result_path"]).read_text()
        assert f"unit {u} did its work" in published
        outcome = json_file(dirs[u] / "outcome.json")
        assert outcome["worker_exit"] == 0 and outcome["outcome"] == "succeeded", outcome
    assert not leftovers(str(log))


DAEMONS = """
subprocess.Popen(["setsid", sys.executable, "-c", "import time; time.sleep(300)", {mark!r}])
if os.fork() == 0:                 # the classic daemon: fork, setsid, fork
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", "import signal, time; "
                 "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)", {mark!r}])
    os._exit(0)
"""


def test_a_unit_a_killed_keeper_left_running_is_still_contained(repo, tmp_path, bwrap,
                                                                 monkeypatch):
    """Sandboxed: when its main process ends, no process of it is left (a setsid child and a
    double-forked daemon that ignores SIGTERM included), with no prun process running."""
    monkeypatch.setenv("PRUN_SANDBOX", "on")
    log, gate, mark = tmp_path / "executions.log", tmp_path / "gate", str(tmp_path / "daemon")
    sup, out = start_run(repo, tmp_path, [gated_unit(
        "spawner", log, gate, first=textwrap.dedent(DAEMONS.format(mark=mark)))])
    until(lambda: len(marked(mark)) == 2)
    kill_supervisor_and_keeper(sup)
    rid = run_id(out)
    gate.touch()
    # bwrap's init would wait for the daemons: it dies with bwrap (--die-with-parent), whose
    # parent is the unit's monitor, and the kernel ends the rest of the PID namespace
    until(lambda: not leftovers(str(log)) and not marked(mark))
    resumed = subprocess.run([*PRUN, "resume", rid, "--plain"], capture_output=True,
                             text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert executions(log) == {"spawner": 1}


def test_without_the_sandbox_what_left_the_group_is_ended_by_the_resumed_supervisor(
        repo, tmp_path, monkeypatch):
    """Unsandboxed, no keeper is left to take in what leaves the unit's group: the resumed
    supervisor ends each process that still carries the unit's state dir in its
    environment once the unit has ended, and reports it."""
    monkeypatch.setenv("PRUN_SANDBOX", "off")
    log, gate, mark = tmp_path / "executions.log", tmp_path / "gate", str(tmp_path / "daemon")
    sup, out = start_run(repo, tmp_path, [gated_unit(
        "spawner", log, gate, first=textwrap.dedent(DAEMONS.format(mark=mark)))])
    until(lambda: len(marked(mark)) == 2)
    kill_supervisor_and_keeper(sup)
    rid = run_id(out)
    sd = state_dirs(repo, rid)["spawner"]
    gate.touch()
    until(lambda: exit_status(str(sd / "exit-status")) == 0)
    daemons = marked(mark)
    assert len(daemons) == 2          # out of its group, with no keeper to end them
    resumed = subprocess.run([*PRUN, "resume", rid, "--plain"], capture_output=True,
                             text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert not marked(mark)
    outcome = json_file(sd / "outcome.json")
    assert sorted(e["pid"] for e in outcome["escaped"]) == sorted(daemons)
    assert executions(log) == {"spawner": 1}


def test_cancel_after_the_kill_ends_the_orphaned_units(repo, tmp_path, sandbox):
    log, gate = tmp_path / "executions.log", tmp_path / "gate"     # the gate never opens
    ids = [f"u{i}" for i in range(4)]
    sup, out = start_run(repo, tmp_path, [gated_unit(u, log, gate) for u in ids])
    until(lambda: len(executions(log)) == len(ids))
    kill_supervisor_and_keeper(sup)
    rid = run_id(out)
    cancel = subprocess.run([*PRUN, "cancel", rid, "--wait", "120"], capture_output=True,
                            text=True, timeout=300)
    assert cancel.returncode == 0, cancel.stdout + cancel.stderr
    assert not leftovers(str(log))
    v = view(rid)
    assert {u["packet_id"]: u["status"] for u in v["units"]} == dict.fromkeys(ids, "cancelled")
    assert executions(log) == dict.fromkeys(ids, 1)


def test_a_unit_that_dies_by_a_signal_after_the_kill_is_judged_128_plus_n(repo, tmp_path,
                                                                         sandbox):
    log, gate = tmp_path / "executions.log", tmp_path / "gate"
    sup, out = start_run(repo, tmp_path, [gated_unit(
        "dies", log, gate, then="os.kill(os.getpid(), signal.SIGUSR1)")])
    until(lambda: executions(log))
    kill_supervisor_and_keeper(sup)
    rid = run_id(out)
    sd = state_dirs(repo, rid)["dies"]
    gate.touch()
    until(lambda: exit_status(str(sd / "exit-status")) is not None)
    resumed = subprocess.run([*PRUN, "resume", rid, "--plain"], capture_output=True,
                             text=True, timeout=300)
    assert resumed.returncode == 1, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    (attempt,) = view(rid)["attempts"]
    assert (attempt["status"], attempt["reason"]) == ("failed", "exit-nonzero")
    assert attempt["exit_code"] == 128 + signal.SIGUSR1
    assert json_file(sd / "outcome.json")["worker_exit"] == 128 + signal.SIGUSR1
    assert executions(log) == {"dies": 1}
