"""What the sandbox costs a unit: 200 command units through `prun run` in a bubblewrap sandbox
beside the same plan unsandboxed, in the same run (target: under 20 ms a unit).

    python bench/bench_sandbox.py [--units 200] [--parallel 8] [--rounds 3]

Each round runs the plan with `sandbox: on` and with `sandbox: off`, in alternating order;
the table gives the medians, their difference per unit, and, beside them, one bare process
started directly and in a sandbox (`true`, 50 times). Everything runs in a temporary git
repository with its own ledger and state folders.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchkit import compile_prun

PRUN = [sys.executable, "-m", "prun"]


def plan(repo: Path, units: int, parallel: int, sandbox: str) -> Path:
    packets = [{"id": f"u{i:04d}", "executor": "command", "prompt": "no-op",
                "command": ["sh", "-c", "echo a no-op unit result, long enough"]}
               for i in range(units)]
    path = repo / f"plan-{sandbox}.yaml"
    path.write_text(json.dumps({"parallel": parallel, "sandbox": sandbox, "packets": packets}))
    return path


def run_once(path: Path, env: dict) -> float:
    t = time.perf_counter()
    r = subprocess.run([*PRUN, "run", str(path), "--plain"], capture_output=True, text=True,
                       env=env, cwd=path.parent)
    took = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"prun run failed ({r.returncode}): {r.stderr.strip()[-400:]}")
    return took


def bare(argv_of, n: int = 50) -> float:
    t = time.perf_counter()
    for _ in range(n):
        subprocess.run(argv_of(["true"]), check=True)
    return (time.perf_counter() - t) / n


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--units", type=int, default=200)
    ap.add_argument("--parallel", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    from prun.attempt import sandbox

    why = sandbox.unavailable()
    if why:
        raise SystemExit(f"no sandbox here: {why}")
    compile_prun()
    root = Path(tempfile.mkdtemp(prefix="prun-bench-sandbox-"))
    try:
        repo = root / "repo"
        repo.mkdir()
        for args_ in (["init", "-q"], ["commit", "-q", "--allow-empty", "-m", "init"]):
            subprocess.run(["git", "-C", str(repo), "-c", "user.email=b@example.com", "-c",
                            "user.name=b", *args_], check=True)
        env = dict(os.environ, PRUN_LEDGER=str(root / "ledger.sqlite"),
                   PRUN_WORKSPACE_ROOT=str(root / "ws"), XDG_STATE_HOME=str(root / "state"),
                   PRUN_STATE_ROOT=str(root / "units"))
        plans = {s: plan(repo, args.units, args.parallel, s) for s in ("on", "off")}
        times: dict[str, list[float]] = {"on": [], "off": []}
        for k in range(args.rounds):
            for s in (("on", "off") if k % 2 == 0 else ("off", "on")):
                times[s].append(run_once(plans[s], env))
        on, off = statistics.median(times["on"]), statistics.median(times["off"])
        direct = bare(lambda argv: argv)
        boxed = bare(lambda argv: sandbox.wrap(argv, writable=[str(root)], read_only=[str(repo)]))
        print(f"### {args.units} command units, parallel {args.parallel}, medians of "
              f"{args.rounds}\n")
        print("| | sandbox off | sandbox on | difference | per unit |")
        print("| --- | ---: | ---: | ---: | ---: |")
        print(f"| `prun run` | {off:.2f} s | {on:.2f} s | {on - off:+.2f} s | "
              f"{(on - off) / args.units * 1000:+.1f} ms |")
        print(f"| one `true` | {direct * 1000:.1f} ms | {boxed * 1000:.1f} ms | "
              f"{(boxed - direct) * 1000:+.1f} ms | |")
        per_unit = (on - off) / args.units * 1000
        print(f"\ntarget under 20 ms a unit: {'met' if per_unit < 20 else 'NOT met'} "
              f"(runs: off {', '.join(f'{t:.2f}' for t in times['off'])} s; "
              f"on {', '.join(f'{t:.2f}' for t in times['on'])} s)")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
