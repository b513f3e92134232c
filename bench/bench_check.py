"""The independence test on large plans, measured.

    python bench/bench_check.py [--sizes 1000,10000] [--wild 200] [--repeat 3]
                                [--reference-cap 60]

For each size, a plan of that many packet files is written into a temporary git repository:
each packet owns its module folder and its test (``src/pkg/mod_1234/**``,
``tests/test_mod_1234.py``); a lead packet owns ``pyproject.toml`` (and so ``uv.lock``) and
``src/pkg/core/**``; every 10th packet names the lead the integration owner of ``uv.lock``;
every 25th reads the core and comes after the lead; every 50th reads ``docs/**``; some hold a
database, a numbered port or a named port (``port:web``); 1 in 20 is read-only. The worst
case beside them: WILD packets whose globs all start with ``**`` (``**/mod_12.py``,
``**/test_mod_12.py``), which have no fixed prefix, so every pair is judged.

Timed (median of REPEAT): ``load_plan``, ``check`` in process, and ``prun check`` end to end
(``python -m prun check PLAN``, a fresh process). Beside them, the reference: the pairwise
check (``tests/plan/pairwise.py``), every pair judged in turn with the same rules, once. It
runs for about REFERENCE_CAP seconds at most; when it cannot finish, the time of the pairs it
judged (in plan order) is extrapolated to all pairs, the table says so. The pairs it judged
must give the same failures as ``check``.

Prints a Markdown table.
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
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "plan"))

from benchkit import compile_prun
from pairwise import pairwise_check

from prun.plan import load_plan
from prun.plan.independence import check

LEAD = "mod-00000"


def wild_packet_text(i: int) -> str:
    return (f'---\nid: mod-{i:05d}\nkind: code\nowns: ["**/mod_{i}.py", "**/test_mod_{i}.py"]'
            f"\n---\nWork on module {i}.\n")


def packet_text(i: int) -> str:
    pid = f"mod-{i:05d}"
    fields = [f"id: {pid}", "kind: read-only" if i % 20 == 19 else "kind: code"]
    if i == 0:
        fields.append('owns: ["pyproject.toml", "src/pkg/__init__.py", "src/pkg/core/**"]')
    elif i % 20 != 19:
        fields.append(f'owns: ["src/pkg/mod_{i}/**", "tests/test_mod_{i}.py"]')
    if i % 10 == 1:
        fields.append(f"shared: {{uv.lock: {LEAD}}}")
    reads = []
    if i % 25 == 5:
        reads.append("src/pkg/core/**")
        fields.append(f"after: [{LEAD}]")
    if i % 50 == 7:
        reads.append("docs/**")
    if reads:
        fields.append(f"reads: [{', '.join(reads)}]")
    state = []
    if i % 7 == 3:
        state.append(f"db:mod_{i}")
    if i % 11 == 4:
        state.append(f"'port:{20000 + i}'")
    if i % 13 == 6:
        state.append("port:web")
    if state:
        fields.append(f"state: [{', '.join(state)}]")
    return "---\n" + "\n".join(fields) + f"\n---\nWork on module {i}.\n"


def write_plan(root: Path, n: int, text=packet_text) -> Path:
    root.mkdir(parents=True)
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@example.invalid",
           "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@example.invalid",
           "GIT_CONFIG_NOSYSTEM": "1"}
    (root / "README").write_text("bench\n")
    for args in (["init", "-q", "-b", "main"], ["add", "README"], ["commit", "-q", "-m", "x"]):
        subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)
    packets = root / "packets"
    packets.mkdir()
    for i in range(n):
        (packets / f"mod_{i:05d}.md").write_text(text(i))
    plan = root / "plan.yaml"
    plan.write_text("name: bench\nbase: main\npackets:\n  - packets/*.md\n")
    return plan


def median_time(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def command(plan: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "prun", "check", str(plan)],
                          capture_output=True, text=True, cwd=plan.parent)


def first_pairs(n: int, limit: int) -> int:
    """How many packets lead the first ``limit`` pairs in plan order, fully."""
    done, i = 0, 0
    while i < n and done + (n - 1 - i) <= limit:
        done += n - 1 - i
        i += 1
    return i


def reference(plan, report, cap: float) -> tuple[float, int, bool]:
    """The pairwise check within about ``cap`` seconds: (seconds for every pair, measured or
    extrapolated; pairs judged; finished)."""
    n = len(plan.packets)
    total = n * (n - 1) // 2
    fixed, _ = median_time(lambda: pairwise_check(plan, limit=0), 1)   # the facts, no pair
    probe = min(total, 20_000)
    took, _ = median_time(lambda: pairwise_check(plan, limit=probe), 1)
    rate = probe / max(took - fixed, 1e-9)
    limit = total if fixed + total / rate <= cap else max(probe, int(rate * (cap - fixed)))
    took, ref = median_time(lambda: pairwise_check(plan, limit=limit), 1)
    lead = first_pairs(n, limit)
    ids = {p.id: k for k, p in enumerate(plan.packets)}
    mine = [f for f in report.failures if ids[f.a] < lead]
    theirs = [f for f in ref.failures if ids[f.a] < lead]
    assert mine == theirs, "the pairwise reference disagrees with check"
    if limit == total:
        return took, limit, True
    return fixed + (took - fixed) * total / limit, limit, False


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--wild", type=int, default=200, help="packets of the worst case (0: none)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--reference-cap", type=float, default=60.0,
                    help="seconds the pairwise reference may run per plan (then extrapolated)")
    args = ap.parse_args()
    compile_prun()
    tmp = Path(tempfile.mkdtemp(prefix="prun-bench-check-"))
    rows = []
    try:
        plans = [(int(s), f"{int(s):,}", packet_text) for s in args.sizes.split(",")]
        if args.wild:
            plans.append((args.wild, f"{args.wild:,}, every glob `**/...`", wild_packet_text))
        for k, (n, label, text) in enumerate(plans):
            path = write_plan(tmp / f"plan{k}", n, text)
            load_s, plan = median_time(lambda p=path: load_plan(p), args.repeat)
            check_s, report = median_time(lambda p=plan: check(p), args.repeat)
            cmd_s, r = median_time(lambda p=path: command(p), args.repeat)
            assert r.stdout.splitlines() == report.lines(), (r.stdout[-500:], r.stderr[-500:])
            ref_s, judged, finished = reference(plan, report, args.reference_cap)
            pairs = report.pairs
            if finished:
                ref_cell, note = f"{ref_s:.2f} s", "every pair"
            else:
                ref_cell = f"~{ref_s:,.0f} s"
                note = f"extrapolated from the first {judged:,} pairs"
            rows.append((label, pairs, report.lines()[-1], load_s, check_s, cmd_s, ref_cell,
                         note))
        print("### prun check on large plans (median of "
              f"{args.repeat}; the reference once)\n")
        print("| packets | pairs | load_plan | check (in process) | prun check (command) "
              "| pairwise reference | reference | summary line |")
        print("| ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |")
        for label, pairs, summary, load_s, check_s, cmd_s, ref_cell, note in rows:
            print(f"| {label} | {pairs:,} | {load_s:.2f} s | {check_s:.2f} s | {cmd_s:.2f} s | "
                  f"{ref_cell} | {note} | `{summary}` |")
        print(f"\nPython {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
