"""Control of a running run, in process: cancel (one unit, then the whole run), reassign
while running, the run's deadline, and a quota stop followed by its linked attempt."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

from supkit import OUTPUT, Run, unit

from helpers import make_fake_cli

QUOTA_AGY = Path(__file__).parents[1] / "fake_agy_quota.py"


def test_cancel_one_unit_then_the_run(repo):
    run = Run.of(repo, [unit("a"), unit("b"), unit("c")], parallel=2)

    async def play():
        a, b = await run.keeper.worker("a"), await run.keeper.worker("b")
        run.request("cancel", f"{run.id}:a:1", cause="not needed")
        await run.event("cancelled", "a")
        assert a.signals == [signal.SIGTERM] and b.signals == []
        assert run.sup.state.units["b"].status == "running"
        await run.keeper.worker("c")                      # a's place
        run.request("cancel", cause="stop everything")
        await run.event("run-done")
        assert b.signals == [signal.SIGTERM]

    assert run.drive(play) == "cancelled"
    assert run.packets() == {"a": "cancelled", "b": "cancelled", "c": "cancelled"}
    assert [a["status"] for a in run.attempts()] == ["cancelled"] * 3
    steps = [e["status"] for e in run.ledger_events(kind="attempt", attempt_id=f"{run.id}:a:1")]
    assert steps == ["pending", "dispatched", "cancel-requested", "cancelled"]


def test_cancel_before_launch_cancels_the_packet(repo):
    run = Run.of(repo, [unit("a"), unit("later")], parallel=1)

    async def play():
        a = await run.keeper.worker("a")
        run.request("cancel", "later", cause="not needed")
        await run.event("cancelled", "later")
        a.exit(0, output=OUTPUT)

    assert run.drive(play) == "failed"
    assert run.packets() == {"a": "succeeded", "later": "cancelled"}
    assert run.attempts("later") == []


def test_reassign_while_running_quarantines_the_late_result(repo):
    run = Run.of(repo, [unit("p")])

    def late(w):  # at SIGTERM it writes a result and exits as if it had succeeded
        w.exit(0, output=OUTPUT, result="LATE result of the first attempt, complete")

    async def play():
        first = await run.keeper.worker("p")
        first.on_term = late
        run.request("reassign", "p", executor="command", cause="try again")
        second = await run.keeper.worker("p", 2)
        assert second.env["PRUN_ATTEMPT_ID"] == f"{run.id}:p:2"
        second.exit(0, output="the successor's result, complete and accepted\n")

    assert run.drive(play) == "succeeded"
    first, second = run.attempts("p")
    assert first["status"] == "cancelled" and second["predecessor"] == first["id"]
    quarantine = Path(first["quarantine"])
    assert (quarantine / Path(first["result_path"]).name).read_text().startswith("LATE")
    assert (quarantine / "workspace").read_text().strip().endswith(".quarantined")
    assert not Path(first["result_path"]).exists()
    assert "accepted" in Path(second["result_path"]).read_text()
    assert run.packets() == {"p": "succeeded"}
    assert run.kinds("p") == ["dispatched", "cancel-requested", "quarantined", "dispatched",
                              "succeeded"]


def test_the_deadline_ends_the_running_unit_and_cancels_the_queue(repo):
    run = Run.of(repo, [unit("slow"), unit("later")], parallel=1)

    def near_deadline(ev):
        # the run's deadline, made to fall just after the unit was dispatched (not before)
        if ev.kind == "dispatched":
            run.sup.state.deadline = time.time() + 0.2

    run.on_event = near_deadline

    async def play():
        slow = await run.keeper.worker("slow")
        await run.event("timeout", "slow")
        assert slow.signals == [signal.SIGTERM]

    assert run.drive(play) == "timeout"
    assert run.packets() == {"slow": "timeout", "later": "cancelled"}
    (slow,) = run.attempts("slow")
    assert slow["status"] == "timeout" and slow["exit_code"] == 128 + signal.SIGTERM
    steps = [e["status"] for e in run.ledger_events(kind="attempt", attempt_id=slow["id"])]
    assert steps[-2:] == ["cancel-requested", "timeout"]
    later = next(e for e in run.events if e.packet_id == "later")
    assert (later.kind, later.cause) == ("cancelled",
                                         "the run's deadline passed before it was dispatched")
    assert run.attempts("later") == []


def agy_stream(*events: dict) -> str:
    return "".join(json.dumps(e) + "\n" for e in events)


QUOTA_STOP = agy_stream(
    {"event": "init", "conversation_id": "conv-1"},
    {"event": "result", "result": {"conversation_id": "conv-1", "status": "ERROR",
                                   "response": "I started by",
                                   "error": "Individual quota reached. Resets in 2s."}})
RESUMED = agy_stream(
    {"event": "init", "conversation_id": "conv-1"},
    {"event": "result", "result": {"conversation_id": "conv-1", "status": "SUCCESS",
                                   "response": "The unit finished: resumed the conversation"}})


def test_a_quota_stop_is_parked_and_followed_by_its_linked_attempt(repo, tmp_path,
                                                                   monkeypatch):
    monkeypatch.setenv("PRUN_AGY_BIN", str(make_fake_cli(tmp_path / "bin", "agy", QUOTA_AGY)))
    run = Run.of(repo, [{"id": "look", "executor": "agy", "prompt": "look something up",
                         "snapshot": False}])

    async def play():
        (await run.keeper.worker("look")).exit(0, output=QUOTA_STOP)
        parked = await run.event("parked", "look")
        assert "quota reached" in parked.cause and parked.data["resets_at"]
        assert run.sup.state.units["look"].status == "parked"
        second = await run.keeper.worker("look", 2)       # after the reset
        assert second.argv[second.argv.index("--conversation") + 1] == "conv-1"
        second.exit(0, output=RESUMED)

    assert run.drive(play) == "succeeded"
    first, second = run.attempts("look")
    assert first["status"] == "quota" and first["resets_at"]
    assert second["predecessor"] == first["id"]
    assert second["continue_from"] == first["state_dir"]
    assert second["workspace"] == first["workspace"]       # the same folder
    assert "resumed the conversation" in Path(second["result_path"]).read_text()
    assert run.packets() == {"look": "succeeded"}
    assert run.kinds("look") == ["dispatched", "parked", "dispatched", "succeeded"]
