"""Benchmark `prun run`: throughput, supervisor memory, and what a coordinator reads.

    python bench/bench_run.py [--units 1000] [--parallel 16,64] [--sleepers 500]

1. 1,000 no-op command units (`echo`) at parallelism 16 and 64, the sandbox off (the other
   tools have none; `bench/bench_sandbox.py` measures its cost): `prun run` beside `xargs -P`
   and GNU parallel, in the same run on the same machine; each tool three times per level in
   alternating order, medians with the range in brackets (each run's time goes to stderr).
2. Memory with 500 sleeping units in flight: the one supervisor process (and its worker keeper,
   which starts the workers and records their exit codes) beside one Python process per unit
   (`prun dispatch`).
3. The bytes a coordinator reads through a 20-unit run: `prun run --detach`, `prun wait`,
   `prun status` (results excluded).

Prints Markdown tables. Everything runs in a temporary git repository with its own ledger.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchkit import compile_prun, one_file_repo

PRUN = [sys.executable, "-m", "prun"]


def write_plan(repo: Path, n: int, command, name: str, parallel: int) -> Path:
    packets = [{"id": f"u{i:04d}", "executor": "command", "command": command,
                "prompt": "no-op"} for i in range(n)]
    path = repo / f"{name}.yaml"
    path.write_text(json.dumps({"parallel": parallel, "packets": packets}))
    return path


def timed(cmd, **kw) -> tuple[float, subprocess.CompletedProcess]:
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    return time.perf_counter() - t, r


def throughput(repo: Path, env: dict, units: int, levels: list[int],
               repeat: int) -> list[str]:
    """Each tool ``repeat`` times per level, in alternating order (a tool that deletes many
    files slows the file creations of whatever runs next on some file systems); medians."""
    import statistics

    rows = ["| parallel | prun run | xargs -P | GNU parallel | prun / xargs | prun / parallel |",
            "| ---: | ---: | ---: | ---: | ---: | ---: |"]
    # a no-op unit must still print 20 bytes to count as a result; every tool runs the same
    noop = ["echo", "a no-op unit result, long enough"]
    seq = "\n".join(str(i) for i in range(units)) + "\n"
    tmp = repo.parent / "parallel-tmp"   # GNU parallel's per-job temp files, beside prun's
    tmp.mkdir(exist_ok=True)
    has_parallel = shutil.which("parallel") is not None

    def run_prun(p: int, n: int) -> float:
        plan = write_plan(repo, units, noop, f"noop{p}-{n}", p)
        t, r = timed([*PRUN, "run", str(plan), "--plain"], cwd=repo,
                     env=dict(env, PRUN_SANDBOX="off"))
        if r.returncode != 0:
            raise SystemExit(f"prun run failed: {r.stdout[-2000:]} {r.stderr[-2000:]}")
        return t

    def run_xargs(p: int, n: int) -> float:
        t, r = timed(["xargs", "-P", str(p), "-n", "1", *noop], input=seq)
        assert r.returncode == 0, r.stderr
        return t

    def run_parallel(p: int, n: int) -> float:
        t, r = timed(["parallel", "--will-cite", "-j", str(p), *noop, "{}"], input=seq,
                     env=dict(os.environ, TMPDIR=str(tmp)))
        assert r.returncode == 0, r.stderr
        return t

    tools = {"prun": run_prun, "xargs": run_xargs}
    if has_parallel:
        tools["parallel"] = run_parallel
    for p in levels:
        times: dict[str, list[float]] = {name: [] for name in tools}
        for n in range(repeat):
            order = list(tools) if n % 2 == 0 else list(reversed(tools))
            for name in order:
                times[name].append(tools[name](p, n))
                print(f"  parallel {p}, pass {n + 1}: {name} {times[name][-1]:.2f} s",
                      file=sys.stderr, flush=True)
        med = {name: statistics.median(ts) for name, ts in times.items()}
        span = {name: f"{min(ts):.2f}–{max(ts):.2f}" for name, ts in times.items()}
        par = f"{med['parallel']:.2f} s ({span['parallel']})" if has_parallel else "not installed"
        ratio_par = f"{med['prun'] / med['parallel']:.2f}x" if has_parallel else "-"
        rows.append(f"| {p} | {med['prun']:.2f} s ({span['prun']}) | {med['xargs']:.2f} s | "
                    f"{par} | {med['prun'] / med['xargs']:.1f}x | {ratio_par} |")
    return rows


def memory(repo: Path, env: dict, n: int) -> list[str]:
    import psutil

    plan = write_plan(repo, n, ["sleep", "60"], "sleepers", n)
    r = subprocess.run([*PRUN, "run", str(plan), "--detach"], cwd=repo, env=env,
                       capture_output=True, text=True)
    run_id = r.stdout.split()[1]
    sup = _wait_supervisor(run_id, env)
    proc = psutil.Process(sup)
    deadline = time.time() + 120
    while time.time() < deadline:
        sleepers = [c for c in proc.children(recursive=True) if c.name() == "sleep"]
        if len(sleepers) >= n:
            break
        time.sleep(0.2)
    time.sleep(1.0)
    sup_rss = proc.memory_info().rss
    keepers = [c for c in proc.children() if c.name() != "sleep"]
    keeper_pss = sum(_pss(c) for c in keepers)
    subprocess.run([*PRUN, "cancel", run_id, "--wait", "120"], cwd=repo, env=env,
                   capture_output=True)
    # one Python process per unit: n standalone dispatchers
    tmp = Path(tempfile.mkdtemp())
    prompt = tmp / "prompt"
    prompt.write_text("sleep")
    procs = [subprocess.Popen([*PRUN, "dispatch", "--executor", "command", "--command",
                               "sleep 60", "--prompt-file", str(prompt), "--result-file",
                               str(tmp / f"r{i}.md"), "--unit-id", f"u{i}"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env={**env, "PRUN_STATE_ROOT": str(tmp / "state"),
                                   "PRUN_LEDGER": "off"})
             for i in range(n)]
    deadline = time.time() + 180
    while time.time() < deadline:
        kids = sum(1 for p in procs for c in _children(p.pid) if c.name() == "sleep")
        if kids >= n:
            break
        time.sleep(0.5)
    per_rss = sum(_rss(p.pid) for p in procs)
    per_pss = sum(_pss_pid(p.pid) for p in procs)
    for p in procs:
        p.terminate()
    for p in procs:
        p.wait()
    shutil.rmtree(tmp, ignore_errors=True)
    mb = 1024 * 1024
    return ["| model | processes | memory |", "| --- | ---: | ---: |",
            f"| prun run: one supervisor | 1 | {sup_rss / mb:.0f} MB RSS |",
            f"| prun run: its worker keeper | {len(keepers)} | {keeper_pss / mb:.0f} MB PSS |",
            f"| one Python process per unit (`prun dispatch`) | {n} | {per_rss / mb:.0f} MB RSS"
            f" ({per_pss / mb:.0f} MB PSS) |"]


def coordinator_bytes(repo: Path, env: dict) -> list[str]:
    code = "import time, random; time.sleep(random.random()); print('x' * 40)"
    plan = write_plan(repo, 20, [sys.executable, "-c", code], "twenty", 20)
    reads = []
    r = subprocess.run([*PRUN, "run", str(plan), "--detach"], cwd=repo, env=env,
                       capture_output=True, text=True)
    reads.append(("prun run --detach", r.stdout))
    run_id = r.stdout.split()[1]
    r = subprocess.run([*PRUN, "wait", run_id], cwd=repo, env=env, capture_output=True,
                       text=True)
    reads.append((f"prun wait (exit {r.returncode})", r.stdout))
    r = subprocess.run([*PRUN, "status", run_id], cwd=repo, env=env, capture_output=True,
                       text=True)
    reads.append(("prun status (the summary)", r.stdout))
    plan = write_plan(repo, 20, [sys.executable, "-c", code], "twenty-fg", 20)
    r = subprocess.run([*PRUN, "run", str(plan)], cwd=repo, env=env, capture_output=True,
                       text=True)
    fg = len(r.stdout.encode())
    rows = ["| step | bytes |", "| --- | ---: |"]
    total = 0
    for name, out in reads:
        total += len(out.encode())
        rows.append(f"| {name} | {len(out.encode())} |")
    rows.append(f"| **total (detach, wait, status)** | **{total}** |")
    rows.append(f"| `prun run` in the foreground (its whole output) | {fg} |")
    return rows


def _wait_supervisor(run_id: str, env: dict) -> int:
    from prun.ledger import Ledger

    deadline = time.time() + 30
    while time.time() < deadline:
        with Ledger.open(env["PRUN_LEDGER"]) as led:
            pid = led.run(run_id)["supervisor_pid"]
        if pid:
            return pid
        time.sleep(0.05)
    raise SystemExit("the supervisor did not start")


def _children(pid):
    import psutil

    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _rss(pid: int) -> int:
    import psutil

    try:
        return psutil.Process(pid).memory_info().rss
    except psutil.NoSuchProcess:
        return 0


def _pss_pid(pid: int) -> int:
    import psutil

    try:
        return _pss(psutil.Process(pid))
    except psutil.NoSuchProcess:
        return 0


def _pss(p) -> int:
    try:
        return p.memory_full_info().pss
    except Exception:
        return p.memory_info().rss


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--units", type=int, default=1000)
    ap.add_argument("--parallel", default="16,64")
    ap.add_argument("--sleepers", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs of each tool per level, in alternating order (medians shown)")
    ap.add_argument("--skip", default="", help="comma list: throughput,memory,bytes")
    ap.add_argument("--dir", help="where the benchmark's repository and files go (default: the "
                    "system's temp folder); e.g. /dev/shm for a RAM file system")
    args = ap.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    compile_prun()
    root = Path(tempfile.mkdtemp(prefix="prun-bench-", dir=args.dir))
    try:
        repo = one_file_repo(root / "repo")
        env = dict(os.environ, PRUN_LEDGER=str(root / "ledger.sqlite"),
                   PRUN_WORKSPACE_ROOT=str(root / "workspaces"),
                   PRUN_STATE_ROOT=str(root / "state"))
        print(f"machine: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, files in {root}\n")
        if "throughput" not in skip:
            print(f"### {args.units} no-op command units\n")
            print("\n".join(throughput(repo, env, args.units,
                                       [int(x) for x in args.parallel.split(",")],
                                       args.repeat)) + "\n")
        if "memory" not in skip:
            print(f"### Memory with {args.sleepers} sleeping units in flight\n")
            print("\n".join(memory(repo, env, args.sleepers)) + "\n")
        if "bytes" not in skip:
            print("### What a coordinator reads through a 20-unit run\n")
            print("\n".join(coordinator_bytes(repo, env)) + "\n")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
