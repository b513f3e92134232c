"""The acceptance check (prun.git.accept) through the prun command: real runs of command units
in real git, then prun reconcile and prun status."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from gitrepo import commit_all, write

from helpers import prun
from prun.ledger import Ledger
from prun.review import render
from prun.review.model import build

PY = sys.executable


def code_unit(pid: str, files: dict[str, str], **fields) -> dict:
    """A code packet owning ``out/<pid>/``, whose command writes ``files`` in its clone and
    prints a result."""
    code = "import os\n" + "".join(
        f"os.makedirs(os.path.dirname({p!r}) or '.', exist_ok=True); open({p!r}, 'w').write({t!r})\n"
        for p, t in files.items()) + "print('the unit wrote its files as asked')"
    return {"id": pid, "kind": "code", "executor": "command", "prompt": f"unit {pid}",
            "owns": [f"out/{pid}/**"], "command": [PY, "-c", code], **fields}


def run(repo: Path, packets: list[dict], **settings) -> str:
    (repo / "plan.yaml").write_text(json.dumps({**settings, "packets": packets}))
    r = prun("run", "plan.yaml", cwd=repo, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout.split()[1]


def reconcile(repo: Path) -> tuple[int, list[str], dict[str, dict]]:
    r = prun("reconcile", cwd=repo, timeout=120)
    j = json.loads(prun("reconcile", "--json", cwd=repo, timeout=120).stdout)
    return r.returncode, r.stdout.splitlines(), {p["packet"]: p for p in j["packets"]}


@pytest.mark.parametrize("overlays", [False, True], ids=["clones", "overlay-workspaces"])
def test_checks_pass_fail_err_and_time_out_each_recorded_with_its_attempt(repo, tmp_path, request,
                                                                          overlays):
    if overlays:   # each code unit's workspace an overlay over the run's checkout
        request.getfixturevalue("overlay")
    check_a = [PY, "-c", "import sys; sys.exit(open('out/pass/a.txt').read() != 'A')"]
    run_id = run(repo, [
        code_unit("pass", {"out/pass/a.txt": "A"}, accept=check_a),
        code_unit("fail", {"out/fail/a.txt": "B"},
                  accept=f"echo BROKEN-OUTPUT; {PY} -c 'import sys; sys.exit(3)'"),
        code_unit("missing", {"out/missing/a.txt": "A"}, accept="no-such-command-for-prun-tests"),
        code_unit("slow", {"out/slow/a.txt": "A"}, accept=[PY, "-c", "import time; time.sleep(60)"],
                  accept_timeout=0.5),
        {"id": "read", "executor": "command", "prompt": "read it",
         "command": [PY, "-c", "print('a read-only result that is long enough')"],
         "accept": "test -f README.md"},
    ])
    code, lines, packets = reconcile(repo)
    assert code == 1, lines
    run_dir = Path(repo / ".prun" / "runs" / run_id)
    fail_log = run_dir / "accept" / "fail.1.log"
    assert "ACCEPTED pass files=1 accept=passed" in lines
    assert f"REJECTED fail reason=accept-failed log={fail_log}" in lines
    assert "BROKEN-OUTPUT" in fail_log.read_text()
    assert any(line.startswith("REVIEW missing reason=accept-error log=") for line in lines)
    assert any(line.startswith("REVIEW slow reason=accept-timeout log=") for line in lines)
    assert "ACCEPTED read accept=passed" in lines
    assert {p: packets[p]["accept"]["status"] for p in packets} == {
        "pass": "passed", "fail": "failed", "missing": "error", "slow": "timeout",
        "read": "passed"}
    assert packets["fail"]["accept"]["exit"] == 3 and packets["missing"]["accept"]["exit"] == 127
    assert packets["slow"]["accept"]["exit"] is None
    assert packets["pass"]["accept"]["log"] == str(run_dir / "accept" / "pass.1.log")
    assert packets["fail"]["verdict"] == "rejected"
    assert packets["missing"]["verdict"] == packets["slow"]["verdict"] == "needs-review"

    # computed once per attempt: a second reconcile reads the ledger (same seconds)
    _, again, second = reconcile(repo)
    assert again == lines and second["slow"]["accept"] == packets["slow"]["accept"]

    status = json.loads(prun("status", "--json", cwd=repo).stdout)
    units = {u["packet_id"]: u for u in status["units"]}
    assert units["fail"]["accept"]["status"] == "failed"
    attempts = {a["packet_id"]: a for a in status["attempts"]}
    assert attempts["fail"]["accept_exit"] == 3 and "BROKEN-OUTPUT" in attempts["fail"]["accept_tail"]
    plain = prun("status", cwd=repo).stdout
    assert "accept=failed" in plain, plain

    page = json.loads(prun("review", "--json", cwd=repo).stdout)
    shown = {p["packet"]: p for p in page["packets"]}
    assert shown["fail"]["verdict"] == "REJECTED" and shown["fail"]["accept"]["status"] == "failed"
    assert shown["missing"]["verdict"] == "REVIEW"
    with Ledger.open() as ledger:
        html = render.page(build(ledger, run_id), "token")
    assert "BROKEN-OUTPUT" in html and 'class="accept-failed"' in html


def test_the_plan_default_checks_base_plus_patch_not_the_workers_clone(repo):
    write(repo, {".gitignore": "local.cfg\n"})
    commit_all(repo, "ignore local.cfg")
    # the worker leaves an ignored file in its clone: outside its patch, unseen by the check
    isolated = "test -f out/own/a.txt && test ! -e local.cfg"
    run(repo, [code_unit("own", {"out/own/a.txt": "A", "local.cfg": "x"}),
               code_unit("other", {"out/other/b.txt": "B"}, accept="test -f out/nothing"),
               {"id": "read", "executor": "command", "prompt": "read it",
                "command": [PY, "-c", "print('a read-only result that is long enough')"]}],
        accept=isolated)
    code, lines, packets = reconcile(repo)
    assert "ACCEPTED own files=1 accept=passed" in lines, lines
    assert packets["other"]["accept"]["status"] == "failed"      # its own check, not the plan's
    assert packets["read"]["accept"] == {"status": "none", "exit": None, "seconds": None,
                                         "log": None}
    assert "ACCEPTED read" in lines and code == 1

    merged = prun("integrate", cwd=repo, timeout=120)
    assert (repo / "out" / "own" / "a.txt").read_text() == "A", merged.stdout + merged.stderr
    assert not (repo / "out" / "other").exists() and not (repo / "local.cfg").exists()


def test_a_dependents_check_runs_on_its_start_with_its_predecessors_change(repo):
    run(repo, [code_unit("first", {"out/first/a.txt": "A"}),
               code_unit("then", {"out/then/b.txt": "B"}, after=["first"],
                         accept="test -f out/first/a.txt && test -f out/then/b.txt")])
    code, lines, packets = reconcile(repo)
    assert "ACCEPTED then files=1 accept=passed" in lines, lines
    assert packets["first"]["accept"]["status"] == "none" and code == 0
