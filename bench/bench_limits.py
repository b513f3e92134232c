"""Benchmark the keeper's cost of holding units to their ``resources`` limits: the CPU the
keeper process spends per second of wall time while it watches ``--units`` units' trees (each
unit a monitor ``sh`` and a sleeping child, as a run's unit is), with limits and without.

    python bench/bench_limits.py [--units 200] [--seconds 10] [--rounds 3]

Starts the real keeper (``python -m prun.run.keeper_process``), asks it to spawn the units
through its own protocol (with ``limits`` or without), waits until every one sleeps, then
reads the keeper's CPU time (user + system) over ``--seconds``; ends the units. Prints a
Markdown table: the keeper's CPU per second (a share of one core), and per unit.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
from benchkit import compile_prun

from prun.attempt.monitor import wrap


def measure(units: int, seconds: float, limited: bool, root: Path) -> float:
    keeper = subprocess.Popen([sys.executable, "-m", "prun.run.keeper_process"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert keeper.stdin is not None and keeper.stdout is not None
    log = root / "exit-codes"
    limits = {"memory": 1 << 30, "pids": 100} if limited else None
    try:
        for i in range(units):
            status = root / f"exit-status-{i}"
            req = {"op": "spawn", "id": i, "argv": wrap(["/bin/sleep", "600"]), "cwd": str(root),
                   "stdout": os.devnull, "stderr": os.devnull, "name": f"u{i}",
                   "log": str(log), "status": [3, str(status)], "limits": limits}
            keeper.stdin.write((json.dumps(req) + "\n").encode())
        keeper.stdin.flush()
        for _ in range(units):
            assert keeper.stdout.readline().startswith(b"spawned"), "a spawn failed"
        proc = psutil.Process(keeper.pid)
        deadline = time.monotonic() + 60
        while sum(c.name() == "sleep" for c in proc.children(recursive=True)) < units:
            if time.monotonic() > deadline:
                raise SystemExit("the units did not all start")
            time.sleep(0.2)
        before, t0 = proc.cpu_times(), time.monotonic()
        time.sleep(seconds)
        after, t1 = proc.cpu_times(), time.monotonic()
        return ((after.user + after.system) - (before.user + before.system)) / (t1 - t0)
    finally:
        for c in psutil.Process(keeper.pid).children():
            try:
                os.killpg(c.pid, 9)
            except OSError:
                pass
        keeper.stdin.close()
        keeper.wait(60)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--units", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    compile_prun()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for limited in (False, True):
            got = [measure(args.units, args.seconds, limited, Path(tmp)) for _ in range(args.rounds)]
            rows.append((limited, statistics.median(got)))
    print(f"| {args.units} units | keeper CPU per second (median of {args.rounds}) | per unit |")
    print("|---|---|---|")
    for limited, cpu in rows:
        what = "memory and pids limits" if limited else "no limits"
        print(f"| {what} | {cpu * 100:.2f} % of a core | {cpu / args.units * 1e6:.0f} µs/s |")


if __name__ == "__main__":
    main()
