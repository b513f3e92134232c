"""Throwaway clones and reconciliation, measured.

    python bench/bench_clone.py [--files 5000] [--repeat 7] [--units 50]

1. Making a workspace of a FILES-file repository, three ways in the same run: prun's guarded
   throwaway clone (``prun.git.workspace.make_clone``: a clone borrowing its objects from the
   run's object store, detached checkout of the base, origin removed, push config stripped,
   hooks and ``protocol.allow=never`` set), as the first clone of a run (which makes the store)
   and as any later one (which finds it), a plain ``git clone --local``, and ``git worktree
   add --detach``. Median of REPEAT runs each,
   interleaved so that cache warmth favours none; each workspace is deleted and the disk
   synced between measurements, outside the timed part. The source is packed (``git gc``), as a
   repository fetched from a server is; ``--loose`` leaves its objects loose instead.
2. Reconciling UNITS code units (each clone with modified, added, untracked, deleted, renamed
   and binary files) with ``prun.git.reconcile.reconcile``, beside a bare loop of ``git diff
   --stat`` over the same clones (which sees neither untracked files nor renames).

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

from prun.git import store, workspace
from prun.git.reconcile import UnitInput, reconcile
from prun.plan import Packet

PARALLEL = "git -c checkout.workers=0 clone --local (no guards, same parallel checkout)"


FIRST = "prun make_clone, a run's first (its object store made too)"
LATER = "prun make_clone, any later clone of the run (the store found)"


def bench_clones(src: Path, out: Path, repeat: int) -> list[tuple[str, float, float]]:
    times: dict[str, list[float]] = {FIRST: [], LATER: [], "git clone --local": [],
                                     "git worktree add --detach": [], PARALLEL: []}
    later = out / "later"
    workspace.make_clone(src, "HEAD", later / "made-outside-the-timed-part")
    for i in range(repeat):
        order = list(times)
        order = order[i % len(order):] + order[:i % len(order)]
        for name in order:
            dest = out / f"{name.split()[1 if name != PARALLEL else 3]}-{i}"
            if name == FIRST:
                dest = out / f"first-{i}" / "clone"
            elif name == LATER:
                dest = later / f"clone-{i}"
            os.sync()   # earlier runs' dirty pages are written back outside the timed part
            if name.startswith("prun"):
                times[name].append(timed(lambda d=dest: workspace.make_clone(src, "HEAD", d)))
                if name == FIRST:
                    for made in store.stores_in(str(dest.parent)):
                        store.discard(made)
            elif name == PARALLEL:
                times[name].append(timed(lambda d=dest: git("-c", "checkout.workers=0", "clone",
                                                            "-q", "--local", str(src), str(d))))
            elif "worktree" in name:
                times[name].append(timed(lambda d=dest: git("worktree", "add", "-q",
                                                            "--detach", str(d), "HEAD",
                                                            cwd=src)))
            else:
                times[name].append(timed(lambda d=dest: git("clone", "-q", "--local",
                                                            str(src), str(d))))
            shutil.rmtree(dest)
    git("worktree", "prune", cwd=src)
    if os.environ.get("BENCH_VERBOSE"):
        for name, t in times.items():
            print(name, [round(x * 1000) for x in t], file=sys.stderr)
    plain = statistics.median(times["git clone --local"])
    return [(n, statistics.median(t), statistics.median(t) / plain) for n, t in times.items()]


def bench_reconcile(src: Path, out: Path, units: int) -> tuple[float, float, int]:
    inputs = []
    base = subprocess.run(["git", "rev-parse", "HEAD"], cwd=src, capture_output=True,
                          text=True, check=True).stdout.strip()
    for u in range(units):
        clone = Path(workspace.make_clone(src, base, out / f"unit{u:02d}"))
        pkg = clone / f"pkg{u % 50:02d}"
        for f in sorted((pkg / "mod0").iterdir())[:3]:
            f.write_text(f.read_text() + f"y = {u}\n")
        (pkg / "mod1" / "new_untracked.py").write_text("NEW = 1\n")
        victim = sorted((pkg / "mod2").iterdir())[0]
        victim.unlink()
        moved = sorted((pkg / "mod3").iterdir())[0]
        moved.rename(pkg / "mod3" / "renamed.py")
        (pkg / "mod4" / "data.bin").write_bytes(os.urandom(2048))
        state = out / f"state{u:02d}"
        state.mkdir()
        (state / "result.md").write_text("## Summary\n\nChanged pkg files.\n")
        (state / "outcome.json").write_text('{"outcome": "succeeded", "tool_uses": 5}')
        packet = Packet(id=f"u{u:02d}", prompt="p", kind="code",
                        owns=(f"pkg{u % 50:02d}/**",), requires=("Summary",))
        inputs.append(UnitInput(packet=packet, attempt_id=f"a{u}", status="succeeded",
                                state_dir=str(state), workspace=str(clone), base=base,
                                result_file=str(state / "result.md"), executor="command"))
    prun_runs, plain_runs = [], []
    for _ in range(3):
        t = time.perf_counter()
        report = reconcile(inputs)
        prun_runs.append(time.perf_counter() - t)
        assert report.count("accepted") == units, report.lines()[:5]
        t = time.perf_counter()
        for u in inputs:
            git("diff", "--stat", base, cwd=u.workspace)
        plain_runs.append(time.perf_counter() - t)
    files = sum(len(v.change.files) for v in report.verdicts)
    prun_s, plain_s = statistics.median(prun_runs), statistics.median(plain_runs)
    return prun_s, plain_s, files


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=5000)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--units", type=int, default=50)
    ap.add_argument("--clones-only", action="store_true", help="skip the reconcile part")
    ap.add_argument("--loose", action="store_true",
                    help="leave the source's objects loose (each clone then hardlinks them all)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="prun-bench-clone-"))
    try:
        src = tmp / "repo"
        make_repo(src, args.files, packed=not args.loose)
        rows = bench_clones(src, tmp / "clones", args.repeat)
        kind = "loose objects" if args.loose else "packed"
        print(f"### Making a workspace of a {args.files:,}-file repository ({kind}, "
              f"median of {args.repeat})\n")
        print("| method | median | vs plain clone |")
        print("| --- | ---: | ---: |")
        for name, med, ratio in rows:
            print(f"| {name} | {med * 1000:.0f} ms | {ratio:.2f}x |")
        shutil.rmtree(tmp / "clones", ignore_errors=True)
        if args.clones_only:
            return
        prun_s, plain_s, files = bench_reconcile(src, tmp / "units", args.units)
        print(f"\n### Reconciling {args.units} code units ({files} changed files, median of 3)"
              "\n")
        print("| method | total | per unit |")
        print("| --- | ---: | ---: |")
        print(f"| prun reconcile (change, scope, sections, verdict) | {prun_s * 1000:.0f} ms | "
              f"{prun_s / args.units * 1000:.1f} ms |")
        print(f"| git diff --stat loop (tracked files only) | {plain_s * 1000:.0f} ms | "
              f"{plain_s / args.units * 1000:.1f} ms |")
        version = subprocess.run(["git", "--version"], capture_output=True,
                                 text=True).stdout.split()[-1]
        print(f"\ngit {version}, Python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
