"""A remote command unit's output lands without being held in memory: 50 MB printed on a
Dask worker comes to the coordinator's state dir a chunk at a time (while it runs and after),
never more than a few chunks ahead of what the supervisor said it wrote, never inside the
task's return; the published responses are byte-identical and the supervisor's peak resident
memory (``ru_maxrss`` from ``os.wait4``, not a timing) stays within the bound of a local
unit's. One of the two units prints at a pace (much of it is pushed while it runs, the rest
after its end), the other at once (nearly all of it after its end)."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import pytest
from clusterkit import write_plan

from fakes.big_output import sha256 as printed
from helpers import FAKES, prun_peak_mib

BIG = 50 << 20
SMALL = 50 << 10
BOUND_MIB = 20
PRINTER = [sys.executable, str(FAKES / "big_output.py")]


@pytest.mark.skipif(not hasattr(os, "wait4"), reason="needs os.wait4 (POSIX)")
def test_50_mb_of_remote_output_lands_whole_in_bounded_memory(cluster, repo, tmp_path):
    def run(size: int, name: str) -> tuple[Path, float]:
        paces: list[list[str]] = [[], ["10"]]   # at once; about 10 MB a second
        plan = write_plan(repo / f"{name}.json", [
            {"id": f"{name}{i}", "executor": "command", "prompt": "print a lot",
             "command": [*PRINTER, str(size), *pace]} for i, pace in enumerate(paces)],
            parallel=2)
        out = tmp_path / f"{name}.out"
        peak = prun_peak_mib("run", str(plan), "--cluster", cluster.address, "--plain",
                             out=out)
        return repo / ".prun" / "runs" / out.read_text().split()[1], peak

    _, baseline = run(SMALL, "small")
    run_dir, big = run(BIG, "big")
    for i in range(2):
        result = run_dir / "results" / f"big{i}.1.md"
        with open(result, "rb") as f:
            assert hashlib.file_digest(f, "sha256").hexdigest() == printed(BIG)
        (state,) = (run_dir / "state").glob(f"big{i}-*")
        wire = json.loads((state / "remote.json").read_text())["wire"]
        assert wire["tail"] == BIG and wire["payload"] < 1 << 20, wire   # in chunks
    assert big - baseline < BOUND_MIB, f"{big:.1f} MiB with 2 x 50 MB, {baseline:.1f} with 50 KB"
