"""In-process runs for supervisor tests: a plan frozen in the real ledger (SQLite in tmp_path),
real state dirs, the run ``Loop`` driven with asyncio, and a fake keeper whose workers end when
the test says (``fakekeeper``).

A scenario is a coroutine that plays the workers while the supervisor runs:

    run = Run.of(repo, [unit("a"), unit("b", after=["a"])])
    async def play():
        (await run.keeper.worker("a")).exit(0, output=LONG)
        ...
    assert run.drive(play) == "succeeded"

``crash`` stops a supervisor mid-run, as a kill would; ``tamper`` then edits the ledger as a
crash between two writes would have left it.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

from fakekeeper import FakeKeeper, Watchers

from prun.ledger import Ledger
from prun.plan import load_plan
from prun.run.events import Event
from prun.run.freeze import freeze
from prun.run.loop import Loop
from runkit import write_plan

LIMIT_S = 30.0  # no scenario takes nearly this long; a broken one fails instead of hanging
OUTPUT = "the unit finished its work and reports a full result\n"


def unit(pid: str, **fields) -> dict:
    """A command packet (its program is this interpreter; the fake keeper runs nothing)."""
    return {"id": pid, "executor": "command", "command": [sys.executable, "-c", "pass"],
            "prompt": f"unit {pid}", "snapshot": False, **fields}


class Run:
    """One frozen run and the supervisors that drive it, one after another."""

    def __init__(self, ledger: Ledger, run_id: str):
        self.ledger = ledger
        self.id = run_id
        self.keeper = FakeKeeper()
        self.events: list[Event] = []
        self.watchers = Watchers()
        self.on_event: Callable[[Event], None] | None = None
        self.sup: Loop | None = None

    @classmethod
    def of(cls, repo: Path, packets: list[dict], **settings) -> Run:
        plan = write_plan(repo / "plan.yaml", packets, sandbox="off", **settings)
        ledger = Ledger.open()
        return cls(ledger, freeze(load_plan(str(plan)), ledger)["id"])

    # driving ---------------------------------------------------------------------------------
    def supervisor(self) -> Loop:
        """A new supervisor for the run. Each has a fake keeper of its own (``self.keeper``):
        the first the one set up with the run, a later one a new one."""
        if self.keeper.loop is not None:
            self.keeper = FakeKeeper()
        self.sup = Loop(self.ledger, self.id, emit=self._emit, env=dict(os.environ),
                        keeper=self.keeper)
        return self.sup

    def drive(self, play: Callable[[], Awaitable[None]] | None = None) -> str:
        """Run a new supervisor to the run's end while ``play()`` plays the workers."""
        async def both() -> str:
            async with asyncio.timeout(LIMIT_S), asyncio.TaskGroup() as group:
                done = group.create_task(self.supervisor().run_until_done())
                if play is not None:
                    playing = group.create_task(play())
                    await asyncio.wait({done, playing}, return_when=asyncio.FIRST_COMPLETED)
                    if not playing.done():
                        playing.cancel()
                        raise AssertionError(f"the run ended ({done.result()}) while the play "
                                             "still waited for something")
            return done.result()

        return _unwrapped(asyncio.run, both())

    def crash(self, play: Callable[[], Awaitable[None]] | None = None, *,
              at: Callable[[Event], bool] | None = None) -> None:
        """Run a new supervisor while ``play()`` plays, and stop it where it is: right at the
        first event ``at`` accepts (before the supervisor acts on it), else once ``play()``
        returns."""
        async def until() -> None:
            async with asyncio.timeout(LIMIT_S), asyncio.TaskGroup() as group:
                running = group.create_task(self.supervisor().run_until_done())
                if at is not None:
                    self.on_event = lambda ev: at(ev) and running.cancel()
                if play is not None:
                    await play()
                if at is None:
                    running.cancel()
            self.on_event = None

        _unwrapped(asyncio.run, until())

    def request(self, kind: str, target: str | None = None, **fields) -> None:
        """What ``prun cancel``/``reassign``/``followup`` do: a request, then SIGUSR1."""
        with Ledger.open(self.ledger.path) as other:
            other.add_request(self.id, kind, target, **fields)
        os.kill(os.getpid(), signal.SIGUSR1)

    # events ----------------------------------------------------------------------------------
    def _emit(self, ev: Event) -> None:
        self.events.append(ev)
        if self.on_event is not None:
            self.on_event(ev)
        self.watchers.changed()

    async def event(self, kind: str, packet: str | None = None) -> Event:
        """The first event of ``kind`` (for ``packet``), once it is emitted."""
        return await self.watchers.until(lambda: next(
            (e for e in self.events if e.kind == kind and (packet is None or e.packet_id == packet)),
            None))

    def kinds(self, packet: str) -> list[str]:
        return [e.kind for e in self.events if e.packet_id == packet]

    # the ledger ------------------------------------------------------------------------------
    def packets(self) -> dict[str, str]:
        return {p["id"]: p["status"] for p in self.ledger.packets(self.id)}

    def attempts(self, packet: str | None = None) -> list[dict]:
        return [dict(a) for a in self.ledger.attempts(self.id, packet)]

    def ledger_events(self, **match) -> list[dict]:
        return [dict(e) for e in self.ledger.events(self.id)
                if all(e[k] == v for k, v in match.items())]

    def status(self) -> str:
        return self.ledger.run(self.id)["status"]

    def tamper(self, sql: str, *args) -> None:
        """Change the ledger behind the supervisor's back (a crash cut its writes short)."""
        self.ledger.conn.execute(sql, args)


def _unwrapped(call, *args):
    """``call(*args)``, raising the one error a task group gathered as it was raised."""
    try:
        return call(*args)
    except BaseExceptionGroup as errors:
        if len(errors.exceptions) == 1:
            raise errors.exceptions[0] from None
        raise


def state_dir(attempt: dict) -> Path:
    return Path(attempt["state_dir"])


def unit_json(attempt: dict) -> dict:
    return json.loads((state_dir(attempt) / "unit.json").read_text())


def exit_log(run: Run) -> Path:
    return Path(run.ledger.run(run.id)["run_dir"]) / "state" / ".exit-codes"
