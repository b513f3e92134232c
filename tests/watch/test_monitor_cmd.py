"""prun monitor: each event kind and its exit code, the digest, the re-launch line, session
units, and that it only observes."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from watchkit import age, end_worker_group, publish, wait_for, write_outcome

from helpers import prun
from prun._util.timeparse import parse_duration
from prun.attempt.statedir import StateDir

MONITOR_CMD = f"{shlex.quote(sys.executable)} -m prun monitor"


def digest(lines: list[str]) -> dict[str, dict[str, str]]:
    """UNIT lines by unit id, as key=value dicts."""
    units = {}
    for line in lines:
        words = shlex.split(line)
        if words and words[0] == "UNIT":
            units[words[1]] = dict(w.split("=", 1) for w in words[2:])
    return units


def test_all_done_when_every_result_is_published(live_dispatcher, make_unit, background):
    d = live_dispatcher()
    units = [make_unit(d) for _ in range(3)]
    m = background("monitor", *(str(sd) for sd, _ in units))
    for sd, result in units:
        publish(result, sd)
    code, lines, err = m.finish()
    assert code == 0, err
    assert lines[0].startswith("ALL-DONE units=3 done=3 running=0 stalled=0 failed=0 waiting=0")
    assert len(lines) == 4  # nothing left to re-launch on
    for info in digest(lines).values():
        assert info["state"] == "done" and info["note"] == "published"
        assert info["model"] == "gemini-test" and info["exit"] == "-"


def test_stall_with_a_short_threshold(live_dispatcher, make_unit):
    d = live_dispatcher()
    stalled, _ = make_unit(d, unit_id="slow")
    busy, _ = make_unit(d, unit_id="busy")
    r = prun("monitor", str(stalled), str(busy), env={"PRUN_STALL_THRESHOLD": "1s",
                                                     "PRUN_MONITOR_COMMAND": MONITOR_CMD})
    assert r.returncode == 5, r.stderr  # STALLED
    lines = r.stdout.splitlines()
    assert lines[0].startswith("STALLED units=2 ")
    units = digest(lines)
    assert units["slow"]["state"] == "stalled" and units["slow"]["note"] == "tail-idle"
    assert units["slow"]["tail"].endswith("B") and units["slow"]["idle"] != "-"
    assert {u["state"] for u in units.values()} <= {"stalled", "running"}
    # The last line re-launches on the units still running; a seen stall does not fire again.
    relaunch = shlex.split(lines[-1])
    assert relaunch[:3] == [sys.executable, "-m", "prun"]
    assert ["--seen-stalled", str(stalled)] == relaunch[relaunch.index("--seen-stalled"):][:2]


def test_the_relaunch_line_runs_and_a_seen_stall_waits_a_full_threshold(live_dispatcher,
                                                                         make_unit):
    d = live_dispatcher()
    sd, _ = make_unit(d, unit_id="old")
    age(sd / "tail", 3600)
    first = prun("monitor", str(sd), "--stall-threshold", "10m",
                 env={"PRUN_MONITOR_COMMAND": MONITOR_CMD})
    assert first.returncode == 5
    line = first.stdout.splitlines()[-1]
    assert "--stall-threshold 10m" in line and "--seen-stalled" in line
    again = subprocess.run([*shlex.split(line), "--timeout", "0.5"], capture_output=True,
                           text=True, timeout=60)
    assert again.returncode == 124, again.stderr
    assert again.stdout.splitlines()[0].startswith("TIMEOUT units=1 done=0 running=1")


def test_stall_threshold_accepts_units():
    assert parse_duration("10m", what="PRUN_STALL_THRESHOLD") == 600
    r = prun("monitor", "/", env={"PRUN_STALL_THRESHOLD": "ten minutes"})
    assert r.returncode == 2 and "PRUN_STALL_THRESHOLD" in r.stderr


def test_kill_9_of_a_dispatcher(tmp_path, fake_agy, background):
    prompt = tmp_path / "prompt.md"
    prompt.write_text("take forever\n")
    env = dict(os.environ, FAKE_AGY_SCENARIO="hang")
    dispatcher = subprocess.Popen(
        [sys.executable, "-m", "prun", "dispatch", "--prompt-file", str(prompt),
         "--result-file", str(tmp_path / "hang.md"), "--unit-id", "hang"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    state_dir = Path(dispatcher.stdout.readline().split(" ", 1)[1].strip())
    try:
        wait_for(lambda: StateDir(str(state_dir)).worker, what="the worker to start")
        m = background("monitor", str(state_dir))
        if sys.platform == "linux":  # kill it while the monitor sleeps, not before it looks
            wait_for(lambda: watches_exit_of(m.proc.pid, dispatcher.pid),
                     what="the monitor to watch the dispatcher")
        os.kill(dispatcher.pid, signal.SIGKILL)
        code, lines, err = m.finish()
        assert code == 4, err
        assert lines[0].startswith("FAILED units=1 done=0 running=0 stalled=0 failed=1")
        unit = digest(lines)["hang"]
        assert unit["state"] == "failed" and unit["note"] == "dispatcher-dead"
        assert unit["exit"] == "-"
        assert not (state_dir / "outcome.json").exists()
    finally:
        dispatcher.kill()
        dispatcher.communicate()
        end_worker_group(state_dir)


def watches_exit_of(monitor_pid: int, pid: int) -> bool:
    """True once the monitor holds a pidfd on ``pid`` (Linux: /proc/<pid>/fdinfo)."""
    folder = Path(f"/proc/{monitor_pid}/fdinfo")
    try:
        return any(f"Pid:\t{pid}\n" in p.read_text() for p in folder.iterdir())
    except OSError:
        return False


def test_a_reused_dispatcher_pid_is_dead(make_unit):
    sd, _ = make_unit(None)
    record = json.loads((sd / "unit.json").read_text())
    record["dispatcher"] = {"pid": os.getpid(), "create_time": 1000.0}  # alive, but not it
    (sd / "unit.json").write_text(json.dumps(record))
    r = prun("monitor", str(sd))
    assert r.returncode == 4
    assert digest(r.stdout.splitlines())[record["unit_id"]]["note"] == "dispatcher-dead"


def test_fallback_from_a_real_dispatch_is_a_failure(tmp_path, fake_agy):
    prompt = tmp_path / "prompt.md"
    prompt.write_text("fail please\n")
    result = tmp_path / "fb.md"
    d = prun("dispatch", "--prompt-file", str(prompt), "--result-file", str(result),
             "--unit-id", "fb", env={"FAKE_AGY_SCENARIO": "error_status"})
    assert d.returncode == 1
    assert result.read_text().startswith("FALLBACK")
    r = prun("monitor", d.stdout.split(" ", 1)[1].strip())
    assert r.returncode == 4
    unit = digest(r.stdout.splitlines())["fb"]
    assert unit["state"] == "failed" and unit["note"].startswith("fallback:")
    assert unit["exit"] == "1" and unit["result"] == str(result)


def test_a_fallback_result_fails_even_before_outcome_json(live_dispatcher, make_unit,
                                                          background):
    d = live_dispatcher()
    ok, _ = make_unit(d, unit_id="fine")
    bad, bad_result = make_unit(d, unit_id="broken")
    m = background("monitor", str(ok), str(bad))
    publish(bad_result, bad, "FALLBACK reason=status-error unit=broken executor=agy exit=0\n\n"
            "## Backend error\n")
    code, lines, _ = m.finish()
    assert code == 4
    units = digest(lines)
    assert units["broken"]["note"] == "fallback:status-error"
    assert units["fine"]["state"] == "running"
    assert shlex.split(lines[-1])[-1] == str(ok)  # re-launch on the one still running


def test_worker_written_result_without_outcome_json(live_dispatcher, make_unit, background):
    d = live_dispatcher()
    sd, result = make_unit(d, unit_id="w")
    m = background("monitor", str(sd), "--stable-window", "0.3")
    result.write_text("# Written by the worker itself\n")
    code, lines, err = m.finish()
    assert code == 0, err
    unit = digest(lines)["w"]
    assert unit["state"] == "done" and unit["note"] == "worker-result" and unit["exit"] == "-"
    assert not (sd / "outcome.json").exists()


def test_worker_result_kept_after_a_backend_failure_is_done_with_its_exit_code(live_dispatcher,
                                                                               make_unit):
    d = live_dispatcher()
    sd, result = make_unit(d, unit_id="kept")
    result.write_text("# The worker's result\n")
    write_outcome(sd, "failed", 1, "worker", "status-error")
    r = prun("monitor", str(sd))
    assert r.returncode == 0
    unit = digest(r.stdout.splitlines())["kept"]
    assert (unit["state"], unit["exit"], unit["note"]) == ("done", "1", "worker-result,failed")


def test_a_finished_dispatcher_without_a_result_failed(make_unit):
    sd, _ = make_unit(None, unit_id="empty")
    write_outcome(sd, "failed", 1, None, "launch-failed")
    r = prun("monitor", str(sd))
    assert r.returncode == 4
    assert digest(r.stdout.splitlines())["empty"]["note"] == "no-result,failed"


def test_two_hundred_state_dirs_at_once(live_dispatcher, make_unit, background):
    d = live_dispatcher()
    units = [make_unit(d) for _ in range(200)]
    m = background("monitor", *(str(sd) for sd, _ in units), "--json")
    for sd, result in units:
        publish(result, sd)
    code, lines, err = m.finish(timeout=120)
    assert code == 0, err
    report = json.loads(lines[0])
    assert report["event"] == "ALL-DONE" and report["counts"]["done"] == 200
    assert len({u["state_dir"] for u in report["units"]}) == 200
    assert report["relaunch"] is None


def test_two_hundred_running_and_one_dies(make_unit, background):
    alive = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
             for _ in range(2)]
    try:
        units = [make_unit(alive[i % 2]) for i in range(200)]
        m = background("monitor", *(str(sd) for sd, _ in units),
                       env={"PRUN_MONITOR_COMMAND": MONITOR_CMD})
        alive[1].kill()
        alive[1].wait()
        code, lines, err = m.finish(timeout=120)
        assert code == 4, err
        assert lines[0].startswith("FAILED units=200 done=0 running=100 stalled=0 failed=100")
        assert len(shlex.split(lines[-1])) == 4 + 100
    finally:
        for p in alive:
            p.kill()
            p.wait()


@pytest.mark.parametrize("how", ["env", "option"])
def test_polling_fallback(live_dispatcher, make_unit, background, how):
    d = live_dispatcher()
    sd, result = make_unit(d)
    env = {"PRUN_WATCH_POLL_INTERVAL": "0.05"}
    args = ["monitor", str(sd)]
    if how == "env":
        env["PRUN_WATCH"] = "poll"
    else:
        args.append("--poll")
    m = background(*args, env=env)
    publish(result, sd)
    code, lines, err = m.finish()
    assert code == 0, err
    assert lines[0].endswith("watch=poll")


def test_session_units_wait_and_are_never_stalled_or_dead(make_unit, background):
    sd, result = make_unit(executor="session", unit_id="sub")
    r = prun("monitor", str(sd), "--stall-threshold", "0", "--timeout", "0.3")
    assert r.returncode == 124
    assert r.stdout.splitlines()[0].startswith("TIMEOUT units=1 done=0 running=0 stalled=0 "
                                               "failed=0 waiting=1")
    unit = digest(r.stdout.splitlines())["sub"]
    assert (unit["state"], unit["tail"], unit["note"]) == ("waiting", "-", "no-receipt")
    assert prun("receipt", str(sd), "--attempt-id", "agent-42").returncode == 0
    r = prun("monitor", str(sd), "--stall-threshold", "0", "--timeout", "0.3")
    unit = digest(r.stdout.splitlines())["sub"]
    assert (unit["state"], unit["note"]) == ("waiting", "no-result-yet")
    m = background("monitor", str(sd), "--stable-window", "0.2", "--stall-threshold", "0")
    result.write_text("# The subagent's result\n")
    code, lines, err = m.finish()
    assert code == 0, err
    assert digest(lines)["sub"]["state"] == "done"


def test_monitor_only_observes(live_dispatcher, make_unit):
    d = live_dispatcher()
    running, _ = make_unit(d, unit_id="run")
    done, result = make_unit(d, unit_id="done")
    publish(result, done)
    write_outcome(done)
    dead, _ = make_unit(None, unit_id="dead")

    def snapshot():
        return {p: (p.stat().st_size, p.stat().st_mtime_ns, p.stat().st_ino)
                for sd in (running, done, dead) for p in [sd, *sd.iterdir()]}

    before = snapshot()
    r = prun("monitor", str(running), str(done), str(dead))
    assert r.returncode == 4
    assert snapshot() == before
    assert d.poll() is None  # the dispatcher was not signalled


def test_not_a_state_dir_is_refused(tmp_path):
    r = prun("monitor", str(tmp_path / "nope"))
    assert r.returncode == 2 and r.stdout == ""
    assert "not a state dir" in r.stderr


def test_a_unit_whose_dispatcher_has_not_written_its_pid_yet(tmp_path, background,
                                                             live_dispatcher):
    root = Path(os.environ["PRUN_STATE_ROOT"])
    sd = root / "early-20260101T000000-abcdef"
    sd.mkdir(parents=True)
    result = tmp_path / "early.md"
    (sd / "result-file").write_text(f"{result}\n")
    r = prun("monitor", str(sd), "--timeout", "0.3")
    assert r.returncode == 124
    assert digest(r.stdout.splitlines())[sd.name]["note"] == "no-dispatch-pid"
    m = background("monitor", str(sd))
    d = live_dispatcher()
    (sd / "dispatch-pid").write_text(f"{d.pid}\n")
    publish(result, sd)
    code, lines, err = m.finish()
    assert code == 0, err
    assert digest(lines)[sd.name]["state"] == "done"


def test_a_real_dispatch_finishing_while_watched(tmp_path, fake_agy, background):
    prompt = tmp_path / "prompt.md"
    prompt.write_text("work a little\n")
    result = tmp_path / "slow.md"
    env = dict(os.environ, FAKE_AGY_SCENARIO="slow")
    dispatcher = subprocess.Popen(
        [sys.executable, "-m", "prun", "dispatch", "--prompt-file", str(prompt),
         "--result-file", str(result), "--unit-id", "slow"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    state_dir = dispatcher.stdout.readline().split(" ", 1)[1].strip()
    m = background("monitor", state_dir)
    gather = background("gather", str(result), "--stable-window", "1h", "--timeout", "60")
    code, lines, err = m.finish()
    dispatcher.communicate(timeout=60)
    assert code == 0, err
    unit = digest(lines)["slow"]
    assert unit["state"] == "done" and unit["note"] in ("published", "response")
    assert gather.finish()[:2] == (0, ["GATHER-START count=1 timeout=60s", f"DONE {result}"])


@pytest.mark.skipif(sys.platform != "linux", reason="needs /proc to know the monitor looked")
def test_done_stays_done_when_the_result_is_moved_away(live_dispatcher, make_unit, background):
    first, second = live_dispatcher(), live_dispatcher()
    a, a_result = make_unit(first, unit_id="a")
    b, b_result = make_unit(second, unit_id="b")
    publish(a_result, a)
    m = background("monitor", str(a), str(b))
    wait_for(lambda: watches_exit_of(m.proc.pid, second.pid), what="the monitor's first look")
    a_result.rename(a_result.with_suffix(".integrated"))  # the coordinator took it
    publish(b_result, b)
    code, lines, err = m.finish()
    assert code == 0, err
    assert {u["state"] for u in digest(lines).values()} == {"done"}
