"""Dependents start from their predecessors: a code packet `after: [a]` starts from the run's
base plus a's accepted change (committed in its clone as a base prun made), a rejected
predecessor blocks it, reconcile and integrate apply each change once, in order."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from helpers import prun
from prun.ledger import Ledger
from runkit import write_plan


def _unit(pid: str, code: str, **fields) -> dict:
    body = textwrap.dedent(code) + "\nprint('the unit did its work and reports it in full')\n"
    return {"id": pid, "executor": "command", "command": [sys.executable, "-c", body],
            "prompt": f"unit {pid}", **fields}


def _git(repo, *args) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=True).stdout


def _run(repo, packets, *extra):
    plan = write_plan(repo / "plan.yaml", packets, parallel=4)
    r = prun("run", str(plan), *extra)
    run_id = r.stdout.split()[1]
    with Ledger.open() as led:
        attempts = {a["packet_id"]: dict(a) for a in led.attempts(run_id)}
        packets = {p["id"]: p["status"] for p in led.packets(run_id)}
        events = [dict(e) for e in led.events(run_id)]
    return r, run_id, attempts, packets, events


def test_dependent_starts_from_its_predecessors_and_integrates_in_order(repo):
    base = _git(repo, "rev-parse", "HEAD").strip()
    r, run_id, att, status, _events = _run(repo, [
        _unit("a", "open('a.txt', 'w').write('from a\\n')", kind="code", owns=["a.txt"]),
        _unit("b", """
            assert open('a.txt').read() == 'from a\\n', 'b must start from a'
            open('b.txt', 'w').write('b saw: ' + open('a.txt').read())
        """, kind="code", owns=["b.txt"], after=["a"]),
        _unit("c", """
            import json, os
            done = json.loads(os.environ['PRUN_PREDECESSOR_RESULTS'])
            assert 'the unit did its work' in open(done['b']).read()
        """, after=["b"])])
    assert r.returncode == 0, r.stdout + r.stderr
    assert status == {"a": "succeeded", "b": "succeeded", "c": "succeeded"}
    clone = Path(att["b"]["workspace"])
    start = att["b"]["base"]
    assert start != base and att["a"]["base"] == base
    assert _git(clone, "rev-parse", f"{start}^").strip() == base
    assert "prun: start from the accepted changes of a" in _git(clone, "log", "-1", "--format=%s")
    # the read-only dependent was told where its predecessor's result is
    brief = att["c"]["brief"]
    assert f"Results of the units before you: `b`: {att['b']['result_path']}." in brief
    # reconcile measures each unit against its own base: b's change is b.txt alone
    rec = prun("reconcile", run_id, "--json")
    assert rec.returncode == 0, rec.stdout + rec.stderr
    files = {p["packet"]: [f["path"] for f in p["change"]["files"]] if p["change"] else None
             for p in json.loads(rec.stdout)["packets"]}
    assert files == {"a": ["a.txt"], "b": ["b.txt"], "c": None}
    # integrate applies a, then b, each once
    done = prun("integrate", run_id, "--no-check")
    assert done.returncode == 0, done.stdout + done.stderr
    applied = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("APPLIED")]
    assert applied == ["a", "b"]
    assert (repo / "a.txt").read_text() == "from a\n"
    assert (repo / "b.txt").read_text() == "b saw: from a\n"
    assert not any(line.startswith("BASE ") for line in done.stdout.splitlines())


def test_a_rejected_predecessor_blocks_its_dependent(repo):
    r, _run_id, att, status, events = _run(repo, [
        _unit("a", "open('a.txt', 'w').write('a'); open('stray.txt', 'w').write('leak')",
              kind="code", owns=["a.txt"]),
        _unit("b", "open('b.txt', 'w').write('b')", kind="code", owns=["b.txt"],
              after=["a"])])
    assert r.returncode == 1, r.stdout + r.stderr
    assert status == {"a": "succeeded", "b": "blocked"}
    blocked = next(e for e in events if e["kind"] == "blocked")
    assert "a was rejected (reason=scope-leak path=stray.txt)" in blocked["cause"]
    assert att["b"]["status"] == "not-dispatched" and att["b"]["receipt"] is None
    assert any(line.startswith("UNIT b blocked") and "scope-leak" in line
               for line in r.stdout.splitlines())


def test_the_run_refuses_a_plan_that_fails_the_independence_test(repo):
    packets = [_unit("a", "open('x.md', 'w').write('a')", kind="code", owns=["*.md"]),
               _unit("b", "open('x.md', 'w').write('b')", kind="code", owns=["x.md"])]
    plan = write_plan(repo / "plan.yaml", packets)
    r = prun("run", str(plan))
    assert r.returncode == 1
    assert r.stdout.startswith("FAIL files a b path=x.md")
    assert "FAILED failures=1" in r.stdout
    assert "--allow-overlap" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    with Ledger.open() as led:
        assert led.runs() == []
    assert not (repo / ".prun" / "runs").exists() or not list((repo / ".prun" / "runs").iterdir())
    # the override runs it and says so in the ledger
    forced = prun("run", str(plan), "--allow-overlap")
    run_id = forced.stdout.split()[1]
    with Ledger.open() as led:
        (event,) = [e for e in led.events(run_id) if e["kind"] == "overlap-allowed"]
    assert "FAIL files a b path=x.md" in json.loads(event["data"])["failures"][0]
