"""The port registry, measured: what reserving and releasing a unit's ports costs.

    python bench/bench_ports.py [--units 300] [--repeat 5] [--dir DIR]

Each row reserves UNITS times (a unit's own range of 10 ports and one named port) and releases
each again, with LIVE entries of other attempts already in the registry, from one process.
The reference is the cost a unit already pays for one file of its bookkeeping: writing
``unit.json`` atomically into its state dir (``fsutil.atomic_write_json``), in the same
folder, in the same run. Median of REPEAT runs, interleaved.

Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from prun._util.fsutil import atomic_write_json
from prun.ports import reserve as ports


def per_unit_ports(env: dict, units: int, live: int) -> float:
    others = [ports.Holder.of_process(f"bench.other.{i}", "bench", f"o{i}") for i in range(live)]
    for h in others:
        ports.reserve(h, ports.PortRequest(count=10), env)
    request = ports.PortRequest(names=("web",), count=10)
    started = time.perf_counter()
    for i in range(units):
        ports.reserve(ports.Holder.of_process(f"bench.unit.{i}", "bench", f"u{i}"), request, env)
        ports.release(f"bench.unit.{i}", env)
    took = (time.perf_counter() - started) / units / 2
    for h in others:
        ports.release(h.attempt_id, env)
    return took


def per_unit_file(folder: str, units: int) -> float:
    info = {"unit_id": "u", "executor": "command", "argv": ["echo", "x"], "pid": 1}
    started = time.perf_counter()
    for i in range(units):
        atomic_write_json(os.path.join(folder, f"unit-{i % 50}.json"), info, durable=False)
    return (time.perf_counter() - started) / units


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--units", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--dir", default=None, help="where the registry goes (default: a temp dir)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        env = {"XDG_STATE_HOME": tmp, "PRUN_PORT_START": "30000"}
        folder = os.path.join(tmp, "state")
        os.makedirs(folder)
        rows = []
        for live in (0, 64, 500):
            reg, ref = [], []
            for _ in range(args.repeat):
                reg.append(per_unit_ports(env, args.units, live))
                ref.append(per_unit_file(folder, args.units))
            rows.append((live, statistics.median(reg), statistics.median(ref)))
    print(f"{args.units} units, median of {args.repeat}\n")
    print("| live entries | reserve or release | one unit.json write | ratio |")
    print("| ---: | ---: | ---: | ---: |")
    for live, reg, ref in rows:
        print(f"| {live} | {reg * 1000:.2f} ms | {ref * 1000:.3f} ms | {reg / ref:.1f}x |")


if __name__ == "__main__":
    main()
