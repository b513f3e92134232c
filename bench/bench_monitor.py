"""Benchmark what each running unit of a `prun run` costs beside the unit itself: its monitor
(the small process that outlives the supervisor and the keeper and records the unit's exit)
and, sandboxed, bubblewrap's two processes.

    python bench/bench_monitor.py [--units 500] [--sandbox off,on] [--src DIR]

Starts a run of ``--units`` sleeping command units (`sleep`), all in flight at once, waits
until every one sleeps, and sums the memory of every process of the units' process groups
but the sleepers themselves (RSS, PSS and USS: what each process holds alone); then cancels the
run. ``--src`` measures another revision's prun instead of the installed one (a folder holding
its ``prun`` package, e.g. ``git archive main src | tar -x -C /tmp/main``: its ``src``), so
the table can show today's figure beside this tree's. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
from benchkit import compile_prun, one_file_repo

PRUN = [sys.executable, "-m", "prun"]
MB = 1024 * 1024


def measure(root: Path, env: dict[str, str], units: int, sandbox: str) -> dict[str, float]:
    repo = one_file_repo(root / f"repo-{sandbox}")
    plan = repo / "sleepers.json"
    plan.write_text(json.dumps({"parallel": units, "packets": [
        {"id": f"u{i:04d}", "executor": "command", "command": ["sleep", "600"],
         "prompt": "sleep"} for i in range(units)]}))
    env = dict(env, PRUN_SANDBOX=sandbox)
    r = subprocess.run([*PRUN, "run", str(plan), "--detach"], cwd=repo, env=env,
                       capture_output=True, text=True, check=True)
    run_id = r.stdout.split()[1]
    try:
        sup = psutil.Process(_supervisor(run_id, env))
        deadline = time.monotonic() + 600
        while True:
            keeper = [c for c in sup.children() if c.name() != "sleep"]
            leaders = {c.pid for k in keeper for c in k.children()}
            groups = [p for p in psutil.process_iter(["pid", "name"])
                      if _pgid(p.info["pid"]) in leaders]
            sleepers = [p for p in groups if p.info["name"] == "sleep"]
            if len(sleepers) >= units:
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"only {len(sleepers)} of {units} units started")
            time.sleep(0.5)
        time.sleep(1.0)
        extra = [p for p in groups if p.info["name"] != "sleep"]
        rss = pss = uss = 0
        for p in extra:
            with_mem = p.memory_full_info()
            rss, pss, uss = rss + with_mem.rss, pss + with_mem.pss, uss + with_mem.uss
        return {"procs": len(extra) / units, "rss": rss / units, "pss": pss / units,
                "uss": uss / units, "total_pss": pss}
    finally:
        subprocess.run([*PRUN, "cancel", run_id, "--wait", "300"], cwd=repo, env=env,
                       capture_output=True)


def _pgid(pid: int) -> int:
    try:
        return os.getpgid(pid)
    except OSError:
        return -1


def _supervisor(run_id: str, env: dict[str, str]) -> int:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        r = subprocess.run([*PRUN, "status", run_id, "--json"], env=env, capture_output=True,
                           text=True)
        pid = json.loads(r.stdout).get("run", {}).get("supervisor_pid") if r.stdout else None
        if pid:
            return int(pid)
        time.sleep(0.2)
    raise SystemExit("the supervisor did not start")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--units", type=int, default=500)
    ap.add_argument("--sandbox", default="off,on", help="comma list of PRUN_SANDBOX values")
    ap.add_argument("--src", help="the folder holding the prun package to measure")
    ap.add_argument("--label", default="this tree", help="the tree's name in the table")
    args = ap.parse_args()
    env = dict(os.environ)
    if args.src:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [args.src, env.get("PYTHONPATH")]))
    else:
        compile_prun()
    root = Path(tempfile.mkdtemp(prefix="prun-bench-monitor-"))
    env.update(PRUN_LEDGER=str(root / "ledger.sqlite"), PRUN_STATE_ROOT=str(root / "state"),
               PRUN_WORKSPACE_ROOT=str(root / "workspaces"))
    print(f"machine: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}; "
          f"{args.units} sleeping units in flight\n")
    print("| tree | sandbox | processes per unit besides it | RSS per unit | PSS per unit "
          "| USS per unit | PSS, all units |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for sandbox in args.sandbox.split(","):
        m = measure(root, env, args.units, sandbox)
        print(f"| {args.label} | {sandbox} | {m['procs']:.0f} | {m['rss'] / 1024:.0f} KiB | "
              f"{m['pss'] / 1024:.0f} KiB | {m['uss'] / 1024:.0f} KiB | "
              f"{m['total_pss'] / MB:.1f} MB |", flush=True)


if __name__ == "__main__":
    main()
