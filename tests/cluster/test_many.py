"""Many units over two workers of a cluster left at Dask's defaults: every one runs exactly
once and its result lands."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

from clusterkit import attempts, write_plan

from helpers import prun

N = 200
CODE_UNITS = 20


def test_two_hundred_units_run_once_each(cluster, repo, tmp_path):
    log = tmp_path / "ran.log"
    code = (f"import os; fd = os.open({str(log)!r}, os.O_WRONLY | os.O_APPEND | os.O_CREAT); "
            "os.write(fd, (os.environ['PRUN_ATTEMPT_ID'] + '\\n').encode()); "
            "print('unit', os.environ['PRUN_PACKET_ID'], 'ran once on a cluster worker')")
    packets = [{"id": f"u{i:03d}", "executor": "command", "sandbox": "off",
                "prompt": f"unit {i}", "command": [sys.executable, "-c", code]}
               for i in range(N)]
    plan = write_plan(repo / "plan.json", packets, parallel=16)
    r = prun("run", str(plan), "--cluster", cluster.address, "--plain", timeout=170)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    ran = Counter(log.read_text().split())
    assert len(ran) == N and set(ran.values()) == {1}      # nothing lost, nothing twice
    rows = attempts(repo)
    assert len(rows) == N and {row["status"] for row in rows} == {"succeeded"}
    assert set(ran) == {row["id"] for row in rows}


def test_twenty_code_units_on_a_default_scheduler_succeed_once_each(cluster, repo, tmp_path):
    from distributed import Client

    from prun.cluster import claim

    log = tmp_path / "ran.log"
    code = ("import os, pathlib; aid = os.environ['PRUN_ATTEMPT_ID']; "
            f"fd = os.open({str(log)!r}, os.O_WRONLY | os.O_APPEND | os.O_CREAT); "
            "os.write(fd, (aid + '\\n').encode()); "
            "pathlib.Path(os.environ['PRUN_PACKET_ID'] + '.txt').write_text(aid + '\\n'); "
            "print('wrote', os.environ['PRUN_PACKET_ID'] + '.txt in its clone on a worker')")
    packets = [{"id": f"c{i:02d}", "kind": "code", "executor": "command", "sandbox": "off",
                "owns": [f"c{i:02d}.txt"], "prompt": f"write c{i:02d}.txt",
                "command": [sys.executable, "-c", code]} for i in range(CODE_UNITS)]
    plan = write_plan(repo / "plan.json", packets, parallel=8)
    r = prun("run", str(plan), "--cluster", cluster.address, "--plain", timeout=170)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    rows = attempts(repo)
    assert len(rows) == CODE_UNITS and {row["status"] for row in rows} == {"succeeded"}
    assert sorted(log.read_text().split()) == sorted(row["id"] for row in rows)   # once each
    with Client(cluster.address, set_as_default=False) as c:
        for row in rows:
            where = json.loads((Path(row["state_dir"]) / "remote.json").read_text())["worker"]
            # claimed by the one worker that ran it, and by no other
            assert claim.workers(c.get_metadata(claim.keys(row["id"]))) == [where]
            clone = Path(row["workspace"])
            assert (clone / f"{row['packet_id']}.txt").read_text() == row["id"] + "\n"
