"""A unit of a cluster run gets its ports on the worker's machine that runs it: reserved by
its task in that machine's registry before it starts (each test worker has a state folder of
its own, so its registry is not the coordinator's), given to the unit in its environment,
named by variable in its brief, and given back when it ends."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from clusterkit import attempts, write_plan

from helpers import prun

# the unit records its port variables and the registry of the machine it runs on, as it runs
# (a unit's own environment names no XDG folder of the person's: it reads its worker's)
SEE = ("import json, os, pathlib, sys; "
       "env = dict(v.split('=', 1) for v in pathlib.Path(f'/proc/{os.getppid()}/environ')"
       ".read_text().split(chr(0)) if '=' in v); state = env['XDG_STATE_HOME']; "
       "registry = pathlib.Path(state, 'prun', 'ports.json'); "
       "pathlib.Path(sys.argv[1]).write_text(json.dumps({'state': state, 'worker': os.getppid(), "
       "'env': {k: v for k, v in os.environ.items() if k.startswith('PRUN_PORT_')}, "
       "'registry': json.loads(registry.read_text())})); "
       "print('it saw its ports and the registry of the machine it ran on')")


def entries_of(registry: Path, holder: str) -> list[dict]:
    """The entries an attempt (or a run's blocks of ranges) holds in ``registry``."""
    if not registry.exists():
        return []
    return [e for e in json.loads(registry.read_text())["entries"]
            if e["attempt"] == holder or e["attempt"].startswith(f"{holder}/")]


def test_a_units_ports_are_reserved_on_its_worker(cluster, repo, tmp_path):
    seen_file = tmp_path / "seen.json"
    plan = write_plan(repo / "plan.json", [
        {"id": "serve", "executor": "command", "sandbox": "off", "prompt": "serve",
         "state": ["port:web"], "command": [sys.executable, "-c", SEE, str(seen_file)]}])
    r = prun("run", str(plan), "--cluster", cluster.address, "--plain", timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    row = attempts(repo)[0]
    seen = json.loads(seen_file.read_text())
    env = seen["env"]
    assert set(env) == {"PRUN_PORT_BASE", "PRUN_PORT_COUNT", "PRUN_PORT_WEB"}
    # the worker's own registry held them while the unit ran, in the worker process's name:
    # its own range from the worker's block of the run's ranges, its named port for it
    assert seen["state"] in {str(cluster.state(n)) for n in (1, 2)}
    run_id = row["run_id"]
    held = {(e["kind"], e["name"], e["base"], e["count"], e["pid"])
            for e in seen["registry"]["entries"]
            if e["attempt"] == row["id"] or e["attempt"].startswith(f"{run_id}/ranges/")}
    assert ("range", None, int(env["PRUN_PORT_BASE"]), int(env["PRUN_PORT_COUNT"]),
            seen["worker"]) in held
    assert ("name", "web", int(env["PRUN_PORT_WEB"]), 1, seen["worker"]) in held
    # given back when it ended; the coordinator's registry never held them
    after = Path(seen["state"]) / "prun" / "ports.json"
    assert entries_of(after, row["id"]) == [] and entries_of(after, run_id) == []
    here = Path(os.environ["XDG_STATE_HOME"]) / "prun" / "ports.json"
    assert entries_of(here, row["id"]) == [] and entries_of(here, run_id) == []
    # the brief names the variables; where it ran says what they held
    assert "$PRUN_PORT_BASE" in row["brief"] and "$PRUN_PORT_WEB" in row["brief"]
    assert "reserved for you on the machine you run on" in row["brief"]
    remote = json.loads((Path(row["state_dir"]) / "remote.json").read_text())
    assert remote["ports"] == env
