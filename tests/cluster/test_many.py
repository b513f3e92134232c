"""200 short units over two workers: every one runs exactly once and its result lands."""

from __future__ import annotations

import sys
from collections import Counter

from clusterkit import attempts, write_plan

from helpers import prun

N = 200


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
