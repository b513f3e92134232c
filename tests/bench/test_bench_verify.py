"""bench/bench_verify.py in a tiny mode, so that it cannot rot: every mode ends on the same
integrated tree, whose check passes, and prun's verification finds the culprits itself."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_the_three_coordinators_reach_the_same_passing_tree(bwrap, tmp_path):
    r = subprocess.run([sys.executable, str(BENCH / "bench_verify.py"), "--units", "7",
                        "--check-seconds", "0", "--json"], cwd=BENCH, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    out = json.loads(r.stdout)
    modes = {m["mode"]: m for m in out["modes"]}
    assert list(modes) == ["verified", "culprit", "manual"]
    # 7 units: u01 u04 u06 claim a check they never ran, u02 u05 break it, u03 u07 clash
    verified, culprit, manual = modes["verified"], modes["culprit"], modes["manual"]
    # without accept, the bisection holds the breakers and then the later of the pair
    for m in (verified, manual, culprit):
        assert m["passes"] and m["integrated"] == ["u01", "u03", "u04", "u06"]
    steps = [s[0] for s in out["rounds"]["verified"][0]["steps"]]
    assert [s.split()[:2] for s in steps] == [
        ["prun", "run"], ["prun", "reconcile"], ["prun", "status"],
        ["prun", "review"], ["prun", "review"], ["prun", "review"], ["prun", "integrate"]]
    assert verified["bisect_runs"] > 0 and culprit["bisect_runs"] > verified["bisect_runs"]
    assert manual["bisect_runs"] is None
    # 7 acceptance checks, then the combined check, the bisection and the check again
    assert verified["check_runs"] == 7 + 2 + verified["bisect_runs"]
    # the reference reads each unit's result and diff and checks each unit itself
    assert manual["commands"] > 3 * 7 > verified["commands"]
    assert manual["check_runs"] >= 7 + 2
