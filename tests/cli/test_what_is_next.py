"""What a new user meets through the `prun` command (issue 33): a dirty tree is said at `prun
run` and `base: worktree` starts code units from it; a run whose units succeeded but whose
reconcile will reject one says so at its end; a run whose supervisor is gone is named by
`prun status` and `prun wait` (exit 7, whatever the cursor)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from helpers import poll, prun, write_plan
from prun.ledger import Ledger
from prun.run.detached import supervisor_alive

DONE = "print('## Summary\\nthe unit did its work and reports it in full')\n"


def code_unit(pid: str, code: str, **fields) -> dict:
    return {"id": pid, "kind": "code", "executor": "command", "prompt": f"unit {pid}",
            "command": [sys.executable, "-c", code + DONE], "owns": [f"{pid}.txt"], **fields}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=True).stdout


def attempts(run_id: str) -> dict[str, dict]:
    with Ledger.open() as ledger:
        return {a["packet_id"]: dict(a) for a in ledger.attempts(run_id)}


COPY = ("import os; open('{pid}.txt', 'w').write(open('notes.txt').read() "
        "if os.path.exists('notes.txt') else 'none')\n")


def test_the_plans_own_uncommitted_files_are_not_counted(repo):
    # the plan and its packet files, new and untracked, are not work a unit misses
    (repo / "packets").mkdir()
    (repo / "packets" / "a.md").write_text(
        "---\nid: a\nkind: code\nexecutor: command\nsandbox: 'off'\nowns: [a.txt]\n"
        f"command: [{sys.executable!r}, -c, \"open('a.txt', 'w').write('x'); "
        "print('wrote a.txt as the packet asked, and nothing else')\"]\n---\n"
        "Write a.txt.\n")
    (repo / "plan.yaml").write_text("packets: [packets/*.md]\n")
    r = prun("run", "plan.yaml")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "uncommitted" not in r.stderr, r.stderr


def test_a_dirty_tree_is_said_and_base_worktree_starts_from_it(repo):
    write_plan(repo / "plan.yaml", [code_unit("a", COPY.format(pid="a"))], sandbox="off")
    git(repo, "add", "plan.yaml")
    git(repo, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", "plan")
    head = git(repo, "rev-parse", "HEAD").strip()
    (repo / "README").write_text("edited, not committed\n")
    (repo / "notes.txt").write_text("the person's notes\n")
    index = (repo / ".git" / "index").read_bytes()

    r = prun("run", "plan.yaml")
    assert r.returncode == 0, r.stdout + r.stderr
    assert ("prun: 2 uncommitted changes in the working tree will not be seen by code units, "
            "which start from the base commit (commit them first, or set base: worktree in "
            "the plan)\n") in r.stderr
    run_id = r.stdout.split()[1]
    first = attempts(run_id)["a"]
    assert first["base"] == head
    assert (Path(first["workspace"]) / "a.txt").read_text() == "none"

    write_plan(repo / "plan.yaml", [code_unit("a", COPY.format(pid="a"))], sandbox="off",
               base="worktree")
    r = prun("run", "plan.yaml")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "uncommitted" not in r.stderr
    run_id = r.stdout.split()[1]
    unit = attempts(run_id)["a"]
    base = unit["base"]
    assert base != head and f"base={base}" in r.stdout.splitlines()[0]
    assert git(repo, "rev-parse", f"{base}^").strip() == head
    assert git(repo, "show", f"{base}:plan.yaml") == (repo / "plan.yaml").read_text()
    assert (Path(unit["workspace"]) / "a.txt").read_text() == "the person's notes\n"
    with Ledger.open() as ledger:
        assert ledger.find_run(run_id)["base"] == base
    # nothing of the person's moved: branch, index, stash list
    assert git(repo, "rev-parse", "HEAD").strip() == head
    assert (repo / ".git" / "index").read_bytes() == index
    assert git(repo, "stash", "list") == ""
    # its change alone is reconciled and integrated into the tree as it is
    rec = prun("reconcile", run_id)
    assert rec.returncode == 0, rec.stdout + rec.stderr
    assert "ACCEPTED a files=1" in rec.stdout
    integ = prun("integrate", run_id)
    assert integ.returncode == 0, integ.stdout + integ.stderr
    assert (repo / "a.txt").read_text() == "the person's notes\n"
    assert (repo / "README").read_text() == "edited, not committed\n"


def test_a_scope_leak_is_named_at_the_end_of_a_run_that_succeeded(repo):
    leak = "open('a.txt', 'w').write('mine'); open('leak.txt', 'w').write('not mine')\n"
    write_plan(repo / "plan.yaml", [code_unit("a", leak)], sandbox="off")
    r = prun("run", "plan.yaml")
    assert r.returncode == 0, r.stdout + r.stderr
    run_id = r.stdout.split()[1]
    assert " status=succeeded " in r.stdout
    assert r.stdout.splitlines()[-1] == "REJECTED a reason=scope-leak path=leak.txt"
    assert (f"prun: every unit succeeded, but `prun reconcile {run_id}` will reject 1 packet "
            "(the REJECTED lines)") in r.stderr
    assert "REJECTED a reason=scope-leak path=leak.txt" in prun("reconcile", run_id).stdout


def test_a_gone_supervisor_is_named_by_status_and_wait_whatever_the_cursor(repo, tmp_path):
    go = tmp_path / "go"
    wait_for_go = (f"import os, time\nwhile not os.path.exists({str(go)!r}): time.sleep(0.05)\n"
                   "print('## Summary\\nthe unit waited for its signal and ends now')\n")
    write_plan(repo / "plan.yaml", [
        {"id": "bad", "executor": "command", "prompt": "fails",
         "command": [sys.executable, "-c", "raise SystemExit(1)"]},
        {"id": "slow", "executor": "command", "prompt": "waits",
         "command": [sys.executable, "-c", wait_for_go]}], sandbox="off")
    r = prun("run", "plan.yaml", "--detach")
    assert r.returncode == 0, r.stderr
    run_id = r.stdout.split()[1]
    try:
        first = prun("wait", run_id, "--timeout", "60")
        assert first.returncode == 4, first.stdout + first.stderr       # bad failed
        with Ledger.open() as ledger:
            row = ledger.find_run(run_id)
        os.kill(row["supervisor_pid"], signal.SIGKILL)
        poll(lambda: not supervisor_alive(row))

        again = prun("wait", run_id)                 # no cursor: bad's failure is found again
        assert again.returncode == 7, again.stdout + again.stderr
        assert f'supervisor-gone cause="run `prun resume {run_id}`"' in again.stdout
        status = prun("status", run_id)
        assert status.returncode == 0, status.stderr
        assert "status=running" in status.stdout and "supervisor=gone" in status.stdout
        assert status.stderr == (f"prun: the supervisor of run {run_id} is gone (`prun resume "
                                 f"{run_id}` takes it over)\n")
        doc = json.loads(prun("status", run_id, "--json").stdout)
        assert doc["run"]["status"] == "running" and doc["next"] == f"prun resume {run_id}"
    finally:
        go.write_text("")
    resumed = prun("resume", run_id)
    assert resumed.returncode == 1, resumed.stdout + resumed.stderr   # bad failed, slow ended
    assert prun("wait", run_id).returncode == 1


def test_prun_check_resolves_base_worktree_as_prun_run_does(repo):
    packets = [code_unit("a", "", base="worktree"), code_unit("b", "")]
    write_plan(repo / "plan.yaml", packets, sandbox="off")
    git(repo, "add", "plan.yaml")
    git(repo, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", "plan")
    clean = prun("check", "plan.yaml")
    assert clean.returncode == 0, clean.stdout + clean.stderr   # a clean tree is HEAD
    (repo / "README").write_text("edited\n")
    dirty = prun("check", "plan.yaml")
    assert dirty.returncode == 1, dirty.stdout + dirty.stderr
    assert "FAIL base a b" in dirty.stdout and "worktree..HEAD" not in dirty.stdout
