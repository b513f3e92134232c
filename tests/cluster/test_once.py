"""A worker refuses a second launch of the same attempt id: on the worker that ran it (its
marker file) and on any other (prun's claim in the scheduler's metadata); an attempt the
coordinator gave up is launched nowhere."""

from __future__ import annotations

import sys

from clusterkit import poll


def spec(aid: str, pidlog: str) -> dict:
    code = f"import os; open({pidlog!r}, 'a').write(str(os.getpid()) + '\\n'); print('ran' * 10)"
    return {"attempt_id": aid, "unit_id": "once", "executor": "command",
            "mode": "accept-edits", "command": [sys.executable, "-c", code], "model": None,
            "effort": None, "timeout_s": 60.0, "prompt": "run once", "kind": "scratch",
            "base": None, "snapshot": False, "start_patch": b"", "setup": None,
            "sandbox": "off", "extra_env": {}, "paths": [], "conversation_id": None,
            "result_name": "once.md", "topic": "prun-test-once", "ports": None}


def ended(events: list, aid: str, answer: dict) -> dict:
    """The task's payload: its return value, or (once its workspace was made) its last
    event."""
    if not answer.get("by_event"):
        return answer
    return poll(lambda: next((e[1]["p"] for e in events
                              if e[1].get("k") == "end" and e[1].get("a") == aid), None))


def test_a_second_launch_of_an_attempt_is_refused_everywhere(cluster, tmp_path):
    from distributed import Client

    from prun.cluster.task import run_unit

    log = tmp_path / "ran.log"
    s = spec("test-run:once:1", str(log))
    with Client(cluster.address, set_as_default=False) as c:
        events: list = []
        c.subscribe_topic("prun-test-once", events.append)
        workers = sorted(c.scheduler_info()["workers"])
        first = c.submit(run_unit, s, None, key="once-a", pure=False, retries=0,
                         workers=[workers[0]]).result(60)
        assert ended(events, s["attempt_id"], first)["exit_code"] == 0
        events.clear()
        again = c.submit(run_unit, s, None, key="once-b", pure=False, retries=0,
                         workers=[workers[0]]).result(60)
        # the other worker has a state folder of its own (as on another machine): no marker
        # of the attempt there, so it is prun's claim in the scheduler that refuses it
        elsewhere = ended(events, s["attempt_id"], c.submit(
            run_unit, s, None, key="once-c", pure=False, retries=0,
            workers=[workers[1]]).result(60))
    assert "launched on this worker already" in again["refused"]
    assert elsewhere["refused_by"] == "claimed"
    assert "launched already (on " + workers[0] in elsewhere["refused"]
    assert len(log.read_text().split()) == 1          # it ran once


def test_an_attempt_the_coordinator_gave_up_is_launched_nowhere(cluster, tmp_path):
    from distributed import Client

    from prun.cluster import claim
    from prun.cluster.task import run_unit

    log = tmp_path / "ran.log"
    s = spec("test-run:given-up:1", str(log))
    with Client(cluster.address, set_as_default=False) as c:
        events: list = []
        c.subscribe_topic("prun-test-once", events.append)
        c.set_metadata(claim.keys(s["attempt_id"], claim.COORDINATOR), claim.CANCEL)
        answer = ended(events, s["attempt_id"], c.submit(
            run_unit, s, None, key="given-up-a", pure=False, retries=0).result(60))
    assert answer["refused_by"] == "cancel" and "cancelled before it started" in answer["refused"]
    assert not log.exists()
