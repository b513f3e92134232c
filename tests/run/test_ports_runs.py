"""Ports across concurrent runs (the real `prun run --detach`, units held open by gates): the
ports given out never collide, and a fixed port is held by one unit of the machine at a time."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

from helpers import prun
from prun.ledger import Ledger
from runkit import poll, write_plan

HOLD = textwrap.dedent("""
    import json, os, pathlib, time
    pid = os.environ["PRUN_RUN_ID"] + ":" + os.environ["PRUN_PACKET_ID"]
    ports = {{k: v for k, v in os.environ.items() if k.startswith("PRUN_PORT_")}}
    with open({log!r}, "a") as f:
        f.write(json.dumps({{"unit": pid, "ports": ports}}) + "\\n")
    gate = pathlib.Path({gate!r})
    while not gate.exists():
        time.sleep(0.02)
    print("held its ports until the gate opened, as asked")
""")


def _unit(pid: str, log: Path, gate: Path, state: list[str]) -> dict:
    return {"id": pid, "executor": "command", "prompt": f"unit {pid}", "state": state,
            "command": [sys.executable, "-c", HOLD.format(log=str(log), gate=str(gate))]}


def _lines(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _detach(repo: Path, name: str, packets: list[dict]) -> str:
    plan = write_plan(repo / f"{name}.yaml", packets, parallel=4)
    r = prun("run", str(plan), "--detach")
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout.split()[1]


def test_concurrent_runs_never_share_a_port(repo, tmp_path):
    log, gate = tmp_path / "ports.jsonl", tmp_path / "gate"
    runs = [_detach(repo, f"plan{k}", [_unit(f"u{i}", log, gate, ["port:web", "port:db"])
                                       for i in range(3)]) for k in range(2)]
    seen = poll(lambda: _lines(log) if len(_lines(log)) == 6 else None)  # all six at once
    gate.touch()
    for run_id in runs:
        assert prun("wait", run_id, "--timeout", "60").returncode == 0
    held = []
    for unit in seen:
        p = unit["ports"]
        base, count = int(p["PRUN_PORT_BASE"]), int(p["PRUN_PORT_COUNT"])
        held += [*range(base, base + count), int(p["PRUN_PORT_WEB"]), int(p["PRUN_PORT_DB"])]
    assert len(held) == len(set(held)) == 6 * 12


def test_a_fixed_port_is_held_by_one_unit_of_the_machine_at_a_time(repo, tmp_path):
    log, gate_a, gate_b = tmp_path / "fixed.jsonl", tmp_path / "gate-a", tmp_path / "gate-b"
    first = _detach(repo, "first", [_unit("server", log, gate_a, ["port:18011"])])
    poll(lambda: len(_lines(log)) == 1)
    second = _detach(repo, "second", [_unit("server", log, gate_b, ["port:18011"])])

    def waiting():
        with Ledger.open() as led:
            return [e for e in led.events(second) if e["kind"] == "waiting"]

    (note,) = poll(waiting)
    assert "port 18011 is held by attempt" in note["cause"] and first in note["cause"]
    assert len(_lines(log)) == 1                      # the second has not started
    status = prun("status", second, "--all")
    assert "waiting for its ports" in status.stdout
    gate_a.touch()
    assert prun("wait", first, "--timeout", "60").returncode == 0
    poll(lambda: len(_lines(log)) == 2)               # it starts once the port is free
    gate_b.touch()
    assert prun("wait", second, "--timeout", "60").returncode == 0
