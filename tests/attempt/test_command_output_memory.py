"""A command unit's output is never held in memory: 50 MB of stdout goes to its state dir's
``tail`` as it comes and is published from there file to file, byte for byte, through
`prun dispatch` and through `prun run`; the supervisor judging it for a dependent and
`prun reconcile` read it a line at a time. The memory it costs is measured, not timed: the
peak resident set of the finished `prun` process (``ru_maxrss`` from ``os.wait4``) with 50 MB
of output, against the same command printing 50 KB."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import pytest

from fakes.big_output import sha256 as printed
from helpers import FAKES, prun_peak_mib, working_repo, write_plan

BIG = 50 << 20            # bytes a unit prints
SMALL = 50 << 10          # ... and what the same unit prints for the baseline
BOUND_MIB = 20            # what 50 MB of output may cost a prun process, above its baseline
PRINTER = [sys.executable, str(FAKES / "big_output.py")]

pytestmark = pytest.mark.skipif(not hasattr(os, "wait4"), reason="needs os.wait4 (POSIX)")


def sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def dispatch(tmp_path: Path, size: int, name: str) -> tuple[Path, float]:
    prompt = tmp_path / "prompt.md"
    prompt.write_text("print a lot\n")
    result = tmp_path / f"{name}.md"
    mib = prun_peak_mib("dispatch", "--executor", "command", "--command",
                        " ".join([*PRINTER, str(size)]), "--prompt-file", str(prompt),
                        "--result-file", str(result), "--unit-id", name,
                        out=tmp_path / f"{name}.out")
    return result, mib


def test_50_mb_of_command_output_through_dispatch_is_published_whole_in_bounded_memory(
        tmp_path):
    _, baseline = dispatch(tmp_path, SMALL, "small")
    result, big = dispatch(tmp_path, BIG, "big")
    assert result.stat().st_size == BIG and sha256(result) == printed(BIG)
    state = Path((tmp_path / "big.out").read_text().split()[1])
    outcome = json.loads((state / "outcome.json").read_text())
    assert outcome["outcome"] == "succeeded" and outcome["published"] == "response"
    assert outcome["result_identity"]["sha256"] == printed(BIG)
    assert big - baseline < BOUND_MIB, f"{big:.1f} MiB with 50 MB, {baseline:.1f} with 50 KB"


def test_50_mb_of_output_from_each_of_two_units_costs_the_supervisor_bounded_memory(
        tmp_path, monkeypatch):
    repo = working_repo(tmp_path, monkeypatch, {"README": "a repository\n"})

    def run(size: int, name: str) -> tuple[str, float, float]:
        """A run of two units printing ``size`` bytes, and one after both (the supervisor
        judges theirs first): the run's id, its supervisor's peak, `prun reconcile`'s."""
        plan = write_plan(repo / f"{name}.json", [
            *({"id": f"{name}{i}", "executor": "command", "prompt": "print a lot",
               "requires": ["Summary"], "command": [*PRINTER, str(size)]} for i in range(2)),
            {"id": f"{name}-next", "executor": "command", "prompt": "then this",
             "after": [f"{name}0", f"{name}1"],
             "command": [sys.executable, "-c", "print('both came before this one')"]}],
            parallel=2)
        supervisor = prun_peak_mib("run", str(plan), "--plain", out=tmp_path / f"{name}.out")
        run_id = (tmp_path / f"{name}.out").read_text().split()[1]
        reconcile = prun_peak_mib("reconcile", run_id,
                                  out=tmp_path / f"{name}-reconcile.out")
        return run_id, supervisor, reconcile

    _, supervisor0, reconcile0 = run(SMALL, "small")
    run_id, supervisor, reconcile = run(BIG, "big")
    results = repo / ".prun" / "runs" / run_id / "results"
    for name in ("big0.1.md", "big1.1.md"):
        assert (results / name).stat().st_size == BIG and sha256(results / name) == printed(BIG)
    lines = (tmp_path / "big-reconcile.out").read_text().splitlines()
    assert [line.split()[:2] for line in lines[:3]] == [
        ["ACCEPTED", "big-next"], ["ACCEPTED", "big0"], ["ACCEPTED", "big1"]], lines
    assert supervisor - supervisor0 < BOUND_MIB, \
        f"supervisor: {supervisor:.1f} MiB with 2 x 50 MB, {supervisor0:.1f} with 50 KB"
    assert reconcile - reconcile0 < BOUND_MIB, \
        f"reconcile: {reconcile:.1f} MiB with 2 x 50 MB, {reconcile0:.1f} with 50 KB"
