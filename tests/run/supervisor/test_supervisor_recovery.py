"""Recovery, in process: a supervisor started on a run whose supervisor stopped mid-run picks
it up from the ledger and the state dirs, and launches nothing twice.

Each test lets a first supervisor run with a fake keeper and stops it (``Run.crash``), makes
what happened meanwhile happen (a worker ends, or does not; a ledger batch was cut short),
then drives a second supervisor, with a keeper of its own, to the run's end."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from supkit import OUTPUT, Run, exit_log, state_dir, unit, unit_json
from test_supervisor_control import QUOTA_AGY, QUOTA_STOP, RESUMED

from helpers import make_fake_cli
from prun._util.process import create_time
from prun.attempt import statedir


def finish(run: Run, packet: str, code: int = 0):
    """A play that ends ``packet``'s worker with ``code`` once it is started."""
    async def play():
        (await run.keeper.worker(packet)).exit(code, output=OUTPUT)
    return play


def event(kind: str, packet: str):
    return lambda ev: ev.kind == kind and ev.packet_id == packet


def test_a_finished_packet_stays_finished(repo):
    run = Run.of(repo, [unit("done"), unit("open")], parallel=2)

    async def one_done():
        await run.keeper.worker("open")
        (await run.keeper.worker("done")).exit(0, output=OUTPUT)

    run.crash(one_done, at=event("succeeded", "done"))
    assert run.packets() == {"done": "succeeded", "open": "running"}
    run.keeper.of("open")[0].exit(0, output=OUTPUT)      # while no supervisor runs

    assert run.drive() == "succeeded"
    assert run.keeper.workers == []                      # nothing launched again
    assert [a["status"] for a in run.attempts()] == ["succeeded", "succeeded"]
    assert [e["status"] for e in run.ledger_events(kind="attempt", packet_id="done")] == \
        ["pending", "dispatched", "succeeded"]           # the second supervisor left it


def test_an_attempt_whose_packet_row_missed_its_end_is_settled_without_running(repo):
    run = Run.of(repo, [unit("a")])
    run.crash(finish(run, "a"), at=event("succeeded", "a"))
    run.tamper("UPDATE packets SET status = 'running' WHERE run_id = ?", run.id)

    assert run.drive() == "succeeded"
    assert run.keeper.workers == []
    (a,) = run.attempts("a")
    assert a["status"] == "succeeded"
    last = run.ledger_events(kind="packet", packet_id="a")[-1]
    assert (last["status"], last["cause"]) == ("succeeded", f"{a['id']} succeeded")


def test_a_quota_stop_gets_its_follow_up_after_a_restart(repo, tmp_path, monkeypatch):
    monkeypatch.setenv("PRUN_AGY_BIN", str(make_fake_cli(tmp_path / "bin", "agy", QUOTA_AGY)))
    run = Run.of(repo, [{"id": "look", "executor": "agy", "prompt": "look something up",
                         "snapshot": False}])

    async def stopped_by_quota():
        (await run.keeper.worker("look")).exit(0, output=QUOTA_STOP)
        await run.event("parked", "look")

    run.crash(stopped_by_quota)
    assert run.packets() == {"look": "parked"}
    Path(os.environ["PRUN_QUOTA_SNAPSHOT"]).unlink()     # the pool has reset meanwhile

    async def resumed():
        second = await run.keeper.worker("look")
        assert second.argv[second.argv.index("--conversation") + 1] == "conv-1"
        second.exit(0, output=RESUMED)

    assert run.drive(resumed) == "succeeded"
    first, second = run.attempts("look")
    assert first["status"] == "quota"
    assert second["predecessor"] == first["id"] and second["continue_from"] == first["state_dir"]
    assert second["workspace"] == first["workspace"]


def test_a_reassigned_packet_gets_its_successor_after_a_restart(repo):
    run = Run.of(repo, [unit("p")])

    async def reassigned():
        await run.keeper.worker("p")
        run.request("reassign", "p", cause="try again")

    run.crash(reassigned, at=event("quarantined", "p"))
    assert run.packets() == {"p": "pending"}
    assert [a["status"] for a in run.attempts("p")] == ["cancelled"]

    async def successor():
        (await run.keeper.worker("p")).exit(0, output=OUTPUT)

    assert run.drive(successor) == "succeeded"
    first, second = run.attempts("p")
    assert second["predecessor"] == first["id"] and second["status"] == "succeeded"
    assert first["status"] == "cancelled" and Path(first["quarantine"]).is_dir()


def test_a_packet_with_no_receipt_is_dispatched_again_on_resume(repo, tmp_path):
    tool = tmp_path / "bin" / "tool"
    run = Run.of(repo, [unit("p", command=[str(tool)])])
    assert run.drive() == "stopped"
    assert run.packets() == {"p": "pending"}
    assert [a["status"] for a in run.attempts("p")] == ["not-dispatched"]
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\n")                       # the environment was fixed
    tool.chmod(0o755)

    async def dispatched():
        (await run.keeper.worker("p")).exit(0, output=OUTPUT)

    assert run.drive(dispatched) == "succeeded"
    first, second = run.attempts("p")
    assert second["predecessor"] == first["id"] and second["status"] == "succeeded"


def test_an_attempt_recorded_but_never_launched_is_launched_again(repo):
    run = Run.of(repo, [unit("a")])
    # what a supervisor that died between recording the attempt and launching it left: the
    # attempt's row without its state dir, and a state dir whose unit.json names no worker
    aid = f"{run.id}:a:1"
    run_dir = Path(run.ledger.run(run.id)["run_dir"])
    run.ledger.record_attempt(aid, "queued", run_id=run.id, packet_id="a", seq=1,
                              executor="command", result_path=str(run_dir / "results/a.1.md"))
    run.ledger.set_packet_status(run.id, "a", "running", "launching")
    (run_dir / "state").mkdir(parents=True, exist_ok=True)
    sd = statedir.create("a", str(run_dir / "state"))
    sd.write_json(statedir.UNIT, {"unit_id": "a", "attempt_id": aid, "executor": "command"})

    async def launched():
        w = await run.keeper.worker("a")
        assert w.attempt == f"{run.id}:a:2"
        w.exit(0, output=OUTPUT)

    assert run.drive(launched) == "succeeded"
    first, second = run.attempts("a")
    assert (first["status"], first["reason"]) == ("cancelled", "never-launched")
    assert first["state_dir"] == sd.path                 # completed from its state dir
    assert second["predecessor"] == aid and second["status"] == "succeeded"


def test_a_state_dir_the_ledger_never_heard_of_is_recorded_and_judged(repo):
    run = Run.of(repo, [unit("a")])
    run.crash(at=event("dispatched", "a"))
    (lost,) = run.attempts("a")
    # the crash cut the batch that recorded the packet running and its attempt
    run.tamper("DELETE FROM attempts WHERE id = ?", lost["id"])
    run.tamper("UPDATE packets SET status = 'pending' WHERE run_id = ?", run.id)
    run.keeper.of("a")[0].exit(0, output=OUTPUT)

    assert run.drive() == "succeeded"
    assert run.keeper.workers == []
    (a,) = run.attempts("a")
    assert (a["id"], a["state_dir"], a["status"]) == (lost["id"], lost["state_dir"],
                                                      "succeeded")
    causes = [e["cause"] for e in run.ledger_events(kind="attempt", attempt_id=a["id"])]
    assert "found in its state dir after a crash" in causes
    assert Path(a["result_path"]).read_text() == OUTPUT


class RealWorker:
    """A real process standing in for a worker that outlived its supervisor (this thread
    reaps it, as a worker keeper would); it ends when its stdin is closed."""

    def __init__(self):
        self.proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                                     stdin=subprocess.PIPE, start_new_session=True)
        self.reaper = threading.Thread(target=self.proc.wait, daemon=True)
        self.reaper.start()

    def stands_in_for(self, run: Run, attempt: dict) -> None:
        """Make the attempt's receipt in the ledger (and its unit.json, the human record)
        name this process as its worker."""
        started = create_time(self.proc.pid)
        run.tamper("UPDATE attempts SET receipt = ? WHERE id = ?",
                   f"pid:{self.proc.pid}@{started:.3f}", attempt["id"])
        unit = unit_json(attempt)
        unit["worker"] = {**unit["worker"], "pid": self.proc.pid, "pgid": self.proc.pid,
                          "create_time": started}
        (state_dir(attempt) / "unit.json").write_text(json.dumps(unit))

    def end(self) -> int | None:
        self.proc.stdin.close()
        return self.ended()

    def ended(self) -> int | None:
        self.reaper.join(30)
        return self.proc.returncode


@pytest.fixture
def real_worker():
    worker = RealWorker()
    yield worker
    if worker.proc.poll() is None:
        worker.proc.kill()
    worker.ended()


def test_a_live_worker_is_reattached_and_watched_to_its_end(repo, real_worker):
    run = Run.of(repo, [unit("a")])
    run.crash(at=event("dispatched", "a"))
    (a,) = run.attempts("a")
    real_worker.stands_in_for(run, a)

    async def reattached():
        await run.event("reattached", "a")
        with open(state_dir(a) / "tail", "a") as f:      # what it printed
            f.write(OUTPUT)
        with open(exit_log(run), "a") as f:              # what its keeper logs as it ends
            f.write(f"{state_dir(a).name} 0\n")
        assert real_worker.end() == 0

    assert run.drive(reattached) == "succeeded"
    assert run.keeper.workers == []
    (a,) = run.attempts("a")
    assert a["status"] == "succeeded" and a["exit_code"] == 0
    assert (state_dir(a) / "dispatch-pid").read_text().strip() == str(os.getpid())
    steps = [e["status"] for e in run.ledger_events(kind="attempt", attempt_id=a["id"])]
    assert steps == ["pending", "dispatched", "running", "succeeded"]


def test_a_reattached_worker_whose_cancel_was_requested_is_ended(repo, real_worker):
    run = Run.of(repo, [unit("a")])
    run.crash(at=event("dispatched", "a"))
    (a,) = run.attempts("a")
    run.tamper("UPDATE attempts SET status = 'cancel-requested' WHERE id = ?", a["id"])
    real_worker.stands_in_for(run, a)

    assert run.drive() == "failed"
    assert real_worker.ended() == -signal.SIGTERM        # its group got SIGTERM
    assert run.packets() == {"a": "cancelled"}
    assert run.attempts("a")[0]["status"] == "cancelled"


def test_a_worker_judged_before_the_crash_is_settled_from_its_outcome(repo):
    run = Run.of(repo, [unit("a")])
    run.crash(finish(run, "a"), at=event("succeeded", "a"))
    (a,) = run.attempts("a")
    assert (state_dir(a) / "outcome.json").exists()
    # the batch that recorded its end was cut; its exit code is gone too, so only its
    # outcome.json can tell how it ended
    run.tamper("UPDATE attempts SET status = 'dispatched', finished_at = NULL WHERE id = ?",
               a["id"])
    run.tamper("UPDATE packets SET status = 'running' WHERE run_id = ?", run.id)
    exit_log(run).unlink()

    assert run.drive() == "succeeded"
    assert run.keeper.workers == []
    assert run.attempts("a")[0]["status"] == "succeeded"
    assert Path(a["result_path"]).read_text() == OUTPUT


def test_a_worker_that_ended_meanwhile_is_judged_from_its_logged_exit_code(repo):
    run = Run.of(repo, [unit("a")])
    run.crash(at=event("dispatched", "a"))
    run.keeper.of("a")[0].exit(3, output="it broke\n")   # logged by the keeper, nothing else

    assert run.drive() == "failed"
    assert run.keeper.workers == []
    (a,) = run.attempts("a")
    assert (a["status"], a["exit_code"], a["reason"]) == ("failed", 3, "exit-nonzero")


def test_a_worker_gone_without_a_trace_is_judged_a_failure(repo):
    run = Run.of(repo, [unit("a")])
    run.crash(at=event("dispatched", "a"))                         # it never ends; no code is logged

    assert run.drive() == "failed"
    assert run.keeper.workers == []
    (a,) = run.attempts("a")
    assert a["status"] == "failed" and a["exit_code"] is None
    assert Path(a["result_path"]).read_text().startswith("FALLBACK ")
    assert " exit=none" in Path(a["result_path"]).read_text().splitlines()[0]
