"""What the brief costs each worker: the bytes of prun's generated contract beside the bytes of
the packet's own task, for every packet in examples/ (target: under 1.5 KB for a typical one).

The coordinator pays for every byte of the contract in every worker's context, so it is kept
short. Paths are given realistic lengths (a home folder, a run id, a snapshot folder).

    python bench/bench_brief.py
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))

from prun.plan import load_plan  # noqa: E402
from prun.plan.independence import ancestors  # noqa: E402
from prun.run import brief  # noqa: E402

RUN_DIR = "/home/someone/work/project/.prun/runs/20261201-093000-4f2a"
SNAPSHOT = "/home/someone/.local/state/prun/workspaces/20261201-093000-4f2a/snapshot-1a2b3c4d5e6f"
BASE = "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b"
TARGET = 1500


def rows():
    for plan_path in sorted((HERE.parent / "examples").glob("*/plan.yaml")):
        plan = load_plan(plan_path)
        before = ancestors(plan)
        for p in plan.packets:
            code = p.writes_code
            applied = [q.id for q in plan.packets if q.id in before[p.id] and q.writes_code]
            ctx = brief.context(
                plan, p, workspace="clone" if code else "scratch",
                result_file=f"{RUN_DIR}/results/{p.id}.1.md", base=BASE,
                applied=applied if code else (), snapshot=None if code else SNAPSHOT,
                ports=brief.Ports(20000, 10),
                predecessors={a: f"{RUN_DIR}/results/{a}.1.md" for a in p.after})
            contract = len(brief.contract(p, ctx).encode())
            task = len(p.prompt.strip().encode())
            yield plan_path.parent.name, p.id, "code" if code else "read-only", task, contract


def main() -> int:
    table = list(rows())
    print(f"{'example':<13} {'packet':<22} {'kind':<9} {'task B':>7} {'contract B':>11} "
          f"{'contract share':>15}")
    for example, pid, kind, task, contract in table:
        share = contract / (contract + task)
        print(f"{example:<13} {pid:<22} {kind:<9} {task:>7} {contract:>11} {share:>14.0%}")
    sizes = [c for *_, c in table]
    print(f"\ncontract: median {statistics.median(sizes):.0f} B, largest {max(sizes)} B, "
          f"target < {TARGET} B for a typical packet: "
          f"{'met' if statistics.median(sizes) < TARGET else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
