"""One unit's fault stays its own: a unit that fills the disk under the run fails with its
reason, `prun run` ends with a documented exit code (never 70, a traceback), an innocent
sibling's work is kept and published once space allows (`prun resume`), and `prun reconcile`
works on the run. Needs root to mount a small tmpfs (skipped elsewhere, run on CI)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from test_environment import tmpfs

from prun.attempt import statedir
from prun.attempt.statedir import StateDir

# the sibling reports its work first, then waits for the disk to be full and ends well
SIBLING = ("import os, sys, time\n"
           "print('the sibling did its work and reports it here in full', flush=True)\n"
           "open(sys.argv[1] + '.printed', 'w').close()\n"
           "while not os.path.exists(sys.argv[1] + '.full'):\n"
           "    time.sleep(0.02)\n")
# the filler waits for the sibling's report, fills its outbox until the disk is full, and
# fails as a program does on a full disk
FILLER = ("import os, sys, time\n"
          "while not os.path.exists(sys.argv[1] + '.printed'):\n"
          "    time.sleep(0.02)\n"
          "try:\n"
          "    with open(os.environ['PRUN_RESULT_FILE'], 'wb') as f:\n"
          "        while True:\n"
          "            f.write(b'x' * 65536)\n"
          "            f.flush()\n"
          "finally:\n"
          "    open(sys.argv[1] + '.full', 'w').close()\n")


def _plan(repo, tmp_path) -> None:
    marks = str(tmp_path / "mark")
    packets = [{"id": "sibling", "executor": "command", "sandbox": "off",
                "command": [sys.executable, "-c", SIBLING, marks], "prompt": "work"},
               {"id": "filler", "executor": "command", "sandbox": "off",
                "command": [sys.executable, "-c", FILLER, marks], "prompt": "fill"},
               {"id": "next", "executor": "command", "after": ["sibling"],
                "command": [sys.executable, "-c", "print('the next unit built on it, in full')"],
                "prompt": "after the sibling"}]
    (repo / "plan.json").write_text(json.dumps({"parallel": 2, "packets": packets}))


def _prun(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "prun", *args], capture_output=True,
                          text=True, timeout=300)


def _units(run_id: str) -> dict[str, dict]:
    status = json.loads(_prun("status", run_id, "--json").stdout)
    return {u["packet_id"]: u for u in status["units"]}


def _after_space_is_freed(repo, run_id: str) -> None:
    """What the person does next: make room, resume, reconcile."""
    subprocess.run(["mount", "-o", "remount,size=64m", str(repo / ".prun")], check=True)
    resumed = _prun("resume", run_id, "--plain")
    assert resumed.returncode == 1, resumed.stdout + resumed.stderr   # the filler failed
    assert "Traceback" not in resumed.stderr, resumed.stderr
    units = _units(run_id)
    assert units["sibling"]["status"] == "succeeded", units
    assert units["filler"]["status"] == "failed", units
    assert units["next"]["status"] == "succeeded", units       # no longer blocked behind it
    result = repo / ".prun" / "runs" / run_id / "results" / "sibling.1.md"
    assert result.read_text() == "the sibling did its work and reports it here in full\n"
    (filler,) = (repo / ".prun" / "runs" / run_id / "state").glob("filler-*")
    outbox = statedir.outbox(StateDir(str(filler)), "filler.1.md")
    assert os.stat(outbox).st_size > 1 << 20                  # its work is not deleted
    rec = _prun("reconcile", run_id)
    assert rec.returncode in (0, 1, 10), rec.stdout + rec.stderr
    assert "Traceback" not in rec.stderr, rec.stderr
    words = ("ACCEPTED", "REJECTED", "NEEDS-REVIEW", "RECONCILE", "SUMMARY", "RUN")
    assert all(line.split()[0] in words for line in rec.stdout.splitlines() if line.strip()), \
        rec.stdout


def test_a_unit_that_fills_the_run_dir_fails_alone_and_its_sibling_is_published(
        repo, tmp_path):
    _plan(repo, tmp_path)
    with tmpfs(repo / ".prun", "4m"):
        p = _prun("run", "plan.json", "--plain")
        assert p.returncode == 1, p.stdout + p.stderr
        assert "Traceback" not in p.stderr, p.stderr
        run_id = p.stdout.split()[1]
        units = _units(run_id)
        assert units["filler"]["status"] == "failed", units
        sibling = units["sibling"]
        assert sibling["status"] == "failed" and sibling["reason"] == "disk-full", units
        assert units["next"]["status"] == "blocked", units
        line = next(x for x in p.stdout.splitlines() if x.startswith("UNIT sibling failed"))
        assert f"prun resume {run_id}" in line, line          # what to do, said once
        rec = _prun("reconcile", run_id)                       # on the disk still full
        assert rec.returncode == 1 and "Traceback" not in rec.stderr, rec.stdout + rec.stderr
        _after_space_is_freed(repo, run_id)


def test_a_full_disk_under_the_ledger_ends_the_run_with_one_line_and_resume_completes_it(
        repo, tmp_path, monkeypatch):
    monkeypatch.delenv("PRUN_LEDGER")                        # the ledger in .prun, filled too
    _plan(repo, tmp_path)
    with tmpfs(repo / ".prun", "4m"):
        p = _prun("run", "plan.json", "--plain")
        assert p.returncode == 1, p.stdout + p.stderr
        assert "Traceback" not in p.stderr, p.stderr
        last = p.stderr.strip().splitlines()[-1]
        assert last.startswith("prun: the ledger ") and "cannot be written" in last, p.stderr
        assert "prun resume" in last
        _after_space_is_freed(repo, p.stdout.split()[1])
    assert not os.path.ismount(repo / ".prun")


def test_a_unit_that_fills_the_workspaces_root_fails_alone_and_the_run_stops_cleanly(
        repo, tmp_path, monkeypatch):
    workspaces = tmp_path / "workspaces"
    monkeypatch.setenv("PRUN_WORKSPACE_ROOT", str(workspaces))
    marks = str(tmp_path / "mark")
    fill_here = FILLER.replace("os.environ['PRUN_RESULT_FILE']", "'big.bin'")  # its workspace
    late = {"id": "late", "executor": "command", "after": ["sibling"], "snapshot": False,
            "command": [sys.executable, "-c", "print('the late unit did its work, in full')"],
            "prompt": "later"}
    packets = [{"id": "sibling", "executor": "command", "sandbox": "off", "snapshot": False,
                "command": [sys.executable, "-c", SIBLING, marks], "prompt": "work"},
               {"id": "filler", "executor": "command", "sandbox": "off", "snapshot": False,
                "command": [sys.executable, "-c", fill_here, marks], "prompt": "fill"}, late]
    (repo / "plan.json").write_text(json.dumps({"parallel": 2, "packets": packets}))
    with tmpfs(workspaces, "4m"):
        p = _prun("run", "plan.json", "--plain")
        assert p.returncode == 3, p.stdout + p.stderr     # stopped: `late` could not begin
        assert "Traceback" not in p.stderr, p.stderr
        run_id = p.stdout.split()[1]
        units = _units(run_id)
        assert units["sibling"]["status"] == "succeeded", units
        assert units["filler"]["status"] == "failed", units
        assert units["late"]["status"] == "pending", units
        subprocess.run(["mount", "-o", "remount,size=64m", str(workspaces)], check=True)
        resumed = _prun("resume", run_id, "--plain")
        assert resumed.returncode == 1 and "Traceback" not in resumed.stderr, resumed.stderr
        assert _units(run_id)["late"]["status"] == "succeeded"
        (filled,) = (workspaces / run_id).glob("filler.1-*/big.bin")
        assert filled.stat().st_size > 1 << 20                 # its work is not deleted
