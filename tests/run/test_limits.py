"""Per-unit limits (``resources:``) and admission by the machine's room, end to end through
``prun run``: real supervisors, real keepers, real units, the real ledger."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import psutil

from helpers import prun
from prun.ledger import Ledger
from runkit import poll, py_unit, write_plan

# leaks 16 MiB every 20 ms (pages written, so resident) up to 1 GiB, then waits
HOG = textwrap.dedent("""
    import time
    held = []
    for _ in range(64):
        held.append(b"\\1" * (16 << 20))
        time.sleep(0.02)
    time.sleep(120)
    print("a hog that was never stopped reports a full result")
""")

# 150 processes, each a grandchild whose parent exits at once (so it is orphaned to the
# keeper, in the unit's session and group), each writing its pid, then sleeping
BOMB = textwrap.dedent("""
    import os, time
    pids = {pids!r}
    for _ in range(150):
        child = os.fork()
        if child == 0:
            if os.fork() == 0:
                with open(pids, "a") as f:
                    f.write(f"{{os.getpid()}} {{time.time()}}\\n")
                time.sleep(600)
            os._exit(0)
        os.waitpid(child, 0)
    time.sleep(120)
    print("a bomb that was never stopped reports a full result")
""")

OK = "print('a sibling that stays well within its limits reports its result')"


def _attempts(run_id: str) -> dict[str, dict]:
    with Ledger.open() as led:
        return {a["packet_id"]: dict(a) for a in led.attempts(run_id)}


def _statuses(run_id: str) -> dict[str, str]:
    with Ledger.open() as led:
        return {p["id"]: p["status"] for p in led.packets(run_id)}


def test_a_unit_past_its_memory_limit_fails_memory_limit_while_its_sibling_succeeds(repo):
    plan = write_plan(repo / "plan.yaml", [
        py_unit("hog", HOG, resources={"memory": "200M"}),
        py_unit("calm", OK)], resources={"memory": "200M"}, parallel=2)
    r = prun("run", str(plan), timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    run_id = r.stdout.split()[1]
    assert _statuses(run_id) == {"hog": "failed", "calm": "succeeded"}
    hog = _attempts(run_id)["hog"]
    assert hog["reason"] == "memory-limit"
    assert "resources.memory passed: peak" in hog["error"] and "over its 200M" in hog["error"]
    assert "enforced by keeper" in hog["error"]
    fallback = Path(hog["result_path"]).read_text()
    assert fallback.startswith("FALLBACK") and "memory-limit" in fallback
    assert "peak" in fallback and "keeper" in fallback
    assert any(line.startswith("UNIT hog failed") and "memory-limit" in line
               for line in r.stdout.splitlines()), r.stdout


def test_a_fork_bomb_past_its_pids_limit_fails_pids_limit_and_leaves_no_process(repo, tmp_path):
    pids = tmp_path / "pids"
    plan = write_plan(repo / "plan.yaml", [
        py_unit("bomb", BOMB.format(pids=str(pids)), resources={"pids": 64}),
        py_unit("calm", OK)], parallel=2)
    r = prun("run", str(plan), timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    run_id = r.stdout.split()[1]
    assert _statuses(run_id) == {"bomb": "failed", "calm": "succeeded"}
    bomb = _attempts(run_id)["bomb"]
    assert bomb["reason"] == "pids-limit", bomb
    assert "processes over its 64" in bomb["error"]
    assert len(pids.read_text().splitlines()) > 10   # it did fork (pids of its namespace)

    def alive() -> list[int]:
        """Every process left that carries the bomb's attempt id."""
        out = []
        for p in psutil.process_iter():
            try:
                if p.environ().get("PRUN_ATTEMPT_ID") == bomb["id"] \
                        and p.status() != psutil.STATUS_ZOMBIE:
                    out.append(p.pid)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass
        return out

    poll(lambda: not alive(), limit=30)


def test_memfree_beyond_the_machine_holds_units_back_with_their_reason_and_cancel_works(repo):
    plan = write_plan(repo / "plan.yaml", [
        py_unit("first", "import time; time.sleep(300)"),
        py_unit("second", OK), py_unit("third", OK)], parallel=3)
    r = prun("run", str(plan), "--detach", "--memfree", "1000T")
    assert r.returncode == 0, r.stderr
    run_id = r.stdout.split()[1]

    def held() -> list[str]:
        lines = prun("status", run_id).stdout.splitlines()
        waiting = [line for line in lines if " waiting reason=memfree" in line]
        return lines if len(waiting) == 2 else []

    lines = poll(held)
    assert any(line.startswith("UNIT second waiting reason=memfree") for line in lines), lines
    assert any(line.startswith("UNIT third waiting reason=memfree") for line in lines), lines
    units = {u["packet_id"]: u for u in json.loads(prun("status", run_id, "--json").stdout)["units"]}
    assert units["second"]["waiting"] == units["third"]["waiting"] == "memfree"
    assert units["second"]["note"].startswith("waiting reason=memfree available=")
    statuses = _statuses(run_id)
    assert statuses["first"] == "running" and statuses["second"] == "pending"
    c = prun("cancel", run_id)
    assert c.returncode == 0, c.stdout + c.stderr
    assert set(_statuses(run_id).values()) == {"cancelled"}


def test_cpus_without_a_cgroup_is_refused_in_one_line_unless_allowed(repo):
    plan = write_plan(repo / "plan.yaml", [py_unit("a", OK, resources={"cpus": 0.5})])
    r = prun("run", str(plan))
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "resources.cpus 0.5" in r.stderr
    assert "--allow-unenforced" in r.stderr and not r.stdout
    assert not (repo / ".prun").exists() or not list((repo / ".prun").glob("runs/*"))
    r = prun("run", str(plan), "--allow-unenforced")
    assert r.returncode == 0, r.stdout + r.stderr
    run_id = r.stdout.split()[1]
    with Ledger.open() as led:
        events = [e for e in led.events(run_id) if e["kind"] == "unenforced-allowed"]
    assert len(events) == 1 and json.loads(events[0]["data"]) == {"packets": ["a"]}


def test_bad_sizes_and_loads_are_refused_before_anything_is_made(repo):
    plan = write_plan(repo / "plan.yaml", [py_unit("a", OK)])
    for args, said in ((["--memfree", "lots"], "--memfree 'lots' is not a size"),
                       (["--load", "-1"], "--load '-1' is not a load"),
                       (["--parallel", "many"], "many")):
        r = prun("run", str(plan), *args)
        assert r.returncode == 2 and said in r.stderr, r.stderr
    bad = write_plan(repo / "bad.yaml", [py_unit("a", OK, resources={"memory": "0K"})])
    r = prun("run", str(bad))
    assert r.returncode == 2 and "resources.memory" in r.stderr, r.stderr


def test_parallel_auto_takes_the_cores(repo):
    plan = write_plan(repo / "plan.yaml", [py_unit("a", OK)], parallel="auto")
    r = prun("run", str(plan))
    assert r.returncode == 0, r.stdout + r.stderr
    cores = len(psutil.Process().cpu_affinity() or [])
    assert f"parallel={cores} " in r.stdout.splitlines()[0]
