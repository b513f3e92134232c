"""A worker refuses a second launch of the same attempt id: on the worker that ran it (its
marker file) and on any other (the scheduler's record)."""

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
            "result_name": "once.md", "topic": "prun-test-once"}


def test_a_second_launch_of_an_attempt_is_refused_everywhere(cluster, tmp_path):
    from distributed import Client

    from prun.cluster.task import run_unit

    log = tmp_path / "ran.log"
    s = spec("test-run:once:1", str(log))
    with Client(cluster.address, set_as_default=False) as c:
        events = []
        c.subscribe_topic("prun-test-once", events.append)
        workers = sorted(c.scheduler_info()["workers"])
        first = c.submit(run_unit, s, None, key="once-a", pure=False, retries=0,
                         workers=[workers[0]]).result(60)
        assert first.get("by_event") or first.get("exit_code") == 0
        poll(lambda: any(e[1].get("k") == "end" for e in events))
        again = c.submit(run_unit, s, None, key="once-b", pure=False, retries=0,
                         workers=[workers[0]]).result(60)
        # another machine's worker has no marker of it: this cluster's workers share one
        # state folder, so the marker goes, and the scheduler's record must refuse it
        marker = (cluster.folder / "worker-state" / "prun" / "cluster" / "launched"
                  / "test-run_once_1")
        marker.unlink()
        elsewhere = c.submit(run_unit, s, None, key="once-c", pure=False, retries=0,
                             workers=[workers[1]]).result(60)
        if elsewhere.get("by_event"):   # refused once its workspace was made: as an event
            ends = poll(lambda: [e[1]["p"] for e in events if e[1].get("k") == "end"][1:])
            elsewhere = ends[-1]
    assert "launched on this worker already" in again["refused"]
    assert "launched already (on " + workers[0] in elsewhere["refused"]
    assert len(log.read_text().split()) == 1          # it ran once
