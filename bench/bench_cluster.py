"""Benchmark cluster runs: the same plan on a two-worker loopback Dask cluster and locally.

    python bench/bench_cluster.py [--units 200] [--code 50] [--rounds 2] [--threads 4] [--dir D]

The cluster is the set-up a person would use to try it: `prun cluster local --workers 2`
(a scheduler and two workers, each with its nanny, on 127.0.0.1, Dask's defaults otherwise),
started here through the same code. Two plans, each run locally and on the cluster,
alternating, `--rounds` times:

1. `--units` short read-only command units (`echo`), sandbox off, parallel = workers x threads;
2. `--code` short code units, each writing one file, so a clone and a diff travel both ways.

Per-unit overhead of the cluster path: the CPU a unit costs on the cluster (the `prun run`
process and its children, the scheduler's and workers' processes and the units they reaped)
less what it costs locally; and the extra time a unit holds a slot, (cluster wall time - local
wall time) x parallel / units; and the stages of one unit from its `remote.json`
(submitted -> the task starts on a worker -> the unit is launched -> the task returns ->
landed). Bytes on the wire per unit, from `remote.json`: the task's spec, the progress
events, the returned payload (pickled sizes) and, inside those, the tail, the result and the
diff; what a unit costs beyond its diff and result is spec + events + payload - diff - result
(the tail reported apart), and the base's bundle once per base per run.

Prints Markdown tables. Everything runs in a temporary git repository with its own ledger.
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

from benchkit import compile_prun, one_file_repo

PRUN = [sys.executable, "-m", "prun"]
ECHO = ["sh", "-c", "echo 'a short unit: one line of output, long enough to be a result'"]
WRITE = ["sh", "-c", "echo \"$PRUN_PACKET_ID\" > \"out-$PRUN_PACKET_ID.txt\"; "
         "echo 'wrote one file, a short code unit on a cluster worker'"]


def write_plan(repo: Path, name: str, n: int, parallel: int, code: bool) -> Path:
    packets = [{"id": f"u{i:04d}", "executor": "command", "sandbox": "off",
                "prompt": "short", "command": WRITE if code else ECHO,
                **({"kind": "code", "owns": [f"out-u{i:04d}.txt"]} if code else {})}
               for i in range(n)]
    path = repo / f"{name}.json"
    path.write_text(json.dumps({"parallel": parallel, "packets": packets}))
    return path


def cpu_of(pids: list[int]) -> float:
    """CPU seconds the cluster's processes used so far: each of them and its live descendants
    (a nanny's worker process), with the children each reaped (the units, their guards)."""
    import psutil

    total = 0.0
    for pid in pids:
        top = psutil.Process(pid)
        for p in (top, *top.children(recursive=True)):
            try:
                t = p.cpu_times()
            except psutil.NoSuchProcess:
                continue
            total += t.user + t.system + t.children_user + t.children_system
    return total


def run(plan: Path, env: dict, cluster: str | None, pids: list[int]
        ) -> tuple[float, float, str]:
    """One `prun run`: wall seconds, CPU seconds (prun and its children, and the cluster's
    processes), the run id."""
    import resource

    cmd = [*PRUN, "run", str(plan), "--plain"] + (["--cluster", cluster] if cluster else [])
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    there = cpu_of(pids) if cluster else 0.0
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=plan.parent)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if cluster:
        cpu += cpu_of(pids) - there
    if r.returncode != 0:
        raise SystemExit(f"prun run failed ({r.returncode}):\n{r.stdout[-3000:]}{r.stderr[-3000:]}")
    return wall, cpu, r.stdout.split()[1]


def remote_records(repo: Path, run_id: str) -> list[dict]:
    state = repo / ".prun" / "runs" / run_id / "state"
    return [json.loads((d / "remote.json").read_text()) for d in state.iterdir()
            if (d / "remote.json").exists()]


def med(xs) -> float:
    return statistics.median(xs) if xs else float("nan")


def stages(recs: list[dict]) -> dict[str, float]:
    def ms(a, b):
        return [1000 * (r[b] - r[a]) for r in recs if r.get(a) and r.get(b)]

    return {"queued + sent to a worker": med(ms("submitted_at", "received_at")),
            "workspace from the bundle": med(ms("received_at", "placed_at")),
            "state dir, request, begin": med(ms("placed_at", "begun_at")),
            "claim answered (asked at the start, waited for here)": med(
                ms("begun_at", "claimed_at")),
            "launch": med(ms("claimed_at", "launched_at")),
            "unit running": med(ms("launched_at", "exited_at")),
            "diff, return": med(ms("exited_at", "returned_at")),
            "result back here": med(ms("returned_at", "landing_at")),
            "landed": med(ms("landing_at", "finished_at"))}


def wire(recs: list[dict]) -> dict[str, float]:
    w = [r["wire"] for r in recs]
    beyond = [x["spec"] + x["events"] + x["payload"] - x["diff"] - x["result"] - x["tail"]
              for x in w]
    return {"spec": med([x["spec"] for x in w]), "events": med([x["events"] for x in w]),
            "event count": med([x["event_count"] for x in w]),
            "payload (when fetched, not an event)": med([x["payload"] for x in w]),
            "tail": med([x["tail"] for x in w]),
            "result": med([x["result"] for x in w]), "diff": med([x["diff"] for x in w]),
            "beyond diff, result and tail": med(beyond),
            "bundle (once per base per run)": sum(x["bundle"] for x in w)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--units", type=int, default=200)
    ap.add_argument("--code", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--dir", help="where the benchmark's repository, state and the workers' "
                    "files go (default: the system's temp folder); e.g. /dev/shm")
    args = ap.parse_args()
    compile_prun()
    from prun.cluster.local import LocalCluster

    with tempfile.TemporaryDirectory(prefix="prun-bench-cluster-", dir=args.dir) as tmp:
        root = Path(tmp)
        repo = one_file_repo(root / "repo")
        env = {**os.environ, "PRUN_LEDGER": str(root / "ledger.sqlite"),
               "PRUN_WORKSPACE_ROOT": str(root / "workspaces"),
               "PRUN_STATE_ROOT": str(root / "units"), "XDG_STATE_HOME": str(root / "state")}
        cluster = LocalCluster(str(root / "cluster"), "127.0.0.1", 0, 2, args.threads,
                               env={**env, "XDG_STATE_HOME": str(root / "worker-state")})
        t = time.perf_counter()
        address = cluster.start()
        started = time.perf_counter() - t
        parallel = 2 * args.threads
        try:
            rows = []
            for name, n, code in (("read-only", args.units, False), ("code", args.code, True)):
                if n <= 0:
                    continue
                plan = write_plan(repo, name, n, parallel, code)
                local, remote, lcpu, rcpu, recs = [], [], [], [], []
                pids = [p.pid for p in cluster.procs]
                for _ in range(args.rounds):
                    wall, cpu, _ = run(plan, env, None, pids)
                    local.append(wall)
                    lcpu.append(cpu)
                    wall, cpu, run_id = run(plan, env, address, pids)
                    remote.append(wall)
                    rcpu.append(cpu)
                    recs = remote_records(repo, run_id)
                rows.append((name, n, local, remote, recs, lcpu, rcpu))
        finally:
            cluster.stop(5.0)
    print(f"cluster: scheduler + 2 workers x {args.threads} threads on 127.0.0.1, up in "
          f"{started:.1f} s; parallel {parallel}; {args.rounds} rounds, medians\n")
    print("| plan | units | local wall | cluster wall | slot time added a unit | local CPU a unit "
          "| cluster CPU a unit | CPU added a unit |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, n, local, remote, _, lcpu, rcpu in rows:
        over = (med(remote) - med(local)) * parallel / n * 1000
        lc, rc = med(lcpu) / n * 1000, med(rcpu) / n * 1000
        print(f"| {name} | {n} | {med(local):.2f} s | {med(remote):.2f} s | {over:.0f} ms "
              f"| {lc:.1f} ms | {rc:.1f} ms | {rc - lc:.1f} ms |")
    print("\n| stage of one cluster unit (median, ms) | " + " | ".join(r[0] for r in rows) + " |")
    print("|---|" + "---:|" * len(rows))
    st = [stages(r[4]) for r in rows]
    for key in st[0]:
        print(f"| {key} | " + " | ".join(f"{s[key]:.1f}" for s in st) + " |")
    print("\n| bytes on the wire a unit (median) | " + " | ".join(r[0] for r in rows) + " |")
    print("|---|" + "---:|" * len(rows))
    ws = [wire(r[4]) for r in rows]
    for key in ws[0]:
        print(f"| {key} | " + " | ".join(f"{w[key]:.0f}" for w in ws) + " |")


if __name__ == "__main__":
    main()
