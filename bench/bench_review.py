"""`prun review --json` of a run whose one code unit added many files, measured.

    python bench/bench_review.py [--files 20000] [--repeat 3]

Makes a one-file repository, runs a plan of one command unit that writes FILES new small
files in its clone (`prun run`, the real command), then times `prun review RUN --json` (a
real process: the run's view, reconcile, the diffs the page shows) REPEAT times and prints the
median, the least and the most, and how many files' diffs the answer carried. The prun it
measures is the one `python -m prun` imports (PYTHONPATH chooses another checkout's).
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

from benchkit import one_file_repo

WRITE = ("import pathlib, sys\n"
         "for i in range(int(sys.argv[1])):\n"
         "    p = pathlib.Path(f'gen/d{i % 100:02d}/f{i:05d}.txt')\n"
         "    p.parent.mkdir(parents=True, exist_ok=True)\n"
         "    p.write_text(f'line {i}\\n' * 3)\n"
         "print('wrote every file it was asked to write, and nothing else')\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-review-") as tmp:
        root = one_file_repo(Path(tmp) / "repo")
        (root / ".git" / "info" / "exclude").write_text("/plan.json\n")
        env = {**os.environ, "PRUN_LEDGER": f"{tmp}/ledger.sqlite",
               "PRUN_WORKSPACE_ROOT": f"{tmp}/ws", "PRUN_STATE_ROOT": f"{tmp}/state",
               "PRUN_CONFIG": f"{tmp}/config.toml"}
        plan = {"packets": [{"id": "many", "kind": "code", "executor": "command",
                             "owns": ["gen/**"], "prompt": "p",
                             "command": [sys.executable, "-c", WRITE, str(args.files)]}]}
        (root / "plan.json").write_text(json.dumps(plan))
        r = subprocess.run([sys.executable, "-m", "prun", "run", "plan.json"], cwd=root,
                           env=env, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(r.stdout + r.stderr)
        run_id = next(line.split()[1] for line in r.stdout.splitlines()
                      if line.startswith("RUN "))
        took, shown = [], None
        for _ in range(args.repeat):
            t = time.perf_counter()
            r = subprocess.run([sys.executable, "-m", "prun", "review", run_id, "--json"],
                               cwd=root, env=env, capture_output=True, text=True)
            took.append(time.perf_counter() - t)
            if r.returncode != 0:
                sys.exit(r.stdout + r.stderr)
            page = json.loads(r.stdout)["packets"][0]
            shown = len(page.get("diffs") or {})
        print(f"| files | median | least | most | diffs carried |\n|---:|---:|---:|---:|---:|\n"
              f"| {args.files} | {statistics.median(took):.2f} s | {min(took):.2f} s | "
              f"{max(took):.2f} s | {shown} |")


if __name__ == "__main__":
    main()
