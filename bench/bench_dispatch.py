"""How fast `prun dispatch` answers: time to its STATE-DIR line and to the published result.

Runs the installed `prun` console script (its shebang is the real interpreter, not a shim) with
a fake agy that answers at once, beside `python -c pass` on the same interpreter, and prints a
Markdown table (median and worst of N runs).

    python bench/bench_dispatch.py [--runs 30]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchkit import compile_prun

HERE = Path(__file__).resolve().parent
FAKE_AGY = HERE.parent / "tests" / "fakes" / "fake_agy.py"


def prun_script() -> str:
    beside = Path(sys.executable).with_name("prun")
    found = str(beside) if beside.exists() else shutil.which("prun")
    if not found:
        sys.exit("bench: install prun first (pip install -e .)")
    return found


def timed(argv: list[str], env: dict, wait_line: bool) -> tuple[float, float]:
    """(seconds to the first stdout line, seconds to exit)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    first = t0
    if wait_line:
        p.stdout.readline()
        first = time.perf_counter()
    p.communicate()
    end = time.perf_counter()
    if p.returncode != 0:
        sys.exit(f"bench: {argv[:3]} exited {p.returncode}")
    return (first - t0 if wait_line else end - t0), end - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=30)
    runs = ap.parse_args().runs
    work = Path(tempfile.mkdtemp(prefix="prun-bench-"))
    agy = work / "agy"
    agy.write_text(f"#!{sys.executable}\n" + FAKE_AGY.read_text())
    agy.chmod(0o755)
    prompt = work / "prompt.md"
    prompt.write_text("Say hello.\n")
    env = dict(os.environ, PRUN_AGY_BIN=str(agy), PRUN_STATE_ROOT=str(work / "state"),
               PRUN_QUOTA_SNAPSHOT=str(work / "quota.json"), PRUN_LEDGER=str(work / "l.sqlite"),
               PRUN_AGY_QUOTA_GATE="off")
    env.pop("FAKE_AGY_LOG", None)
    prun = prun_script()
    compile_prun()
    bare, state_line, result, fake_alone = [], [], [], []
    for i in range(runs):
        bare.append(timed([sys.executable, "-c", "pass"], env, False)[0])
        fake_alone.append(timed([str(agy), "-p", "x"], env, False)[0])
        first, end = timed([prun, "dispatch", "--prompt-file", str(prompt), "--result-file",
                            str(work / f"r{i}.md"), "--unit-id", f"b{i}"], env, True)
        state_line.append(first)
        result.append(end)
    shutil.rmtree(work, ignore_errors=True)

    def row(name, xs):
        return f"| {name} | {statistics.median(xs) * 1000:.1f} | {max(xs) * 1000:.1f} |"

    ratio = statistics.median(state_line) / statistics.median(bare)
    print(f"{runs} runs, {sys.executable}\n")
    print("| what | median ms | worst ms |\n|---|---:|---:|")
    print(row("`python -c pass` (bare interpreter start)", bare))
    print(row("`prun dispatch` → `STATE-DIR` line", state_line))
    print(row("fake agy alone (answers at once)", fake_alone))
    print(row("`prun dispatch` → result published, exit 0", result))
    print(f"\nSTATE-DIR line / bare start: {ratio:.2f}x (target ≤ 3x)")


if __name__ == "__main__":
    main()
