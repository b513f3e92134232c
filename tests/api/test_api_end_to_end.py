"""The Python API a coordinator written in Python uses (docs/api.md), end to end on real
processes: a plan of command units in a real git repository is loaded, checked, run in the
background by a real supervisor, waited for, read back, reconciled and integrated; one unit is
dispatched outside a plan; and what the API refuses is a prun error, with nothing made."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import prun
from helpers import write_plan
from prun._util.process import is_subreaper

WRITE = """
import json, pathlib, sys
for path, text in json.loads(sys.argv[1]).items():
    pathlib.Path(path).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(path).write_text(text)
print("wrote the files it was asked to write, and nothing else at all")
"""


def unit(pid: str, owns: list[str], files: dict[str, str]) -> dict:
    return {"id": pid, "kind": "code", "executor": "command", "owns": owns, "prompt": "p",
            "command": [sys.executable, "-c", WRITE, json.dumps(files)]}


def git(repo, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=True).stdout


def test_a_python_coordinator_runs_a_plan_from_load_to_integrate(repo):
    (repo / ".git" / "info" / "exclude").write_text("/plan.json\n")
    check = f"{sys.executable} -c \"import pathlib; assert pathlib.Path('src/app.py').exists()\""
    path = write_plan(repo / "plan.json", [
        unit("docs", ["docs/**"], {"docs/guide.md": "# Guide\n"}),
        unit("code", ["src/**"], {"src/app.py": "X = 1\n"}),
    ], check=check)
    head = git(repo, "rev-parse", "HEAD")

    plan = prun.load_plan(path)
    assert isinstance(plan, prun.Plan) and [p.id for p in plan.packets] == ["docs", "code"]
    checked = prun.check(plan)
    assert isinstance(checked, prun.CheckReport) and checked.ok, checked.lines()

    started = prun.run_plan(plan)
    assert isinstance(started, prun.Started)
    assert (started.packets, started.base) == (2, head.strip())

    woke = prun.wait(started.run_id, timeout=180)
    assert isinstance(woke, prun.Wake) and not woke.timed_out
    assert woke.exit_code == prun.ExitCode.OK, woke.events
    assert woke.events[-1].what == "run-done" and woke.cursor >= woke.events[-1].seq

    view = prun.status(started.run_id)
    assert isinstance(view, prun.RunView)
    assert view.run["status"] == "succeeded" and view.counts() == {"succeeded": 2}
    assert {u.packet_id: u.status for u in view.units} == {"docs": "succeeded",
                                                           "code": "succeeded"}

    report = prun.reconcile(started.run_id)
    assert isinstance(report, prun.Reconciliation) and report.complete
    assert {v.packet_id: v.verdict for v in report.verdicts} == {"docs": "accepted",
                                                                 "code": "accepted"}
    assert prun.reconcile_exit_code(report) == prun.ExitCode.OK

    done: list[str] = []
    result = prun.integrate(started.run_id, on_unit=lambda u: done.append(u.packet_id))
    assert isinstance(result, prun.Integration)
    assert prun.integrate_exit_code(result) == prun.ExitCode.OK
    assert sorted(done) == ["code", "docs"] and result.check is not None and result.check.ok
    assert (repo / "docs" / "guide.md").read_text() == "# Guide\n"
    assert (repo / "src" / "app.py").read_text() == "X = 1\n"
    assert git(repo, "rev-parse", "HEAD") == head           # never committed

    # the same run, as the commands see it: the library wrote the ledger they read
    kinds = [e["kind"] for e in json.loads(subprocess.run(
        [sys.executable, "-m", "prun", "ledger", started.run_id, "--events", "--json"],
        capture_output=True, text=True, check=True).stdout)]
    assert "reconcile" in kinds and "integrate" in kinds


def test_a_unit_that_fails_wakes_the_wait_with_its_event(repo):
    path = write_plan(repo / "plan.json", [
        {"id": "bad", "kind": "code", "executor": "command", "owns": ["x/**"], "prompt": "p",
         "command": [sys.executable, "-c", "import sys; sys.exit(3)"]}])
    started = prun.run_plan(path)
    woke = prun.wait(started.run_id, timeout=180)
    assert woke.exit_code in (prun.ExitCode.UNIT_FAILED, prun.ExitCode.FAILED), woke
    assert (woke.events[0].what, woke.events[0].packet_id) == ("failed", "bad")
    while not any(e.what == "run-done" for e in woke.events):   # the run's end follows
        woke = prun.wait(started.run_id, since=woke.cursor, timeout=180)
    assert woke.exit_code == prun.ExitCode.FAILED and woke.run.run["status"] == "failed"
    assert not prun.reconcile(started.run_id).complete


def test_one_unit_is_dispatched_outside_a_plan(tmp_path):
    (tmp_path / "prompt.md").write_text("say something\n")
    seen: list[str] = []
    request = prun.DispatchRequest(
        "command", str(tmp_path / "prompt.md"), str(tmp_path / "result.md"), "alone",
        command=[sys.executable, "-c", "print('a result long enough to be a result')"],
        sandbox="off")
    assert not is_subreaper()
    outcome = prun.dispatch(request, on_state_dir=seen.append)
    assert not is_subreaper()   # the caller's process is left as it was found: the orphans
    assert isinstance(outcome, prun.Outcome)   # of its other children are not held here
    assert outcome.exit_code == prun.ExitCode.OK, outcome
    assert "a result long enough" in (tmp_path / "result.md").read_text()
    assert len(seen) == 1 and (tmp_path / "result.md").exists()


def test_a_plan_that_fails_the_independence_test_is_refused_and_nothing_is_made(repo,
                                                                                 tmp_path):
    path = write_plan(repo / "plan.json", [unit("a", ["src/**"], {"src/a.py": "A\n"}),
                                           unit("b", ["src/**"], {"src/b.py": "B\n"})])
    with pytest.raises(prun.NotIndependent) as refused:
        prun.run_plan(path)
    assert refused.value.exit_code == prun.ExitCode.FAILED
    assert any(line.startswith("FAIL files a b") for line in refused.value.lines)
    assert not (tmp_path / "ledger.sqlite").exists()
    assert not (repo / ".prun").exists()


def test_what_the_api_refuses_is_a_prun_error_with_the_commands_exit_code(repo, tmp_path):
    with pytest.raises(prun.UsageError) as no_run:
        prun.status("nosuchrun")
    assert no_run.value.exit_code == prun.ExitCode.USAGE and "no run" in no_run.value.line()
    (tmp_path / "broken.yaml").write_text("packets: [\n")
    with pytest.raises(prun.PrunError) as bad_plan:
        prun.load_plan(tmp_path / "broken.yaml")
    assert bad_plan.value.exit_code == prun.ExitCode.USAGE
