"""The scheduler, in process: the parallel limit, ``after``, blocked dependents, a unit that
waits for a held port, and an unexpected error that fails one unit and not the run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from supkit import OUTPUT, Run, unit

from prun._util.process import create_time
from prun.errors import StateError
from prun.ports import reserve as ports


def test_no_more_than_parallel_units_run_at_once(repo):
    run = Run.of(repo, [unit("a"), unit("b"), unit("c")], parallel=2)

    async def play():
        a, b = await run.keeper.worker("a"), await run.keeper.worker("b")
        assert run.sup.state.units["c"].status == "pending"   # queued, not launched
        assert len(run.keeper.live()) == 2
        b.exit(0, output=OUTPUT)
        c = await run.keeper.worker("c")                 # b's place
        assert len(run.keeper.live()) == 2
        a.exit(0, output=OUTPUT)
        c.exit(0, output=OUTPUT)

    assert run.drive(play) == "succeeded"
    assert run.packets() == {"a": "succeeded", "b": "succeeded", "c": "succeeded"}
    # the ledger's log: c was launched only once b had ended
    log = [(e["packet_id"], e["kind"], e["status"]) for e in run.ledger_events()]
    assert log.index(("c", "packet", "running")) > log.index(("b", "attempt", "succeeded"))


def test_after_waits_for_success_and_a_failure_blocks_its_dependents(repo):
    run = Run.of(repo, [unit("a"), unit("b", after=["a"]), unit("c"),
                        unit("d", after=["c"]), unit("e", after=["d"])], parallel=4)

    async def play():
        a, c = await run.keeper.worker("a"), await run.keeper.worker("c")
        assert run.sup.state.units["b"].status == "pending"
        c.exit(3, output="it broke\n")
        await run.event("blocked", "e")
        a.exit(0, output=OUTPUT)
        (await run.keeper.worker("b")).exit(0, output=OUTPUT)

    assert run.drive(play) == "failed"
    assert run.packets() == {"a": "succeeded", "b": "succeeded", "c": "failed",
                             "d": "blocked", "e": "blocked"}
    assert sorted(w.packet for w in run.keeper.workers) == ["a", "b", "c"]  # once each
    assert {a["packet_id"] for a in run.attempts()} == {"a", "b", "c"}  # none for d, e
    blocked = next(e for e in run.events if e.kind == "blocked" and e.packet_id == "d")
    assert blocked.cause == "it comes after c, which did not succeed"


def test_a_unit_whose_fixed_port_is_held_waits_then_starts(repo):
    env = dict(os.environ)
    holder = ports.Holder("other-run:x:1", "other-run", "x", os.getpid(),
                          create_time(os.getpid()))
    ports.reserve(holder, ports.port_request(["port:8765"], env), env)
    run = Run.of(repo, [unit("web", state=["port:8765"]), unit("other")], parallel=2)

    async def play():
        waiting = await run.event("waiting", "web")
        assert "8765" in waiting.cause and "other-run" in waiting.cause
        (await run.keeper.worker("other")).exit(0, output=OUTPUT)
        assert run.keeper.of("web") == [] and run.sup.state.units["web"].status == "pending"
        ports.release("other-run:x:1", env)
        web = await run.keeper.worker("web")
        assert web.env["PRUN_ATTEMPT_ID"] == f"{run.id}:web:1"  # its first attempt
        held = {(e.holder.attempt_id, e.kind): e.ports.base for e in ports.held(env)}
        assert held[(web.attempt, "fixed")] == 8765
        # its own range is one of the run's block, the registry holds only what it fixed
        assert set(held) == {(web.attempt, "fixed"), (f"{run.id}/ranges", "range")}
        block = [e.ports for e in ports.held(env) if e.holder.attempt_id == f"{run.id}/ranges"]
        assert ports.PortRange(int(web.env["PRUN_PORT_BASE"]),
                               int(web.env["PRUN_PORT_COUNT"])) in block
        web.exit(0, output=OUTPUT)

    assert run.drive(play) == "succeeded"
    assert run.kinds("web").count("waiting") == 1             # said once
    assert [a["id"] for a in run.attempts("web")] == [f"{run.id}:web:1"]
    assert ports.held(env) == []                             # released at its end


def test_an_unexpected_error_fails_only_its_unit(repo, capsys):
    run = Run.of(repo, [unit("bad"), unit("good")], parallel=2)
    run.keeper.failures["bad"] = RuntimeError("a bug in the keeper")

    async def play():
        (await run.keeper.worker("good")).exit(0, output=OUTPUT)

    assert run.drive(play) == "failed"
    assert run.packets() == {"bad": "failed", "good": "succeeded"}
    (bad,) = run.attempts("bad")
    assert bad["status"] == "failed" and bad["reason"] == "internal-error"
    assert "RuntimeError: a bug in the keeper" in bad["error"]
    assert "Traceback" in capsys.readouterr().err              # kept for whoever debugs it
    assert Path(run.attempts("good")[0]["result_path"]).read_text() == OUTPUT


def test_an_error_of_the_loop_itself_reaches_the_caller_as_raised(repo):
    run = Run.of(repo, [unit("a"), unit("b", after=["a"])])

    def broken_renderer(ev):
        if ev.kind == "blocked":  # emitted by the scheduler, in the loop
            raise StateError("the renderer broke")

    run.on_event = broken_renderer

    async def play():
        (await run.keeper.worker("a")).exit(1, output="it broke\n")

    with pytest.raises(StateError, match="the renderer broke"):
        run.drive(play)
    assert run.keeper.closed
    assert run.attempts("a")[0]["status"] == "failed"    # the queued writes were applied
