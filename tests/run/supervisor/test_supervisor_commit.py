"""The group commit, in process: a launch waits for its own ledger rows and for no sync of the
units settled before it; a settled unit's end is committed only once its files are synced; an
attempt that depends on another one's end is committed behind that end."""

from __future__ import annotations

import asyncio
import threading

import pytest
from supkit import LIMIT_S, OUTPUT, Run, unit

from prun.ledger import Ledger
from prun.run import group_commit


class HeldSync:
    """The supervisor's ``syncfs``, held until ``release``; ``entered`` once it was called."""

    def __init__(self) -> None:
        self.entered, self.released = threading.Event(), threading.Event()

    def __call__(self, root: str) -> None:
        self.entered.set()
        if not self.released.wait(LIMIT_S):
            raise AssertionError("the test never released the sync")

    def release(self) -> None:
        self.released.set()


@pytest.fixture
def held_sync(monkeypatch):
    held = HeldSync()
    monkeypatch.setattr(group_commit, "sync_fs", held)
    return held


def committed(run: Run) -> tuple[dict[str, str], dict[str, list[str]]]:
    """What another connection reads: each packet's status and each packet's attempts'."""
    with Ledger.open(run.ledger.path) as other:
        packets = {p["id"]: p["status"] for p in other.packets(run.id)}
        attempts: dict[str, list[str]] = {}
        for a in other.attempts(run.id):
            attempts.setdefault(a["packet_id"], []).append(a["status"])
    return packets, attempts


def test_a_launch_waits_for_no_sync_and_an_end_is_committed_only_once_synced(repo, held_sync):
    run = Run.of(repo, [unit("a"), unit("b")], parallel=1)

    async def play():
        (await run.keeper.worker("a")).exit(0, output=OUTPUT)
        await asyncio.to_thread(held_sync.entered.wait, LIMIT_S)  # a's files being synced
        b = await run.keeper.worker("b")     # started in a's place, the sync still held
        packets, attempts = committed(run)
        assert attempts["b"] == ["pending"]  # its own row was committed before it started
        assert "succeeded" not in (packets["a"], *attempts["a"])  # a's end: not synced yet
        assert packets["b"] == "pending"     # written behind a's end
        held_sync.release()
        await run.event("succeeded", "a")
        b.exit(0, output=OUTPUT)

    assert run.drive(play) == "succeeded"
    log = [(e["packet_id"], e["kind"], e["status"]) for e in run.ledger_events()]
    assert log.index(("b", "packet", "running")) > log.index(("a", "attempt", "succeeded"))
    assert log.index(("b", "attempt", "dispatched")) > log.index(("a", "attempt", "succeeded"))


def test_a_successor_is_committed_behind_its_predecessors_end(repo):
    run = Run.of(repo, [unit("p")])

    async def play():
        await run.keeper.worker("p")
        run.request("reassign", "p", executor="command", cause="try again")
        (await run.keeper.worker("p", 2)).exit(0, output=OUTPUT)

    assert run.drive(play) == "succeeded"
    first, second = run.attempts("p")
    log = [(e["attempt_id"], e["status"]) for e in run.ledger_events(kind="attempt")]
    assert log.index((second["id"], "pending")) > log.index((first["id"], "cancelled"))


def test_a_dependent_is_committed_behind_the_end_it_waited_for(repo):
    run = Run.of(repo, [unit("a"), unit("b", after=["a"])])

    async def play():
        (await run.keeper.worker("a")).exit(0, output=OUTPUT)
        (await run.keeper.worker("b")).exit(0, output=OUTPUT)

    assert run.drive(play) == "succeeded"
    log = [(e["packet_id"], e["status"]) for e in run.ledger_events(kind="attempt")]
    assert log.index(("b", "pending")) > log.index(("a", "succeeded"))
