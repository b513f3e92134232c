"""prun run end to end: real supervisor processes, real command units, the real ledger."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from helpers import FAKES, make_fake_cli, prun
from prun.ledger import Ledger
from runkit import poll, py_unit, write_plan

REPO_ROOT = Path(__file__).resolve().parents[2]

GATED = textwrap.dedent("""
    import os, pathlib, time
    pid = os.environ["PRUN_UNIT_ID"]
    with open({log!r}, "a") as f:
        f.write(pid + "\\n")
    gate = pathlib.Path({gates!r}) / pid
    while not gate.exists():
        time.sleep(0.02)
    print(f"unit {{pid}} finished its work and reports a full result")
""")


def ledger():
    return Ledger.open()


def packet_statuses(run_id):
    with ledger() as led:
        return {p["id"]: p["status"] for p in led.packets(run_id)}


def attempts(run_id):
    with ledger() as led:
        return [dict(a) for a in led.attempts(run_id)]


def test_plan_runs_with_after_and_reports_failures(repo, tmp_path):
    order = tmp_path / "order"
    code = f"import os; open({str(order)!r}, 'a').write(os.environ['PRUN_UNIT_ID'] + '\\n'); " \
           "print('a result that is long enough to count')"
    plan = write_plan(repo / "plan.yaml", [
        py_unit("first", code), py_unit("second", code, after=["first"]),
        py_unit("broken", "import sys; sys.exit(3)")], parallel=4)
    r = prun("run", str(plan))
    assert r.returncode == 1, r.stderr
    lines = r.stdout.splitlines()
    run_id = lines[0].split()[1]
    assert lines[0].startswith(f"RUN {run_id} packets=3 parallel=4 base=")
    assert any(line.startswith("UNIT broken failed") and "cause=exit-nonzero" in line
               for line in lines), r.stdout
    assert f"RUN {run_id} status=failed packets=3 failed=1 succeeded=2" in r.stdout
    assert order.read_text().splitlines().index("first") < \
        order.read_text().splitlines().index("second")
    assert packet_statuses(run_id) == {"first": "succeeded", "second": "succeeded",
                                       "broken": "failed"}
    rows = attempts(run_id)
    assert all(a["receipt"].startswith("pid:") for a in rows)
    ok = next(a for a in rows if a["packet_id"] == "first")
    assert "long enough" in Path(ok["result_path"]).read_text()
    assert Path(ok["state_dir"], "dispatch-pid").read_text().strip().isdigit()
    # exit codes go to one log
    dirs = [Path(a["state_dir"]) for a in rows]
    unit = json.loads((dirs[0] / "unit.json").read_text())
    assert unit["worker"]["pid"] and unit["worker"]["create_time"]
    log = (dirs[0].parent / ".exit-codes").read_text().splitlines()
    codes = dict(line.split() for line in log if " spawned " not in line)
    assert codes == {d.name: ("3" if "broken" in d.name else "0") for d in dirs}
    started = {line.split()[0] for line in log if " spawned " in line}
    assert started == {d.name for d in dirs}    # each start logged before it was relied on
    # the ledger's log has every step of every attempt
    with ledger() as led:
        steps = [e["status"] for e in led.events(run_id) if e["attempt_id"] == ok["id"]]
    assert steps == ["pending", "dispatched", "succeeded"]


def test_quickstart_example_runs_end_to_end(repo):
    import shutil

    shutil.copytree(REPO_ROOT / "examples" / "quickstart", repo / "quickstart")
    r = prun("run", "quickstart/plan.yaml")
    assert r.returncode == 0, r.stdout + r.stderr
    run_id = r.stdout.split()[1]
    statuses = packet_statuses(run_id)
    assert statuses and set(statuses.values()) == {"succeeded"}
    for a in attempts(run_id):
        text = Path(a["result_path"]).read_text()
        assert len(text.strip()) > 20 and not text.startswith("FALLBACK")


def test_failed_receipt_stops_the_run(repo, tmp_path):
    plan = write_plan(repo / "plan.yaml", [
        {"id": "needs-agy", "executor": "agy", "prompt": "research something"},
        py_unit("later", "print('this unit must never run at all, no')")], parallel=1)
    env = {"PATH": str(Path(sys.executable).parent) + os.pathsep + "/usr/bin:/bin"}
    r = prun("run", str(plan), env=env)          # agy is not installed: refused, nothing made
    assert (r.returncode, r.stdout) == (2, ""), r.stdout + r.stderr
    assert "can go only to agy (not-installed)" in r.stderr and "PRUN_AGY_BIN" in r.stderr
    # agy was there when the run was checked, and is gone when its unit starts: no receipt
    agy = make_fake_cli(tmp_path / "bin", "agy", FAKES / "fake_agy.py")
    plan = write_plan(repo / "plan.yaml", [
        py_unit("remove-agy", f"import os; os.remove({str(agy)!r}); print('agy removed, ' * 4)",
                sandbox="off"),
        {"id": "needs-agy", "executor": "agy", "prompt": "research something",
         "after": ["remove-agy"]},
        py_unit("later", "print('this unit must never run at all, no')", after=["needs-agy"])],
        parallel=1)
    r = prun("run", str(plan), env={**env, "PRUN_AGY_BIN": str(agy)})
    assert r.returncode == 3, r.stdout + r.stderr
    stopped = [line for line in r.stdout.splitlines() if line.startswith("STOPPED")]
    assert len(stopped) == 1
    assert 'action="start agy for packet needs-agy"' in stopped[0]
    assert "is not an executable file" in stopped[0] and "PRUN_AGY_BIN" in stopped[0]
    run_id = r.stdout.split()[1]
    assert packet_statuses(run_id) == {"remove-agy": "succeeded", "needs-agy": "pending",
                                       "later": "pending"}
    rows = [a for a in attempts(run_id) if a["packet_id"] != "remove-agy"]
    assert [(a["packet_id"], a["status"], a["receipt"]) for a in rows] == \
        [("needs-agy", "not-dispatched", None)]
    assert "status=stopped" in r.stdout


def test_a_units_state_dir_is_written_by_its_keeper_with_a_copy_of_the_brief(repo):
    """The state dir a run's keeper wrote as it started the worker: the seed's one-value
    files, ``unit.json`` once, with the worker and its keeper; ``prompt``, a copy of the
    frozen brief (not a link: what damages one leaves the other), read by the worker on
    stdin."""
    plan = write_plan(repo / "plan.yaml", [
        py_unit("one", "import sys; print('read', len(sys.stdin.read()), 'bytes of brief')")])
    r = prun("run", str(plan), "--plain")
    assert r.returncode == 0, r.stdout + r.stderr
    (row,) = attempts(r.stdout.split()[1])
    sd = Path(row["state_dir"])
    unit = json.loads((sd / "unit.json").read_text())
    assert unit["unit_id"] == "one" and unit["attempt_id"] == row["id"]
    assert unit["worker"]["pid"] == unit["worker"]["pgid"]
    assert unit["worker"]["keeper"]["pid"] != unit["dispatcher"]["pid"]
    assert row["receipt"] == f"pid:{unit['worker']['pid']}@{unit['worker']['create_time']:.3f}"
    assert (sd / "dispatch-pid").read_text() == f"{unit['dispatcher']['pid']}\n"
    assert (sd / "result-file").read_text() == row["result_path"] + "\n"
    assert (sd / "model").read_text() == "command\n"
    frozen = sd.parents[1] / "prompts" / "one.1.md"
    assert not os.path.samefile(sd / "prompt", frozen)
    assert (sd / "prompt").read_text() == frozen.read_text() == row["brief"]
    assert f"read {len(frozen.read_bytes())} bytes" in (sd / "tail").read_text()


def test_a_unit_whose_launch_fails_still_has_its_opening_files(repo):
    """The keeper never got it: the files kept for it are written before the judgement."""
    plan = write_plan(repo / "plan.yaml", [
        {"id": "nobin", "executor": "command", "command": ["no-such-program-here"],
         "prompt": "run the program that is not there"}])
    r = prun("run", str(plan), "--plain")
    assert r.returncode != 0
    (row,) = attempts(r.stdout.split()[1])
    sd = Path(row["state_dir"])
    unit = json.loads((sd / "unit.json").read_text())
    assert unit["unit_id"] == "nobin" and "worker" not in unit
    assert (sd / "model").read_text() == "command\n"
    assert (sd / "result-file").read_text() == row["result_path"] + "\n"
    assert json.loads((sd / "outcome.json").read_text())["outcome"] != "ok"


def test_deadline_cancels_the_unit_and_its_descendants(repo, tmp_path):
    pidfile = tmp_path / "grandchild.pid"
    code = ("import subprocess, time; "
            "p = subprocess.Popen(['sleep', '300']); "
            f"open({str(pidfile)!r}, 'w').write(str(p.pid)); time.sleep(300)")
    plan = write_plan(repo / "plan.yaml", [py_unit("slow", code)], deadline="2s",
                      sandbox="off")  # its pid as the host sees it (tests/attempt/sandbox: sandboxed)
    r = prun("run", str(plan), "-v")
    assert r.returncode == 124, r.stdout + r.stderr
    run_id = r.stdout.split()[1]
    grandchild = int(pidfile.read_text())
    assert not _alive(grandchild)
    assert packet_statuses(run_id) == {"slow": "timeout"}
    with ledger() as led:
        steps = [e["status"] for e in led.events(run_id) if e["kind"] == "attempt"]
    assert steps[-2:] == ["cancel-requested", "timeout"]


def test_kill_9_of_the_supervisor_then_resume(repo, tmp_path):
    log, gates = tmp_path / "started.log", tmp_path / "gates"
    gates.mkdir()
    code = GATED.format(log=str(log), gates=str(gates))
    ids = [f"u{i}" for i in range(6)]
    plan = write_plan(repo / "plan.yaml", [py_unit(i, code) for i in ids], parallel=3)
    r = prun("run", str(plan), "--detach")
    assert r.returncode == 0, r.stderr
    run_id = r.stdout.split()[1]
    first = poll(lambda: [a for a in attempts(run_id) if a["status"] == "dispatched"]
                 if len([a for a in attempts(run_id) if a["status"] == "dispatched"]) == 3
                 else None)
    with ledger() as led:
        sup = led.run(run_id)["supervisor_pid"]
    os.kill(sup, signal.SIGKILL)
    poll(lambda: not _alive(sup))
    # one unit finishes while no supervisor runs; two keep running
    done_meanwhile = first[0]["packet_id"]
    (gates / done_meanwhile).touch()
    from prun.attempt.dispatch import recorded_exit
    from prun.attempt.statedir import StateDir

    poll(lambda: recorded_exit(StateDir(first[0]["state_dir"])) is not None)
    resumed = subprocess.Popen([sys.executable, "-m", "prun", "resume", run_id, "--plain"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with ledger() as led:
        poll(lambda: sum(1 for e in led.events(run_id)
                         if e["cause"] == "re-attached by a resumed supervisor") == 2)
    for i in ids:
        (gates / i).touch()
    out, err = resumed.communicate(timeout=60)
    assert resumed.returncode == 0, out + err
    assert set(packet_statuses(run_id).values()) == {"succeeded"}
    rows = attempts(run_id)
    assert sorted(a["packet_id"] for a in rows) == ids  # one attempt each: nothing twice
    assert sorted(log.read_text().split()) == ids       # each unit's work started once
    for a in rows:
        assert "finished its work" in Path(a["result_path"]).read_text()


def test_reassign_rejects_the_late_result(repo, tmp_path):
    code = textwrap.dedent("""
        import os, signal, sys, time
        if os.environ["PRUN_ATTEMPT_ID"].endswith(":1"):
            def late(*_):
                open(os.environ["PRUN_RESULT_FILE"], "w").write("LATE result of the first try")
                sys.exit(0)
            signal.signal(signal.SIGTERM, late)
            time.sleep(300)
        print("the successor's result, complete and accepted")
    """)
    plan = write_plan(repo / "plan.yaml", [py_unit("p", code)])
    r = prun("run", str(plan), "--detach")
    run_id = r.stdout.split()[1]
    poll(lambda: any(a["status"] == "dispatched" for a in attempts(run_id)))
    r = prun("reassign", "p", "--run", run_id, "--executor", "command")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"predecessor={run_id}:p:1 attempt={run_id}:p:2" in r.stdout
    w = prun("wait", run_id, "--timeout", "60")
    assert w.returncode == 0, w.stdout
    first, second = attempts(run_id)
    assert first["status"] in ("cancelled", "quarantined")
    assert second["predecessor"] == first["id"] and second["status"] == "succeeded"
    q = Path(first["quarantine"])
    assert (q / Path(first["result_path"]).name).read_text().startswith("LATE")
    assert not Path(first["result_path"]).exists()
    assert "accepted" in Path(second["result_path"]).read_text()
    assert packet_statuses(run_id) == {"p": "succeeded"}


def test_cancel_a_detached_run(repo):
    plan = write_plan(repo / "plan.yaml",
                      [py_unit(f"s{i}", "import time; time.sleep(300)") for i in range(3)],
                      parallel=2)
    run_id = prun("run", str(plan), "--detach").stdout.split()[1]
    poll(lambda: sum(a["status"] == "dispatched" for a in attempts(run_id)) == 2)
    r = prun("cancel", run_id)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip() == f"CANCEL {run_id} status=cancelled"
    assert set(packet_statuses(run_id).values()) == {"cancelled"}
    assert {a["status"] for a in attempts(run_id)} == {"cancelled"}


def test_event_hook_hears_events_and_cannot_harm_the_run(repo, tmp_path):
    heard = tmp_path / "heard"
    hook = f"echo $PRUN_EVENT $PRUN_PACKET_ID >> {heard}; exit 7"
    plan = write_plan(repo / "plan.yaml", [
        py_unit("ok", "print('a result that is long enough to count')"),
        py_unit("bad", "raise SystemExit(2)")], on_event=hook)
    r = prun("run", str(plan))
    assert r.returncode == 1
    lines = set(heard.read_text().splitlines())
    assert {"succeeded ok", "failed bad", "run-done"} <= lines
    run_id = r.stdout.split()[1]
    assert packet_statuses(run_id) == {"ok": "succeeded", "bad": "failed"}


def test_status_and_wait_lines(repo):
    plan = write_plan(repo / "plan.yaml", [py_unit("a", "print('a result, long enough to count')")])
    run_id = prun("run", str(plan)).stdout.split()[1]
    s = prun("status")
    assert s.stdout.splitlines()[0].startswith(f"RUN {run_id} status=succeeded packets=1")
    assert s.stdout.splitlines()[-1].startswith("RESULTS ")
    data = json.loads(prun("status", run_id, "--json").stdout)
    assert data["counts"] == {"succeeded": 1}
    w = prun("wait", run_id)
    assert w.returncode == 0 and w.stdout.splitlines()[-1].startswith("CURSOR ")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_wait_wakes_on_a_stall(repo, monkeypatch):
    monkeypatch.setenv("PRUN_STALL_THRESHOLD", "1")
    plan = write_plan(repo / "plan.yaml", [py_unit("quiet", "import time; time.sleep(300)")])
    run_id = prun("run", str(plan), "--detach").stdout.split()[1]
    w = prun("wait", run_id, "--timeout", "60")
    assert w.returncode == 5, w.stdout + w.stderr
    assert any(line.startswith("EVENT ") and " stalled packet=quiet" in line
               for line in w.stdout.splitlines())
    cursor = w.stdout.splitlines()[-1].split()[1]
    assert prun("cancel", run_id).returncode == 0
    w2 = prun("wait", run_id, "--since", cursor, "--timeout", "60")
    assert w2.returncode == 1 and "failed packet=quiet status=cancelled" in w2.stdout


def test_a_hanging_hook_is_ended_and_the_run_finishes(repo, tmp_path, monkeypatch):
    monkeypatch.setenv("PRUN_HOOK_TIMEOUT", "1")
    plan = write_plan(repo / "plan.yaml",
                      [py_unit("ok", "print('a result that is long enough to count')")],
                      on_event="sleep 120")
    r = prun("run", str(plan), timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    run_dir = Path(r.stdout.splitlines()[-1].split()[1]).parent
    assert "ended after 1 s" in (run_dir / "hooks.log").read_text()


def test_session_unit_is_handed_off_and_done_when_its_result_lands(repo):
    plan = write_plan(repo / "plan.yaml", [{"id": "mail", "executor": "session",
                                            "session_tools": True, "prompt": "read my mail"}])
    run_id = prun("run", str(plan), "--detach").stdout.split()[1]
    w = prun("wait", run_id, "--timeout", "60")
    assert w.returncode == 9, w.stdout + w.stderr
    event = next(line for line in w.stdout.splitlines() if " handoff " in line)
    assert "handoff=" in event and "receipt_cmd=" in event
    (attempt,) = attempts(run_id)
    assert attempt["status"] == "pending" and not attempt["receipt"]
    r = prun("receipt", attempt["state_dir"], "--attempt-id", "agent-42")
    assert r.returncode == 0, r.stderr
    Path(attempt["result_path"]).write_text("## Summary\nthree unread messages, none urgent\n")
    cursor = w.stdout.splitlines()[-1].split()[1]
    w2 = prun("wait", run_id, "--since", cursor, "--timeout", "60")
    assert w2.returncode == 0, w2.stdout
    (attempt,) = attempts(run_id)
    assert attempt["status"] == "succeeded" and attempt["receipt"] == "agent-42"


def test_cancel_one_attempt_leaves_the_others_running(repo):
    plan = write_plan(repo / "plan.yaml",
                      [py_unit("stop-me", "import time; time.sleep(300)"),
                       py_unit("keep", "import time; time.sleep(300)")], parallel=2)
    run_id = prun("run", str(plan), "--detach").stdout.split()[1]
    poll(lambda: sum(a["status"] == "dispatched" for a in attempts(run_id)) == 2)
    target = f"{run_id}:stop-me:1"
    r = prun("cancel", target)
    assert r.stdout.strip() == f"CANCEL {target} status=cancelled", r.stdout + r.stderr
    statuses = packet_statuses(run_id)
    assert statuses["stop-me"] == "cancelled" and statuses["keep"] == "running"
    assert prun("cancel", run_id).returncode == 0
    assert packet_statuses(run_id)["keep"] == "cancelled"
