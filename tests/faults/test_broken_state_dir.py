"""A state dir a unit broke before it ended (`outcome.json` a folder, `unit.json` a FIFO or a
link to /dev/zero, its `tail` a link to /dev/zero) crashes and hangs nothing: the run, `prun
status`, `wait`, `monitor`, `gather` and `reconcile` report that unit with its reason and
carry on with the others; `prun settle` settles a standalone one from its dispatcher's record.
The units run unsandboxed, so that they can write their state dir."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import psutil
from faultkit import json_file, until

BREAKS = {
    "outcome-folder": "os.mkdir(sd + '/outcome.json')",
    "unit-fifo": "os.replace(sd + '/unit.json', sd + '/unit.old'); os.mkfifo(sd + '/unit.json')",
    "unit-zero": "os.remove(sd + '/unit.json'); os.symlink('/dev/zero', sd + '/unit.json')",
    "tail-zero": ("os.symlink('/dev/zero', sd + '/tail.new'); "
                  "os.replace(sd + '/tail.new', sd + '/tail')"),
}
REPORT = "print('a unit that reports its work here, long enough to count', flush=True)\n"


def _unit(name: str) -> dict:
    code = f"import os\nsd = os.environ['PRUN_STATE_DIR']\n{REPORT}{BREAKS[name]}\n"
    return {"id": name, "executor": "command", "sandbox": "off",
            "command": [sys.executable, "-c", code], "prompt": f"break {name}"}


def _prun(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "prun", *args], capture_output=True,
                          text=True, timeout=120)


def _clean(p: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in p.stderr, p.stderr
    assert p.returncode != 70, p.stdout + p.stderr


def test_a_broken_state_dir_fails_its_unit_and_every_command_carries_on(repo, tmp_path):
    good = {"id": "good", "executor": "command", "command": [sys.executable, "-c", REPORT],
            "prompt": "work"}
    (repo / "plan.json").write_text(json.dumps({
        "parallel": 5, "packets": [good, *(_unit(n) for n in BREAKS)]}))
    p = _prun("run", "plan.json", "--plain")
    _clean(p)
    assert p.returncode == 1, p.stdout + p.stderr
    run_id = p.stdout.split()[1]

    status = _prun("status", run_id, "--json")
    _clean(status)
    units = {u["packet_id"]: u for u in json.loads(status.stdout)["units"]}
    assert units["good"]["status"] == "succeeded"
    assert units["tail-zero"]["status"] == "failed"
    assert units["tail-zero"]["reason"] == "result-not-a-file"   # its stdout is its result
    # what the others broke is theirs to read: prun's own records are not in their state dir
    assert {units[n]["status"] for n in ("outcome-folder", "unit-fifo", "unit-zero")} <= {
        "succeeded", "failed"}
    _clean(_prun("status", run_id))
    wait = _prun("wait", run_id)
    _clean(wait)
    assert wait.returncode in (1, 4), wait.stdout + wait.stderr   # the run failed

    run_dir = repo / ".prun" / "runs" / run_id
    states = sorted(str(d) for d in (run_dir / "state").iterdir() if not d.name.startswith("."))
    monitor = _prun("monitor", *states, "--timeout", "5s")
    _clean(monitor)
    assert monitor.returncode in (0, 4, 124), monitor.stdout + monitor.stderr
    assert monitor.stdout.split()[0] in ("ALL-DONE", "FAILED", "TIMEOUT"), monitor.stdout
    results = sorted(str(f) for f in (run_dir / "results").iterdir())
    gather = _prun("gather", *results, "--timeout", "5s")
    _clean(gather)
    assert gather.returncode in (0, 1, 2), gather.stdout + gather.stderr

    rec = _prun("reconcile", run_id)
    _clean(rec)
    assert rec.returncode in (1, 10), rec.stdout + rec.stderr
    verdicts = {line.split()[1]: line.split()[0] for line in rec.stdout.splitlines()
                if line.split()[0] in ("ACCEPTED", "REJECTED", "NEEDS-REVIEW")}
    assert set(verdicts) == {"good", *BREAKS} and verdicts["good"] == "ACCEPTED", rec.stdout
    assert verdicts["tail-zero"] == "REJECTED"


def test_settle_of_a_standalone_unit_whose_unit_json_is_a_fifo(repo, tmp_path):
    (tmp_path / "prompt.md").write_text("break it\n")
    script = tmp_path / "break.py"
    script.write_text("import os, time\nsd = os.environ['PRUN_STATE_DIR']\n"
                      f"{REPORT}{BREAKS['unit-fifo']}\ntime.sleep(600)\n")
    d = subprocess.Popen([sys.executable, "-m", "prun", "dispatch", "--executor", "command",
                          "--command", f"{sys.executable} {script}", "--prompt-file",
                          str(tmp_path / "prompt.md"), "--result-file",
                          str(tmp_path / "result.md"), "--unit-id", "broken", "--sandbox",
                          "off"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    state = d.stdout.readline().split(" ", 1)[1].strip()
    try:
        until(lambda: os.path.exists(f"{state}/unit.old"))
        d.send_signal(signal.SIGKILL)               # its worker dies with it
        d.wait(30)
        for command in ("settle", "cancel", "monitor"):
            p = _prun(command, state, *(["--timeout", "5s"] if command == "monitor" else []))
            _clean(p)
            assert p.returncode in (0, 4), p.stdout + p.stderr
        result = (tmp_path / "result.md").read_text()
        assert result.startswith("FALLBACK") and "reports its work here" in result
        assert json_file(f"{state}/outcome.json")["unit_id"] == "broken"
    finally:
        d.kill()
        for child in psutil.Process().children(recursive=True):
            child.kill()
