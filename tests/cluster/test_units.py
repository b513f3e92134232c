"""Units of a plan run on a real Dask cluster (a scheduler and two workers on loopback): read-only
and code units of the command and (fake) Claude executors; what they produce lands in the local
state dirs and workspaces, and reconcile and integrate read it like any other run's."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from clusterkit import attempts as all_attempts
from clusterkit import write_plan

from helpers import prun

WRITE = ("import os, pathlib; pathlib.Path('notes.txt').write_text('from the cluster\\n'); "
         "pathlib.Path('data.bin').write_bytes(bytes(range(255, -1, -1))); "
         "pathlib.Path(os.environ['PRUN_RESULT_FILE']).write_text("
         "'# Result\\nwrote notes.txt and data.bin on a cluster worker\\n'); print('wrote')")
READ = ("import os, pathlib; snap = os.environ['PRUN_REPO_SNAPSHOT']; "
        "text = pathlib.Path(snap, 'README').read_text(); "
        "print('read', len(text), 'bytes', flush=True); "
        "pathlib.Path(os.environ['PRUN_RESULT_FILE']).write_text('# Result\\n' + text)")


def attempts(repo):
    return {r["packet_id"]: r for r in all_attempts(repo)}


def test_units_of_both_kinds_run_on_the_cluster_and_integrate(cluster, repo, monkeypatch):
    monkeypatch.setenv("PRUN_CLAUDE_BIN", cluster.env["PRUN_CLAUDE_BIN"])
    monkeypatch.setenv("IS_SANDBOX", "1")
    plan = write_plan(repo / "plan.json", [
        {"id": "read", "kind": "read-only", "executor": "command",
         "command": [sys.executable, "-c", READ], "prompt": "read the README"},
        {"id": "write", "kind": "code", "executor": "command", "owns": ["notes.txt", "data.bin"],
         "command": [sys.executable, "-c", WRITE], "prompt": "write notes"},
        {"id": "ask", "kind": "read-only", "executor": "claude", "prompt": "what is 6 x 7?"},
        {"id": "edit", "kind": "code", "executor": "claude", "owns": ["claude.txt"],
         "prompt": "write claude.txt"},
    ])
    r = prun("run", str(plan), "--cluster", cluster.address, "--plain", timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = attempts(repo)
    assert {k: v["status"] for k, v in rows.items()} == dict.fromkeys(
        ("read", "write", "ask", "edit"), "succeeded")
    for row in rows.values():
        assert row["receipt"].startswith("dask:prun-unit-")
        unit = json.loads((_p(row["state_dir"]) / "unit.json").read_text())
        assert unit["remote"]["cluster"] == cluster.address and "worker" not in unit
        remote = json.loads((_p(row["state_dir"]) / "remote.json").read_text())
        assert remote["worker"].startswith("tcp://127.0.0.1:")
        assert remote["exit_code"] == 0
        outcome = json.loads((_p(row["state_dir"]) / "outcome.json").read_text())
        assert outcome["outcome"] == "succeeded"
    read_tail = (_p(rows["read"]["state_dir"]) / "tail").read_text()
    assert read_tail.startswith("read ") and "bytes" in read_tail
    assert "a repository for cluster runs" in _p(rows["read"]["result_path"]).read_text()
    assert '"type":"result"' in (_p(rows["ask"]["state_dir"]) / "tail").read_text().replace(" ", "")
    # the diffs landed in the local clones: reconcile and integrate read them as usual
    ws = _p(rows["write"]["workspace"])
    assert (ws / "notes.txt").read_text() == "from the cluster\n"
    assert (ws / "data.bin").read_bytes() == bytes(range(255, -1, -1))
    assert (_p(rows["edit"]["workspace"]) / "claude.txt").read_text() == "from-claude\n"
    rec = prun("reconcile", timeout=60)
    assert rec.returncode == 0, rec.stdout + rec.stderr
    assert "ACCEPTED write" in rec.stdout and "ACCEPTED edit" in rec.stdout
    integ = prun("integrate", timeout=60)
    assert integ.returncode == 0, integ.stdout + integ.stderr
    assert (repo / "notes.txt").read_text() == "from the cluster\n"
    assert (repo / "data.bin").read_bytes() == bytes(range(255, -1, -1))
    assert (repo / "claude.txt").read_text() == "from-claude\n"


def test_status_reads_a_cluster_run_like_any_other(cluster, repo):
    plan = write_plan(repo / "plan.json", [
        {"id": "one", "executor": "command", "prompt": "one",
         "command": [sys.executable, "-c", "print('a line long enough to be a result' * 3)"]}])
    r = prun("run", str(plan), "--cluster", cluster.address, "--plain", timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    run_id = r.stdout.split()[1]
    s = prun("status", run_id, "--json", timeout=60)
    assert s.returncode == 0, s.stderr
    assert '"succeeded"' in s.stdout


def _p(path):
    return Path(path)
