"""The read-only snapshot, measured.

    python bench/bench_snapshot.py [--files 5000] [--repeat 7] [--units 20] [--dir DIR]

1. Giving UNITS read-only units of one run the repository to read: one
   ``prun.git.snapshot.ensure_snapshot`` that makes the snapshot and UNITS more that find it,
   beside one plain ``git clone --local`` of the same FILES-file repository (packed, as a
   repository fetched from a server is). Median of REPEAT rounds, the two in alternating order;
   each is deleted and the disk synced between measurements, outside the timed part. The
   ratio of the two in each round is printed too: on a shared machine it drifts less than
   either time.
2. ``prun.git.snapshot.snapshot_changes`` on that snapshot (nothing changed, the usual answer)
   beside ``git status --porcelain`` in it, which sees neither modes nor ``.git``.

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

from benchkit import git, make_repo, timed

from prun.git.snapshot import ensure_snapshot, remove_snapshot, snapshot_changes

SNAPSHOT = "prun snapshot (1 made + {units} found)"
FINDS = "of which the {units} finds"
CLONE = "git clone --local"


def bench_making(src: Path, out: Path, base: str, units: int, repeat: int) -> dict[str, list]:
    times: dict[str, list[float]] = {SNAPSHOT: [], FINDS: [], CLONE: []}
    for i in range(repeat):
        for name in (SNAPSHOT, CLONE) if i % 2 == 0 else (CLONE, SNAPSHOT):
            os.sync()   # earlier runs' dirty pages are written back outside the timed part
            if name == CLONE:
                dest = out / f"clone-{i}"
                times[CLONE].append(timed(lambda d=dest: git("clone", "-q", "--local",
                                                              str(src), str(d))))
                shutil.rmtree(dest)
                continue
            parent = str(out / f"run-{i}")
            start = time.perf_counter()
            snap = ensure_snapshot(parent, str(src), base)
            made = time.perf_counter()
            for _ in range(units):
                assert ensure_snapshot(parent, str(src), base) == snap
            end = time.perf_counter()
            times[SNAPSHOT].append(end - start)
            times[FINDS].append(end - made)
            remove_snapshot(snap.path)
    return times


def bench_changes(src: Path, out: Path, base: str, repeat: int) -> tuple[float, float, int]:
    snap = ensure_snapshot(str(out / "changes"), str(src), base)
    prun_runs, status_runs = [], []
    for _ in range(repeat):
        prun_runs.append(timed(lambda: snapshot_changes(snap.path)))
        status_runs.append(timed(lambda: git("status", "--porcelain", cwd=snap.path)))
    assert snapshot_changes(snap.path) == []
    entries = sum(len(dirs) + len(files) for _, dirs, files in os.walk(snap.path)) + 1
    remove_snapshot(snap.path)
    return statistics.median(prun_runs), statistics.median(status_runs), entries


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=5000)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--units", type=int, default=20)
    ap.add_argument("--dir", help="where the benchmark's files go (default: the system's temp "
                    "folder); e.g. /dev/shm for a RAM file system")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="prun-bench-snapshot-", dir=args.dir))
    try:
        src = tmp / "repo"
        make_repo(src, args.files)
        base = subprocess.run(["git", "rev-parse", "HEAD"], cwd=src, capture_output=True,
                              text=True, check=True).stdout.strip()
        times = bench_making(src, tmp / "out", base, args.units, args.repeat)
        if os.environ.get("BENCH_VERBOSE"):
            for name, t in times.items():
                print(name, [round(x * 1000) for x in t], file=sys.stderr)
        plain = statistics.median(times[CLONE])
        print(f"### The repository for {args.units} read-only units ({args.files:,} files, "
              f"packed, median of {args.repeat})\n")
        print("| method | median | vs plain clone |")
        print("| --- | ---: | ---: |")
        for name, t in times.items():
            med = statistics.median(t)
            print(f"| {name.format(units=args.units)} | {med * 1000:.0f} ms | "
                  f"{med / plain:.2f}x |")
        paired = sorted(s / c for s, c in zip(times[SNAPSHOT], times[CLONE], strict=True))
        print(f"\nSnapshot / clone, round by round: median {statistics.median(paired):.2f}x, "
              f"from {paired[0]:.2f}x to {paired[-1]:.2f}x (target: at most 1.2x)")
        prun_s, status_s, entries = bench_changes(src, tmp / "out", base, args.repeat)
        print(f"\n### Checking the snapshot for changes ({entries:,} entries, .git included, "
              f"median of {args.repeat})\n")
        print("| method | median | vs git status |")
        print("| --- | ---: | ---: |")
        print(f"| prun snapshot_changes (stat walk, .git included) | {prun_s * 1000:.1f} ms | "
              f"{prun_s / status_s:.2f}x |")
        print(f"| git status --porcelain (work tree only) | {status_s * 1000:.1f} ms | 1.00x |")
        version = subprocess.run(["git", "--version"], capture_output=True,
                                 text=True).stdout.split()[-1]
        print(f"\ngit {version}, Python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(tmp)], check=False)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
