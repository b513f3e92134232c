"""A real `prun run` of code units, then reconcile, integrate and clean on its clones."""

from __future__ import annotations

import json
import os
import sys

from gitrepo import gout, poll

from helpers import last_attempt, prun

WRITE = "import pathlib,sys; p=pathlib.Path(sys.argv[1]); p.write_text(sys.argv[2]); " \
        "print('wrote ' + sys.argv[1] + ' as asked, nothing else')"


def unit(pid: str, path: str, text: str, owns: list[str]) -> dict:
    return {"id": pid, "kind": "code", "executor": "command", "owns": owns,
            "command": [sys.executable, "-c", WRITE, path, text], "prompt": f"unit {pid}"}


def test_run_reconcile_integrate_clean(repo, tmp_path):
    plan = repo / "plan.json"
    plan.write_text(json.dumps({
        "check": f"{sys.executable} -c \"import pathlib; "
                 f"assert pathlib.Path('src/app/main.py').read_text() == 'A'\"",
        "packets": [unit("a", "src/app/main.py", "A", ["src/app/**"]),
                    unit("b", "README.md", "leak", ["src/lib/**"])]}))
    head = gout(repo, "rev-parse", "HEAD")
    r = prun("run", str(plan), cwd=repo, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (repo / "src/app/main.py").read_text().startswith("def main")   # untouched so far

    r = prun("reconcile", cwd=repo)
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout.splitlines()[:2] == ["ACCEPTED a files=1",
                                         "REJECTED b reason=scope-leak path=README.md"]

    r = prun("integrate", cwd=repo)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "CHANGED a modified src/app/main.py +1 -2" in r.stdout
    assert "SKIPPED b verdict=rejected" in r.stdout
    assert "CHECK passed exit=0" in r.stdout
    assert (repo / "src/app/main.py").read_text() == "A"
    assert (repo / "README.md").read_text() == "readme\n"
    assert gout(repo, "rev-parse", "HEAD") == head

    r = prun("clean", cwd=repo)
    assert r.returncode == 0, r.stderr
    removed = [line for line in r.stdout.splitlines() if line.startswith("REMOVED")]
    assert len(removed) == 3    # the two clones, then the object store they borrowed from
    assert os.path.basename(removed[-1].split(" ", 2)[2]).startswith("objects-")
    for line in removed:
        path = line.split(" ", 2)[2]
        assert path.startswith(str(tmp_path / "ws")) and not os.path.exists(path)
    assert (repo / "src").is_dir()


def test_pause_a_unit_of_a_live_run(repo, tmp_path):
    from prun.ledger import Ledger

    code = ("import pathlib,time; pathlib.Path('src/app/main.py').write_text('half'); "
            "pathlib.Path('src/app/extra.py').write_text('X = 1\\n'); time.sleep(300)")
    plan = repo / "plan.json"
    plan.write_text(json.dumps({"packets": [
        {"id": "slow", "kind": "code", "executor": "command", "owns": ["src/app/**"],
         "command": [sys.executable, "-c", code], "prompt": "p"}]}))
    r = prun("run", str(plan), "--detach", cwd=repo)
    assert r.returncode == 0, r.stderr
    run_id = r.stdout.split()[1]

    a = poll(lambda: (x := last_attempt(run_id, "slow")) and x["status"] == "dispatched"
             and x["workspace"]
             and os.path.exists(os.path.join(x["workspace"], "src/app/extra.py")) and x)
    r = prun("pause", "slow", cwd=repo, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith(f"PAUSED slow attempt={a['id']} stopped=stopped files=2 patch=")
    patch = open(os.path.join(a["state_dir"], "paused.patch")).read()
    assert "+half" in patch and "+X = 1" in patch
    assert poll(lambda: last_attempt(run_id, "slow")["status"] == "cancelled")
    with Ledger.open() as ledger:
        assert any(e["kind"] == "pause" for e in ledger.events(run_id))
    with Ledger.open() as ledger:
        poll(lambda: ledger.run(run_id)["status"] != "running")
    r = prun("clean", run_id, cwd=repo)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines()[-1] == f"CLEAN run={run_id} removed=2 kept=0"  # and its store
    assert not os.path.exists(a["workspace"])
    assert not os.path.exists(a["workspace"] + ".quarantined")
