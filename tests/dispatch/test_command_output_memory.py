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
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import working_repo, write_plan

BIG = 50 << 20            # bytes a unit prints
SMALL = 50 << 10          # ... and what the same unit prints for the baseline
BOUND_MIB = 20            # what 50 MB of output may cost a prun process, above its baseline

HEAD = b"## Summary\n"      # the section a packet requires, then every byte value
# a numbered block at a time: not UTF-8, no two blocks alike
PRINTER = """
import sys
size = int(sys.argv[1])
out = sys.stdout.buffer
out.write(HEAD)
size -= len(HEAD)
i = 0
while size > 0:
    block = (b"%08d " % i + bytes(range(256)) * 255)[:size]
    out.write(block)
    size -= len(block)
    i += 1
""".replace("HEAD", repr(HEAD))


def expected(size: int) -> str:
    """The SHA-256 of what the printer prints for ``size``."""
    h, i = hashlib.sha256(HEAD), 0
    size -= len(HEAD)
    while size > 0:
        block = (b"%08d " % i + bytes(range(256)) * 255)[:size]
        h.update(block)
        size -= len(block)
        i += 1
    return h.hexdigest()


def sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def peak_mib(argv: list[str], tmp_path: Path, name: str) -> tuple[int, float]:
    """Run the real `prun` with ``argv`` to its end (it must succeed): its exit code and the
    peak resident memory (MiB) of that process (its own, and of any child it reaped: none
    comes close)."""
    out, err = tmp_path / f"{name}.out", tmp_path / f"{name}.err"
    with open(out, "wb") as o, open(err, "wb") as e:
        proc = subprocess.Popen([sys.executable, "-m", "prun", *argv], stdout=o, stderr=e)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = code = os.waitstatus_to_exitcode(status)
    assert code == 0, err.read_text()[-2000:]
    return code, usage.ru_maxrss / 1024     # KiB on Linux


@pytest.fixture
def printer(tmp_path):
    path = tmp_path / "printer.py"
    path.write_text(PRINTER)
    return path


def dispatch(tmp_path: Path, printer: Path, size: int, name: str) -> tuple[Path, float]:
    prompt = tmp_path / "prompt.md"
    prompt.write_text("print a lot\n")
    result = tmp_path / f"{name}.md"
    _, mib = peak_mib(["dispatch", "--executor", "command", "--command",
                       f"{sys.executable} {printer} {size}", "--prompt-file", str(prompt),
                       "--result-file", str(result), "--unit-id", name], tmp_path, name)
    return result, mib


@pytest.mark.skipif(not hasattr(os, "wait4"), reason="needs os.wait4 (a POSIX system)")
def test_50_mb_of_command_output_through_dispatch_is_published_whole_in_bounded_memory(
        tmp_path, printer):
    _, baseline = dispatch(tmp_path, printer, SMALL, "small")
    result, big = dispatch(tmp_path, printer, BIG, "big")
    assert result.stat().st_size == BIG and sha256(result) == expected(BIG)
    state = Path((tmp_path / "big.out").read_text().split()[1])
    outcome = json.loads((state / "outcome.json").read_text())
    assert outcome["outcome"] == "succeeded" and outcome["published"] == "response"
    assert outcome["result_identity"]["sha256"] == expected(BIG)
    assert big - baseline < BOUND_MIB, f"{big:.1f} MiB with 50 MB, {baseline:.1f} with 50 KB"


@pytest.mark.skipif(not hasattr(os, "wait4"), reason="needs os.wait4 (a POSIX system)")
def test_50_mb_of_output_from_each_of_two_units_costs_the_supervisor_bounded_memory(
        tmp_path, monkeypatch, printer):
    repo = working_repo(tmp_path, monkeypatch, {"README": "a repository\n"})

    def run(size: int, name: str) -> tuple[str, float, float]:
        """A run of two units printing ``size`` bytes, and one after both (the supervisor
        judges theirs first): the run's id, its supervisor's peak, `prun reconcile`'s."""
        plan = write_plan(repo / f"{name}.json", [
            *({"id": f"{name}{i}", "executor": "command", "prompt": "print a lot",
               "requires": ["Summary"], "command": [sys.executable, str(printer), str(size)]}
              for i in range(2)),
            {"id": f"{name}-next", "executor": "command", "prompt": "then this",
             "after": [f"{name}0", f"{name}1"],
             "command": [sys.executable, "-c", "print('both came before this one')"]}],
            parallel=2)
        _, supervisor = peak_mib(["run", str(plan), "--plain"], tmp_path, name)
        run_id = (tmp_path / f"{name}.out").read_text().split()[1]
        _, reconcile = peak_mib(["reconcile", run_id], tmp_path, f"{name}-reconcile")
        return run_id, supervisor, reconcile

    _, supervisor0, reconcile0 = run(SMALL, "small")
    run_id, supervisor, reconcile = run(BIG, "big")
    results = repo / ".prun" / "runs" / run_id / "results"
    for name in ("big0.1.md", "big1.1.md"):
        assert (results / name).stat().st_size == BIG and sha256(results / name) == expected(BIG)
    lines = (tmp_path / "big-reconcile.out").read_text().splitlines()
    assert [line.split()[:2] for line in lines[:3]] == [
        ["ACCEPTED", "big-next"], ["ACCEPTED", "big0"], ["ACCEPTED", "big1"]], lines
    assert supervisor - supervisor0 < BOUND_MIB, \
        f"supervisor: {supervisor:.1f} MiB with 2 x 50 MB, {supervisor0:.1f} with 50 KB"
    assert reconcile - reconcile0 < BOUND_MIB, \
        f"reconcile: {reconcile:.1f} MiB with 2 x 50 MB, {reconcile0:.1f} with 50 KB"
