"""The git wrapper's cost per git call, and the sandbox's cost per start, measured.

    python bench/bench_gitwrap.py [--calls 50] [--rounds 5]

1. ``git --version`` and ``git status`` (in a small repository) CALLS times through prun's git
   wrapper (``prun.hooks.git_wrapper.git_wrapper_dir``) and CALLS times straight to the real
   git, rounds interleaved so that cache warmth favours neither; beside them ``python -E -s -S
   -c pass``, the interpreter start that the wrapper cannot go below.
2. Where a sandbox can be made here: ``true`` started CALLS times in ``prun.attempt.sandbox.wrap`` (one
   read-only and one writable path) and CALLS times directly.

Each row is the median over ROUNDS of the time for CALLS calls, and that divided by CALLS.
Prints Markdown tables.
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from prun.attempt import sandbox
from prun.hooks.git_wrapper import git_wrapper_dir


def timed(argv: list[str], calls: int, cwd: str, env: dict[str, str]) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def table(title: str, rows: dict[str, list[list[str]]], runs: dict[str, list[float]],
          calls: int, reference: str) -> None:
    print(f"\n{title}\n")
    print(f"| what | {calls} calls, median | per call | vs {reference} |")
    print("| --- | ---: | ---: | ---: |")
    ref = statistics.median(runs[reference])
    for name in rows:
        med = statistics.median(runs[name])
        print(f"| {name} | {med * 1000:.0f} ms | {med * 1000 / calls:.1f} ms | {med / ref:.2f}x |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    real_git = shutil.which("git")
    with tempfile.TemporaryDirectory() as tmp:
        repo = os.path.join(tmp, "repo")
        subprocess.run([real_git, "init", "-q", repo], check=True)
        Path(repo, "a.txt").write_text("a\n")
        subprocess.run([real_git, "-C", repo, "add", "a.txt"], check=True)
        wrapped_env = {**os.environ, "PATH": git_wrapper_dir(os.path.join(tmp, "state"))
                       + os.pathsep + os.environ["PATH"]}
        rows = {
            "git --version, real git": [real_git, "--version"],
            "git --version, through the wrapper": ["git", "--version"],
            "git status, real git": [real_git, "status", "--short"],
            "git status, through the wrapper": ["git", "status", "--short"],
            "python -E -s -S -c pass": [sys.executable, "-E", "-s", "-S", "-c", "pass"],
        }
        runs: dict[str, list[float]] = {name: [] for name in rows}
        for _ in range(args.rounds):
            for name, argv in rows.items():
                env = wrapped_env if "wrapper" in name else dict(os.environ)
                runs[name].append(timed(argv, args.calls, repo, env))
        version = subprocess.run([real_git, "--version"], capture_output=True, text=True).stdout
        table(f"git calls ({version.strip()})", rows, runs, args.calls, "git --version, real git")
        why = sandbox.unavailable()
        if why is not None:
            print(f"\nno sandbox here: {why}")
            return
        true = shutil.which("true")
        box = {"true, direct": [true],
               "true, in the sandbox": sandbox.wrap([true], writable=[tmp], read_only=[repo])}
        runs = {name: [] for name in box}
        for _ in range(args.rounds):
            for name, argv in box.items():
                runs[name].append(timed(argv, args.calls, tmp, dict(os.environ)))
        table("sandbox starts", box, runs, args.calls, "true, direct")


if __name__ == "__main__":
    main()
