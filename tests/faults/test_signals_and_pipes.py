"""Signals only with proof (a recorded start time that still matches), and a closed stdout
that changes nothing about a run."""

from __future__ import annotations

import json
import subprocess
import sys

import psutil
from faultkit import counted_unit, executions, json_file, until


def _dispatch(tmp_path, code: str) -> tuple[subprocess.Popen, str]:
    (tmp_path / "prompt.md").write_text("hold on\n")
    d = subprocess.Popen([sys.executable, "-m", "prun", "dispatch", "--executor", "command",
                          "--command", f"{sys.executable} -c {code!r}", "--prompt-file",
                          str(tmp_path / "prompt.md"), "--result-file",
                          str(tmp_path / "result.md"), "--unit-id", "held", "--sandbox", "off"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = d.stdout.readline()
    assert line.startswith("STATE-DIR "), line + d.stderr.read()
    return d, line.split(" ", 1)[1].strip()


def test_no_recorded_start_time_means_no_signal(repo, tmp_path):
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                                 start_new_session=True)
    d, state = _dispatch(tmp_path, "import time; time.sleep(600)")
    try:
        path = f"{state}/unit.json"
        unit = until(lambda: (u := json_file(path)) and u.get("worker") and u)
        # the record now names a process prun did not start, with no start time to prove it
        for key in ("dispatcher", "worker"):
            unit[key] = {"pid": bystander.pid}
        unit["worker"]["pgid"] = bystander.pid
        with open(path, "w") as f:
            json.dump(unit, f)
        for args in (["cancel", state], ["pause", state]):
            p = subprocess.run([sys.executable, "-m", "prun", *args], capture_output=True,
                               text=True, timeout=60)
            assert bystander.poll() is None, f"{args} signalled a process it cannot prove"
            assert len(p.stderr.splitlines()) <= 1, p.stderr
    finally:
        bystander.kill()
        d.kill()
        d.wait(30)
        for p in psutil.Process().children(recursive=True):
            p.kill()


def test_a_closed_stdout_changes_nothing_about_a_run(repo, tmp_path):
    log = tmp_path / "executions.log"
    good = [counted_unit(f"u{i}", log) for i in range(6)]
    bad = {**counted_unit("bad", log), "command": [sys.executable, "-c", "raise SystemExit(3)"]}
    (repo / "good.json").write_text(json.dumps({"packets": good}))
    (repo / "bad.json").write_text(json.dumps({"packets": [*good, bad]}))
    for plan, code in (("good.json", 0), ("bad.json", 1)):
        for flags in ("", "--verbose"):
            shell = (f"{sys.executable} -m prun run {plan} --plain {flags} | head -c 1; "
                     "echo \" rc=${PIPESTATUS[0]}\"")
            p = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, timeout=300)
            assert p.stdout.rstrip().endswith(f"rc={code}"), (plan, flags, p.stdout, p.stderr)
    assert executions(log) == {f"u{i}": 4 for i in range(6)}
    runs = json.loads(subprocess.run([sys.executable, "-m", "prun", "ledger", "--json"],
                                     capture_output=True, text=True, check=True).stdout)
    assert sorted(r["status"] for r in runs) == ["failed", "failed", "succeeded", "succeeded"]


def test_a_run_whose_supervisor_has_no_recorded_start_time_is_never_signalled(repo, tmp_path):
    import sqlite3

    log = tmp_path / "executions.log"
    (repo / "plan.json").write_text(json.dumps({"packets": [counted_unit("a", log)]}))
    subprocess.run([sys.executable, "-m", "prun", "run", "plan.json", "--plain"], check=True,
                   capture_output=True, timeout=300)
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                                 start_new_session=True)
    try:
        where = subprocess.run([sys.executable, "-m", "prun", "ledger", "--path"],
                               capture_output=True, text=True, check=True).stdout.strip()
        db = sqlite3.connect(where)
        with db:
            db.execute("UPDATE runs SET status='running', supervisor_pid=?, "
                       "supervisor_started=NULL, finished_at=NULL", (bystander.pid,))
        db.close()
        run_id = json.loads(subprocess.run([sys.executable, "-m", "prun", "ledger", "--json"],
                                           capture_output=True, text=True,
                                           check=True).stdout)[0]["id"]
        for args in (["cancel", run_id, "--wait", "1"], ["pause", "a", "--run", run_id]):
            p = subprocess.run([sys.executable, "-m", "prun", *args], capture_output=True,
                               text=True, timeout=120)
            assert bystander.poll() is None, f"{args} signalled a process it cannot prove"
            assert "Traceback" not in p.stderr
    finally:
        bystander.kill()
