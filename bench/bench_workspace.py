"""Ready workspaces, measured: code units that start with the project's dependencies in place.

    python bench/bench_workspace.py [--files 3000] [--units 8] [--dep-files 3000]
                                    [--dep-mb 30] [--prime-seconds 2] [--scale 3000,30000]
    python bench/bench_workspace.py --full    # the issue's sizes: 30,000 files, a 300 MB,
                                              # 30,000-file dependency folder, a 20 s prime,
                                              # workspace time at 3,000 and 300,000 files

1. UNITS code units of a FILES-file repository through the real ``prun run`` with a plan
   ``workspace:`` whose prime writes a DEP_MB, DEP_FILES-file ``deps`` folder and takes about
   PRIME_SECONDS: the wall time from ``prun run`` until every unit has started with ``deps``
   in place, how many times the prime ran, how long after the prime ended each unit started,
   and the disk each unit's workspace takes (``du``: its clone and its copy of ``deps``, or
   the upper layers of its overlays: over the run's one checkout of the base, shared and
   counted once, and over the template's ``deps``).
   Beside it, in the same run, what a person does today: ``git worktree add`` then the same
   prime in each worktree, UNITS at once.
2. prun's workspace time at each repository size of SCALE, made as the run makes it: an
   overlay over the run's checkout where the kernel mounts one (``prun.git.layered``), else
   a clone (``make_clone``), plus ``template.give`` of an already primed template; beside
   it the run's one-off cost (its store and checkout) and a fresh unit's disk.

``PRUN_OVERLAY=off`` measures clones and copies instead of overlays. Otherwise the bench sets
``PRUN_OVERLAY=on``, so that the overlay is measured at every size (a run overlays a code
unit's checkout only from ``prun.git.layered.MIN_FILES`` tracked files at its base).

Prints Markdown tables.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from benchkit import compile_prun, git, make_repo

from prun.git import layered, template, workspace
from prun.plan import Prime

PRIME = textwrap.dedent("""
    import os, sys, time
    files, size, seconds, stamps = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
    t0 = time.time()
    chunk = os.urandom(max(1, size // files))
    for i in range(files):
        d = os.path.join('deps', f'pkg{i % 300:03d}')
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f'f{i:06d}.js'), 'wb') as f:
            f.write(chunk)
    left = seconds - (time.time() - t0)
    if left > 0:
        time.sleep(left)
    with open(stamps, 'a') as f:
        f.write(f'prime-end {time.time()}\\n')
""")

UNIT = textwrap.dedent("""
    import os, sys, time
    assert os.path.isdir('deps/pkg000'), 'no deps'
    with open(sys.argv[1], 'a') as f:
        f.write(f'unit {os.environ["PRUN_UNIT_ID"]} {time.time()}\\n')
    open(os.environ['PRUN_UNIT_ID'] + '.txt', 'w').write('done')
    print('the unit did its work and reports it in full')
""")


def du(path: Path) -> int:
    """Bytes ``path`` takes on disk (``du -s``: each inode once)."""
    out = subprocess.run(["du", "-s", "-B1", str(path)], capture_output=True, text=True)
    return int(out.stdout.split()[0]) if out.returncode == 0 else 0


def prun_units(repo: Path, root: Path, args: argparse.Namespace) -> dict[str, object]:
    stamps = root / "stamps.log"
    prime = [sys.executable, "-c", PRIME, str(args.dep_files), str(args.dep_mb << 20),
             str(args.prime_seconds), str(stamps)]
    packets = [{"id": f"u{i}", "kind": "code", "executor": "command", "owns": [f"u{i}.txt"],
                "command": [sys.executable, "-c", UNIT, str(stamps)], "prompt": f"unit {i}"}
               for i in range(args.units)]
    plan = repo / "plan.json"
    plan.write_text(json.dumps({"parallel": args.units, "packets": packets,
                                "workspace": {"prime": prime, "key": ["lock.txt"],
                                              "share": ["deps"]}}))
    env = dict(os.environ, PRUN_LEDGER=str(root / "ledger.sqlite"),
               PRUN_WORKSPACE_ROOT=str(root / "workspaces"), PRUN_STATE_ROOT=str(root / "state"),
               PRUN_SANDBOX_WRITABLE=str(root), PRUN_STALL_THRESHOLD="3600")
    t0 = time.time()
    done = subprocess.run([sys.executable, "-m", "prun", "run", str(plan)], cwd=repo, env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"prun run failed:\n{done.stdout}\n{done.stderr}")
    lines = [line.split() for line in stamps.read_text().splitlines()]
    prime_end = [float(w[1]) for w in lines if w[0] == "prime-end"]
    starts = [float(w[2]) for w in lines if w[0] == "unit"]
    clones = [p for p in (root / "workspaces").glob("*/u*")
              if p.is_dir() and p.suffix != ".overlay"]
    checkouts = list((root / "workspaces").glob(f"*/{layered.PREFIX}*"))
    return {"all_started_s": max(starts) - t0, "primes": len(prime_end),
            "after_prime_s": sorted(s - prime_end[0] for s in starts),
            "disk_per_unit": sorted(du(c) + du(Path(f"{c}.overlay")) for c in clones),
            "deps_per_unit": sorted(du(Path(f"{c}.overlay", "0")) or du(c / "deps")
                                    for c in clones),
            "overlay": any(Path(f"{c}.overlay").is_dir() for c in clones),
            "checkout": sum(du(c) for c in checkouts)}


def worktrees(repo: Path, root: Path, args: argparse.Namespace) -> dict[str, object]:
    stamps = root / "wt-stamps.log"
    t0 = time.time()

    def one(i: int) -> float:
        dest = root / f"wt{i}"
        git("worktree", "add", "--detach", "-q", str(dest), cwd=repo)
        subprocess.run([sys.executable, "-c", PRIME, str(args.dep_files),
                        str(args.dep_mb << 20), str(args.prime_seconds), str(stamps)],
                       cwd=dest, check=True)
        return time.time()

    with ThreadPoolExecutor(args.units) as pool:
        ready = list(pool.map(one, range(args.units)))
    disk = sorted(du(root / f"wt{i}") for i in range(args.units))
    for i in range(args.units):
        git("worktree", "remove", "--force", str(root / f"wt{i}"), cwd=repo)
    return {"all_started_s": max(ready) - t0, "primes": args.units, "disk_per_unit": disk}


def workspace_time(files: int, root: Path, args: argparse.Namespace) -> dict[str, float]:
    """One more unit's workspace in a FILES-file repository, made as the run makes it: an
    overlay over the run's checkout (``prun.git.layered``) where the kernel mounts one, else a
    clone; then its deps from an already primed template (an overlay's layers, else a copy).
    Seconds (median of 3), the run's own first cost (its store, and its checkout or first
    clone, made once) and the disk of the last unit's workspace before it writes anything."""
    repo = root / f"scale-{files}"
    make_repo(repo, files)
    (repo / "lock.txt").write_text("v1\n")
    git("add", "lock.txt", cwd=repo)
    git("commit", "-q", "-m", "lock", cwd=repo)
    ws_root = root / f"scale-ws-{files}"
    base = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    prime = Prime(shlex.join([sys.executable, "-c", PRIME, str(args.dep_files),
                              str(args.dep_mb << 20), "0", str(root / "scale-stamps.log")]),
                  ("lock.txt",), ("deps",))
    primed = template.ensure(prime, root=str(ws_root), repo_root=str(repo), base=base,
                             store=None, env=os.environ, sandbox=False, logs=str(ws_root))
    run = ws_root / "run"
    layers = layered.wanted(str(run / "u0"), os.environ, sandbox=True, base=base,
                            objects=str(repo))
    t = time.perf_counter()
    if layers:   # the run's store and its one checkout of the base
        layered.ensure_lower(str(run), str(repo), base)
    else:        # the run's store and a first clone
        workspace.make_clone(repo, base, run / "warm")
    once = time.perf_counter() - t
    overlay = template.overlay_here(str(run), os.environ, sandbox=True)
    times, dest = [], run
    for i in range(3):
        dest = run / f"u{i}"
        t = time.perf_counter()
        made = (layered.make(str(repo), base, str(dest)) if layers
                else workspace.make_clone(repo, base, dest))
        template.give(primed, made, overlay=overlay)
        times.append(time.perf_counter() - t)
    return {"seconds": sorted(times)[1], "once": once, "overlay": float(layers),
            "disk": float(du(dest) + du(Path(f"{dest}.overlay")))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=3000)
    ap.add_argument("--units", type=int, default=8)
    ap.add_argument("--dep-files", type=int, default=3000)
    ap.add_argument("--dep-mb", type=int, default=30)
    ap.add_argument("--prime-seconds", type=float, default=2.0)
    ap.add_argument("--scale", default="3000,30000")
    ap.add_argument("--full", action="store_true", help="the issue's sizes")
    args = ap.parse_args()
    if args.full:
        args.files, args.dep_files, args.dep_mb, args.prime_seconds = 30000, 30000, 300, 20.0
        args.scale = "3000,300000"
    os.environ.setdefault("PRUN_OVERLAY", "on")   # the overlay at every size (see above)
    compile_prun()
    root = Path(tempfile.mkdtemp(prefix="prun-bench-ws-"))
    try:
        repo = root / "repo"
        make_repo(repo, args.files)
        (repo / "lock.txt").write_text("v1\n")
        git("add", "lock.txt", cwd=repo)
        git("commit", "-q", "-m", "lock", cwd=repo)
        print(f"{args.units} code units, {args.files} tracked files, a prime writing "
              f"{args.dep_mb} MB in {args.dep_files} files in about {args.prime_seconds:g} s\n")
        ours = prun_units(repo, root / "prun", args)
        theirs = worktrees(repo, root / "worktrees", args)
        mib = 1 << 20
        print("| method | all units started with deps | primes run | disk per unit (MiB) |")
        print("| --- | ---: | ---: | ---: |")
        for name, r in (("prun run, workspace: prime", ours),
                        ("git worktree add + prime in each", theirs)):
            disk = r["disk_per_unit"]
            assert isinstance(disk, list)
            print(f"| {name} | {r['all_started_s']:.1f} s | {r['primes']} | "
                  f"{min(disk) / mib:.1f} to {max(disk) / mib:.1f} |")
        checkout = ours["checkout"]
        assert isinstance(checkout, int)
        if checkout:
            print(f"\nprun's units' workspaces: overlays over the run's one checkout of the base "
                  f"({checkout / mib:.1f} MiB, shared)")
        deps = ours["deps_per_unit"]
        assert isinstance(deps, list)
        print(f"\nprun's units' deps: {'an overlay each' if ours['overlay'] else 'a copy each'}, "
              f"{min(deps) / mib:.2f} to {max(deps) / mib:.2f} MiB of each unit's disk")
        after = ours["after_prime_s"]
        assert isinstance(after, list)
        print(f"\nprun's units started {min(after):.2f} to {max(after):.2f} s after the prime "
              f"ended ({', '.join(f'{a:.2f}' for a in after)})\n")
        print("| tracked files | one more unit's workspace (with its deps) | as | the run's "
              "checkout or first clone, once | a unit's disk before it writes |")
        print("| ---: | ---: | --- | ---: | ---: |")
        for n in (int(x) for x in args.scale.split(",")):
            w = workspace_time(n, root, args)
            print(f"| {n} | {w['seconds'] * 1000:.0f} ms | "
                  f"{'overlay' if w['overlay'] else 'clone'} | {w['once']:.1f} s | "
                  f"{w['disk'] / 1024:.0f} KiB |")
    finally:
        shutil.rmtree(root, ignore_errors=True)
        subprocess.run(["chmod", "-R", "u+w", str(root)], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
