"""Exactly once, in process: a worker starts only after its attempt's row is committed (another
connection reads it), and an attempt that depends on another one's end is written behind
that end."""

from __future__ import annotations

from fakekeeper import FakeKeeper, FakeWorker
from supkit import OUTPUT, Run, unit

from prun.ledger import Ledger


def committed(run: Run) -> dict[str, list[dict]]:
    """What another connection reads: each packet's attempts."""
    with Ledger.open(run.ledger.path) as other:
        attempts: dict[str, list[dict]] = {}
        for a in other.attempts(run.id):
            attempts.setdefault(a["packet_id"], []).append(dict(a))
    return attempts


class Reading(FakeKeeper):
    """A keeper that, as it starts each worker, reads what another connection sees of it."""

    def __init__(self, run: Run) -> None:
        super().__init__()
        self.run = run
        self.seen: dict[str, list[dict]] = {}

    def _spawned(self, w: FakeWorker) -> None:
        self.seen[w.packet] = committed(self.run).get(w.packet, [])
        super()._spawned(w)


def test_a_worker_starts_only_once_its_attempts_row_is_committed(repo):
    run = Run.of(repo, [unit("a"), unit("b")], parallel=1)
    keeper = run.keeper = Reading(run)

    async def play():
        for pid in ("a", "b"):
            (await run.keeper.worker(pid)).exit(0, output=OUTPUT)

    assert run.drive(play) == "succeeded"
    for pid in ("a", "b"):
        (row,) = keeper.seen[pid]                 # as its worker started
        assert row["status"] == "pending" and row["state_dir"] and row["brief"], row
    log = [(e["packet_id"], e["status"]) for e in run.ledger_events(kind="attempt")]
    assert log.index(("b", "pending")) > log.index(("a", "succeeded"))


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
