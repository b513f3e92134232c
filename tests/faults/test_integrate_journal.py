"""A killed `prun integrate` is detected and finished by the next one: each change applied
exactly once, the interrupted one named, no false conflict."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

UNITS = 24
WRITE = ("import pathlib,sys; p=pathlib.Path(sys.argv[1]); p.parent.mkdir(exist_ok=True); "
         "p.write_text(sys.argv[2] * 2000); print('wrote ' + sys.argv[1] + ' as asked, all done')")


def _git(repo, *args) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=True).stdout


def test_an_interrupted_integrate_is_finished_by_the_next_one(repo):
    packets = [{"id": f"p{i:02}", "kind": "code", "executor": "command",
                "owns": [f"area{i:02}/**"], "prompt": f"unit {i}",
                "command": [sys.executable, "-c", WRITE, f"area{i:02}/file.txt", f"{i:02} "]}
               for i in range(UNITS)]
    (repo / "plan.json").write_text(json.dumps({"packets": packets}))
    _git(repo, "add", "plan.json")
    _git(repo, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "-m", "plan")
    r = subprocess.run([sys.executable, "-m", "prun", "run", "plan.json", "--plain"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    r = subprocess.run([sys.executable, "-m", "prun", "reconcile"], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr

    first = subprocess.Popen([sys.executable, "-m", "prun", "integrate", "--no-check"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = first.stdout.readline()                    # APPLIED lines come as they happen
    assert line.startswith(("APPLIED", "CHANGED")), line + first.stderr.read()
    first.send_signal(signal.SIGKILL)
    first.wait(30)

    again = subprocess.run([sys.executable, "-m", "prun", "integrate", "--no-check"],
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "CONFLICT" not in again.stdout, again.stdout
    for i in range(UNITS):
        assert (repo / f"area{i:02}" / "file.txt").read_text() == f"{i:02} " * 2000
    third = subprocess.run([sys.executable, "-m", "prun", "integrate", "--no-check"],
                           capture_output=True, text=True, timeout=300)
    assert third.returncode == 0 and "CONFLICT" not in third.stdout, third.stdout + third.stderr
