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
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from clusterkit import poll, write_plan

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


# waits for the test's word (a file), then prints SIZE bytes at once
WAIT_THEN_PRINT = ("import os, sys, time\n"
                   "while not os.path.exists(sys.argv[1]): time.sleep(0.05)\n"
                   "os.execv(sys.argv[2], sys.argv[2:])")


def test_output_of_a_unit_whose_supervisor_stalls_comes_back_whole(cluster, repo, tmp_path):
    """The supervisor is stopped (SIGSTOP) before the unit prints: the window fills, the
    task waits for its word, then returns the rest from what it acknowledged. Once it runs
    again, the published response is byte-identical."""
    go, size = tmp_path / "go", 8 << 20
    plan = write_plan(repo / "plan.json", [
        {"id": "slow", "executor": "command", "sandbox": "off", "prompt": "print a lot",
         "command": [sys.executable, "-c", WAIT_THEN_PRINT, str(go), *PRINTER, str(size)]}])
    sup = subprocess.Popen([sys.executable, "-m", "prun", "run", str(plan), "--cluster",
                            cluster.address, "--plain"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT)
    try:
        run_dir = repo / ".prun" / "runs" / sup.stdout.readline().split()[1].decode()
        (state,) = poll(lambda: [d for d in (run_dir / "state").glob("slow-*")
                                 if "worker" in json.loads(_read(d / "remote.json") or "{}")])
        units = [cluster.state(n) / "prun" / "cluster" / "units" for n in (1, 2)]
        poll(lambda: any(u.is_dir() and any(u.iterdir()) for u in units))   # placed there
        sup.send_signal(signal.SIGSTOP)
        go.touch()
        poll(lambda: not any(u.is_dir() and any(u.iterdir()) for u in units))   # it returned
    finally:
        sup.send_signal(signal.SIGCONT)
    out = sup.communicate(timeout=120)[0].decode()
    assert sup.returncode == 0, out
    with open(run_dir / "results" / "slow.1.md", "rb") as f:
        assert hashlib.file_digest(f, "sha256").hexdigest() == printed(size)
    wire = json.loads((state / "remote.json").read_text())["wire"]
    assert wire["payload"] > 1 << 20, wire   # the rest came inside the task's return


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None
